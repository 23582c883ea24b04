package listprojector

import (
	"context"
	"database/sql"

	"time"

	"github.com/redis/go-redis/v9"
)

// RefillCache rebuilds app's Redis sets and cards from MySQL (tests).
func RefillCache(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app string) error {
	cfg = cfg.WithDefaults()
	return refillCache(ctx, db, newCache(rdb, cfg), app, cfg.nowMs())
}

// UpsertCards writes cards with the projector's statement (benchmarks).
func UpsertCards(ctx context.Context, db *sql.DB, cards []*Card) error {
	return upsertCards(ctx, db, cards)
}

// OnApplied sets the projector's benchmark hook.
func OnApplied(p *Projector, fn func(eventID string, at time.Time)) { p.onApplied = fn }

// FillHidesRacing fills a region's Redis hide set, running write between
// its MySQL read and its Redis write (tests).
func FillHidesRacing(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app string, region int64, write func()) error {
	cfg = cfg.WithDefaults()
	_, err := fillHidesAround(ctx, db, newCache(rdb, cfg), app, region, cfg.nowMs(), write)
	return err
}

// NearCacheUp reports whether l's near cache is in use (tests).
func NearCacheUp(l *Lister) bool { return l.near != nil && l.near.up.Load() }

// NearCacheConnID returns the Redis client id of l's tracking connection.
func NearCacheConnID(l *Lister) int64 { return l.near.connID.Load() }

// NearCacheOn reports whether l has a near cache (it is not turned off).
func NearCacheOn(l *Lister) bool { return l.near != nil }
