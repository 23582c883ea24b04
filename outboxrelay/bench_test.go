package outboxrelay_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
)

// The benchmarks measure fixed workloads, whatever b.N says: run them with
// -benchtime=1x. VOICEROOM_BENCH_ROWS (default 100000) sets the backlog of
// BenchmarkDrain, VOICEROOM_BENCH_SECONDS (default 10) the length of each
// BenchmarkLatency case, VOICEROOM_BENCH_BATCH (default 100, the default
// VOICEROOM_OUTBOX_BATCH_SIZE) the relay's batch size.
//
//	go test -run '^$' -bench . -benchtime=1x ./outboxrelay/

func benchEnv(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

const benchRooms = 1000

// insertBacklog writes n pending rows of benchRooms rooms into db,
// interleaved as concurrent commands would write them, in transactions of
// 1000 rows, and returns their messages.
func insertBacklog(b testing.TB, db *sql.DB, n int) []bus.Message {
	b.Helper()
	msgs := make([]bus.Message, 0, n)
	for lo := 0; lo < n; lo += 1000 {
		envs := make([]bus.Envelope, 0, 1000)
		for i := lo; i < min(lo+1000, n); i++ {
			envs = append(envs, testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", i%benchRooms), int64(i/benchRooms+1), "seat_changed"))
		}
		part, err := testenv.InsertOutboxTx(context.Background(), db, time.Now(), envs...)
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, part...)
	}
	return msgs
}

// nopPublisher acks everything at once: the relay with it measures MySQL
// alone (select, mark, commit, through the same pipeline).
type nopPublisher struct{}

func (nopPublisher) PublishMessage(context.Context, bus.Message) (bus.PubAck, error) {
	return bus.PubAck{}, nil
}

func (nopPublisher) PublishBatch(_ context.Context, msgs []bus.Message) []bus.Result {
	return make([]bus.Result, len(msgs))
}

// failingPublisher fails everything at once: a fast path with it leaves
// every event to the relay.
type failingPublisher struct{}

var errBenchDown = errors.New("jetstream down (benchmark)")

func (failingPublisher) PublishMessage(context.Context, bus.Message) (bus.PubAck, error) {
	return bus.PubAck{}, errBenchDown
}

func (failingPublisher) PublishBatch(_ context.Context, msgs []bus.Message) []bus.Result {
	res := make([]bus.Result, len(msgs))
	for i := range res {
		res[i].Err = errBenchDown
	}
	return res
}

// pendingLeft reports whether any row is still pending (one index probe).
func pendingLeft(b *testing.B, db *sql.DB) bool {
	var one int
	err := db.QueryRow(`SELECT 1 FROM room_outbox FORCE INDEX (idx_room_outbox_pending) WHERE status = 'pending' LIMIT 1`).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	if err != nil {
		b.Fatal(err)
	}
	return true
}

// drain runs relays relays (each with its own MySQL pool and publisher)
// over a fresh backlog of rows and returns the time until no row is
// pending.
func drain(b *testing.B, rows, relays, batch int, newPub func(i int) outboxrelay.Publisher) (time.Duration, []bus.Message, *sql.DB) {
	b.Helper()
	db, dsn := testenv.NewDBWithDSN(b)
	msgs := insertBacklog(b, db, rows)
	type relayRun struct {
		r    *outboxrelay.Relay
		pool *sql.DB
	}
	var rs []relayRun
	// The end is seen through the relays' acks, not by polling MySQL: a
	// poll would walk the index entries of rows just published (not yet
	// purged) and steal the server's time.
	var acked atomic.Int64
	all := make(chan struct{})
	m := newTestMetrics(b, nil)
	outboxrelay.SetOnAck(m, func(string, string, time.Time) {
		if acked.Add(1) == int64(rows) {
			close(all)
		}
	})
	for i := range relays {
		pool, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: dsn, MaxOpenConns: 16}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { pool.Close() })
		r, err := outboxrelay.New(pool, newPub(i), nil, m, outboxrelay.Config{
			BatchSize: batch, PollInterval: time.Second, StatsInterval: time.Hour, RetentionInterval: time.Hour,
			Pipeline: benchEnv("VOICEROOM_BENCH_PIPELINE", 0),
		})
		if err != nil {
			b.Fatal(err)
		}
		rs = append(rs, relayRun{r, pool})
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	start := time.Now()
	for _, rr := range rs {
		wg.Go(func() { rr.r.Run(ctx) })
	}
	select {
	case <-all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d rows acked in 5 minutes", acked.Load(), rows)
	}
	// Acked is not yet marked: wait for the last marks too. The wait is
	// part of the measured time, so it polls every millisecond
	// (testenv.Eventually's longer steps would add to the figure).
	marked := time.Now().Add(time.Minute)
	for pendingLeft(b, db) {
		if time.Now().After(marked) {
			b.Fatal("rows still pending a minute after the last ack")
		}
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	return elapsed, msgs, db
}

// BenchmarkDrain is the relay's drain rate, pending in MySQL to acked in
// JetStream and marked, for a backlog of VOICEROOM_BENCH_ROWS rows, with one
// and two relays, next to the two ceilings measured in the same run: the
// relay's MySQL side alone (a publisher that acks at once) and JetStream
// async publishing alone (the relay's PublishBatch calls, and plain nats.go).
func BenchmarkDrain(b *testing.B) {
	rows := benchEnv("VOICEROOM_BENCH_ROWS", 100000)
	batch := benchEnv("VOICEROOM_BENCH_BATCH", outboxrelay.DefaultBatchSize)
	report := func(b *testing.B, n int, d time.Duration) {
		b.ReportMetric(float64(n)/d.Seconds(), "rows/s")
		b.ReportMetric(d.Seconds(), "s")
		b.Logf("%d rows in %v: %.0f rows/s (batch %d)", n, d.Round(time.Millisecond), float64(n)/d.Seconds(), batch)
	}

	for _, relays := range []int{1, 2} {
		b.Run(fmt.Sprintf("relays=%d", relays), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				srv := testenv.NewJetStreamServer(b)
				var conns []*bus.Conn
				for i := range relays {
					conn, err := bus.Connect(context.Background(), bus.ConnConfig{URL: srv.ClientURL(), Name: fmt.Sprintf("relay%d", i)}, nil)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(conn.Close)
					conns = append(conns, conn)
				}
				if err := bus.Provision(context.Background(), conns[0].JetStream(), bus.StreamConfig{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				d, msgs, _ := drain(b, rows, relays, batch, func(i int) outboxrelay.Publisher {
					p, err := bus.NewPublisher(conns[i].JetStream(), bus.PublisherConfig{})
					if err != nil {
						b.Fatal(err)
					}
					return p
				})
				if n := testenv.StreamLen(b, conns[0].JetStream()); n != uint64(len(msgs)) {
					b.Fatalf("stream holds %d, want %d", n, len(msgs))
				}
				report(b, rows, d)
			}
		})
	}

	b.Run("ceiling=mysql", func(b *testing.B) {
		for range b.N {
			d, _, _ := drain(b, rows, 1, batch, func(int) outboxrelay.Publisher { return nopPublisher{} })
			report(b, rows, d)
		}
	})

	b.Run("ceiling=jetstream_batches", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			conn := testenv.NewJetStream(b)
			pub := testenv.NewPublisher(b, conn)
			msgs := benchMessages(rows)
			b.StartTimer()
			start := time.Now()
			for lo := 0; lo < len(msgs); lo += batch {
				for _, r := range pub.PublishBatch(context.Background(), msgs[lo:min(lo+batch, len(msgs))]) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			report(b, rows, time.Since(start))
		}
	})

	b.Run("ceiling=jetstream_async", func(b *testing.B) {
		for range b.N {
			b.StopTimer()
			conn := testenv.NewJetStream(b)
			js := testenv.ConnectJetStream(b, conn.NATS().ConnectedUrl())
			msgs := benchMessages(rows)
			b.StartTimer()
			start := time.Now()
			for _, m := range msgs {
				if _, err := js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{jetstream.MsgIDHeader: []string{m.ID}}}); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("acks missing after a minute")
			}
			report(b, rows, time.Since(start))
		}
	})
}

// benchMessages encodes n envelopes like the backlog's.
func benchMessages(n int) []bus.Message {
	msgs := make([]bus.Message, n)
	for i := range msgs {
		env := testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", i%benchRooms), int64(i/benchRooms+1), "seat_changed")
		m, err := env.Message()
		if err != nil {
			panic(err)
		}
		msgs[i] = m
	}
	return msgs
}

// latencies collects commit and first-ack times by event_id. The two are
// joined at the end: a relay may ack an event before its committer has
// noted the commit time.
type latencies struct {
	mu        sync.Mutex
	committed map[string]time.Time
	acked     map[string]ackAt
}

type ackAt struct {
	path string
	at   time.Time
}

func newLatencies() *latencies {
	return &latencies{committed: make(map[string]time.Time), acked: make(map[string]ackAt)}
}

func (l *latencies) commit(msgs []bus.Message, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range msgs {
		l.committed[m.ID] = at
	}
}

// unacked returns how many committed events have no ack yet.
func (l *latencies) unacked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for id := range l.committed {
		if _, ok := l.acked[id]; !ok {
			n++
		}
	}
	return n
}

func (l *latencies) ack(path, eventID string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.acked[eventID]; !ok { // the first ack counts
		l.acked[eventID] = ackAt{path, at}
	}
}

// report reports commit -> first ack over every command committed, by
// whichever path its ack came (an event the fast path left to the relay
// took as long as the relay made it wait). A command never acked is later
// than every acked one: it ranks last, and a percentile that falls on it
// is +Inf. unacked counts those commands, other-path the ones acked first
// by the path other than path; a command never acked fails the benchmark.
func (l *latencies) report(b *testing.B, path string, commits int) {
	l.mu.Lock()
	var lat []time.Duration
	other, unacked := 0, 0
	for id, c := range l.committed {
		a, ok := l.acked[id]
		if !ok {
			unacked++
			continue
		}
		if a.path != path {
			other++
		}
		lat = append(lat, a.at.Sub(c))
	}
	l.mu.Unlock()
	total := len(lat) + unacked
	if total == 0 || total != commits {
		b.Fatalf("%d commands committed, %d commit times noted", commits, total)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		i := int(float64(total-1) * p)
		if i >= len(lat) {
			return math.Inf(1)
		}
		return float64(lat[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(unacked), "unacked")
	b.ReportMetric(float64(other), "other-path")
	b.Logf("%d commands: %d acked first by the %s path, %d by the other, %d never acked; p50 %.3f ms, p99 %.3f ms, max %.3f ms",
		commits, len(lat)-other, path, other, unacked, pct(0.50), pct(0.99), pct(1))
	if unacked > 0 {
		b.Errorf("%d of %d committed commands were never acknowledged by the stream", unacked, commits)
	}
}

// BenchmarkLatency is commit -> stream ack at 500 commands/s (one event
// each, over benchRooms rooms): commands commit an outbox row in a
// transaction and hand it to the fast path after the commit. "fast" has a
// working fast path; "relay_poll=..." has a fast path whose publishes all
// fail, so every event waits for the relay. The percentiles are over every
// command committed, acknowledged or not (see report): unacked counts the
// commands the stream never acknowledged, other-path those acknowledged
// first by the other path.
func BenchmarkLatency(b *testing.B) {
	seconds := benchEnv("VOICEROOM_BENCH_SECONDS", 10)
	const rate = 500
	for _, tc := range []struct {
		name string
		fast bool
		poll time.Duration
	}{
		{"fast", true, time.Second},
		{"relay_poll=1s", false, time.Second},
		{"relay_poll=100ms", false, 100 * time.Millisecond},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				db := testenv.NewDB(b)
				conn := testenv.NewJetStream(b)
				pub := testenv.NewPublisher(b, conn)
				lat := newLatencies()
				m := newTestMetrics(b, nil)
				outboxrelay.SetOnAck(m, lat.ack)
				var fastPub outboxrelay.Publisher = pub
				if !tc.fast {
					fastPub = failingPublisher{}
				}
				fp, err := outboxrelay.NewFastPath(db, fastPub, nil, m, outboxrelay.FastPathConfig{})
				if err != nil {
					b.Fatal(err)
				}
				r, err := outboxrelay.New(db, pub, nil, m, outboxrelay.Config{PollInterval: tc.poll})
				if err != nil {
					b.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Go(func() { fp.Run(ctx) })
				wg.Go(func() { r.Run(ctx) })
				b.StartTimer()

				// Commands arrive at a steady rate; each commits on a
				// worker of its own, as cells of different rooms would.
				tokens := make(chan int)
				var commits atomic.Int64
				var workers sync.WaitGroup
				for range 16 {
					workers.Go(func() {
						for i := range tokens {
							env := testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", i%benchRooms), int64(i/benchRooms+1), "gift_sent")
							msgs, err := testenv.InsertOutboxTx(context.Background(), db, time.Now(), env)
							if err != nil {
								b.Error(err)
								return
							}
							now := time.Now()
							lat.commit(msgs, now)
							fp.Committed(msgs, voiceroom.OutboxGroup{}, now)
							commits.Add(1)
						}
					})
				}
				tick := time.NewTicker(time.Second / rate)
				for i := range rate * seconds {
					<-tick.C
					tokens <- i
				}
				tick.Stop()
				close(tokens)
				workers.Wait()
				// The last events' acks, for up to 10 s; what has none
				// by then is counted as never acknowledged.
				for wait := time.Now().Add(10 * time.Second); lat.unacked() > 0 && time.Now().Before(wait); {
					time.Sleep(10 * time.Millisecond)
				}
				b.StopTimer()
				cancel()
				wg.Wait()
				path := "fast"
				if !tc.fast {
					path = "relay"
				}
				lat.report(b, path, int(commits.Load()))
			}
		})
	}
}
