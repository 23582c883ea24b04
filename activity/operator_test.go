package activity

import (
	"context"
	"reflect"
	"testing"

	"voiceroom/apperr"
)

// TestOperatorBoardSeesEveryRegion: an operator reads the board of an
// activity that names a region (which no user of another region, and no
// caller without a profile, may read), the same entries as a user of the
// region, with no place of its own; paging works as for users; another
// app's activity is not found.
func TestOperatorBoardSeesEveryRegion(t *testing.T) {
	e := newScoreEnv(t, nil)
	sea := e.region("a1", "SEA", "SG")
	e.user("a1", 1, "SG")
	id := e.activity(Activity{Metric: GiftValueSent, RegionIDs: []int64{sea}})
	s := e.newScorer(e.rdb)
	r := e.room("a1", sea, 1)
	for u := int64(1); u <= 5; u++ {
		e.mustScore(s, e.gift(r, u, 99, 1, u*10, 1, t0+u*sec))
	}
	ctx := context.Background()
	for name, b := range map[string]*Boards{"redis": e.boards(e.rdb), "mysql": e.boards(nil)} {
		user, err := b.Board(ctx, BoardQuery{AppCode: "a1", UserID: 1, ActivityID: id, Limit: 20})
		if err != nil {
			t.Fatal(err)
		}
		op, err := b.OperatorBoard(ctx, "a1", id, 0, 20, "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if op.Me != nil || len(op.Items) != 5 || !reflect.DeepEqual(op.Items, user.Items) || op.Items[0].UserID != 5 {
			t.Fatalf("%s: operator's board %+v, want the user's %+v and no place", name, op, user.Items)
		}
		first, err := b.OperatorBoard(ctx, "a1", id, 0, 2, "")
		if err != nil {
			t.Fatal(err)
		}
		next, err := b.OperatorBoard(ctx, "a1", id, 0, 2, first.NextCursor)
		if err != nil {
			t.Fatal(err)
		}
		if first.NextCursor == "" || !reflect.DeepEqual(next.Items, user.Items[2:4]) {
			t.Fatalf("%s: second page %+v, want %+v", name, next.Items, user.Items[2:4])
		}
		if _, err := b.OperatorBoard(ctx, "a2", id, 0, 20, ""); apperr.CodeOf(err) != apperr.NotFound {
			t.Fatalf("%s: another app's operator: %v, want NOT_FOUND", name, err)
		}
		for _, tt := range []struct {
			limit  int
			cursor string
			field  string
		}{{0, "", "limit"}, {MaxBoardLimit + 1, "", "limit"}, {5, "garbage", "cursor"}} {
			if _, err := b.OperatorBoard(ctx, "a1", id, 0, tt.limit, tt.cursor); apperr.FieldOf(err) != tt.field {
				t.Errorf("%s: limit %d cursor %q: %v, want INVALID_ARGUMENT naming %s", name, tt.limit, tt.cursor, err, tt.field)
			}
		}
	}
}

// TestCompletionsPerPeriod: a daily task's completion counts, per day, the
// latest first: who scored, who reached the target, who is paid and the
// coins paid; each day's board, read by its start (another time is
// refused naming period_start_ms); a leaderboard has no completions;
// another app's task is not found.
func TestCompletionsPerPeriod(t *testing.T) {
	e := newScoreEnv(t, nil)
	id := e.activity(Activity{Kind: Task, Metric: GiftCount, Period: Day, Target: 2, RewardCoins: 7})
	board := e.activity(Activity{Metric: GiftCount})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 0, 1)
	e.mustScore(s,
		e.gift(r, 1, 99, 1, 0, 2, t0+hour),     // day 0: user 1 reaches 2
		e.gift(r, 2, 99, 1, 0, 1, t0+2*hour),   // day 0: user 2 scores 1
		e.gift(r, 1, 99, 1, 0, 3, t0+day+hour), // day 1: user 1 reaches 3
		e.gift(r, 3, 99, 1, 0, 1, t0+day+hour), // day 1: user 3, 1 then 2
		e.gift(r, 3, 99, 1, 0, 1, t0+day+2*hour),
	)
	if _, err := e.db.Exec(`UPDATE activity_payouts SET paid_at_ms = ? WHERE activity_id = ? AND period_start_ms = ? AND user_id = 1`,
		t0+3*hour, id, t0); err != nil {
		t.Fatal(err)
	}
	b := e.boards(e.rdb)
	ctx := context.Background()
	got, err := b.Completions(ctx, "a1", id)
	if err != nil {
		t.Fatal(err)
	}
	want := Completions{ActivityID: id, Metric: GiftCount, Period: Day, Target: 2, RewardCoins: 7, Periods: []TaskPeriod{
		{PeriodStartMs: t0 + day, PeriodEndMs: t0 + 2*day, Participants: 2, Reached: 2},
		{PeriodStartMs: t0, PeriodEndMs: t0 + day, Participants: 2, Reached: 1, Paid: 1, CoinsPaid: 7},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("completions\n%+v\nwant\n%+v", got, want)
	}
	// Each period's board stays for audit: the operator reads day 0's
	// (the clock is in day 0; day 1 is ahead of it) and day 1's.
	for _, tt := range []struct {
		ps   int64
		want []BoardItem
	}{
		{t0, []BoardItem{{Rank: 1, UserID: 1, Score: 2}, {Rank: 2, UserID: 2, Score: 1}}},
		{t0 + day, []BoardItem{{Rank: 1, UserID: 1, Score: 3}, {Rank: 2, UserID: 3, Score: 2}}},
	} {
		p, err := b.OperatorBoard(ctx, "a1", id, tt.ps, 20, "")
		if err != nil || p.PeriodStartMs != tt.ps || p.PeriodEndMs != tt.ps+day || !reflect.DeepEqual(p.Items, tt.want) {
			t.Fatalf("the board of the day from %d: %+v %v, want %+v", tt.ps, p, err, tt.want)
		}
	}
	e.setClock(t0 + day + 12*hour)
	if p, err := b.OperatorBoard(ctx, "a1", id, 0, 20, ""); err != nil || p.PeriodStartMs != t0+day {
		t.Fatalf("the current board on day 1: %+v %v", p, err)
	}
	for _, ps := range []int64{t0 + hour, t0 - day, t0 + 7*day, 1} {
		if _, err := b.OperatorBoard(ctx, "a1", id, ps, 20, ""); apperr.FieldOf(err) != "period_start_ms" {
			t.Errorf("the board of a period from %d: %v, want INVALID_ARGUMENT naming period_start_ms", ps, err)
		}
	}
	if _, err := b.OperatorBoard(ctx, "a1", board, t0+day, 20, ""); apperr.FieldOf(err) != "period_start_ms" {
		t.Errorf("a leaderboard's second day: %v, want INVALID_ARGUMENT naming period_start_ms", err)
	}
	if _, err := b.OperatorBoard(ctx, "a1", board, t0, 20, ""); err != nil {
		t.Errorf("a leaderboard's one period: %v", err)
	}
	if _, err := b.Completions(ctx, "a1", board); apperr.FieldOf(err) != "activity_id" {
		t.Fatalf("a leaderboard's completions: %v, want INVALID_ARGUMENT naming activity_id", err)
	}
	if _, err := b.Completions(ctx, "a2", id); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("another app's task: %v, want NOT_FOUND", err)
	}
}
