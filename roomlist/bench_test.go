package roomlist_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"voiceroom/authtoken"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/regions"
	"voiceroom/roomlist"
)

// Workload knobs of the benchmarks (run them with -benchtime 1x):
//
//	VOICEROOM_BENCH_ROOMS    rooms of the list benchmark (100000)
//	VOICEROOM_BENCH_SECONDS  duration of each timed phase (5)
//	VOICEROOM_BENCH_CONC     concurrent HTTP clients (64)
//	VOICEROOM_BENCH_WRITES   card writes a second during the list's first+writes phase (1000)
//
// The projector's benchmarks (BenchmarkProjectionLag, BenchmarkBacklogDrain)
// are package listprojector's.
var quiet = slog.New(slog.DiscardHandler)

// seedBench writes n rooms straight into room_list_entries, spread over
// apps × regions (region ids 1..regions), and users (app, user) with
// users' regions: user u of region r is r*1000+u.
func seedBench(b *testing.B, db *sql.DB, apps []string, regionsPerApp, n, usersPerRegion int) {
	b.Helper()
	ctx := context.Background()
	const chunk = 1000
	for start := 0; start < n; start += chunk {
		var q strings.Builder
		q.WriteString(`INSERT INTO room_list_entries (app_code, room_id, room_short_id, im_group_id, visible_region_id, owner_user_id,
			host_user_id, title, cover_url, mode, status, heat, online_count, seat_count, occupied_seat_count, sort_score,
			room_version, created_at_ms, updated_at_ms) VALUES `)
		var args []any
		for i := start; i < min(start+chunk, n); i++ {
			if i > start {
				q.WriteByte(',')
			}
			app := apps[i%len(apps)]
			region := int64(i/len(apps)%regionsPerApp + 1)
			id := fmt.Sprintf("%s_%08d", app, i)
			heat := int64(i * 7919 % 5000)
			q.WriteString("(?,?,?,?,?,?,?,?,?,'voice','active',?,?,10,?,?,1,?,?)")
			args = append(args, app, id, fmt.Sprintf("u%d", i), id, region, 100000+i, 100000+i, fmt.Sprintf("room %d", i),
				"https://cdn.example/c.png", heat, i%50, i%10, heat*1000+int64(i%50)*100+int64(i%10)*10, 1_700_000_000_000+int64(i), 1)
		}
		if _, err := db.ExecContext(ctx, q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	for _, app := range apps {
		for r := 1; r <= regionsPerApp; r++ {
			for u := 0; u < usersPerRegion; u++ {
				id := r*1000 + u
				if _, err := db.ExecContext(ctx, `INSERT INTO users (app_code, user_id, display_user_id, country, region_id,
					created_at_ms, updated_at_ms) VALUES (?, ?, ?, '', ?, 1, 1)`, app, id, fmt.Sprintf("user%d", id), r); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
}

// BenchmarkListHTTP measures GET /api/v1/rooms over real HTTP with JWTs:
// 100,000 rooms across 20 regions of 2 apps, first pages and a deep page
// (rooms 900..919 of a chain), with Redis and with Redis stopped (the list
// pointed at a closed port), next to a ceiling measured in the same run:
// the same route answering a fixed page from memory.
func BenchmarkListHTTP(b *testing.B) {
	n := testenv.EnvInt("VOICEROOM_BENCH_ROOMS", 100000)
	secs := testenv.EnvInt("VOICEROOM_BENCH_SECONDS", 5)
	conc := testenv.EnvInt("VOICEROOM_BENCH_CONC", 64)
	apps, regionsPerApp, usersPerRegion := []string{"bencha", "benchb"}, 10, 5
	db := testenv.NewDB(b)
	rdb, prefix := testenv.NewRedis(b)
	seedBench(b, db, apps, regionsPerApp, n, usersPerRegion)
	ctx := context.Background()
	rsvc, err := regions.New(ctx, db, quiet, nil, regions.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer rsvc.Close()

	type user struct {
		token string
		deep  string // a cursor after 900 rooms
	}
	var users []user
	for _, app := range apps {
		for r := 1; r <= regionsPerApp; r++ {
			for u := 0; u < usersPerRegion; u++ {
				tok, err := authtoken.Issue(testSecret, app, int64(r*1000+u), "", time.Hour, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				users = append(users, user{token: tok})
			}
		}
	}

	// The ceiling serves the same route, through the same gateway (JWT,
	// rate limiter, envelope, JSON), with a fixed first page held in
	// memory: no region lookup and no storage. It is what the list could
	// reach on this machine with this client if reading cost nothing.
	var fixed roomlist.Page
	for _, mode := range []string{"ceiling", "redis", "redis-stopped"} {
		cfg := roomlist.Config{CursorSecret: testSecret}
		var client redis.UniversalClient = rdb
		switch mode {
		case "redis-stopped":
			down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(b), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
			defer down.Close()
			client = down
		case "ceiling":
			fixed = firstPage(b, db, rdb, prefix, cfg, apps[0])
		default:
			refill(b, db, rdb, prefix, nil)
		}
		reg := prometheus.NewRegistry()
		m, err := roomlist.NewMetrics(reg)
		if err != nil {
			b.Fatal(err)
		}
		lister, err := roomlist.NewLister(db, newTestMirror(b, db, client, prefix), cfg, quiet, m)
		if err != nil {
			b.Fatal(err)
		}
		lctx, stopLister := context.WithCancel(ctx)
		defer stopLister()
		go lister.Run(lctx)
		pins, err := roomlist.NewPins(db, nil, cfg)
		if err != nil {
			b.Fatal(err)
		}
		mount := gateway.RoomListRoutes(lister, pins, rsvc)
		if mode == "ceiling" {
			mount = func(r gateway.Routers) {
				r.API.Get("/v1/rooms", func(c *fiber.Ctx) error { return gateway.OK(c, fixed) })
			}
		}
		srv, err := gateway.New(gateway.Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1e9, RateBurst: 1 << 30},
			quiet, reg, reg, nil, mount)
		if err != nil {
			b.Fatal(err)
		}
		if err := srv.Listen(); err != nil {
			b.Fatal(err)
		}
		go srv.Serve()
		hc := &fasthttp.HostClient{Addr: srv.Addr(), MaxConns: conc, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
		get := func(path, token string) (int, []byte, error) {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI("http://" + srv.Addr() + path)
			req.Header.Set("Authorization", "Bearer "+token)
			if err := hc.Do(req, resp); err != nil {
				return 0, nil, err
			}
			return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
		}
		for _, depth := range []string{"first", "deep", "first+writes"} {
			if (mode == "ceiling" && depth != "first") || (mode != "redis" && depth == "first+writes") {
				continue
			}
			var stopWrites func()
			if depth == "first+writes" {
				stopWrites = rewriteCards(b, lister, rdb, prefix, apps, regionsPerApp, testenv.EnvInt("VOICEROOM_BENCH_WRITES", 1000))
			}
			if depth == "deep" {
				for i := range users {
					cursor := ""
					for range 18 { // 18 pages of 50: the chain stands after room 900
						code, body, err := get("/api/v1/rooms?limit=50&cursor="+cursor, users[i].token)
						if err != nil || code != 200 {
							b.Fatalf("walk: %d %v %s", code, err, body)
						}
						var env struct {
							Data roomlist.Page `json:"data"`
						}
						if err := json.Unmarshal(body, &env); err != nil || env.Data.NextCursor == "" {
							b.Fatalf("walk: page %s: %v", body, err)
						}
						cursor = env.Data.NextCursor
					}
					users[i].deep = cursor
				}
			}
			near0 := testenv.MetricValue(b, reg, "voiceroom_list_cache_requests_total", "result", "near")
			b.Run(mode+"/"+depth, func(b *testing.B) {
				var next atomic.Int64
				var errs atomic.Int64
				lats := make([][]time.Duration, conc)
				deadline := time.Now().Add(time.Duration(secs) * time.Second)
				start := time.Now()
				var wg sync.WaitGroup
				for w := range conc {
					wg.Go(func() {
						for time.Now().Before(deadline) {
							u := users[int(next.Add(1))%len(users)]
							path := "/api/v1/rooms?tab=hot&limit=20"
							if depth == "deep" {
								path += "&cursor=" + u.deep
							}
							t0 := time.Now()
							code, _, err := get(path, u.token)
							lats[w] = append(lats[w], time.Since(t0))
							if err != nil || code != 200 {
								errs.Add(1)
							}
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				all := slices.Concat(lats...)
				slices.Sort(all)
				if e := errs.Load(); e > 0 {
					b.Errorf("%d failed requests", e)
				}
				if stopWrites != nil {
					stopWrites()
				}
				if mode == "redis" {
					near := testenv.MetricValue(b, reg, "voiceroom_list_cache_requests_total", "result", "near") - near0
					b.ReportMetric(near/float64(len(all)), "near_ratio")
				}
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
				b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.5)), "p50_ms")
				b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.99)), "p99_ms")
				b.ReportMetric(0, "ns/op")
			})
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		srv.Shutdown(sctx)
		cancel()
	}
}

// rewriteCards writes the cards of every region's first page back into
// Redis, perSec writes a second spread over them, until the returned stop
// is called: each write is a change as far as Redis tracking is concerned,
// so the near cache of the list under test keeps losing those cards, as
// it does while the projector updates popular rooms.
func rewriteCards(b *testing.B, l *roomlist.Lister, rdb redis.UniversalClient, prefix string, apps []string, regions, perSec int) (stop func()) {
	b.Helper()
	ctx := context.Background()
	var keys []string
	for _, app := range apps {
		for r := 1; r <= regions; r++ {
			p, err := l.List(ctx, roomlist.ListRequest{AppCode: app, RegionID: int64(r)})
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range p.Rooms {
				keys = append(keys, listprojector.Keys{Prefix: prefix}.Card(app, it.RoomID))
			}
		}
	}
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		v, err := rdb.Get(ctx, k).Bytes()
		if err != nil {
			b.Fatal(err)
		}
		vals[i] = v
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		next := 0
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			p := rdb.Pipeline()
			for range max(perSec/100, 1) {
				i := next % len(keys)
				next = (next*31 + 7) % len(keys) // spread over the pages
				p.Set(ctx, keys[i], vals[i], time.Hour)
			}
			p.Exec(ctx)
		}
	}()
	return func() { close(done); <-stopped }
}

// firstPage returns the first hot page of region 1 of app, read through a
// Lister on Redis: the ceiling's fixed answer, as large as a real one.
func firstPage(b *testing.B, db *sql.DB, rdb redis.UniversalClient, prefix string, cfg roomlist.Config, app string) roomlist.Page {
	b.Helper()
	ctx := context.Background()
	refill(b, db, rdb, prefix, nil)
	l, err := roomlist.NewLister(db, newTestMirror(b, db, rdb, prefix), cfg, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := l.List(ctx, roomlist.ListRequest{AppCode: app, RegionID: 1})
	if err != nil || len(p.Rooms) != roomlist.DefaultLimit {
		b.Fatalf("first page: %d rooms, %v", len(p.Rooms), err)
	}
	return p
}

// BenchmarkListerPage is one first page of the list service alone (no
// HTTP), cards from Redis: its cost per request, allocations included.
// near: served from the near cache (the default); redis: the near cache
// off, cards and hides read from Redis each page; ping: one PING, the
// floor of any Redis read. On a cluster (VOICEROOM_TEST_REDIS_ADDRS) the
// near cache tracks every master, and a page's cards are one MGET per
// slot.
func BenchmarkListerPage(b *testing.B) {
	db := testenv.NewDB(b)
	rdb, prefix := testenv.NewRedis(b)
	seedBench(b, db, []string{"a1"}, 2, 4000, 1)
	refill(b, db, rdb, prefix, nil)
	ctx := context.Background()
	for _, sub := range []struct {
		name string
		near int
	}{{"near", 0}, {"redis", noNearCache}} {
		cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Second, NearCacheCards: sub.near}
		l := newTestLister(b, db, rdb, prefix, cfg, nil)
		b.Run(sub.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.List(ctx, roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ping", func(b *testing.B) {
		for b.Loop() {
			if err := rdb.Ping(ctx).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
