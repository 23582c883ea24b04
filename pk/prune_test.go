package pk_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"voiceroom/pk"
)

// TestPruneKeepsWhatGetShows: a battle settled longer than the retention
// ago loses its pk_seen rows and all but each side's top 3 senders; GET
// shows the same battle as before. A running battle, and a settled one
// still within the retention, keep theirs; a second prune finds nothing.
func TestPruneKeepsWhatGetShows(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c, d := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3), h.room(t, app, 4)
	old := h.battle(t, a, b, 1, 2, 60)
	for i, g := range []struct {
		room          string
		sender, value int64
	}{{a, 11, 50}, {a, 12, 40}, {a, 13, 40}, {a, 14, 10}, {a, 15, 5}, {b, 21, 7}, {b, 22, 9}, {a, 14, 1}} {
		if err := pk.Score(ctx, h.db, gift(t, g.room, g.sender, g.value, old.StartsAtMs+int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	h.clock.Advance(61 * time.Second)
	h.round(t)
	h.round(t)
	before, err := h.svc.Get(ctx, app, old.BattleID)
	if err != nil || before.Status != pk.StatusEnded {
		t.Fatalf("settled: %+v %v", before, err)
	}
	rows := func(table, battleID string) int {
		t.Helper()
		return h.count(t, `SELECT COUNT(*) FROM `+table+` WHERE battle_id = ?`, battleID)
	}
	if n, m := rows("pk_seen", old.BattleID), rows("pk_senders", old.BattleID); n != 8 || m != 7 {
		t.Fatalf("before the prune: %d seen, %d senders", n, m)
	}
	prune := func(want int) {
		t.Helper()
		if n, err := h.tick.Prune(ctx); err != nil || n != want {
			t.Fatalf("prune: %d battles (%v), want %d", n, err, want)
		}
	}
	prune(0) // within the retention

	h.clock.Advance(167 * time.Hour)
	running := h.battle(t, c, d, 3, 4, 60)
	if err := pk.Score(ctx, h.db, gift(t, c, 31, 3, running.StartsAtMs)); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Hour + time.Second)
	prune(1)
	if n, m := rows("pk_seen", old.BattleID), rows("pk_senders", old.BattleID); n != 0 || m != 5 {
		t.Fatalf("after the prune: %d seen, %d senders, want 0 and 3+2", n, m)
	}
	if n, m := rows("pk_seen", running.BattleID), rows("pk_senders", running.BattleID); n != 1 || m != 1 {
		t.Fatalf("the running battle was pruned: %d seen, %d senders", n, m)
	}
	after, err := h.svc.Get(ctx, app, old.BattleID)
	if err != nil || !slices.Equal(after.RoomTopSenders, before.RoomTopSenders) || !slices.Equal(after.OpponentTopSenders, before.OpponentTopSenders) ||
		after.RoomScore != before.RoomScore || after.OpponentScore != before.OpponentScore {
		t.Fatalf("GET after the prune %+v, before %+v (%v)", after, before, err)
	}
	prune(0)
}
