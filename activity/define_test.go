package activity_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/activity"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/regions"
)

// defineEnv is a Definer over a database of the test's own: app1 has the
// gifts 1 and 2, the active region sea and the disabled region old; app2
// has the gift 3 and the region eu.
type defineEnv struct {
	d       *activity.Definer
	store   *activity.Store
	clock   *testenv.Clock
	js      jetstream.JetStream
	sea     int64 // app1's
	old     int64 // app1's, disabled
	eu      int64 // app2's
	nowMs   int64
	regions *regions.Service
}

func newTestDefiner(tb testing.TB) *defineEnv {
	tb.Helper()
	ctx := context.Background()
	db := testenv.NewDB(tb)
	clock := testenv.NewClock(time.Time{})
	rs, err := regions.New(ctx, db, testenv.Logger(tb), nil, regions.Config{Now: clock.Now, DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rs.Close)
	e := &defineEnv{clock: clock, nowMs: clock.Now().UnixMilli(), regions: rs}
	e.sea = mustRegion(tb, rs, "app1", "SEA")
	e.old = mustRegion(tb, rs, "app1", "OLD")
	disabled := regions.StatusDisabled
	if _, err := rs.UpdateRegion(ctx, "app1", e.old, regions.RegionPatch{Status: &disabled}); err != nil {
		tb.Fatal(err)
	}
	e.eu = mustRegion(tb, rs, "app2", "EU")
	for _, g := range []struct {
		app string
		id  int64
	}{{"app1", 1}, {"app1", 2}, {"app2", 3}} {
		if _, err := db.ExecContext(ctx, `INSERT INTO gifts (app_code, gift_id, name, price, heat, enabled, created_at_ms, updated_at_ms)
			VALUES (?, ?, 'rose', 10, 10, TRUE, 0, 0)`, g.app, g.id); err != nil {
			tb.Fatal(err)
		}
	}
	e.js = testenv.NewJetStream(tb).JetStream()
	e.store = activity.NewStore(db, clock.Now)
	if e.d, err = activity.NewDefiner(e.store, rs, e.js, activity.DefineConfig{Now: clock.Now}); err != nil {
		tb.Fatal(err)
	}
	return e
}

func mustRegion(tb testing.TB, rs *regions.Service, app, code string) int64 {
	tb.Helper()
	r, err := rs.CreateRegion(context.Background(), app, code, code)
	if err != nil {
		tb.Fatal(err)
	}
	return r.ID
}

const hourMs = int64(time.Hour / time.Millisecond)

// validLeaderboard is a leaderboard that passes every rule at nowMs.
func validLeaderboard(nowMs int64) activity.Definition {
	return activity.Definition{Name: "weekend top senders", Kind: activity.Leaderboard, Metric: activity.GiftValueSent,
		StartsAtMs: nowMs + hourMs, EndsAtMs: nowMs + 49*hourMs,
		Rewards: []activity.Band{{FromRank: 1, ToRank: 1, Coins: 10_000}, {FromRank: 2, ToRank: 10, Coins: 1000}}}
}

// validTask is a task that passes every rule at nowMs.
func validTask(nowMs int64) activity.Definition {
	return activity.Definition{Name: "send 5 gifts a day", Kind: activity.Task, Metric: activity.GiftCount,
		StartsAtMs: nowMs + hourMs, EndsAtMs: nowMs + 7*24*hourMs, Target: 5, Period: activity.Day, RewardCoins: 10}
}

// TestCreateRefusesEachBadField checks every rule of a definition: each
// case breaks one thing of a valid definition, gets INVALID_ARGUMENT
// naming its field and creates nothing.
func TestCreateRefusesEachBadField(t *testing.T) {
	e := newTestDefiner(t)
	now := e.nowMs
	day := 24 * hourMs
	lb := func(f func(d *activity.Definition)) activity.Definition {
		d := validLeaderboard(now)
		f(&d)
		return d
	}
	task := func(f func(d *activity.Definition)) activity.Definition {
		d := validTask(now)
		f(&d)
		return d
	}
	ids := func(n int) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(i + 1)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		def   activity.Definition
		field string
		says  string
	}{
		{"no name", lb(func(d *activity.Definition) { d.Name = "  " }), "name", "required"},
		{"long name", lb(func(d *activity.Definition) { d.Name = strings.Repeat("名", activity.MaxNameLen+1) }), "name", "at most 128"},
		{"bad UTF-8 name", lb(func(d *activity.Definition) { d.Name = "a\xffb" }), "name", "UTF-8"},
		{"unknown kind", lb(func(d *activity.Definition) { d.Kind = "lottery" }), "kind", "lottery"},
		{"no kind", lb(func(d *activity.Definition) { d.Kind = "" }), "kind", "leaderboard or task"},
		{"unknown metric", lb(func(d *activity.Definition) { d.Metric = "likes" }), "metric", "likes"},
		{"a task of rooms", task(func(d *activity.Definition) { d.Metric = activity.RoomGiftValue }), "metric", "room_gift_value"},
		{"too many gifts", lb(func(d *activity.Definition) { d.GiftIDs = ids(activity.MaxGiftIDs + 1) }), "gift_ids", "at most 100"},
		{"gift id 0", lb(func(d *activity.Definition) { d.GiftIDs = []int64{1, 0} }), "gift_ids[1]", "at least 1"},
		{"gift twice", lb(func(d *activity.Definition) { d.GiftIDs = []int64{1, 2, 1} }), "gift_ids[2]", "twice"},
		{"gift not in the catalog", lb(func(d *activity.Definition) { d.GiftIDs = []int64{1, 9} }), "gift_ids[1]", "catalog"},
		{"another app's gift", lb(func(d *activity.Definition) { d.GiftIDs = []int64{3} }), "gift_ids[0]", "catalog"},
		{"gifts of mic time", lb(func(d *activity.Definition) { d.Metric = activity.MicSeconds; d.GiftIDs = []int64{1} }), "gift_ids", "gift metric"},
		{"too many regions", lb(func(d *activity.Definition) { d.RegionIDs = ids(activity.MaxRegionIDs + 1) }), "region_ids", "at most 100"},
		{"negative region", lb(func(d *activity.Definition) { d.RegionIDs = []int64{-1} }), "region_ids[0]", "at least 0"},
		{"region twice", lb(func(d *activity.Definition) { d.RegionIDs = []int64{e.sea, e.sea} }), "region_ids[1]", "twice"},
		{"another app's region", lb(func(d *activity.Definition) { d.RegionIDs = []int64{e.sea, e.eu} }), "region_ids[1]", "not a region of this app"},
		{"unknown region", lb(func(d *activity.Definition) { d.RegionIDs = []int64{e.eu + 100} }), "region_ids[0]", "not a region of this app"},
		{"disabled region", lb(func(d *activity.Definition) { d.RegionIDs = []int64{e.old} }), "region_ids[0]", "disabled"},
		{"no start", lb(func(d *activity.Definition) { d.StartsAtMs = 0 }), "starts_at_ms", "required"},
		{"start too far ahead", lb(func(d *activity.Definition) { d.StartsAtMs = now + 366*day; d.EndsAtMs = d.StartsAtMs + day }), "starts_at_ms", "365 days"},
		{"end before start", lb(func(d *activity.Definition) { d.EndsAtMs = d.StartsAtMs - 1 }), "ends_at_ms", "after starts_at_ms"},
		{"end at start", lb(func(d *activity.Definition) { d.EndsAtMs = d.StartsAtMs }), "ends_at_ms", "after starts_at_ms"},
		{"window over 90 days", lb(func(d *activity.Definition) { d.EndsAtMs = d.StartsAtMs + 90*day + 1 }), "ends_at_ms", "90 days"},
		{"no bands", lb(func(d *activity.Definition) { d.Rewards = nil }), "rewards", "at least one band"},
		{"too many bands", lb(func(d *activity.Definition) {
			d.Rewards = nil
			for i := range activity.MaxBands + 1 {
				d.Rewards = append(d.Rewards, activity.Band{FromRank: i + 1, ToRank: i + 1, Coins: 1})
			}
		}), "rewards", "at most 50 bands"},
		{"rank 0", lb(func(d *activity.Definition) { d.Rewards[0].FromRank = 0 }), "rewards[0].from_rank", "at least 1"},
		{"band upside down", lb(func(d *activity.Definition) { d.Rewards[1] = activity.Band{FromRank: 5, ToRank: 4, Coins: 1} }), "rewards[1].to_rank", "at least from_rank"},
		{"over 1000 ranks", lb(func(d *activity.Definition) { d.Rewards = []activity.Band{{FromRank: 1, ToRank: 1001, Coins: 1}} }), "rewards[0].to_rank", "at most 1000 ranks"},
		{"band of 0 coins", lb(func(d *activity.Definition) { d.Rewards[1].Coins = 0 }), "rewards[1].coins", "above 0"},
		{"band over budget", lb(func(d *activity.Definition) { d.Rewards[0].Coins = activity.DefaultMaxRewardCoins + 1 }), "rewards[0].coins", "max_reward_coins"},
		{"overlapping bands", lb(func(d *activity.Definition) { d.Rewards[1] = activity.Band{FromRank: 1, ToRank: 3, Coins: 1} }), "rewards", "overlap"},
		{"overlapping bands out of order", lb(func(d *activity.Definition) {
			d.Rewards = []activity.Band{{FromRank: 5, ToRank: 9, Coins: 1}, {FromRank: 1, ToRank: 5, Coins: 1}}
		}), "rewards", "overlap"},
		{"bands over budget in all", lb(func(d *activity.Definition) {
			d.Rewards = []activity.Band{{FromRank: 1, ToRank: 500, Coins: activity.DefaultMaxRewardCoins / 1000}, {FromRank: 501, ToRank: 1000, Coins: activity.DefaultMaxRewardCoins/1000 + 1}}
		}), "rewards", "max_reward_coins"},
		{"a leaderboard with a target", lb(func(d *activity.Definition) { d.Target = 5 }), "target", "only for a task"},
		{"a leaderboard with a period", lb(func(d *activity.Definition) { d.Period = activity.Day }), "period", "only for a task"},
		{"a leaderboard with reward_coins", lb(func(d *activity.Definition) { d.RewardCoins = 5 }), "reward_coins", "only for a task"},
		{"a task with bands", task(func(d *activity.Definition) { d.Rewards = []activity.Band{{FromRank: 1, ToRank: 1, Coins: 1}} }), "rewards", "only for a leaderboard"},
		{"no target", task(func(d *activity.Definition) { d.Target = 0 }), "target", "1.."},
		{"negative target", task(func(d *activity.Definition) { d.Target = -5 }), "target", "1.."},
		{"target too high", task(func(d *activity.Definition) { d.Target = activity.MaxTarget + 1 }), "target", "1.."},
		{"no period", task(func(d *activity.Definition) { d.Period = "" }), "period", "day, week or window"},
		{"unknown period", task(func(d *activity.Definition) { d.Period = "month" }), "period", "month"},
		{"no reward", task(func(d *activity.Definition) { d.RewardCoins = 0 }), "reward_coins", "above 0"},
		{"reward over budget", task(func(d *activity.Definition) { d.RewardCoins = activity.DefaultMaxRewardCoins + 1 }), "reward_coins", "max_reward_coins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.d.Create(context.Background(), "app1", "op", tc.def)
			if !apperr.Is(err, apperr.InvalidArgument) || apperr.FieldOf(err) != tc.field {
				t.Fatalf("got %v (field %q), want INVALID_ARGUMENT naming %q", err, apperr.FieldOf(err), tc.field)
			}
			if msg := apperr.MessageOf(err); !strings.Contains(msg, tc.says) || !strings.HasPrefix(msg, tc.field+": ") {
				t.Fatalf("message %q: want %q first and %q in it", msg, tc.field, tc.says)
			}
		})
	}
	page, err := e.d.List(context.Background(), "app1", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 0 {
		t.Fatalf("refused definitions created %d activities", len(page.Items))
	}
}

// TestCreateAcceptsTheLimits creates what sits exactly on each limit.
func TestCreateAcceptsTheLimits(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	now := e.nowMs
	full := validLeaderboard(now)
	full.Name = strings.Repeat("名", activity.MaxNameLen)
	full.EndsAtMs = full.StartsAtMs + 90*24*hourMs
	full.GiftIDs = []int64{2, 1}
	full.RegionIDs = []int64{e.sea, 0}
	// Out of order, 1,000 ranks, exactly the budget.
	full.Rewards = []activity.Band{{FromRank: 11, ToRank: 1000, Coins: 1000}, {FromRank: 1, ToRank: 10, Coins: (activity.DefaultMaxRewardCoins - 990*1000) / 10}}
	a, err := e.d.Create(ctx, "app1", "op", full)
	if err != nil {
		t.Fatal(err)
	}
	if a.Rewards[0].FromRank != 1 || a.Rewards[1].FromRank != 11 {
		t.Fatalf("bands stored %+v, want them by rank", a.Rewards)
	}
	got, err := e.d.Get(ctx, "app1", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != full.Name || len(got.GiftIDs) != 2 || len(got.RegionIDs) != 2 || got.CreatedBy != "op" || got.Status != activity.Scheduled {
		t.Fatalf("read back %+v", got)
	}
	for _, p := range []activity.Period{activity.Day, activity.Week, activity.Window} {
		tk := validTask(now)
		tk.Period, tk.RewardCoins, tk.Metric = p, activity.DefaultMaxRewardCoins, activity.MicSeconds
		if _, err := e.d.Create(ctx, "app1", "op", tk); err != nil {
			t.Fatalf("task of period %s: %v", p, err)
		}
	}
}

// TestBudgetIsASetting: a smaller max_reward_coins refuses what the
// default accepts.
func TestBudgetIsASetting(t *testing.T) {
	e := newTestDefiner(t)
	d, err := activity.NewDefiner(e.store, e.regions, e.js, activity.DefineConfig{Now: e.clock.Now, MaxRewardCoins: 5000})
	if err != nil {
		t.Fatal(err)
	}
	def := validLeaderboard(e.nowMs)
	def.Rewards = []activity.Band{{FromRank: 1, ToRank: 5, Coins: 1000}}
	if _, err := d.Create(context.Background(), "app1", "op", def); err != nil {
		t.Fatalf("5 x 1000 under a budget of 5000: %v", err)
	}
	def.Rewards = []activity.Band{{FromRank: 1, ToRank: 5, Coins: 1000}, {FromRank: 6, ToRank: 6, Coins: 1}}
	if _, err := d.Create(context.Background(), "app1", "op", def); apperr.FieldOf(err) != "rewards" {
		t.Fatalf("5001 under a budget of 5000: %v, want refused naming rewards", err)
	}
	for _, bad := range []int64{-1, activity.MaxMaxRewardCoins + 1} {
		if _, err := activity.NewDefiner(e.store, e.regions, e.js, activity.DefineConfig{MaxRewardCoins: bad}); err == nil {
			t.Fatalf("MaxRewardCoins %d accepted", bad)
		}
	}
}

// TestPastStartGoesBackAsFarAsTheStreamHolds: a start in the past is
// allowed back to the oldest event ROOM_EVENTS holds and refused before
// it, naming that time; once the stream holds none, back to its last.
func TestPastStartGoesBackAsFarAsTheStreamHolds(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	def := func(startMs int64) activity.Definition {
		d := validLeaderboard(e.nowMs)
		d.StartsAtMs, d.EndsAtMs = startMs, startMs+48*hourMs
		return d
	}
	// A stream never written to lost nothing: any start goes.
	if _, err := e.d.Create(ctx, "app1", "op", def(e.nowMs-80*24*hourMs)); err != nil {
		t.Fatalf("start 80 days back on an empty stream: %v", err)
	}
	for i := range 3 {
		if _, err := e.js.Publish(ctx, bus.SubjectPrefix+".app1.r1.RoomCreated", []byte(`{}`)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	st, err := e.js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// The first two events expire.
	if err := st.Purge(ctx, jetstream.WithPurgeSequence(3)); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.FirstSeq != 3 || info.State.Msgs != 1 {
		t.Fatalf("stream state %+v, want only seq 3", info.State)
	}
	oldestMs := info.State.FirstTime.UnixMilli()
	if info.State.FirstTime.After(time.UnixMilli(oldestMs)) {
		oldestMs++ // the first whole millisecond held
	}
	// The test's clock is a day past the stream's first event.
	e.clock.Advance(time.UnixMilli(oldestMs).Add(24 * time.Hour).Sub(e.clock.Now()))
	if _, err := e.d.Create(ctx, "app1", "op", def(oldestMs)); err != nil {
		t.Fatalf("start at the oldest event held: %v", err)
	}
	_, err = e.d.Create(ctx, "app1", "op", def(oldestMs-1))
	if apperr.FieldOf(err) != "starts_at_ms" || !strings.Contains(apperr.MessageOf(err), fmt.Sprint(oldestMs)) ||
		!strings.Contains(apperr.MessageOf(err), "ROOM_EVENTS") {
		t.Fatalf("start 1ms before the oldest event held: %v, want refused naming starts_at_ms and the oldest time", err)
	}
	// Every event expired: the stream holds none before its last one's time.
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	info, err = st.Info(ctx)
	if err != nil || info.State.Msgs != 0 || info.State.LastSeq != 3 {
		t.Fatalf("purged stream %+v, %v", info.State, err)
	}
	lastMs := info.State.LastTime.UnixMilli()
	if info.State.LastTime.After(time.UnixMilli(lastMs)) {
		lastMs++
	}
	if _, err := e.d.Create(ctx, "app1", "op", def(lastMs)); err != nil {
		t.Fatalf("start at the last event's time on an emptied stream: %v", err)
	}
	if _, err := e.d.Create(ctx, "app1", "op", def(lastMs-1)); apperr.FieldOf(err) != "starts_at_ms" {
		t.Fatalf("start before the last event's time on an emptied stream: %v, want refused", err)
	}
	// A start in the future never reads the stream.
	if _, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.clock.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
}

// TestPastStartNeedsTheStream: JetStream unreachable, a past start is
// UNAVAILABLE (nothing created); a future one does not need it.
func TestPastStartNeedsTheStream(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	js := testenv.RunJetStream(t)
	d, err := activity.NewDefiner(e.store, e.regions, js.Conn().JetStream(), activity.DefineConfig{Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	js.Stop()
	past := validLeaderboard(e.nowMs)
	past.StartsAtMs = e.nowMs - hourMs
	if _, err := d.Create(ctx, "app1", "op", past); !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("past start with JetStream down: %v, want UNAVAILABLE", err)
	}
	if _, err := d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs)); err != nil {
		t.Fatalf("future start with JetStream down: %v", err)
	}
	page, err := d.List(ctx, "app1", 0, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("list: %d items, %v; want only the future one", len(page.Items), err)
	}
}

// TestAppsAndRegionsSeeTheirOwn: an app sees only its activities; a
// region's users see those for every region and those naming theirs,
// scheduled or running, not ended or cancelled ones.
func TestAppsAndRegionsSeeTheirOwn(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	now := e.nowMs
	create := func(app string, regions []int64, startMs, endMs int64) int64 {
		t.Helper()
		d := validLeaderboard(now)
		d.RegionIDs, d.StartsAtMs, d.EndsAtMs = regions, startMs, endMs
		a, err := e.d.Create(ctx, app, "op", d)
		if err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	everywhere := create("app1", nil, now+hourMs, now+2*hourMs)
	seaOnly := create("app1", []int64{e.sea}, now-hourMs, now+hourMs)
	global := create("app1", []int64{0}, now, now+3*hourMs)
	create("app1", nil, now-2*hourMs, now-hourMs) // ended
	cancelled := create("app1", nil, now, now+hourMs)
	if _, err := e.d.Cancel(ctx, "app1", "op", cancelled); err != nil {
		t.Fatal(err)
	}
	euOnly := create("app2", []int64{e.eu}, now, now+hourMs)

	ids := func(list []activity.Activity, err error) []int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, a := range list {
			out = append(out, a.ID)
		}
		return out
	}
	for _, tc := range []struct {
		app    string
		region int64
		want   []int64 // soonest end first
	}{
		{"app1", e.sea, []int64{seaOnly, everywhere}},
		{"app1", 0, []int64{everywhere, global}},
		{"app1", e.eu, []int64{everywhere}}, // an id of another app's region matches nothing of app1's
		{"app2", e.eu, []int64{euOnly}},
		{"app2", e.sea, nil},
	} {
		got := ids(e.d.Visible(ctx, tc.app, tc.region))
		if !slicesEqual(got, tc.want) {
			t.Errorf("%s region %d sees %v, want %v", tc.app, tc.region, got, tc.want)
		}
	}
	for _, tc := range []struct {
		app    string
		region int64
		id     int64
		found  bool
	}{
		{"app1", e.sea, seaOnly, true},
		{"app1", 0, seaOnly, false},
		{"app1", e.eu, seaOnly, false},
		{"app2", e.sea, seaOnly, false},
		{"app1", e.sea, everywhere, true},
		{"app2", e.eu, everywhere, false},
		{"app1", 0, global, true},
		{"app1", e.sea, global, false},
		{"app1", 0, cancelled, true}, // whatever its status
	} {
		_, err := e.d.SeenBy(ctx, tc.app, tc.region, tc.id)
		if tc.found && err != nil || !tc.found && !apperr.Is(err, apperr.NotFound) {
			t.Errorf("SeenBy(%s, region %d, %d): %v, want found %v (else NOT_FOUND)", tc.app, tc.region, tc.id, err, tc.found)
		}
	}
	if _, err := e.d.Get(ctx, "app2", seaOnly); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("app2 reads app1's activity: %v, want NOT_FOUND", err)
	}
	if _, err := e.d.Cancel(ctx, "app2", "op", seaOnly); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("app2 cancels app1's activity: %v, want NOT_FOUND", err)
	}
	page, err := e.d.List(ctx, "app2", 0, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].ID != euOnly {
		t.Fatalf("app2's list %+v, %v; want only %d", page.Items, err, euOnly)
	}
}

// TestListPagesWithACursor pages an app's activities and refuses a
// cursor or limit it did not give.
func TestListPagesWithACursor(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	var want []int64
	for range 5 {
		a, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, a.ID)
	}
	var got []int64
	cursor := ""
	for pages := 1; ; pages++ {
		page, err := e.d.List(ctx, "app1", 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Items {
			got = append(got, a.ID)
		}
		if page.NextCursor == "" {
			if pages != 3 {
				t.Fatalf("%d pages of 2 for 5 activities, want 3", pages)
			}
			break
		}
		cursor = page.NextCursor
	}
	if !slicesEqual(got, want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
	for _, c := range []string{"x", "-1", "0", "01", "1.5"} {
		if _, err := e.d.List(ctx, "app1", 2, c); apperr.FieldOf(err) != "cursor" {
			t.Errorf("cursor %q: %v, want refused naming cursor", c, err)
		}
	}
	for _, l := range []int{-1, activity.MaxListLimit + 1} {
		if _, err := e.d.List(ctx, "app1", l, ""); apperr.FieldOf(err) != "limit" {
			t.Errorf("limit %d: %v, want refused naming limit", l, err)
		}
	}
}

// TestOpenActivitiesPerAppAreBounded: the MaxOpenPerApp+1st activity not
// yet ended is FAILED_PRECONDITION; another app is not held back, and a
// cancelled one frees its place.
func TestOpenActivitiesPerAppAreBounded(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	var first int64
	for i := range activity.MaxOpenPerApp {
		a, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs))
		if err != nil {
			t.Fatalf("activity %d: %v", i, err)
		}
		if i == 0 {
			first = a.ID
		}
	}
	if _, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs)); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("activity %d: %v, want FAILED_PRECONDITION", activity.MaxOpenPerApp+1, err)
	}
	if _, err := e.d.Create(ctx, "app2", "op", validLeaderboard(e.nowMs)); err != nil {
		t.Fatalf("another app: %v", err)
	}
	if _, err := e.d.Cancel(ctx, "app1", "op", first); err != nil {
		t.Fatal(err)
	}
	if _, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs)); err != nil {
		t.Fatalf("after a cancel: %v", err)
	}
}

// TestOpenBoundHoldsUnderConcurrentCreates: creates racing at the bound
// take turns, so exactly the free places are taken.
func TestOpenBoundHoldsUnderConcurrentCreates(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	const free, racers = 3, 12
	for i := range activity.MaxOpenPerApp - free {
		if _, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs)); err != nil {
			t.Fatalf("activity %d: %v", i, err)
		}
	}
	errs := make(chan error, racers)
	for range racers {
		go func() {
			_, err := e.d.Create(ctx, "app1", "op", validLeaderboard(e.nowMs))
			errs <- err
		}()
	}
	created := 0
	for range racers {
		err := <-errs
		switch {
		case err == nil:
			created++
		case !apperr.Is(err, apperr.FailedPrecondition):
			t.Errorf("a racing create: %v, want OK or FAILED_PRECONDITION", err)
		}
	}
	if created != free {
		t.Fatalf("%d racing creates succeeded with %d places free", created, free)
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestCreateAndCancelAreLogged: operators find who made and who cancelled
// an activity in the log.
func TestCreateAndCancelAreLogged(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	var logs testenv.LogBuffer
	d, err := activity.NewDefiner(e.store, e.regions, e.js, activity.DefineConfig{Now: e.clock.Now, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.Create(ctx, "app1", "admin:7", validLeaderboard(e.nowMs))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Cancel(ctx, "app1", "admin:8", a.ID); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf(`msg="activity created" app_code=app1 activity_id=%d`, a.ID), "operator=admin:7",
		fmt.Sprintf(`msg="activity cancelled" app_code=app1 activity_id=%d operator=admin:8`, a.ID),
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestRetroactiveStartIsReadBack: an activity created after its start
// (beyond RetroactiveMargin) is stored in catch-up state reading, so that
// the live durable skips it until its read back joins; one starting
// later, or within the margin, is the live durable's from the start.
func TestRetroactiveStartIsReadBack(t *testing.T) {
	e := newTestDefiner(t)
	ctx := context.Background()
	margin := activity.RetroactiveMargin.Milliseconds()
	for _, c := range []struct {
		startMs int64
		want    activity.CatchupState
	}{
		{e.nowMs - hourMs, activity.CatchupReading},
		{e.nowMs - 1, activity.CatchupReading},
		{e.nowMs + margin - 1, activity.CatchupReading},
		{e.nowMs + margin, activity.CatchupNone},
		{e.nowMs + hourMs, activity.CatchupNone},
	} {
		d := validLeaderboard(e.nowMs)
		d.StartsAtMs, d.EndsAtMs = c.startMs, c.startMs+48*hourMs
		a, err := e.d.Create(ctx, "app1", "op", d)
		if err != nil {
			t.Fatalf("start %+d ms: %v", c.startMs-e.nowMs, err)
		}
		got, err := e.d.Get(ctx, "app1", a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Catchup.State != c.want || got.Catchup != (activity.Catchup{State: c.want}) {
			t.Fatalf("start %+d ms: catch-up %+v, read back %+v, want state %s", c.startMs-e.nowMs, a.Catchup, got.Catchup, c.want)
		}
	}
}
