package roomlist

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/memo"
	"voiceroom/internal/redisconn"
	"voiceroom/listprojector"
)

// cache reads the read model's Redis mirror (listprojector.Keys gives its
// layout; the list never writes it but through listprojector.Mirror). A
// nil *cache (no Redis configured) misses every read.
type cache struct {
	rdb  redis.UniversalClient
	keys listprojector.Keys
	memo decoded
	// cluster: rdb is a cluster's, where a page's cards (a slot each) are
	// read by one MGET per slot (redisconn.MGet).
	cluster bool
}

// newCache returns the reader of m, or nil without Redis.
func newCache(m *listprojector.Mirror) *cache {
	if m == nil {
		return nil
	}
	return &cache{rdb: m.Client(), keys: m.Keys(), cluster: redisconn.IsCluster(m.Client())}
}

// decoded remembers the card each Redis value decoded to, so a card read
// again unchanged (most are, between two requests) is not decoded again.
// It is keyed by the value itself and only saves work: a changed value
// misses and is decoded. It holds at most memo.DefaultBound cards (never
// modified) and starts over when full.
type decoded struct {
	m memo.Map[string, *listprojector.Card]
}

func (d *decoded) card(raw string) (*listprojector.Card, error) {
	if k, ok := d.m.Get(raw); ok {
		return k, nil
	}
	k := new(listprojector.Card)
	if err := json.Unmarshal([]byte(raw), k); err != nil {
		return nil, err
	}
	d.m.Put(raw, k)
	return k, nil
}

// cardsAndHidesWithin is cardsAndHides bounded by timeout.
func (c *cache) cardsAndHidesWithin(ctx context.Context, timeout time.Duration, app string, region int64, ids []string, nowMs int64) (
	found map[string]*listprojector.Card, missing []string, hidden map[string]bool, hidesReady bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return c.cardsAndHides(ctx, app, region, ids, nowMs)
}

// cardsAndHides reads app's cards ids and, when region >= 0, which of
// them the region's hide set holds hidden at nowMs, in one round trip
// (see hideCache). hidesReady is false when the hide set is not filled:
// hidden then means nothing.
func (c *cache) cardsAndHides(ctx context.Context, app string, region int64, ids []string, nowMs int64) (
	found map[string]*listprojector.Card, missing []string, hidden map[string]bool, hidesReady bool, err error) {
	found = make(map[string]*listprojector.Card, len(ids))
	if c == nil {
		return found, ids, nil, false, nil
	}
	keys := c.cardKeys(app, ids)
	var vals []any
	var scores []float64
	if region < 0 && !c.cluster {
		vals, err = c.rdb.MGet(ctx, keys...).Result()
	} else {
		p := c.rdb.Pipeline()
		mget := redisconn.MGet(ctx, p, c.cluster, keys)
		var zms *redis.FloatSliceCmd
		if region >= 0 {
			members := make([]string, 0, len(ids)+1)
			members = append(members, listprojector.HideReady)
			members = append(members, ids...)
			zms = p.ZMScore(ctx, c.keys.Hides(app, region), members...)
		}
		if _, err = p.Exec(ctx); err == nil {
			vals, err = mget()
			if zms != nil {
				scores = zms.Val()
			}
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
		keys[i] = c.keys.Card(app, id)
	}
	return keys
}

// decodeCards decodes the MGET values vals of app's cards ids. missing
// lists the ids Redis does not hold (or holds undecodable, or holds for
// another room).
func (c *cache) decodeCards(app string, ids []string, vals []any) (found map[string]*listprojector.Card, missing []string) {
	found = make(map[string]*listprojector.Card, len(ids))
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
	found map[string]*listprojector.Card, missing []string, set hideSet, ready bool, err error) {
	p := c.rdb.Pipeline()
	var mget func() ([]any, error)
	if len(ids) > 0 {
		mget = redisconn.MGet(ctx, p, c.cluster, c.cardKeys(app, ids))
	}
	var zr *redis.ZSliceCmd
	if wantSet {
		zr = p.ZRangeWithScores(ctx, c.keys.Hides(app, region), 0, -1)
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, ids, nil, false, fmt.Errorf("read cards from redis: %w", err)
	}
	found, missing = map[string]*listprojector.Card{}, nil
	if mget != nil {
		vals, err := mget()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, ids, nil, false, fmt.Errorf("read cards from redis: %w", err)
		}
		found, missing = c.decodeCards(app, ids, vals)
	}
	if zr != nil {
		zs := zr.Val()
		set = make(hideSet, len(zs))
		for _, z := range zs {
			id, _ := z.Member.(string)
			if id == listprojector.HideReady {
				ready = math.IsInf(z.Score, 1)
				continue
			}
			set[id] = z.Score
		}
	}
	return found, missing, set, ready, nil
}

// order reads the first depth rooms of a region's tab from its set, in
// the list's order (key descending, room_id ascending); complete is true
// when the set holds no more. It returns errNotReady when the region's
// sets were never filled.
func (c *cache) order(ctx context.Context, app string, region int64, tab string, depth int) (es []entry, complete bool, err error) {
	if c == nil {
		return nil, false, errNotReady
	}
	p := c.rdb.Pipeline()
	ready := p.Exists(ctx, c.keys.Ready(app, region))
	members := p.ZRevRangeWithScores(ctx, c.keys.List(app, region, tab), 0, int64(depth-1))
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
