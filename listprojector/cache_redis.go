package listprojector

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/roomevent"
)

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
