package listprojector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/memo"
	"voiceroom/roomevent"
)

// cache is the Redis layer of the read model. Keys carry the app (as a
// hash tag, so one app's keys share a cluster slot) and, for lists, the
// region:
//
//	room:list:{app}:<region>:hot   ZSET room_id -> sort_score
//	room:list:{app}:<region>:new   ZSET room_id -> created_at_ms
//	room:list:{app}:<region>:ready "1" once both sets were filled from MySQL
//	room:card:{app}:<room_id>      the Card as JSON, expiring after CardTTL
//
// The projector adds to the sets of any region, so a set without its ready
// key may be partial and is never read; the reader fills it from MySQL. A
// nil *cache (no Redis configured) does nothing and misses every read.
type cache struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
	memo   decoded
}

// decoded remembers the card each Redis value decoded to, so a card read
// again unchanged (most are, between two requests) is not decoded again.
// It is keyed by the value itself and only saves work: a changed value
// misses and is decoded. It holds at most memo.DefaultBound cards (never
// modified) and starts over when full.
type decoded struct {
	m memo.Map[string, *Card]
}

func (d *decoded) card(raw string) (*Card, error) {
	if k, ok := d.m.Get(raw); ok {
		return k, nil
	}
	k := new(Card)
	if err := json.Unmarshal([]byte(raw), k); err != nil {
		return nil, err
	}
	d.m.Put(raw, k)
	return k, nil
}

func (c *cache) listKey(app string, region int64, tab string) string {
	return c.prefix + "room:list:{" + app + "}:" + strconv.FormatInt(region, 10) + ":" + tab
}

func (c *cache) readyKey(app string, region int64) string {
	return c.prefix + "room:list:{" + app + "}:" + strconv.FormatInt(region, 10) + ":ready"
}

func (c *cache) cardKey(app, room string) string {
	return c.prefix + "room:card:{" + app + "}:" + room
}

// applied is a card the projector wrote to MySQL and the region its room
// was listed in before (-1 for none), for the cache.
type applied struct {
	card      *Card
	oldRegion int64
}

// writeApplied mirrors cards the projector wrote to MySQL, in one
// pipeline: the card, and the room's members in its region's sets (out of
// them when it is no longer active, out of the old region's when it moved).
func (c *cache) writeApplied(ctx context.Context, as []applied) error {
	if c == nil || len(as) == 0 {
		return nil
	}
	p := c.rdb.Pipeline()
	for _, a := range as {
		k := a.card
		raw, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode card %s: %w", k.RoomID, err)
		}
		p.Set(ctx, c.cardKey(k.AppCode, k.RoomID), raw, c.ttl)
		if a.oldRegion >= 0 && a.oldRegion != k.VisibleRegionID {
			p.ZRem(ctx, c.listKey(k.AppCode, a.oldRegion, TabHot), k.RoomID)
			p.ZRem(ctx, c.listKey(k.AppCode, a.oldRegion, TabNew), k.RoomID)
		}
		if k.Status == roomevent.StatusActive {
			p.ZAdd(ctx, c.listKey(k.AppCode, k.VisibleRegionID, TabHot), redis.Z{Score: float64(k.SortScore), Member: k.RoomID})
			p.ZAdd(ctx, c.listKey(k.AppCode, k.VisibleRegionID, TabNew), redis.Z{Score: float64(k.CreatedAtMs), Member: k.RoomID})
		} else {
			p.ZRem(ctx, c.listKey(k.AppCode, k.VisibleRegionID, TabHot), k.RoomID)
			p.ZRem(ctx, c.listKey(k.AppCode, k.VisibleRegionID, TabNew), k.RoomID)
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("write %d cards to redis: %w", len(as), err)
	}
	return nil
}

// putCards stores cards read from MySQL (a repair after a miss).
func (c *cache) putCards(ctx context.Context, cards []*Card) error {
	if c == nil || len(cards) == 0 {
		return nil
	}
	p := c.rdb.Pipeline()
	for _, k := range cards {
		raw, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode card %s: %w", k.RoomID, err)
		}
		p.Set(ctx, c.cardKey(k.AppCode, k.RoomID), raw, c.ttl)
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("write %d cards to redis: %w", len(cards), err)
	}
	return nil
}

// cardsAndHidesWithin is cardsAndHides bounded by timeout.
func (c *cache) cardsAndHidesWithin(ctx context.Context, timeout time.Duration, app string, region int64, ids []string, nowMs int64) (
	found map[string]*Card, missing []string, hidden map[string]bool, hidesReady bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.cardsAndHides(ctx, app, region, ids, nowMs)
}

// cardsAndHides reads app's cards ids and, when region >= 0, which of
// them the region's hide set holds hidden at nowMs, in one round trip
// (see hideCache). hidesReady is false when the hide set is not filled:
// hidden then means nothing.
func (c *cache) cardsAndHides(ctx context.Context, app string, region int64, ids []string, nowMs int64) (
	found map[string]*Card, missing []string, hidden map[string]bool, hidesReady bool, err error) {
	found = make(map[string]*Card, len(ids))
	if c == nil {
		return found, ids, nil, false, nil
	}
	keys := c.cardKeys(app, ids)
	var vals []any
	var scores []float64
	if region < 0 {
		vals, err = c.rdb.MGet(ctx, keys...).Result()
	} else {
		members := make([]string, 0, len(ids)+1)
		members = append(members, hideReady)
		members = append(members, ids...)
		p := c.rdb.Pipeline()
		mget := p.MGet(ctx, keys...)
		zms := p.ZMScore(ctx, c.hideKey(app, region), members...)
		if _, err = p.Exec(ctx); err == nil {
			vals, scores = mget.Val(), zms.Val()
		}
	}
	if err != nil {
		return found, ids, nil, false, fmt.Errorf("read cards from redis: %w", err)
	}
	found, missing = c.decodeCards(app, ids, vals)
	// A member Redis lacks scores 0, never above a clock.
	if len(scores) == len(ids)+1 && math.IsInf(scores[0], 1) {
		hidesReady = true
		now := float64(nowMs)
		for i, sc := range scores[1:] {
			if sc > now {
				if hidden == nil {
					hidden = map[string]bool{}
				}
				hidden[ids[i]] = true
			}
		}
	}
	return found, missing, hidden, hidesReady, nil
}

func (c *cache) cardKeys(app string, ids []string) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = c.cardKey(app, id)
	}
	return keys
}

// decodeCards decodes the MGET values vals of app's cards ids. missing
// lists the ids Redis does not hold (or holds undecodable, or holds for
// another room).
func (c *cache) decodeCards(app string, ids []string, vals []any) (found map[string]*Card, missing []string) {
	found = make(map[string]*Card, len(ids))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			missing = append(missing, ids[i])
			continue
		}
		k, err := c.memo.card(s)
		if err != nil || k.RoomID != ids[i] || k.AppCode != app {
			missing = append(missing, ids[i])
			continue
		}
		found[ids[i]] = k
	}
	return found, missing
}

// cardsAndHideSet reads app's cards ids and, when wantSet, the region's
// whole hide set, in one round trip. ready is false when the set is not
// filled (see hideCache).
func (c *cache) cardsAndHideSet(ctx context.Context, app string, region int64, ids []string, wantSet bool) (
	found map[string]*Card, missing []string, set hideSet, ready bool, err error) {
	p := c.rdb.Pipeline()
	var mget *redis.SliceCmd
	if len(ids) > 0 {
		mget = p.MGet(ctx, c.cardKeys(app, ids)...)
	}
	var zr *redis.ZSliceCmd
	if wantSet {
		zr = p.ZRangeWithScores(ctx, c.hideKey(app, region), 0, -1)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, ids, nil, false, fmt.Errorf("read cards from redis: %w", err)
	}
	found, missing = map[string]*Card{}, nil
	if mget != nil {
		found, missing = c.decodeCards(app, ids, mget.Val())
	}
	if zr != nil {
		zs := zr.Val()
		set = make(hideSet, len(zs))
		for _, z := range zs {
			id, _ := z.Member.(string)
			if id == hideReady {
				ready = math.IsInf(z.Score, 1)
				continue
			}
			set[id] = z.Score
		}
	}
	return found, missing, set, ready, nil
}

// errNotReady is a region whose sets have not been filled from MySQL.
var errNotReady = errors.New("region not cached")

// order reads the first depth rooms of a region's tab from its set, in
// the list's order (key descending, room_id ascending); complete is true
// when the set holds no more. It returns errNotReady when the region's
// sets were never filled.
func (c *cache) order(ctx context.Context, app string, region int64, tab string, depth int) (es []entry, complete bool, err error) {
	if c == nil {
		return nil, false, errNotReady
	}
	p := c.rdb.Pipeline()
	ready := p.Exists(ctx, c.readyKey(app, region))
	members := p.ZRevRangeWithScores(ctx, c.listKey(app, region, tab), 0, int64(depth-1))
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, false, fmt.Errorf("read list from redis: %w", err)
	}
	if ready.Val() == 0 {
		return nil, false, errNotReady
	}
	zs := members.Val()
	out := make([]entry, 0, len(zs))
	for _, z := range zs {
		id, _ := z.Member.(string)
		out = append(out, entry{id: id, key: int64(z.Score)})
	}
	sortEntries(out)
	if len(out) == depth {
		// Redis orders equal scores by member descending: rooms tied with
		// the last one may lie beyond depth. Cut the tie group, so the
		// order ends where MySQL's keyset continuation starts.
		last := out[len(out)-1].key
		cut := len(out)
		for cut > 0 && out[cut-1].key == last {
			cut--
		}
		if cut > 0 {
			out = out[:cut]
		}
	}
	return out, len(zs) < depth, nil
}

// sortEntries puts es in list order: key descending, id ascending.
func sortEntries(es []entry) {
	slices.SortFunc(es, func(a, b entry) int {
		if a.key != b.key {
			if a.key > b.key {
				return -1
			}
			return 1
		}
		if a.id < b.id {
			return -1
		}
		if a.id > b.id {
			return 1
		}
		return 0
	})
}

// members returns every room id in a region's two sets.
func (c *cache) members(ctx context.Context, app string, region int64) ([]string, error) {
	p := c.rdb.Pipeline()
	hot := p.ZRange(ctx, c.listKey(app, region, TabHot), 0, -1)
	fresh := p.ZRange(ctx, c.listKey(app, region, TabNew), 0, -1)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read region %d of %s from redis: %w", region, app, err)
	}
	return append(hot.Val(), fresh.Val()...), nil
}

// fillRegion writes a region's listed rooms (read from MySQL) into its
// sets, removes the rooms of gone (no longer listed there) and marks the
// region ready, atomically. Rooms the projector added meanwhile stay.
func (c *cache) fillRegion(ctx context.Context, app string, region int64, hot, fresh []entry, gone []string) error {
	if c == nil {
		return nil
	}
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, t := range []struct {
			tab string
			es  []entry
		}{{TabHot, hot}, {TabNew, fresh}} {
			key := c.listKey(app, region, t.tab)
			for i := 0; i < len(t.es); i += 1000 {
				zs := make([]redis.Z, 0, 1000)
				for _, e := range t.es[i:min(i+1000, len(t.es))] {
					zs = append(zs, redis.Z{Score: float64(e.key), Member: e.id})
				}
				p.ZAdd(ctx, key, zs...)
			}
			for i := 0; i < len(gone); i += 1000 {
				ms := make([]any, 0, 1000)
				for _, id := range gone[i:min(i+1000, len(gone))] {
					ms = append(ms, id)
				}
				p.ZRem(ctx, key, ms...)
			}
		}
		p.Set(ctx, c.readyKey(app, region), "1", 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill region %d of %s in redis: %w", region, app, err)
	}
	return nil
}
