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

// WriteCards writes cards as the projector does, those of the rooms
// stored(app, room) says have a row with its UPDATE (benchmarks).
func WriteCards(ctx context.Context, db *sql.DB, cards []*Card, stored func(app, room string) bool) error {
	return writeCards(ctx, db, cards, func(k roomKey) bool { return stored(k.app, k.room) })
}

// OnApplied sets the projector's benchmark hook.
func OnApplied(p *Projector, fn func(eventID string, at time.Time)) { p.onApplied = fn }
