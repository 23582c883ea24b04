package listprojector_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// Workload knobs of the benchmarks (run them with -benchtime 1x):
//
//	VOICEROOM_BENCH_SECONDS  duration of each timed phase (5)
//	VOICEROOM_BENCH_CONC     concurrent command workers (64)
//	VOICEROOM_BENCH_EVENTS   backlog of the drain benchmark (200000)
//	VOICEROOM_BENCH_FETCH_BATCH  the drain's projector FetchBatch (the default)
//
// Each timed phase also reports the server's rows written (Handler_write,
// Handler_update), write statements and InnoDB redo bytes per event,
// command or card: SHOW GLOBAL STATUS deltas, so only on a server the
// benchmark has to itself.
//
// The list's benchmarks (BenchmarkListHTTP, BenchmarkListerPage,
// BenchmarkBanToGone) are package roomlist's.
var quiet = slog.New(slog.DiscardHandler)

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

// Behind: these tests start with no pending outbox rows of other processes.
func (*commitClock) Behind(voiceroom.RoomKey, string) {}

// Taking is the real fast path's.
func (c *commitClock) Taking() bool { return c.next.Taking() }

func (c *commitClock) Committed(msgs []bus.Message, group voiceroom.OutboxGroup, committedAt time.Time) {
	c.mu.Lock()
	for _, m := range msgs {
		c.at[m.ID] = committedAt
	}
	c.mu.Unlock()
	c.next.Committed(msgs, group, committedAt)
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
	secs := testenv.EnvInt("VOICEROOM_BENCH_SECONDS", 5)
	conc := testenv.EnvInt("VOICEROOM_BENCH_CONC", 64)
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
	cfg := listprojector.Config{KeyPrefix: prefix}
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
		res, err := svc.Execute(ctx, &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: "bench", CommandID: rooms.NewCommandID(),
			Actor: rooms.Actor{UserID: int64(i + 1)}, Args: rooms.Args{Title: "bench"}})
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
			before := mustServerStatus(b, db)
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
						cmd := &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: "bench", RoomID: room, CommandID: rooms.NewCommandID(),
							Actor: rooms.Actor{UserID: user}}
						if joined {
							cmd.Kind = rooms.KindLeaveRoom
						}
						_, err := svc.Execute(ctx, cmd)
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
			reportServerStatus(b, before, mustServerStatus(b, db), cmds.Load(), "cmd")
			mu.Lock()
			all := slices.Clone(lags)
			mu.Unlock()
			slices.Sort(all)
			b.ReportMetric(float64(cmds.Load())/elapsed.Seconds(), "events/s")
			b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.5)), "lag_p50_ms")
			b.ReportMetric(testenv.Millis(testenv.Percentile(all, 0.99)), "lag_p99_ms")
			b.ReportMetric(float64(failed.Load()), "unavailable")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkBacklogDrain measures the projector on a backlog of 200,000
// events (10,000 rooms, 20 events each, interleaved so that one pull holds
// many rooms) against ceilings measured in the same run: the same 200,000
// cards written over existing rows in statements of the projector's batch
// size, with the multi-row upsert alone (upsert_ceiling), then as the
// projector writes cards of rooms that have a row (write_ceiling: its
// UPDATE).
func BenchmarkBacklogDrain(b *testing.B) {
	nEvents := testenv.EnvInt("VOICEROOM_BENCH_EVENTS", 200000)
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
			EventType: roomevent.RoomUserJoined, CommandID: "c", OccurredAtMs: now, Payload: raw}
		m, err := env.Message()
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, m)
		if len(msgs) == 1000 {
			flush()
		}
		cards = append(cards, &listprojector.Card{AppCode: "bench", Card: roomevent.Card{Listing: roomevent.Listing{RoomID: room,
			RoomShortID: c.RoomShortID, IMGroupID: room, VisibleRegionID: c.VisibleRegionID, OwnerUserID: 7, HostUserID: 7,
			Title: c.Title, Mode: "voice", Status: "active", OnlineCount: c.OnlineCount, SeatCount: 10, CreatedAtMs: c.CreatedAtMs},
			RoomVersion: v + 1000}, UpdatedAtMs: now})
	}
	flush()

	cfg := listprojector.Config{KeyPrefix: prefix, FetchBatch: testenv.EnvInt("VOICEROOM_BENCH_FETCH_BATCH", 0)}
	// VOICEROOM_BENCH_CONCURRENCY sets the projector's workers (default
	// DefaultWorkers), to compare VOICEROOM_PROJECTOR_CONCURRENCY values.
	run := bus.ConsumerRunConfig{Durable: bus.DurableListProjector, Concurrency: testenv.EnvInt("VOICEROOM_BENCH_CONCURRENCY", listprojector.DefaultWorkers)}
	p, err := listprojector.New(db, rdb, js, run, nil, cfg, quiet, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("projector workers: %d", run.Concurrency)
	b.Run("projector", func(b *testing.B) {
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		before := mustServerStatus(b, db)
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
		reportServerStatus(b, before, mustServerStatus(b, db), int64(nEvents), "event")
		stop()
		<-done
		b.ReportMetric(float64(nEvents)/elapsed.Seconds(), "events/s")
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(0, "ns/op")
	})
	// The ceilings write over the rows the drain left: every room has one.
	ceiling := func(b *testing.B, write func([]*listprojector.Card) error) {
		batch := cfg.WithDefaults().FetchBatch
		before := mustServerStatus(b, db)
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
			if err := write(rows); err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		reportServerStatus(b, before, mustServerStatus(b, db), int64(len(cards)), "card")
		b.ReportMetric(float64(len(cards))/elapsed.Seconds(), "rows/s")
		b.ReportMetric(elapsed.Seconds(), "s")
		b.ReportMetric(0, "ns/op")
	}
	b.Run("upsert_ceiling", func(b *testing.B) {
		ceiling(b, func(rows []*listprojector.Card) error { return listprojector.UpsertCards(ctx, db, rows) })
	})
	b.Run("write_ceiling", func(b *testing.B) {
		for _, c := range cards {
			c.RoomVersion += 1000 // newer than the upsert's
		}
		stored := func(string, string) bool { return true }
		ceiling(b, func(rows []*listprojector.Card) error { return listprojector.WriteCards(ctx, db, rows, stored) })
	})
}

// serverStatus are the SHOW GLOBAL STATUS counters a benchmark reports:
// rows written (MariaDB counts temporary tables apart, in Handler_tmp_*),
// statements and InnoDB redo bytes.
var serverStatus = []string{"Handler_write", "Handler_update", "Com_insert", "Com_update", "Com_update_multi", "Innodb_os_log_written"}

// mustServerStatus reads serverStatus. Global: every client of the server
// counts, so the figures hold on a server the benchmark has to itself.
func mustServerStatus(tb testing.TB, db *sql.DB) map[string]int64 {
	tb.Helper()
	rows, err := db.Query("SHOW GLOBAL STATUS")
	if err != nil {
		tb.Fatalf("show global status: %v", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var name, val string
		if err := rows.Scan(&name, &val); err != nil {
			tb.Fatalf("show global status: %v", err)
		}
		if slices.Contains(serverStatus, name) {
			if out[name], err = strconv.ParseInt(val, 10, 64); err != nil {
				tb.Fatalf("show global status %s: %v", name, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("show global status: %v", err)
	}
	return out
}

// reportServerStatus reports each counter's growth from before to after
// per unit (n of them): rows written, statements and redo bytes per event,
// command or card.
func reportServerStatus(b *testing.B, before, after map[string]int64, n int64, unit string) {
	if n == 0 {
		return
	}
	per := func(names ...string) float64 {
		var d int64
		for _, name := range names {
			d += after[name] - before[name]
		}
		return float64(d) / float64(n)
	}
	b.ReportMetric(per("Handler_write"), "handler_write/"+unit)
	b.ReportMetric(per("Handler_update"), "handler_update/"+unit)
	b.ReportMetric(per("Com_insert", "Com_update", "Com_update_multi"), "writes/"+unit)
	b.ReportMetric(per("Innodb_os_log_written"), "redo_B/"+unit)
}
