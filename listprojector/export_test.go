package listprojector

import (
	"context"
	"database/sql"

	"time"

	"github.com/redis/go-redis/v9"
)

// RefillCache rebuilds app's Redis sets and cards from MySQL (tests).
func RefillCache(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app string) error {
	return refillCache(ctx, db, newCache(rdb, cfg.WithDefaults()), app)
}

// UpsertCards writes cards with the projector's statement (benchmarks).
func UpsertCards(ctx context.Context, db *sql.DB, cards []*Card) error {
	return upsertCards(ctx, db, cards)
}

// OnApplied sets the projector's benchmark hook.
func OnApplied(p *Projector, fn func(eventID string, at time.Time)) { p.onApplied = fn }
