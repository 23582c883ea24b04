package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/every"
)

// Reconciler is the periodic job that keeps the read model's time-dependent
// part and its Redis mirror right: every ReconcileEvery it recomputes the
// sort_score of rooms young enough for their freshness boost to step down,
// then brings every region's Redis sets in line with MySQL (dropping
// closed, banned and moved rooms, fixing scores a lost write left behind,
// keeping rooms the projector added meanwhile),
// rewrites the cards of listed rooms (cards of rooms no longer listed
// expire after CardTTL) and refills every region's hide set from MySQL
// (dropping expired hides; a set a failed invalidation left stale is
// replaced, see hideCache). Several may run; each pass is idempotent.
type Reconciler struct {
	db      *sql.DB
	cache   *cache
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
}

// NewReconciler returns the reconcile job. rdb may be nil: then only
// scores are refreshed.
func NewReconciler(db *sql.DB, rdb redis.UniversalClient, cfg Config, log *slog.Logger, m *Metrics) (*Reconciler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil {
		return nil, fmt.Errorf("%w: reconciler needs a database", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reconciler{db: db, cache: newCache(rdb, cfg), cfg: cfg, log: log.With("component", "listreconcile"), metrics: m}, nil
}

// Run runs a pass at once and then every ReconcileEvery until ctx ends; a
// pass in flight is cut by ctx. A failed pass is logged and retried at the
// next tick. It returns nil.
func (r *Reconciler) Run(ctx context.Context) error {
	every.Now(ctx, r.cfg.ReconcileEvery, func() {
		pctx, cancel := context.WithTimeout(ctx, r.cfg.ReconcileEvery)
		defer cancel()
		if err := r.Pass(pctx); err != nil && ctx.Err() == nil {
			r.log.Warn("reconcile pass failed", "error", err)
		}
	})
	return nil
}

// Pass runs one reconcile pass over every app.
func (r *Reconciler) Pass(ctx context.Context) error {
	if err := refreshScores(ctx, r.db, r.cfg); err != nil {
		return err
	}
	if r.cache == nil {
		return nil
	}
	if err := refillCache(ctx, r.db, r.cache, "", r.cfg.nowMs()); err != nil {
		r.metrics.redisFailed("reconcile")
		return err
	}
	return nil
}

// refreshScores recomputes the sort_score of active rooms whose boost may
// have stepped down since the last pass: those younger than the last
// boost step plus a margin of an hour (or ten passes), so a reconciler
// that was down for less than that leaves no stale boost behind.
func refreshScores(ctx context.Context, db *sql.DB, cfg Config) error {
	nowMs := cfg.nowMs()
	margin := max(time.Hour, 10*cfg.ReconcileEvery)
	args := make([]any, 0, len(freshness)+1)
	for range freshness {
		args = append(args, nowMs)
	}
	args = append(args, nowMs-(maxBoostAge+margin).Milliseconds())
	_, err := db.ExecContext(ctx, `UPDATE room_list_entries SET sort_score = `+sortScoreSQL()+`
		WHERE status = 'active' AND created_at_ms > ?`, args...)
	if err != nil {
		return fmt.Errorf("refresh sort scores: %w", err)
	}
	return nil
}

// refillCache rebuilds the Redis sets, cards and hide sets of every region
// of app (every app when app is "") from MySQL, hides as they apply at
// nowMs.
func refillCache(ctx context.Context, db *sql.DB, c *cache, app string, nowMs int64) error {
	rows, err := db.QueryContext(ctx, `SELECT app_code, visible_region_id FROM room_list_entries WHERE app_code = ? OR ? = ''
		UNION SELECT app_code, visible_region_id FROM room_region_hides WHERE app_code = ? OR ? = ''`, app, app, app, app)
	if err != nil {
		return fmt.Errorf("read regions: %w", err)
	}
	type region struct {
		app string
		id  int64
	}
	var regions []region
	for rows.Next() {
		var rg region
		if err := rows.Scan(&rg.app, &rg.id); err != nil {
			rows.Close()
			return fmt.Errorf("read regions: %w", err)
		}
		regions = append(regions, rg)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read regions: %w", err)
	}
	for _, rg := range regions {
		if err := fillRegionFromDB(ctx, db, c, rg.app, rg.id); err != nil {
			return err
		}
		if err := refillCards(ctx, db, c, rg.app, rg.id); err != nil {
			return err
		}
		if _, err := fillHides(ctx, db, c, rg.app, rg.id, nowMs); err != nil {
			return err
		}
	}
	return nil
}

// refillCards rewrites the cards of a region's listed rooms, 500 at a time.
func refillCards(ctx context.Context, db *sql.DB, c *cache, app string, region int64) error {
	after := ""
	for {
		rows, err := db.QueryContext(ctx, `SELECT `+cardCols+` FROM room_list_entries e WHERE `+ListedSQL+`
			AND e.room_id > ? ORDER BY e.room_id LIMIT 500`, app, region, after)
		if err != nil {
			return fmt.Errorf("read cards: %w", err)
		}
		var cards []*Card
		for rows.Next() {
			k, err := ScanCard(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("read cards: %w", err)
			}
			cards = append(cards, k)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read cards: %w", err)
		}
		if err := c.putCards(ctx, cards); err != nil {
			return err
		}
		if len(cards) < 500 {
			return nil
		}
		after = cards[len(cards)-1].RoomID
	}
}
