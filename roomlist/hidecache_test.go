package roomlist_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomlist"
)

func hideKey(prefix, app string, region int64) string {
	return listprojector.Keys{Prefix: prefix}.Hides(app, region)
}

// hidesCached reports whether the region's hide set is filled in Redis.
func hidesCached(tb testing.TB, rdb redis.UniversalClient, prefix, app string, region int64) bool {
	tb.Helper()
	err := rdb.ZScore(context.Background(), hideKey(prefix, app, region), "").Err()
	if err != nil && !errors.Is(err, redis.Nil) {
		tb.Fatal(err)
	}
	return err == nil
}

// eventuallyHidesCached lists the region until its hide set is filled in
// Redis (a list request that misses it fills it in the background).
func (s *stack) eventuallyHidesCached(app string, region int64) {
	s.tb.Helper()
	eventuallyFilled(s.tb, s.lister, s.rdb, s.prefix, app, region)
}

func eventuallyFilled(tb testing.TB, l *roomlist.Lister, rdb redis.UniversalClient, prefix, app string, region int64) {
	tb.Helper()
	testenv.Eventually(tb, 10*time.Second, func() error {
		if _, err := l.List(context.Background(), roomlist.ListRequest{AppCode: app, RegionID: region, Limit: 50}); err != nil {
			return err
		}
		if !hidesCached(tb, rdb, prefix, app, region) {
			return fmt.Errorf("hides of %s region %d not in redis", app, region)
		}
		return nil
	})
}

// failWrites fails the hide invalidations (MULTI with INCR) and fills
// (scripts) of a client while on: Redis unreachable for the writer only.
type failWrites struct{ on atomic.Bool }

var errInjected = errors.New("injected redis failure")

func (f *failWrites) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *failWrites) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); f.on.Load() && (n == "evalsha" || n == "eval" || n == "del" || n == "incr") {
			return errInjected
		}
		return next(ctx, cmd)
	}
}
func (f *failWrites) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if n := c.Name(); f.on.Load() && (n == "incr" || n == "del" || n == "evalsha" || n == "eval") {
				return errInjected
			}
		}
		return next(ctx, cmds)
	}
}

// hideProc is one api process: its list query and hide store.
type hideProc struct {
	lister *roomlist.Lister
	hides  *roomlist.Hides
	reg    *prometheus.Registry
}

func newHideProc(tb testing.TB, s *fixture, rdb redis.UniversalClient, cfg roomlist.Config) hideProc {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m, err := roomlist.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	l := newTestLister(tb, s.db, rdb, s.prefix, cfg, m)
	h, err := roomlist.NewHides(s.db, l, nil, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return hideProc{lister: l, hides: h, reg: reg}
}

// ids lists the first page of app's region.
func (p hideProc) ids(tb testing.TB, app string, region int64) []string {
	tb.Helper()
	pg, err := p.lister.List(context.Background(), roomlist.ListRequest{AppCode: app, RegionID: region, Limit: 50})
	if err != nil {
		tb.Fatal(err)
	}
	return roomIDs(pg.Rooms)
}

// hidesFromMySQL counts the pages whose hides were read from MySQL.
func (p hideProc) hidesFromMySQL(tb testing.TB) float64 {
	tb.Helper()
	return testenv.MetricValue(tb, p.reg, "voiceroom_list_cache_requests_total", "result", "hides_miss")
}

func without(ids []string, drop string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == drop })
}

// TestHideSeenByTheNextRequest: with the region's hides cached in Redis, a
// hide and an unhide show at the very next list request of every process,
// however the Redis side went: cached, its key deleted, Redis stopped, or
// the writer's invalidation failed (then this process reads MySQL until
// the set is refilled; another process as soon as it is). Other regions
// and apps keep their cached sets and lists.
func TestHideSeenByTheNextRequest(t *testing.T) {
	for _, tt := range []string{"cached", "key deleted", "redis stopped", "failed invalidation"} {
		t.Run(tt, func(t *testing.T) {
			s := newFixture(t)
			clk := newClock()
			cfg := s.cfg
			cfg.Now = clk.now
			all := seedRooms(t, s.db, "a1", 1, 0, 6, func(i int) int64 { return int64(100 - i) })
			other := seedRooms(t, s.db, "a1", 2, 10, 3, func(i int) int64 { return int64(100 - i) })
			foreign := seedRooms(t, s.db, "b2", 1, 20, 3, func(i int) int64 { return int64(100 - i) })
			ctx := context.Background()
			refill(t, s.db, s.rdb, s.prefix, clk.now)
			for _, r := range []struct {
				app    string
				region int64
			}{{"a1", 1}, {"a1", 2}, {"b2", 1}} {
				if !hidesCached(t, s.rdb, s.prefix, r.app, r.region) {
					t.Fatalf("reconcile did not fill the hides of %s region %d", r.app, r.region)
				}
			}
			fw := &failWrites{}
			hooked := testenv.RedisClient(t)
			hooked.AddHook(fw)
			t.Cleanup(func() { hooked.Close() })
			writer := newHideProc(t, s, hooked, cfg)
			reader := newHideProc(t, s, s.rdb, cfg) // another api process
			target := all[2]
			want := without(all, target)

			switch tt {
			case "key deleted":
				if n, err := s.rdb.Del(ctx, hideKey(s.prefix, "a1", 1)).Result(); err != nil || n != 1 {
					t.Fatalf("delete the hide set: %d deleted, %v", n, err)
				}
			case "redis stopped":
				down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
				t.Cleanup(func() { down.Close() })
				writer = newHideProc(t, s, down, cfg)
				reader = writer
			case "failed invalidation":
				fw.on.Store(true)
			}
			h, err := writer.hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: target, VisibleRegionID: 1, Reason: "spam"})
			if err != nil {
				t.Fatal(err)
			}
			for name, p := range map[string]hideProc{"writer": writer, "reader": reader} {
				if tt == "failed invalidation" && name == "reader" {
					// The other process reads the set the failed writer could
					// not drop until this process's next request refills it.
					continue
				}
				if got := p.ids(t, "a1", 1); !slices.Equal(got, want) {
					t.Errorf("%s: list right after the hide: %v, want %v", name, got, want)
				}
			}
			if tt == "failed invalidation" {
				before := writer.hidesFromMySQL(t)
				for range 3 {
					if got := writer.ids(t, "a1", 1); !slices.Equal(got, want) {
						t.Errorf("writer, its invalidation failed: %v, want %v", got, want)
					}
				}
				if d := writer.hidesFromMySQL(t) - before; d != 3 {
					t.Errorf("writer read hides from MySQL %v times of 3 while its set is marked stale", d)
				}
				fw.on.Store(false) // Redis reachable again: the next request repairs
				eventuallyFilled(t, writer.lister, s.rdb, s.prefix, "a1", 1)
				testenv.Eventually(t, 10*time.Second, func() error {
					before := writer.hidesFromMySQL(t)
					if got := writer.ids(t, "a1", 1); !slices.Equal(got, want) {
						t.Fatalf("writer after the repair: %v", got)
					}
					if writer.hidesFromMySQL(t) != before {
						return errors.New("writer still reads hides from MySQL")
					}
					return nil
				})
				if got := reader.ids(t, "a1", 1); !slices.Equal(got, want) {
					t.Errorf("reader after the repair: %v, want %v", got, want)
				}
			}
			if tt != "redis stopped" {
				// The set is refilled with the hide, and then serves it.
				eventuallyFilled(t, reader.lister, s.rdb, s.prefix, "a1", 1)
				before := reader.hidesFromMySQL(t)
				if got := reader.ids(t, "a1", 1); !slices.Equal(got, want) {
					t.Errorf("from the refilled set: %v, want %v", got, want)
				}
				if reader.hidesFromMySQL(t) != before {
					t.Errorf("hides still read from MySQL after the refill")
				}
			}
			// Another region and another app: untouched, sets kept.
			for _, r := range []struct {
				app    string
				region int64
				want   []string
			}{{"a1", 2, other}, {"b2", 1, foreign}} {
				if tt != "redis stopped" && !hidesCached(t, s.rdb, s.prefix, r.app, r.region) {
					t.Errorf("hides of %s region %d dropped from redis", r.app, r.region)
				}
				if got := reader.ids(t, r.app, r.region); !slices.Equal(got, r.want) {
					t.Errorf("%s region %d: %v, want %v", r.app, r.region, got, r.want)
				}
			}

			// Unhide: back at the next request, every process.
			if tt == "failed invalidation" {
				fw.on.Store(true)
			}
			if _, err := writer.hides.Delete(ctx, "a1", "op", h.HideID, "appeal"); err != nil {
				t.Fatal(err)
			}
			if got := writer.ids(t, "a1", 1); !slices.Equal(got, all) {
				t.Errorf("writer after unhide: %v, want %v", got, all)
			}
			if tt != "failed invalidation" {
				if got := reader.ids(t, "a1", 1); !slices.Equal(got, all) {
					t.Errorf("reader after unhide: %v, want %v", got, all)
				}
			}
			fw.on.Store(false)

			// Expiry applies at read time, from Redis as from MySQL.
			if _, err := writer.hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: target, VisibleRegionID: 1,
				Reason: "cool down", ExpiresAtMs: clk.nowMs() + time.Minute.Milliseconds()}); err != nil {
				t.Fatal(err)
			}
			if tt != "redis stopped" {
				eventuallyFilled(t, reader.lister, s.rdb, s.prefix, "a1", 1)
			}
			if got := reader.ids(t, "a1", 1); !slices.Equal(got, want) {
				t.Errorf("under an expiring hide: %v, want %v", got, want)
			}
			clk.add(time.Minute)
			if got := reader.ids(t, "a1", 1); !slices.Equal(got, all) {
				t.Errorf("after the hide expired: %v, want %v", got, all)
			}
		})
	}
}

// TestHideFillLosesToAWrite: a fill that read MySQL before a hide
// committed never leaves its older state in Redis (the writer's gen bump
// drops it), and the reconcile job replaces a set a lost invalidation
// left stale.
func TestHideFillLosesToAWrite(t *testing.T) {
	s := newFixture(t)
	all := seedRooms(t, s.db, "a1", 1, 0, 4, func(i int) int64 { return int64(100 - i) })
	ctx := context.Background()
	p := newHideProc(t, s, s.rdb, s.cfg)
	eventuallyFilled(t, p.lister, s.rdb, s.prefix, "a1", 1)

	// A lost invalidation: the hide commits while Redis keeps the old set
	// (written back here as a fill that raced the write and lost nothing).
	stale, err := s.rdb.ZRangeWithScores(ctx, hideKey(s.prefix, "a1", 1), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: all[0], VisibleRegionID: 1, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	if hidesCached(t, s.rdb, s.prefix, "a1", 1) {
		t.Fatal("hide left the region's set in redis")
	}
	if err := s.rdb.ZAdd(ctx, hideKey(s.prefix, "a1", 1), stale...).Err(); err != nil {
		t.Fatal(err)
	}
	if got := p.ids(t, "a1", 1); !slices.Equal(got, all) {
		t.Fatalf("the stale set should serve (it is the simulated loss): %v", got)
	}
	refill(t, s.db, s.rdb, s.prefix, nil)
	if got := p.ids(t, "a1", 1); !slices.Equal(got, all[1:]) {
		t.Errorf("after the reconcile pass: %v, want %v", got, all[1:])
	}

	// A fill that read gen before a write's bump is dropped: the hide
	// commits and invalidates between the fill's MySQL read and its
	// script.
	racing := &beforeScript{run: func() {
		if _, err := p.hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: all[1], VisibleRegionID: 1, Reason: "spam"}); err != nil {
			t.Error(err)
		}
	}}
	hooked := testenv.RedisClient(t)
	hooked.AddHook(racing)
	t.Cleanup(func() { hooked.Close() })
	filled, err := newTestMirror(t, s.db, hooked, s.prefix).FillHides(ctx, "a1", 1, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	if !racing.ran.Load() || filled || hidesCached(t, s.rdb, s.prefix, "a1", 1) {
		t.Errorf("a fill that raced a hide (raced: %v) wrote its set (filled: %v)", racing.ran.Load(), filled)
	}
	if got := p.ids(t, "a1", 1); !slices.Equal(got, all[2:]) {
		t.Errorf("after the racing fill: %v, want %v", got, all[2:])
	}
}

// beforeScript runs run once, before the first script a client sends (a
// hide set's fill, after its MySQL read).
type beforeScript struct {
	run func()
	ran atomic.Bool
}

func (b *beforeScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (b *beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && b.ran.CompareAndSwap(false, true) {
			b.run()
		}
		return next(ctx, cmd)
	}
}
func (b *beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
