package listprojector

import (
	"context"
	"database/sql"
	"time"
)

// UpsertCards writes cards with the projector's statement (benchmarks).
func UpsertCards(ctx context.Context, db *sql.DB, cards []*Card) error {
	return upsertCards(ctx, db, cards)
}

// OnApplied sets the projector's benchmark hook.
func OnApplied(p *Projector, fn func(eventID string, at time.Time)) { p.onApplied = fn }
