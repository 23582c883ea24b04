package listprojector

import (
	"context"
	"database/sql"

	"github.com/redis/go-redis/v9"
)

// RefillCache rebuilds app's Redis sets and cards from MySQL (tests).
func RefillCache(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg Config, app string) error {
	return refillCache(ctx, db, newCache(rdb, cfg.WithDefaults()), app)
}
