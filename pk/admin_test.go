package pk_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/pk"
	"voiceroom/roomevent"
)

func score(n int64) *int64 { return &n }

// TestAdminSetScore: an admin sets one side's total of a running battle;
// both rooms are told the totals with the next sequence, the change is in
// that room's audit trail, and later gifts add to it. Every bad request
// is a clear 4xx that changes nothing: the scores, the sequence, the
// events and the audit trail stay as they were.
func TestAdminSetScore(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3)
	pending, err := h.svc.Invite(ctx, app, 3, c, pk.Invitation{OpponentRoomID: h.room(t, app, 4), DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	battle := h.battle(t, a, b, 1, 2, 60)
	if err := pk.Score(ctx, h.db, gift(t, a, 11, 100, battle.StartsAtMs)); err != nil {
		t.Fatal(err)
	}
	h.round(t) // both rooms told 100:0, seq 1

	type state struct {
		room, opponent, seq int64
		events, audits      int
	}
	now := func() state {
		var s state
		if err := h.db.QueryRow(`SELECT room_score, opponent_score, score_seq FROM pk_battles WHERE battle_id = ?`, battle.BattleID).
			Scan(&s.room, &s.opponent, &s.seq); err != nil {
			t.Fatal(err)
		}
		s.events = h.count(t, `SELECT COUNT(*) FROM room_outbox WHERE event_type = ?`, roomevent.RoomPKScoreChanged)
		s.audits = h.count(t, `SELECT COUNT(*) FROM room_audit`)
		return s
	}
	before := now()
	if before != (state{100, 0, 1, 2, 0}) {
		t.Fatalf("before: %+v", before)
	}
	for _, tc := range []struct {
		name     string
		app, id  string
		change   pk.ScoreChange
		want     apperr.Code
		contains string
	}{
		{"not a battle id", app, "nope", pk.ScoreChange{RoomID: a, Score: score(5)}, apperr.InvalidArgument, "battle_id"},
		{"no room", app, battle.BattleID, pk.ScoreChange{Score: score(5)}, apperr.InvalidArgument, "room_id"},
		{"no score", app, battle.BattleID, pk.ScoreChange{RoomID: a}, apperr.InvalidArgument, "score"},
		{"negative score", app, battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(-1)}, apperr.InvalidArgument, "score"},
		{"score over the bound", app, battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(pk.MaxScore + 1)}, apperr.InvalidArgument, "score"},
		{"reason too long", app, battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(5), Reason: strings.Repeat("x", 257)}, apperr.InvalidArgument, "reason"},
		{"a room not of the battle", app, battle.BattleID, pk.ScoreChange{RoomID: c, Score: score(5)}, apperr.InvalidArgument, "room_id"},
		{"a battle of another app", "pkother", battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(5)}, apperr.NotFound, "battle"},
		{"an unknown battle", app, "0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", pk.ScoreChange{RoomID: a, Score: score(5)}, apperr.NotFound, "battle"},
		{"a pending battle", app, pending.BattleID, pk.ScoreChange{RoomID: c, Score: score(5)}, apperr.FailedPrecondition, "pending"},
	} {
		_, err := h.svc.SetScore(ctx, tc.app, "admin:ops", tc.id, tc.change)
		if !apperr.Is(err, tc.want) || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.want, tc.contains)
		}
		if got := now(); got != before {
			t.Errorf("%s changed %+v to %+v", tc.name, before, got)
		}
	}

	got, err := h.svc.SetScore(ctx, app, "admin:ops", battle.BattleID, pk.ScoreChange{RoomID: b, Score: score(500), Reason: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	if got.RoomScore != 100 || got.OpponentScore != 500 {
		t.Fatalf("after the set: %+v", got)
	}
	if s := now(); s != (state{100, 500, 2, 4, 1}) {
		t.Fatalf("after the set: %+v", s)
	}
	for _, side := range []struct {
		room         string
		mine, theirs int64
	}{{a, 100, 500}, {b, 500, 100}} {
		if v := h.view(t, app, side.room); v.PK == nil || v.PK.MyScore != side.mine || v.PK.OpponentScore != side.theirs || v.PK.Seq != 2 {
			t.Fatalf("view of %s: %+v", side.room, v.PK)
		}
	}
	var operator, action, reason string
	var was, is []byte
	if err := h.db.QueryRow(`SELECT operator, action, reason, before_value, after_value FROM room_audit WHERE app_code = ? AND room_id = ?`,
		app, b).Scan(&operator, &action, &reason, &was, &is); err != nil {
		t.Fatal(err)
	}
	var wasScore, isScore struct {
		BattleID string `json:"battle_id"`
		Score    int64  `json:"score"`
	}
	if json.Unmarshal(was, &wasScore) != nil || json.Unmarshal(is, &isScore) != nil || operator != "admin:ops" || action != "pk_score" ||
		reason != "refund" || wasScore.Score != 0 || isScore.Score != 500 || isScore.BattleID != battle.BattleID {
		t.Fatalf("audit %s %s %q %s %s", operator, action, reason, was, is)
	}
	h.round(t)
	if s := now(); s.events != 4 {
		t.Fatalf("the clock told the set score again: %+v", s)
	}

	// Later gifts add to the set total.
	if err := pk.Score(ctx, h.db, gift(t, b, 12, 7, battle.StartsAtMs+1)); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.svc.Get(ctx, app, battle.BattleID); got.OpponentScore != 507 {
		t.Fatalf("a gift after the set: %+v", got)
	}
	// 0 is a score; the time up is not running any more.
	if _, err := h.svc.SetScore(ctx, app, "admin:ops", battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(0)}); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(61 * time.Second)
	_, err = h.svc.SetScore(ctx, app, "admin:ops", battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(5)})
	mustCode(t, "at time up", err, apperr.FailedPrecondition)
	h.round(t)
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, battle.BattleID); got.Status != pk.StatusEnded || got.RoomScore != 0 || got.OpponentScore != 507 ||
		got.WinnerRoomID != b {
		t.Fatalf("settled: %+v", got)
	}
	_, err = h.svc.SetScore(ctx, app, "admin:ops", battle.BattleID, pk.ScoreChange{RoomID: a, Score: score(5)})
	mustCode(t, "an ended battle", err, apperr.FailedPrecondition)
}
