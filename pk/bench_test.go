package pk_test

import (
	"context"
	"testing"

	"github.com/google/uuid"

	"voiceroom/bus"
	"voiceroom/pk"
)

// BenchmarkScore is the scorer's cost per gift: of a room at battle (the
// battle's row locked, the pk_seen row, the totals and the sender's
// row), and of a room not at battle (the slot looked up, nothing
// written); at_battle_batch32 is gifts to both sides scored in delivery
// batches of 32 (ScoreBatch: one transaction each), an op a gift. Ceilings, measured in the same run on the same database: a
// bare primary-key read of the slot, and a bare one-row INSERT.
//
//	go test ./pk -run '^$' -bench Score -benchtime 2000x -count 3
func BenchmarkScore(b *testing.B) {
	h := newHarness(b)
	ctx := context.Background()
	a, o, idle := h.room(b, app, 1), h.room(b, app, 2), h.room(b, app, 3)
	inv, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: o, DurationSeconds: 1800})
	if err != nil {
		b.Fatal(err)
	}
	battle, err := h.svc.Accept(ctx, app, 2, inv.BattleID)
	if err != nil {
		b.Fatal(err)
	}
	at := battle.StartsAtMs + 1
	b.Run("at_battle", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := pk.Score(ctx, h.db, gift(b, a, int64(100+i%50), 10, at)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("at_battle_batch32", func(b *testing.B) {
		var envs []bus.Envelope
		flush := func() {
			if errs := pk.ScoreBatch(ctx, h.db, envs); errs != nil {
				b.Fatal(errs)
			}
			envs = envs[:0]
		}
		for i := 0; b.Loop(); i++ {
			envs = append(envs, gift(b, []string{a, o}[i%2], int64(100+i%50), 10, at))
			if len(envs) == 32 {
				flush()
			}
		}
		flush()
	})
	b.Run("not_at_battle", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := pk.Score(ctx, h.db, gift(b, idle, int64(100+i%50), 10, at)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ceiling_pk_read", func(b *testing.B) {
		var id string
		for b.Loop() {
			if err := h.db.QueryRowContext(ctx, `SELECT battle_id FROM pk_room_slots WHERE app_code = ? AND room_id = ?`, app, a).Scan(&id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ceiling_insert", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.db.ExecContext(ctx, `INSERT INTO pk_seen (battle_id, event_id) VALUES ('bench', ?)`, uuid.NewString()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
