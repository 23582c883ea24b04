package listprojector_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/valyala/fasthttp"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/outboxrelay"
	"voiceroom/regions"
	"voiceroom/rooms"
)

// Workload knobs of the benchmarks (run them with -benchtime 1x):
//
//	VOICEROOM_BENCH_ROOMS    rooms of the list benchmark (100000)
//	VOICEROOM_BENCH_SECONDS  duration of each timed phase (5)
//	VOICEROOM_BENCH_CONC     concurrent HTTP clients / command workers (64)
//	VOICEROOM_BENCH_EVENTS   backlog of the drain benchmark (200000)
//	VOICEROOM_BENCH_FETCH_BATCH  the drain's projector FetchBatch (the default)
//	VOICEROOM_BENCH_WRITES   card writes a second during the list's first+writes phase (1000)
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

var quiet = slog.New(slog.DiscardHandler)

// percentile of sorted durations.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(float64(len(d))*p))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
	n := envInt("VOICEROOM_BENCH_ROOMS", 100000)
	secs := envInt("VOICEROOM_BENCH_SECONDS", 5)
	conc := envInt("VOICEROOM_BENCH_CONC", 64)
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
				tok, err := gateway.IssueToken(testSecret, app, int64(r*1000+u), "", time.Hour, time.Now())
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
	var fixed listprojector.Page
	for _, mode := range []string{"ceiling", "redis", "redis-stopped"} {
		cfg := listprojector.Config{KeyPrefix: prefix, CursorSecret: testSecret}
		var client redis.UniversalClient = rdb
		switch mode {
		case "redis-stopped":
			down := redis.NewClient(&redis.Options{Addr: closedAddr(b), MaxRetries: -1, DialTimeout: 50 * time.Millisecond})
			defer down.Close()
			client = down
		case "ceiling":
			fixed = firstPage(b, db, rdb, cfg, apps[0])
		default:
			if err := listprojector.RefillCache(ctx, db, rdb, cfg, ""); err != nil {
				b.Fatal(err)
			}
		}
		reg := prometheus.NewRegistry()
		m, _ := listprojector.NewMetrics(reg)
		lister, err := listprojector.NewLister(db, client, cfg, quiet, m)
		if err != nil {
			b.Fatal(err)
		}
		lctx, stopLister := context.WithCancel(ctx)
		defer stopLister()
		go lister.Run(lctx)
		pins, _ := listprojector.NewPins(db, nil, cfg)
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
				stopWrites = rewriteCards(b, lister, rdb, prefix, apps, regionsPerApp, envInt("VOICEROOM_BENCH_WRITES", 1000))
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
							Data listprojector.Page `json:"data"`
						}
						json.Unmarshal(body, &env)
						cursor = env.Data.NextCursor
					}
					users[i].deep = cursor
				}
			}
			near0 := testenv.MetricValue(b, reg, "room_list_cache_requests_total", "result", "near")
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
					near := testenv.MetricValue(b, reg, "room_list_cache_requests_total", "result", "near") - near0
					b.ReportMetric(near/float64(len(all)), "near_ratio")
				}
				b.ReportMetric(float64(len(all))/elapsed.Seconds(), "req/s")
				b.ReportMetric(ms(percentile(all, 0.5)), "p50_ms")
				b.ReportMetric(ms(percentile(all, 0.99)), "p99_ms")
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
func rewriteCards(b *testing.B, l *listprojector.Lister, rdb *redis.Client, prefix string, apps []string, regions, perSec int) (stop func()) {
	b.Helper()
	ctx := context.Background()
	var keys []string
	for _, app := range apps {
		for r := 1; r <= regions; r++ {
			p, err := l.List(ctx, listprojector.ListRequest{AppCode: app, RegionID: int64(r)})
			if err != nil {
				b.Fatal(err)
			}
			for _, it := range p.Rooms {
				keys = append(keys, prefix+"room:card:{"+app+"}:"+it.RoomID)
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
func firstPage(b *testing.B, db *sql.DB, rdb redis.UniversalClient, cfg listprojector.Config, app string) listprojector.Page {
	b.Helper()
	ctx := context.Background()
	if err := listprojector.RefillCache(ctx, db, rdb, cfg, ""); err != nil {
		b.Fatal(err)
	}
	l, err := listprojector.NewLister(db, rdb, cfg, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	p, err := l.List(ctx, listprojector.ListRequest{AppCode: app, RegionID: 1})
	if err != nil || len(p.Rooms) != listprojector.DefaultLimit {
		b.Fatalf("first page: %d rooms, %v", len(p.Rooms), err)
	}
	return p
}

// benchUsers puts every user in region 1 of the app.
type benchUsers struct{}

func (benchUsers) UserRegion(_ context.Context, _ string, id int64) (string, int64, error) {
	return fmt.Sprintf("user%d", id), 1, nil
}
func (benchUsers) CheckRegion(context.Context, string, int64) error { return nil }

// commitClock notes the commit time of every event on its way to the fast
// path.
type commitClock struct {
	next rooms.FastPath
	mu   sync.Mutex
	at   map[string]time.Time
}

func (c *commitClock) Committed(msgs []bus.Message, committedAt time.Time) {
	c.mu.Lock()
	for _, m := range msgs {
		c.at[m.ID] = committedAt
	}
	c.mu.Unlock()
	c.next.Committed(msgs, committedAt)
}

func (c *commitClock) take(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.at[id]
	delete(c.at, id)
	return t, ok
}

// BenchmarkProjectionLag measures commit (the rooms committer's commit
// time) to applied (MySQL and Redis written, so the card is what the list
// shows) through the real pipeline:
// room commands (joins and leaves over 500 rooms), the outbox fast path,
// JetStream, the projector. First at 1,000 commands/s (one event each),
// then at the most VOICEROOM_BENCH_CONC workers can commit.
func BenchmarkProjectionLag(b *testing.B) {
	secs := envInt("VOICEROOM_BENCH_SECONDS", 5)
	conc := envInt("VOICEROOM_BENCH_CONC", 64)
	const nRooms = 500
	db := testenv.NewDB(b)
	rdb, prefix := testenv.NewRedis(b)
	conn := testenv.NewJetStream(b)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	om, err := outboxrelay.NewMetrics(reg)
	if err != nil {
		b.Fatal(err)
	}
	fp, err := outboxrelay.NewFastPath(db, pub, quiet, om, outboxrelay.FastPathConfig{})
	if err != nil {
		b.Fatal(err)
	}
	fctx, stopFP := context.WithCancel(ctx)
	fpDone := make(chan struct{})
	go func() { fp.Run(fctx); close(fpDone) }()
	defer func() { stopFP(); <-fpDone }()
	commits := &commitClock{next: fp, at: map[string]time.Time{}}
	svc, err := rooms.New(db, benchUsers{}, benchUsers{}, commits, rooms.Config{}, quiet, reg, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	cfg := listprojector.Config{KeyPrefix: prefix, CursorSecret: testSecret}
	p, err := listprojector.New(db, rdb, conn.JetStream(), bus.ConsumerRunConfig{Durable: bus.DurableListProjector}, nil, cfg, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	var (
		mu       sync.Mutex
		lags     []time.Duration
		recordOn atomic.Bool
		applied  atomic.Int64
	)
	listprojector.OnApplied(p, func(eventID string, at time.Time) {
		applied.Add(1)
		committed, ok := commits.take(eventID)
		if ok && recordOn.Load() {
			mu.Lock()
			lags = append(lags, at.Sub(committed))
			mu.Unlock()
		}
	})
	pctx, stopP := context.WithCancel(ctx)
	pDone := make(chan struct{})
	go func() { p.Run(pctx); close(pDone) }()
	defer func() { stopP(); <-pDone }()

	roomIDs := make([]string, nRooms)
	for i := range nRooms {
		res, err := svc.Create(ctx, "bench", rooms.Actor{UserID: int64(i + 1)}, rooms.NewCommandID(), false, "", rooms.CreateRequest{Title: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		roomIDs[i] = res.View.RoomID
	}
	testenv.Eventually(b, 30*time.Second, func() error {
		if n := applied.Load(); n < nRooms {
			return fmt.Errorf("%d of %d creates applied", n, nRooms)
		}
		return nil
	})

	for _, rate := range []int{1000, 0} {
		name := "peak"
		if rate > 0 {
			name = fmt.Sprintf("%d_per_s", rate)
		}
		b.Run(name, func(b *testing.B) {
			mu.Lock()
			lags = lags[:0]
			mu.Unlock()
			// At a fixed rate, command k is due at start + k/rate: a paced
			// schedule that a starved ticker cannot thin out.
			var slot atomic.Int64
			paceStart := time.Now()
			recordOn.Store(true)
			deadline := time.Now().Add(time.Duration(secs) * time.Second)
			var cmds, failed atomic.Int64
			var wg sync.WaitGroup
			for w := range conc {
				wg.Go(func() {
					user := int64(100000 + w)
					room := roomIDs[w%nRooms]
					joined := false
					for i := 0; time.Now().Before(deadline); i++ {
						if rate > 0 {
							due := paceStart.Add(time.Duration(slot.Add(1)-1) * time.Second / time.Duration(rate))
							if due.After(deadline) {
								return
							}
							time.Sleep(time.Until(due))
						}
						cmd := &rooms.Command{AppCode: "bench", RoomID: room, CommandID: rooms.NewCommandID(), Actor: rooms.Actor{UserID: user}}
						var err error
						if joined {
							cmd.Kind = rooms.KindLeaveRoom
							_, err = svc.Execute(ctx, cmd)
						} else {
							_, err = svc.Join(ctx, cmd, "")
						}
						if err != nil && !apperr.Is(err, apperr.Unavailable) {
							b.Error(err)
							return
						}
						if err != nil {
							failed.Add(1)
							continue
						}
						joined = !joined
						cmds.Add(1)
						if joined {
							continue
						}
						room = roomIDs[(w+i*conc)%nRooms] // move on after a leave
					}
				})
			}
			start := time.Now()
			wg.Wait()
			elapsed := time.Since(start)
			// Wait for the tail to be applied.
			testenv.Eventually(b, 30*time.Second, func() error {
				info, err := conn.JetStream().Consumer(ctx, bus.StreamName, bus.DurableListProjector)
				if err != nil {
					return err
				}
				ci, err := info.Info(ctx)
				if err != nil {
					return err
				}
				if ci.NumPending != 0 || ci.NumAckPending != 0 {
					return fmt.Errorf("pending %d", ci.NumPending+uint64(ci.NumAckPending))
				}
				return nil
			})
			recordOn.Store(false)
			mu.Lock()
			all := slices.Clone(lags)
			mu.Unlock()
			slices.Sort(all)
			b.ReportMetric(float64(cmds.Load())/elapsed.Seconds(), "events/s")
			b.ReportMetric(ms(percentile(all, 0.5)), "lag_p50_ms")
			b.ReportMetric(ms(percentile(all, 0.99)), "lag_p99_ms")
			b.ReportMetric(float64(failed.Load()), "unavailable")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkBacklogDrain measures the projector on a backlog of 200,000
// events (10,000 rooms, 20 events each, interleaved so that one pull holds
// many rooms) against a ceiling measured in the same run: the same 200,000
// cards written with the projector's multi-row upsert alone, in
// statements of the projector's batch size.
func BenchmarkBacklogDrain(b *testing.B) {
	nEvents := envInt("VOICEROOM_BENCH_EVENTS", 200000)
	const nRooms = 10000
	db := testenv.NewDB(b)
	rdb, prefix := testenv.NewRedis(b)
	conn := testenv.NewJetStream(b)
	ctx := context.Background()
	js := conn.JetStream()
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.ConsumerConfig{Durable: bus.DurableListProjector, MaxAckPending: 5000}); err != nil {
		b.Fatal(err)
	}
	pub, err := bus.NewPublisher(js, bus.PublisherConfig{})
	if err != nil {
		b.Fatal(err)
	}
	cards := make([]*listprojector.Card, 0, nEvents)
	var msgs []bus.Message
	flush := func() {
		for _, r := range pub.PublishBatch(ctx, msgs) {
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		msgs = msgs[:0]
	}
	now := time.Now().UnixMilli()
	for i := range nEvents {
		v := int64(i/nRooms + 1)
		room := fmt.Sprintf("bench_%06d", i%nRooms)
		c := card(room, v, int64(i%nRooms%20), "backlog room", int(v))
		raw, _ := json.Marshal(map[string]any{"room": c})
		env := bus.Envelope{EventID: fmt.Sprintf("e%d", i), AppCode: "bench", RoomID: room, RoomVersion: v,
			EventType: rooms.EventRoomUserJoined, CommandID: "c", OccurredAtMs: now, Payload: raw}
		m, err := env.Message()
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
		if len(msgs) == 1000 {
			flush()
		}
		cards = append(cards, &listprojector.Card{AppCode: "bench", RoomID: room, RoomShortID: c.RoomShortID, IMGroupID: room,
			VisibleRegionID: c.VisibleRegionID, OwnerUserID: 7, HostUserID: 7, Title: c.Title, Mode: "voice", Status: "active",
			OnlineCount: c.OnlineCount, SeatCount: 10, CreatedAtMs: c.CreatedAtMs, RoomVersion: v + 1000, UpdatedAtMs: now})
	}
	flush()

	cfg := listprojector.Config{KeyPrefix: prefix, CursorSecret: testSecret, FetchBatch: envInt("VOICEROOM_BENCH_FETCH_BATCH", 0)}
	// VOICEROOM_BENCH_CONCURRENCY sets the projector's workers (default
	// DefaultWorkers), to compare VOICEROOM_PROJECTOR_CONCURRENCY values.
	run := bus.ConsumerRunConfig{Durable: bus.DurableListProjector, Concurrency: envInt("VOICEROOM_BENCH_CONCURRENCY", listprojector.DefaultWorkers)}
	p, err := listprojector.New(db, rdb, js, run, nil, cfg, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("projector workers: %d", run.Concurrency)
	b.Run("projector", func(b *testing.B) {
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		start := time.Now()
		go func() { p.Run(pctx); close(done) }()
		testenv.Eventually(b, 10*time.Minute, func() error {
			c, err := js.Consumer(ctx, bus.StreamName, bus.DurableListProjector)
			if err != nil {
				return err
			}
			ci, err := c.Info(ctx)
			if err != nil {
				return err
			}
			if ci.NumPending != 0 || ci.NumAckPending != 0 {
				return fmt.Errorf("pending %d", ci.NumPending+uint64(ci.NumAckPending))
			}
			return nil
		})
		elapsed := time.Since(start)
		stop()
		<-done
		b.ReportMetric(float64(nEvents)/elapsed.Seconds(), "events/s")
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(0, "ns/op")
	})
	b.Run("upsert_ceiling", func(b *testing.B) {
		batch := cfg.WithDefaults().FetchBatch
		start := time.Now()
		for i := 0; i < len(cards); i += batch {
			chunk := cards[i:min(i+batch, len(cards))]
			// One statement holds each room once, as a coalesced batch does.
			seen := map[string]bool{}
			var rows []*listprojector.Card
			for _, c := range chunk {
				if !seen[c.RoomID] {
					seen[c.RoomID] = true
					rows = append(rows, c)
				}
			}
			if err := listprojector.UpsertCards(ctx, db, rows); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.ReportMetric(float64(len(cards))/elapsed.Seconds(), "rows/s")
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(0, "ns/op")
	})
}

// BenchmarkListerPage is one first page of the list service alone (no
// HTTP), cards from Redis: its cost per request, allocations included.
func BenchmarkListerPage(b *testing.B) {
	db := testenv.NewDB(b)
	rdb, prefix := testenv.NewRedis(b)
	seedBench(b, db, []string{"a1"}, 2, 4000, 1)
	cfg := listprojector.Config{KeyPrefix: prefix, CursorSecret: testSecret, FreezeEvery: time.Second}
	if err := listprojector.RefillCache(context.Background(), db, rdb, cfg, ""); err != nil {
		b.Fatal(err)
	}
	l := newTestLister(b, db, rdb, cfg)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := l.List(ctx, listprojector.ListRequest{AppCode: "a1", RegionID: 1, Limit: 20}); err != nil {
			b.Fatal(err)
		}
	}
}
