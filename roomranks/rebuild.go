package roomranks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RebuildResult says what Rebuild did.
type RebuildResult struct {
	AppCode string `json:"app_code"`
	// Rooms is how many rooms had their sets rebuilt.
	Rooms int `json:"rooms"`
	// Sets is how many sets were written (four per room: sender and
	// receiver, day and week).
	Sets int `json:"sets"`
	// Behind counts sets left as they were because the room's gifts
	// outran the journal three times in a row; run it again.
	Behind int `json:"behind"`
}

// ErrNoRoom is Rebuild's error for a room the app does not have.
var ErrNoRoom = errors.New("no such room")

// Rebuild writes the current day's and week's sets of app's rooms (only
// room, when not empty; else every room with a gift this week) from MySQL
// into Redis, replacing what is there. It is safe while projectors run: a
// set is replaced in one script with MySQL's sums and the journaled gifts
// after them (see doc.go). For a stale Redis (restored from an old
// snapshot, a dead-lettered event).
func Rebuild(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app, room string, log *slog.Logger) (RebuildResult, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return RebuildResult{}, err
	}
	if db == nil || rdb == nil {
		return RebuildResult{}, fmt.Errorf("%w: rebuilding ranks needs MySQL and Redis", ErrInvalidConfig)
	}
	cal, err := NewCalendar(cfg.TimeZones)
	if err != nil {
		return RebuildResult{}, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := newCache(rdb, cfg)
	now := cfg.Now().UnixMilli()
	day, week := cal.Window(app, Day, now), cal.Window(app, Week, now)
	rooms := []string{room}
	if room == "" {
		if rooms, err = giftRooms(ctx, db, app, week.StartMs); err != nil {
			return RebuildResult{}, err
		}
	} else if !strings.HasPrefix(room, app+"_") {
		return RebuildResult{}, fmt.Errorf("room %s of app %s: %w", room, app, ErrNoRoom)
	}
	res := RebuildResult{AppCode: app}
	for _, r := range rooms {
		for _, w := range []Window{day, week} {
			for _, by := range []By{BySender, ByReceiver} {
				done, err := rebuildSet(ctx, db, c, app, r, by, w, cfg.Now)
				if errors.Is(err, ErrNoRoom) {
					return res, fmt.Errorf("room %s of app %s: %w", r, app, err)
				}
				if err != nil {
					return res, err
				}
				if done {
					res.Sets++
				} else {
					res.Behind++
					log.Warn("ranks rebuild: gifts outran the journal; run it again", "app", app, "room", r, "by", by, "period", w.Period)
				}
			}
		}
		res.Rooms++
	}
	return res, nil
}

// rebuildSet replaces one set, trying three times when it is behind.
func rebuildSet(ctx context.Context, db *sql.DB, c *cache, app, room string, by By, w Window, now func() time.Time) (bool, error) {
	for range 3 {
		l, err := loadSums(ctx, db, app, room, by, w)
		if err != nil {
			return false, err
		}
		if !l.found {
			return false, ErrNoRoom
		}
		res, err := c.fill(ctx, app, room, by, w, l, true, now().UnixMilli())
		if err != nil {
			return false, err
		}
		if res != fillBehind {
			return true, nil
		}
	}
	return false, nil
}
