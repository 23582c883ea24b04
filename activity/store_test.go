package activity_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"voiceroom/activity"
	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// newTestStore is a store over a database of the test's own, read with a
// clock the test moves.
func newTestStore(tb testing.TB) (*activity.Store, *testenv.Clock) {
	tb.Helper()
	clock := testenv.NewClock(time.Time{})
	return activity.NewStore(testenv.NewDB(tb), clock.Now), clock
}

func mustCreate(tb testing.TB, s *activity.Store, a activity.Activity) activity.Activity {
	tb.Helper()
	got, err := s.Create(context.Background(), a)
	if err != nil {
		tb.Fatalf("create %+v: %v", a, err)
	}
	return got
}

func leaderboardOf(app string, startMs, endMs int64) activity.Activity {
	return activity.Activity{AppCode: app, Name: "top senders", Kind: activity.Leaderboard, Metric: activity.GiftValueSent,
		GiftIDs: []int64{1, 2}, RegionIDs: []int64{7}, StartsAtMs: startMs, EndsAtMs: endMs,
		Rewards: []activity.Band{{FromRank: 1, ToRank: 1, Coins: 1000}, {FromRank: 2, ToRank: 10, Coins: 100}}, CreatedBy: "op"}
}

func TestStoreKeepsDefinitionsPerApp(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	now := clock.Now().UnixMilli()
	lb := mustCreate(t, s, leaderboardOf("app1", now+60_000, now+3_600_000))
	task := mustCreate(t, s, activity.Activity{AppCode: "app1", Name: "send 5", Kind: activity.Task, Metric: activity.GiftCount,
		StartsAtMs: now - 1000, EndsAtMs: now + 86_400_000, Target: 5, Period: activity.Day, RewardCoins: 10})
	if lb.ID == 0 || task.ID <= lb.ID {
		t.Fatalf("ids %d, %d: want increasing ids above 0", lb.ID, task.ID)
	}
	if lb.Status != activity.Scheduled || task.Status != activity.Running {
		t.Fatalf("statuses %s, %s: want scheduled, running", lb.Status, task.Status)
	}

	got, err := s.Get(ctx, "app1", lb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, lb) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, lb)
	}
	gotTask, err := s.Get(ctx, "app1", task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if gotTask.GiftIDs != nil || gotTask.RegionIDs != nil || gotTask.Rewards != nil || gotTask.Target != 5 || gotTask.Period != activity.Day {
		t.Fatalf("task read back %+v", gotTask)
	}
	if _, err := s.Get(ctx, "app2", lb.ID); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("another app's activity: %v, want NOT_FOUND", err)
	}
	if _, err := s.Get(ctx, "app1", task.ID+100); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("a missing activity: %v, want NOT_FOUND", err)
	}

	// The clock moves the derived status: running from its start,
	// settling from its end.
	clock.Advance(time.Minute)
	if got, err = s.Get(ctx, "app1", lb.ID); err != nil || got.Status != activity.Running {
		t.Fatalf("at its start: %s, %v; want running", got.Status, err)
	}
	clock.Advance(time.Hour)
	if got, err = s.Get(ctx, "app1", lb.ID); err != nil || got.Status != activity.Settling {
		t.Fatalf("after its end: %s, %v; want settling", got.Status, err)
	}
}

func TestStoreListPagesOneAppOnly(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	now := clock.Now().UnixMilli()
	var want []int64
	for i := range 5 {
		want = append(want, mustCreate(t, s, leaderboardOf("app1", now, now+1000)).ID)
		if i%2 == 0 {
			mustCreate(t, s, leaderboardOf("app2", now, now+1000))
		}
	}
	var got []int64
	after := int64(0)
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("paging does not end")
		}
		page, more, err := s.List(ctx, "app1", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page {
			if a.AppCode != "app1" {
				t.Fatalf("app1's list holds %+v", a)
			}
			got = append(got, a.ID)
		}
		if !more {
			break
		}
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
}

func TestStoreOpenAndCancel(t *testing.T) {
	s, clock := newTestStore(t)
	ctx := context.Background()
	now := clock.Now().UnixMilli()
	a := mustCreate(t, s, leaderboardOf("app1", now, now+1000))
	b := mustCreate(t, s, leaderboardOf("app2", now, now+1000))
	open, err := s.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 2 || open[0].ID != a.ID || open[1].ID != b.ID {
		t.Fatalf("open: %+v, want %d and %d", open, a.ID, b.ID)
	}
	if _, err := s.Cancel(ctx, "app2", a.ID); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("cancel by another app: %v, want NOT_FOUND", err)
	}
	c, err := s.Cancel(ctx, "app1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status != activity.Cancelled || c.SettleState != activity.StateCancelled {
		t.Fatalf("cancelled: %s/%s", c.Status, c.SettleState)
	}
	again, err := s.Cancel(ctx, "app1", a.ID)
	if err != nil || again.Status != activity.Cancelled {
		t.Fatalf("cancel again: %s, %v", again.Status, err)
	}
	if open, err = s.Open(ctx); err != nil || len(open) != 1 || open[0].ID != b.ID {
		t.Fatalf("open after cancel: %+v, %v; want only %d", open, err, b.ID)
	}

	// Once settlement pays, or has paid, cancel is refused.
	for _, state := range []activity.SettleState{activity.StatePaying, activity.StateSettled} {
		if _, err := s.DB().ExecContext(ctx, `UPDATE activities SET settle_state = ? WHERE activity_id = ?`, state, b.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, "app2", b.ID); !apperr.Is(err, apperr.FailedPrecondition) {
			t.Fatalf("cancel while %s: %v, want FAILED_PRECONDITION", state, err)
		}
		got, err := s.Get(ctx, "app2", b.ID)
		if err != nil || got.SettleState != state {
			t.Fatalf("after a refused cancel: %s, %v; want %s", got.SettleState, err, state)
		}
	}
}

func TestDeriveStatus(t *testing.T) {
	for _, tc := range []struct {
		stored activity.Status
		state  activity.SettleState
		nowMs  int64
		want   activity.Status
	}{
		{activity.Scheduled, activity.StateOpen, 5, activity.Scheduled},
		{activity.Scheduled, activity.StateOpen, 10, activity.Running},
		{activity.Scheduled, activity.StateOpen, 19, activity.Running},
		{activity.Scheduled, activity.StateOpen, 20, activity.Settling},
		{activity.Scheduled, activity.StateFrozen, 15, activity.Settling},
		{activity.Scheduled, activity.StatePaying, 25, activity.Settling},
		{activity.Scheduled, activity.StateSettled, 25, activity.Settled},
		{activity.Settled, activity.StateSettled, 25, activity.Settled},
		{activity.Cancelled, activity.StateCancelled, 5, activity.Cancelled},
		{activity.Scheduled, activity.StateCancelled, 15, activity.Cancelled},
	} {
		if got := activity.DeriveStatus(tc.stored, tc.state, 10, 20, tc.nowMs); got != tc.want {
			t.Errorf("DeriveStatus(%s, %s, 10, 20, %d) = %s, want %s", tc.stored, tc.state, tc.nowMs, got, tc.want)
		}
	}
}
