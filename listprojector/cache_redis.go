package listprojector

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/roomevent"
)

// Keys is the read model's Redis layout under Prefix (tests isolate
// themselves with it). Keys carry the app as a hash tag, so one app's keys
// share a cluster slot, and, for lists and hides, the region:
//
//	room:list:{app}:<region>:hot   ZSET room_id -> sort_score
//	room:list:{app}:<region>:new   ZSET room_id -> created_at_ms
//	room:list:{app}:<region>:ready "1" once both sets were filled from MySQL
//	room:card:{app}:<room_id>      the Card as JSON, expiring after CardTTL
//	room:hides:{app}:<region>      ZSET of the applying hides (hides_redis.go)
//	room:hides:{app}:<region>:gen  bumped by every hide and unhide
//
// The projector adds to the sets of any region, so a set without its ready
// key may be partial: it is never read, and a reader that finds it so
// fills it from MySQL (Mirror.RepairRegion).
type Keys struct{ Prefix string }

// List is the set of a region's tab (TabHot or TabNew).
func (k Keys) List(app string, region int64, tab string) string {
	return k.Prefix + "room:list:{" + app + "}:" + strconv.FormatInt(region, 10) + ":" + tab
}

// Ready is the key that marks a region's sets filled from MySQL.
func (k Keys) Ready(app string, region int64) string {
	return k.Prefix + "room:list:{" + app + "}:" + strconv.FormatInt(region, 10) + ":ready"
}

// Card is the key of a room's card.
func (k Keys) Card(app, room string) string { return k.Prefix + "room:card:{" + app + "}:" + room }

// Hides is the key of a region's hide set.
func (k Keys) Hides(app string, region int64) string {
	return k.Prefix + "room:hides:{" + app + "}:" + strconv.FormatInt(region, 10)
}

func (k Keys) hidesGen(app string, region int64) string { return k.Hides(app, region) + ":gen" }

// CardPrefix begins every card key, and HidesPrefix every hide set's key
// (and its gen key): a client that tracks them sees every change of a card
// or hide set.
func (k Keys) CardPrefix() string { return k.Prefix + "room:card:" }

// HidesPrefix: see CardPrefix.
func (k Keys) HidesPrefix() string { return k.Prefix + "room:hides:" }

// ParseCard returns the app and room of a card key; ok is false for any
// other key.
func (k Keys) ParseCard(key string) (app, room string, ok bool) {
	rest, ok := k.cut(key, "room:card:{")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "}:")
}

// ParseHides returns the app and region of a hide set's key; ok is false
// for any other key, its gen key included.
func (k Keys) ParseHides(key string) (app string, region int64, ok bool) {
	rest, ok := k.cut(key, "room:hides:{")
	if !ok {
		return "", 0, false
	}
	app, reg, ok := strings.Cut(rest, "}:")
	if !ok {
		return "", 0, false
	}
	region, err := strconv.ParseInt(reg, 10, 64)
	if err != nil {
		return "", 0, false
	}
	return app, region, true
}

// cut returns key without the prefix and then kind, if it has both.
func (k Keys) cut(key, kind string) (string, bool) {
	rest, ok := strings.CutPrefix(key, k.Prefix)
	if !ok {
		return "", false
	}
	return strings.CutPrefix(rest, kind)
}

// cache writes the read model's Redis mirror (Keys). A nil *cache (no
// Redis configured) writes nothing.
type cache struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

func (c *cache) keys() Keys { return Keys{Prefix: c.prefix} }

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
	keys := c.keys()
	p := c.rdb.Pipeline()
	for _, a := range as {
		k := a.card
		raw, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode card %s: %w", k.RoomID, err)
		}
		p.Set(ctx, keys.Card(k.AppCode, k.RoomID), raw, c.ttl)
		if a.oldRegion >= 0 && a.oldRegion != k.VisibleRegionID {
			p.ZRem(ctx, keys.List(k.AppCode, a.oldRegion, TabHot), k.RoomID)
			p.ZRem(ctx, keys.List(k.AppCode, a.oldRegion, TabNew), k.RoomID)
		}
		if k.Status == roomevent.StatusActive {
			p.ZAdd(ctx, keys.List(k.AppCode, k.VisibleRegionID, TabHot), redis.Z{Score: float64(k.SortScore), Member: k.RoomID})
			p.ZAdd(ctx, keys.List(k.AppCode, k.VisibleRegionID, TabNew), redis.Z{Score: float64(k.CreatedAtMs), Member: k.RoomID})
		} else {
			p.ZRem(ctx, keys.List(k.AppCode, k.VisibleRegionID, TabHot), k.RoomID)
			p.ZRem(ctx, keys.List(k.AppCode, k.VisibleRegionID, TabNew), k.RoomID)
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("write %d cards to redis: %w", len(as), err)
	}
	return nil
}

// putCards stores cards read from MySQL.
func (c *cache) putCards(ctx context.Context, cards []*Card) error {
	if c == nil || len(cards) == 0 {
		return nil
	}
	keys := c.keys()
	p := c.rdb.Pipeline()
	for _, k := range cards {
		raw, err := json.Marshal(k)
		if err != nil {
			return fmt.Errorf("encode card %s: %w", k.RoomID, err)
		}
		p.Set(ctx, keys.Card(k.AppCode, k.RoomID), raw, c.ttl)
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("write %d cards to redis: %w", len(cards), err)
	}
	return nil
}

// members returns every room id in a region's two sets.
func (c *cache) members(ctx context.Context, app string, region int64) ([]string, error) {
	keys := c.keys()
	p := c.rdb.Pipeline()
	hot := p.ZRange(ctx, keys.List(app, region, TabHot), 0, -1)
	fresh := p.ZRange(ctx, keys.List(app, region, TabNew), 0, -1)
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("read region %d of %s from redis: %w", region, app, err)
	}
	return append(hot.Val(), fresh.Val()...), nil
}

// fillRegionFromDB brings a region's Redis sets in line with MySQL: its
// listed rooms are written with their scores, and members MySQL no longer
// lists there (closed, banned, moved; checked again after the read, so a
// room the projector added meanwhile stays) are removed.
func fillRegionFromDB(ctx context.Context, db *sql.DB, c *cache, app string, region int64) error {
	if c == nil {
		return nil
	}
	listed, err := listedScores(ctx, db, app, region)
	if err != nil {
		return err
	}
	members, err := c.members(ctx, app, region)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(listed))
	for _, s := range listed {
		seen[s.id] = true
	}
	var suspects []string
	for _, id := range members {
		if !seen[id] {
			seen[id] = true // once
			suspects = append(suspects, id)
		}
	}
	var gone []string
	for i := 0; i < len(suspects); i += 500 {
		chunk := suspects[i:min(i+500, len(suspects))]
		still, err := stillListed(ctx, db, app, region, chunk)
		if err != nil {
			return err
		}
		for _, id := range chunk {
			if !still[id] {
				gone = append(gone, id)
			}
		}
	}
	return c.fillRegion(ctx, app, region, listed, gone)
}

// fillRegion writes a region's listed rooms (read from MySQL) into its
// sets, removes the rooms of gone (no longer listed there) and marks the
// region ready, atomically. Rooms the projector added meanwhile stay.
func (c *cache) fillRegion(ctx context.Context, app string, region int64, listed []scored, gone []string) error {
	keys := c.keys()
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, tab := range []string{TabHot, TabNew} {
			key := keys.List(app, region, tab)
			for i := 0; i < len(listed); i += 1000 {
				zs := make([]redis.Z, 0, 1000)
				for _, s := range listed[i:min(i+1000, len(listed))] {
					score := s.hot
					if tab == TabNew {
						score = s.fresh
					}
					zs = append(zs, redis.Z{Score: float64(score), Member: s.id})
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
		p.Set(ctx, keys.Ready(app, region), "1", 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("fill region %d of %s in redis: %w", region, app, err)
	}
	return nil
}
