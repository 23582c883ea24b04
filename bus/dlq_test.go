package bus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// switchHandler fails permanently with its current reason (none: it
// succeeds) and records every delivery.
type switchHandler struct {
	mu     sync.Mutex
	reason string
	seen   []bus.Delivery
}

func (h *switchHandler) handle(_ context.Context, d bus.Delivery) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, d)
	if h.reason != "" {
		return bus.Permanent(errors.New(h.reason))
	}
	return nil
}

func (h *switchHandler) fail(reason string) {
	h.mu.Lock()
	h.reason = reason
	h.mu.Unlock()
}

func (h *switchHandler) deliveries() []bus.Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

// waitDeliveries waits until h has seen n deliveries and returns them.
func (h *switchHandler) waitDeliveries(tb testing.TB, n int) []bus.Delivery {
	tb.Helper()
	var got []bus.Delivery
	testenv.Eventually(tb, 10*time.Second, func() error {
		if got = h.deliveries(); len(got) < n {
			return fmt.Errorf("%d deliveries, want %d", len(got), n)
		}
		return nil
	})
	return got
}

func newTestDLQ(tb testing.TB, conn *bus.Conn, cfg bus.DLQConfig, m *bus.DLQMetrics) *bus.DLQ {
	tb.Helper()
	q, err := bus.NewDLQ(conn.JetStream(), cfg, testenv.Logger(tb), m)
	if err != nil {
		tb.Fatalf("new dlq: %v", err)
	}
	return q
}

func mustList(tb testing.TB, q *bus.DLQ, sink, app string, after uint64, limit int) bus.LetterPage {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	page, err := q.List(ctx, sink, app, after, limit)
	if err != nil {
		tb.Fatalf("list %s %s after %d: %v", sink, app, after, err)
	}
	return page
}

func mustReplay(tb testing.TB, q *bus.DLQ, sink, app string, seqs ...uint64) bus.ReplayResult {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := q.Replay(ctx, sink, app, seqs)
	if err != nil {
		tb.Fatalf("replay %s %s %v: %v", sink, app, seqs, err)
	}
	return res
}

// waitLetters waits until sink has n letters in app and returns them.
func waitLetters(tb testing.TB, q *bus.DLQ, sink, app string, n int) []bus.DeadLetter {
	tb.Helper()
	var got []bus.DeadLetter
	testenv.Eventually(tb, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		page, err := q.List(ctx, sink, app, 0, 200)
		if err != nil {
			return err
		}
		if got = page.Letters; len(got) != n {
			return fmt.Errorf("%d letters of %s in %s, want %d", len(got), sink, app, n)
		}
		return nil
	})
	return got
}

func envelopeOf(app, room string, version int64) bus.Envelope {
	e := newTestEnvelope(room, version)
	e.AppCode = app
	return e
}

func TestDLQListPagedAndPerApp(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	h := &switchHandler{reason: "IM says: group not found"}
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, h.handle, nil)
	q := newTestDLQ(t, conn, bus.DLQConfig{Sinks: []string{"sinka", "sinkb"}}, nil)

	var mine []bus.Envelope
	for i := range 5 {
		env := envelopeOf("app1", "r"+strconv.Itoa(i), 1)
		mine = append(mine, env)
		mustPublish(t, p, env)
		mustPublish(t, p, envelopeOf("app2", "r"+strconv.Itoa(i), 1))
	}
	waitLetters(t, q, "sinka", "app1", 5)

	var got []bus.DeadLetter
	var after uint64
	pages := 0
	for {
		page := mustList(t, q, "sinka", "app1", after, 2)
		pages++
		got = append(got, page.Letters...)
		if page.Next == 0 {
			break
		}
		if len(page.Letters) != 2 || page.Next != page.Letters[1].Sequence {
			t.Fatalf("page %d: %d letters, next %d", pages, len(page.Letters), page.Next)
		}
		after = page.Next
	}
	if pages != 3 || len(got) != 5 {
		t.Fatalf("%d pages, %d letters; want 3 and 5", pages, len(got))
	}
	byRoom := make(map[string]bus.Envelope)
	for _, env := range mine {
		byRoom[env.RoomID] = env
	}
	for i, l := range got {
		app, room, typ, id := l.Event()
		want, ok := byRoom[room]
		delete(byRoom, room)
		if app != "app1" || !ok || typ != want.EventType || id != want.EventID {
			t.Errorf("letter %d: %s %s %s %s, want one of app1's events, once", i, app, room, typ, id)
		}
		if l.Consumer != "sinka" || !strings.Contains(l.Reason, "group not found") || l.Deliveries != 1 {
			t.Errorf("letter %d: %+v", i, l)
		}
		if i > 0 && l.Sequence <= got[i-1].Sequence {
			t.Errorf("letters out of order: %d after %d", l.Sequence, got[i-1].Sequence)
		}
	}

	// Another app's admin sees only its own; a sink without letters is empty.
	if n := len(mustList(t, q, "sinka", "app2", 0, 0).Letters); n != 5 {
		t.Errorf("app2 has %d letters, want 5", n)
	}
	if n := len(mustList(t, q, "sinka", "app3", 0, 0).Letters); n != 0 {
		t.Errorf("app3 sees %d letters", n)
	}
	if page := mustList(t, q, "sinka", "app1", 1<<40, 0); len(page.Letters) != 0 || page.Next != 0 {
		t.Errorf("after the end: %+v", page)
	}
	if n := len(mustList(t, q, "sinkb", "app1", 0, 0).Letters); n != 0 {
		t.Errorf("sinkb has %d letters", n)
	}
	// Named letters of another app are not replayed.
	if res := mustReplay(t, q, "sinka", "app3", got[0].Sequence); res.Replayed != 0 || res.Skipped != 1 {
		t.Errorf("replay of app1's letter as app3: %+v", res)
	}

	ctx := context.Background()
	if _, err := q.List(ctx, "nosuch", "app1", 0, 10); !errors.Is(err, bus.ErrUnknownSink) {
		t.Errorf("unknown sink: %v", err)
	}
	if _, err := q.List(ctx, "sinka", "app1", 0, -1); !errors.Is(err, bus.ErrInvalidQuery) {
		t.Errorf("negative limit: %v", err)
	}
	if _, err := q.List(ctx, "sinka", "a.>", 0, 1); !errors.Is(err, bus.ErrInvalidQuery) {
		t.Errorf("wildcard app: %v", err)
	}
	if _, err := q.Replay(ctx, "nosuch", "app1", nil); !errors.Is(err, bus.ErrUnknownSink) {
		t.Errorf("replay unknown sink: %v", err)
	}
	if _, err := q.Replay(ctx, "sinka", "app1", make([]uint64, 1001)); !errors.Is(err, bus.ErrInvalidQuery) {
		t.Errorf("replay of too many seqs: %v", err)
	}
}

func TestDLQReplayFailingAgainComesBackWithNewReason(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	a := &switchHandler{reason: "first failure"}
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, a.handle, nil)
	q := newTestDLQ(t, conn, bus.DLQConfig{Sinks: []string{"sinka"}}, nil)

	env := envelopeOf("app1", "r1", 1)
	mustPublish(t, p, env)
	old := waitLetters(t, q, "sinka", "app1", 1)[0]

	a.fail("second failure")
	if res := mustReplay(t, q, "sinka", "app1", old.Sequence); res.Replayed != 1 {
		t.Fatalf("replay: %+v", res)
	}
	var l bus.DeadLetter
	testenv.Eventually(t, 10*time.Second, func() error {
		letters := mustList(t, q, "sinka", "app1", 0, 10).Letters
		if len(letters) != 1 || letters[0].Sequence == old.Sequence {
			return fmt.Errorf("letters %+v, want only a new one", letters)
		}
		l = letters[0]
		return nil
	})
	_, _, _, id := l.Event()
	if !strings.Contains(l.Reason, "second failure") || id != env.EventID ||
		l.OriginalSubject != "room.events.app1.r1.seat_changed" || l.Subject != "dlq.sinka.room.events.app1.r1.seat_changed" ||
		l.Header.Get(bus.HeaderReplayOf) != strconv.FormatUint(old.Sequence, 10) {
		t.Fatalf("new letter %+v", l)
	}
	// The new letter replays like any other.
	a.fail("")
	if res := mustReplay(t, q, "sinka", "app1"); res.Replayed != 1 {
		t.Fatalf("replay of the new letter: %+v", res)
	}
	waitLetters(t, q, "sinka", "app1", 0)
}

// A replay requested again while its copy waits is dropped by the
// duplicate window: the letter is not delivered twice.
func TestDLQReplayTwiceDeliversOnce(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	a := &switchHandler{reason: "down"}
	q := newTestDLQ(t, conn, bus.DLQConfig{Sinks: []string{"sinka"}}, nil)
	r := newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, a.handle, nil)
	mustPublish(t, p, envelopeOf("app1", "r1", 1))
	waitLetters(t, q, "sinka", "app1", 1)
	r.stop(t, 10*time.Second) // the sink is down while replays are asked for

	if res := mustReplay(t, q, "sinka", "app1"); res.Replayed != 1 {
		t.Fatalf("first replay: %+v", res)
	}
	if res := mustReplay(t, q, "sinka", "app1"); res.Replayed != 0 || res.Skipped != 1 {
		t.Fatalf("second replay: %+v", res)
	}
	a.fail("")
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, a.handle, nil)
	waitLetters(t, q, "sinka", "app1", 0)
	testenv.Eventually(t, 5*time.Second, settled(conn.JetStream(), "sinka", 0))
	replays := 0
	for _, d := range a.deliveries() {
		if d.ReplayOf != 0 {
			replays++
		}
	}
	if replays != 1 {
		t.Fatalf("%d replayed deliveries, want 1", replays)
	}
}

// Deployments provisioned before replays existed get the replay subjects
// on the stream and in each durable's filter.
func TestProvisionUpdatesOldDeployment(t *testing.T) {
	srv := testenv.NewJetStreamServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: srv.ClientURL(), Name: t.Name()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	js := conn.JetStream()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: bus.StreamName, Subjects: []string{"room.events.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: bus.DLQStreamName, Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, bus.StreamName, jetstream.ConsumerConfig{
		Durable: bus.DurableIMBridge, AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "room.events.>",
		AckWait: 30 * time.Second, MaxDeliver: 10, MaxAckPending: 1000,
	}); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.DefaultConsumers()...); err != nil {
		t.Fatalf("provision over the old deployment: %v", err)
	}
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.CachedInfo().Config.Subjects; !slices.Equal(got, []string{"room.events.>", "room.replay.>"}) {
		t.Errorf("stream subjects %v", got)
	}
	c := mustConsumerInfo(t, js, bus.DurableIMBridge).Config
	if len(c.FilterSubjects) != 0 || c.FilterSubject != "" { // the whole stream: events and replays
		t.Errorf("imbridge filter %q %v", c.FilterSubject, c.FilterSubjects)
	}
	if _, err := js.KeyValue(ctx, bus.LastDeliveryBucket); err != nil {
		t.Errorf("last-delivery bucket: %v", err)
	}
}

// A message whose last delivery is never answered while no instance of
// its durable runs gets no advisory-made letter; the gap check makes it.
func TestGapCheckDeadLettersUnheardMaxDeliveries(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	const durable = "gap"
	cc := bus.ConsumerConfig{Durable: durable, AckWait: time.Second, MaxDeliver: 1}
	reg := prometheus.NewRegistry()
	m, err := bus.NewDLQMetrics(reg, durable)
	if err != nil {
		t.Fatal(err)
	}
	gc, err := bus.NewGapChecker(js, bus.GapCheckConfig{Durable: durable, Interval: 50 * time.Millisecond}, testenv.Logger(t), m)
	if err != nil {
		t.Fatal(err)
	}

	// A handled message leaves nothing for the check.
	release := make(chan struct{})
	var hang atomic.Bool
	var calls atomic.Int32
	r := newTestConsumer(t, conn, cc, bus.ConsumerRunConfig{ShutdownTimeout: 10 * time.Millisecond},
		func(context.Context, bus.Delivery) error {
			calls.Add(1)
			if hang.Load() {
				<-release // a process that dies: no answer, ctx ignored
			}
			return nil
		}, nil)
	defer close(release)
	ok := mustPublish(t, p, envelopeOf("app1", "r1", 1))
	testenv.Eventually(t, 5*time.Second, settled(js, durable, ok.Sequence))
	if n, err := gc.Check(context.Background()); err != nil || n != 0 {
		t.Fatalf("check after a handled message: %d letters, %v", n, err)
	}

	// The last (only) delivery hangs; the instance goes away.
	hang.Store(true)
	lost := mustPublish(t, p, envelopeOf("app1", "r2", 1))
	testenv.Eventually(t, 5*time.Second, func() error {
		if calls.Load() != 2 {
			return errors.New("not delivered yet")
		}
		return nil
	})
	r.stop(t, 10*time.Second)
	// The server gives up after the ack wait: nothing is pending.
	testenv.Eventually(t, 10*time.Second, func() error {
		if info := mustConsumerInfo(t, js, durable); info.NumAckPending != 0 || info.Delivered.Stream < lost.Sequence {
			return fmt.Errorf("ack pending %d, delivered %d", info.NumAckPending, info.Delivered.Stream)
		}
		return nil
	})
	if n := mustStreamMsgs(t, js, bus.DLQStreamName); n != 0 {
		t.Fatalf("%d letters before the check", n)
	}

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gc.Run(ctx) }()
	l := testenv.WaitDeadLetters(t, js, 1)[0]
	stop()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if bus.ReasonMaxDeliveries != "max_deliveries" || l.Reason != bus.ReasonMaxDeliveries || l.OriginalStreamSeq != lost.Sequence ||
		l.Consumer != durable || l.Deliveries != 1 || l.OriginalSubject != "room.events.app1.r2.seat_changed" {
		t.Fatalf("letter %+v", l)
	}
	// The mark is gone: another check stores nothing.
	if n, err := gc.Check(context.Background()); err != nil || n != 0 {
		t.Fatalf("second check: %d letters, %v", n, err)
	}
	if v, ok := testenv.Metric(t, reg, "voiceroom_bus_gap_dead_lettered_total", "consumer", durable); !ok || v != 1 {
		t.Errorf("gap counter %v (exists %v)", v, ok)
	}
}

func TestMonitorGauges(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	reg := prometheus.NewRegistry()
	m, err := bus.NewDLQMetrics(reg, "sinka", "sinkb")
	if err != nil {
		t.Fatal(err)
	}
	// Every alert series exists at 0 before anything happened.
	for _, s := range []struct{ name, label, value string }{
		{"voiceroom_bus_consumer_pending", "consumer", "sinka"},
		{"voiceroom_bus_consumer_ack_pending", "consumer", "sinkb"},
		{"voiceroom_bus_dlq_depth", "sink", "sinka"},
		{"voiceroom_bus_dlq_depth", "sink", "sinkb"},
		{"voiceroom_bus_gap_dead_lettered_total", "consumer", "sinkb"},
		{"voiceroom_bus_dlq_replayed_total", "sink", "sinka"},
	} {
		if v, ok := testenv.Metric(t, reg, s.name, s.label, s.value); !ok || v != 0 {
			t.Errorf("%s{%s=%q} = %v, exists %v; want 0", s.name, s.label, s.value, v, ok)
		}
	}
	// A second construction on the same registry shares the series.
	if _, err := bus.NewDLQMetrics(reg, "sinka"); err != nil {
		t.Fatalf("second metrics on one registry: %v", err)
	}

	a := &switchHandler{reason: "permanent"}
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, a.handle, nil)
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: "sinkb"}) // nobody reads it
	q := newTestDLQ(t, conn, bus.DLQConfig{Sinks: []string{"sinka", "sinkb"}}, m)
	for i := range 3 {
		mustPublish(t, p, envelopeOf("app"+strconv.Itoa(i), "r1", 1))
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return func() error {
			if d, err := q.Depth(ctx, "sinka"); err != nil || d != 3 {
				return fmt.Errorf("depth %d, %v", d, err)
			}
			return nil
		}()
	})
	mo, err := bus.NewMonitor(q, bus.MonitorConfig{Durables: []string{"sinka", "sinkb"}}, testenv.Logger(t), m)
	if err != nil {
		t.Fatal(err)
	}
	// A letter is stored before its original is terminated, and the term
	// is not confirmed: the gauges settle once the terms have landed.
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := mo.Refresh(context.Background()); err != nil {
			return err
		}
		for _, s := range []struct {
			name, label, value string
			want               float64
		}{
			{"voiceroom_bus_dlq_depth", "sink", "sinka", 3},
			{"voiceroom_bus_dlq_depth", "sink", "sinkb", 0},
			{"voiceroom_bus_consumer_pending", "consumer", "sinkb", 3},
			{"voiceroom_bus_consumer_pending", "consumer", "sinka", 0},
			{"voiceroom_bus_consumer_ack_pending", "consumer", "sinka", 0},
		} {
			if v, ok := testenv.Metric(t, reg, s.name, s.label, s.value); !ok || v != s.want {
				return fmt.Errorf("%s{%s=%q} = %v (exists: %v), want %v", s.name, s.label, s.value, v, ok, s.want)
			}
		}
		return nil
	})
}

func TestDLQConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  bus.DLQConfig
		ok   bool
	}{
		{"defaults", bus.DLQConfig{}, true},
		{"bad sink", bus.DLQConfig{Sinks: []string{"a.b"}}, false},
		{"max below default", bus.DLQConfig{DefaultLimit: 100, MaxLimit: 10}, false},
		{"negative replay", bus.DLQConfig{MaxReplay: -1}, false},
		{"negative seqs", bus.DLQConfig{MaxReplaySeqs: -1}, false},
		{"negative in flight", bus.DLQConfig{ReplayInFlight: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("validate: %v, want ok %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
		})
	}
	for _, c := range []bus.GapCheckConfig{{}, {Durable: "d", Interval: -1}, {Durable: "d", MaxPerCheck: -1}} {
		if err := c.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("gap check %+v: %v", c, err)
		}
	}
	if err := (bus.MonitorConfig{Interval: -1}).Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("monitor: %v", err)
	}
}
