package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"

	"voiceroom/roomevent"

	"github.com/redis/go-redis/v9"
)

// RebuildResult counts what Rebuild did.
type RebuildResult struct {
	// Rooms is how many rooms were recovered.
	Rooms int `json:"rooms"`
	// Written is how many cards were newer than the read model's (all of
	// them when it was empty).
	Written int `json:"written"`
}

// CardLoader recovers app's room from MySQL alone (its latest snapshot and
// command log) and returns its card. The rooms package provides it
// (rooms.LoadCard); cmd/voiceroom wires it in, so the list never imports
// the rooms package. A room that does not exist is an error.
type CardLoader func(ctx context.Context, app, room string) (roomevent.Card, error)

// rebuildBatch is how many rooms one rebuild statement writes.
const rebuildBatch = 500

// Rebuild regenerates room_list_entries of app (every app when app is "")
// from MySQL alone: each room of the rooms table is recovered from its
// snapshot and command log (load) and its card written with the
// projector's version guard, so a rebuild is safe while projectors run
// (neither overwrites the other's newer card). Then the app's Redis sets
// and cards are refilled when rdb is not nil. It stops at the first error.
func Rebuild(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app string, load CardLoader, log *slog.Logger) (RebuildResult, error) {
	if load == nil {
		return RebuildResult{}, fmt.Errorf("%w: rebuild needs a card loader", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var res RebuildResult
	afterApp, afterRoom := "", ""
	for {
		keys, err := roomKeys(ctx, db, app, afterApp, afterRoom, rebuildBatch)
		if err != nil {
			return res, err
		}
		if len(keys) == 0 {
			break
		}
		priors, err := readPriors(ctx, db, keys)
		if err != nil {
			return res, err
		}
		nowMs := cfg.nowMs()
		cards := make([]*Card, 0, len(keys))
		for _, k := range keys {
			rc, err := load(ctx, k.app, k.room)
			if err != nil {
				return res, fmt.Errorf("rebuild room %s of %s: %w", k.room, k.app, err)
			}
			c, err := fromEventCard(k.app, k.room, rc.RoomVersion, rc)
			if err != nil {
				return res, fmt.Errorf("rebuild room %s of %s: %w", k.room, k.app, err)
			}
			c.SortScore, c.UpdatedAtMs = sortScore(c, nowMs), nowMs
			p, ok := priors[k]
			if ok && p.RoomVersion > c.RoomVersion {
				continue // the guard would keep the stored card
			}
			if !ok || p.RoomVersion < c.RoomVersion {
				res.Written++
			}
			cards = append(cards, c)
		}
		stored := func(k roomKey) bool { _, ok := priors[k]; return ok }
		if err := writeCards(ctx, db, cards, stored); err != nil {
			return res, err
		}
		res.Rooms += len(keys)
		last := keys[len(keys)-1]
		afterApp, afterRoom = last.app, last.room
		log.Info("rebuild progress", "rooms", res.Rooms, "written", res.Written)
	}
	if rdb != nil {
		if err := refillCache(ctx, db, newCache(rdb, cfg), app, cfg.nowMs()); err != nil {
			return res, fmt.Errorf("refill redis: %w", err)
		}
	}
	return res, nil
}

// roomKeys lists rooms of app (all apps when "") after (afterApp, afterRoom).
func roomKeys(ctx context.Context, db *sql.DB, app, afterApp, afterRoom string, limit int) ([]roomKey, error) {
	var rows *sql.Rows
	var err error
	if app != "" {
		rows, err = db.QueryContext(ctx, `SELECT app_code, room_id FROM rooms WHERE app_code = ? AND room_id > ?
			ORDER BY room_id LIMIT ?`, app, afterRoom, limit)
	} else {
		rows, err = db.QueryContext(ctx, `SELECT app_code, room_id FROM rooms WHERE (app_code, room_id) > (?, ?)
			ORDER BY app_code, room_id LIMIT ?`, afterApp, afterRoom, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list rooms: %w", err)
	}
	defer rows.Close()
	var out []roomKey
	for rows.Next() {
		var k roomKey
		if err := rows.Scan(&k.app, &k.room); err != nil {
			return nil, fmt.Errorf("list rooms: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}
