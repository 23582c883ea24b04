package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mirror is the read model's Redis mirror as a reader of it (the list
// query, package roomlist) uses it: the client and key layout (Keys) to
// read, and the only writes a reader makes, each a repair from MySQL or
// an invalidation, so that every Redis key of the read model is written
// by this package. Each write that fails is counted in
// voiceroom_list_redis_write_failures_total under its writer ("repair" or
// "hides").
type Mirror struct {
	c       *cache
	db      *sql.DB
	metrics *Metrics
}

// NewMirror returns the mirror of cfg.KeyPrefix on rdb, whose repairs read
// MySQL through db; it returns nil when rdb is nil (a list without Redis).
// m may be nil.
func NewMirror(db *sql.DB, rdb redis.UniversalClient, cfg Config, m *Metrics) (*Mirror, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: mirror needs a database", ErrInvalidConfig)
	}
	if rdb == nil {
		return nil, nil
	}
	return &Mirror{c: newCache(rdb, cfg), db: db, metrics: m}, nil
}

// Client is the Redis client the mirror is on.
func (m *Mirror) Client() redis.UniversalClient { return m.c.rdb }

// Keys is the mirror's key layout.
func (m *Mirror) Keys() Keys { return m.c.keys() }

// RepairCards writes cards read from MySQL (after a miss) back to Redis.
func (m *Mirror) RepairCards(ctx context.Context, cards []*Card) error {
	return m.counted("repair", m.c.putCards(ctx, cards))
}

// RepairRegion brings a region's sets in line with MySQL and marks them
// ready: the listed rooms with their scores, rooms no longer listed there
// removed, rooms the projector added meanwhile kept.
func (m *Mirror) RepairRegion(ctx context.Context, app string, region int64) error {
	return m.counted("repair", fillRegionFromDB(ctx, m.db, m.c, app, region))
}

// FillHides replaces a region's hide set with the hides MySQL applies at
// nowMs, unless a hide or unhide invalidated the set meanwhile: filled is
// false then, and the set stays missing (see hides_redis.go).
func (m *Mirror) FillHides(ctx context.Context, app string, region, nowMs int64) (filled bool, err error) {
	filled, err = fillHides(ctx, m.db, m.c, app, region, nowMs)
	return filled, m.counted("hides", err)
}

// InvalidateHides drops a region's hide set after a hide or unhide of it
// committed, in at most two attempts of timeout each; it returns the
// errors when both failed (see hides_redis.go for what the caller must do
// then).
func (m *Mirror) InvalidateHides(ctx context.Context, app string, region int64, timeout time.Duration) error {
	return m.counted("hides", m.c.invalidateHides(ctx, app, region, timeout))
}

// counted counts err, when not nil, as a failed write of writer.
func (m *Mirror) counted(writer string, err error) error {
	if err != nil {
		m.metrics.redisFailed(writer)
	}
	return err
}
