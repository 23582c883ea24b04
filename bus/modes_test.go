package bus_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// The consume loop runs three kinds of handler. Every case below is
// written once, against a testSink, and run against every mode
// (Watermill's TestPubSub): the guarantees of the package doc hold
// whichever handler a sink brings.

// testSink is what a case does with its deliveries, whatever the mode.
type testSink struct {
	// take runs when d is handed over, inside the handler's own call
	// (the same for every mode): it may panic or block. Optional.
	take func(d bus.Delivery)
	// handle returns d's result. Per-message and batch handlers run it in
	// their call; the async handler after its call returned, on a
	// goroutine of its own, as a sink that queues its events would.
	handle func(ctx context.Context, d bus.Delivery) error
}

func (s testSink) taken(d bus.Delivery) {
	if s.take != nil {
		s.take(d)
	}
}

// consumerMode is one kind of handler over the loop.
type consumerMode struct {
	name string
	// holds: the handler may hold several deliveries of one room at once
	// (AsyncHandler); only their hand-over is in stream order.
	holds bool
	new   func(js jetstream.JetStream, rc bus.ConsumerRunConfig, s testSink, log *slog.Logger, m *bus.Metrics) (*bus.Consumer, error)
}

var consumerModes = []consumerMode{
	{name: "per_message", new: func(js jetstream.JetStream, rc bus.ConsumerRunConfig, s testSink, log *slog.Logger, m *bus.Metrics) (*bus.Consumer, error) {
		return bus.NewConsumer(js, rc, func(ctx context.Context, d bus.Delivery) error {
			s.taken(d)
			return s.handle(ctx, d)
		}, log, m)
	}},
	{name: "batch", new: func(js jetstream.JetStream, rc bus.ConsumerRunConfig, s testSink, log *slog.Logger, m *bus.Metrics) (*bus.Consumer, error) {
		return bus.NewBatchConsumer(js, rc, func(ctx context.Context, ds []bus.Delivery) []error {
			errs := make([]error, len(ds))
			for i, d := range ds {
				s.taken(d)
				errs[i] = s.handle(ctx, d)
			}
			return errs
		}, log, m)
	}},
	{name: "async", holds: true, new: func(js jetstream.JetStream, rc bus.ConsumerRunConfig, s testSink, log *slog.Logger, m *bus.Metrics) (*bus.Consumer, error) {
		return bus.NewAsyncConsumer(js, rc, func(ctx context.Context, d bus.Delivery, done func(error)) {
			s.taken(d)
			go func() { done(s.handle(ctx, d)) }()
		}, log, m)
	}},
}

// start provisions cc and runs a consumer of s in mode m until the test
// ends (or stops it).
func (m consumerMode) start(tb testing.TB, conn *bus.Conn, cc bus.ConsumerConfig, rc bus.ConsumerRunConfig, s testSink, met *bus.Metrics) *runningConsumer {
	tb.Helper()
	return startTestConsumer(tb, conn, cc, rc, func(js jetstream.JetStream, rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
		return m.new(js, rc, s, testenv.Logger(tb), met)
	})
}

var consumerCases = []struct {
	name string
	run  func(t *testing.T, m consumerMode)
}{
	{"acks", testAcks},
	{"retry_then_succeed", testRetryThenSucceed},
	{"panic_is_retried", testPanicIsRetried},
	{"permanent_dead_letters", testPermanentDeadLetters},
	{"undecodable_dead_letters", testUndecodableDeadLetters},
	{"classify", testClassify},
	{"max_deliver_dead_letters", testMaxDeliverDeadLetters},
	{"max_deliveries_advisory", testMaxDeliveriesAdvisory},
	{"last_delivery_marks_removed", testLastDeliveryMarksRemoved},
	{"replay_reaches_only_its_sink", testReplayReachesOnlyItsSink},
	{"in_progress_keeps_long_handler", testInProgressKeepsLongHandler},
	{"shutdown_naks_queued", testShutdownNaksQueued},
	{"shutdown_lets_handler_finish", testShutdownLetsHandlerFinish},
	{"shutdown_cancels_stuck_handler", testShutdownCancelsStuckHandler},
	{"shutdown_abandons_handler_ignoring_ctx", testShutdownAbandonsHandlerIgnoringCtx},
	{"per_room_order", testPerRoomOrder},
	{"ack_sync", testAckSync},
}

// TestConsumer runs every case against every mode.
func TestConsumer(t *testing.T) {
	for _, m := range consumerModes {
		t.Run(m.name, func(t *testing.T) {
			for _, c := range consumerCases {
				t.Run(c.name, func(t *testing.T) { c.run(t, m) })
			}
		})
	}
}

// receive waits for the next value on ch.
func receive[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatal("nothing received within 10s")
		panic("unreachable")
	}
}

func ok(context.Context, bus.Delivery) error { return nil }

// counted is a handle that counts its calls in n and returns err.
func counted(n *atomic.Int32, err error) func(context.Context, bus.Delivery) error {
	return func(context.Context, bus.Delivery) error {
		n.Add(1)
		return err
	}
}

// newTestBus is a JetStream of the test's own, its API and a publisher.
func newTestBus(tb testing.TB) (*bus.Conn, jetstream.JetStream, *bus.Publisher) {
	tb.Helper()
	conn := testenv.NewJetStream(tb)
	return conn, conn.JetStream(), testenv.NewPublisher(tb, conn)
}

func testAcks(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	reg := prometheus.NewRegistry()
	got := make(chan bus.Delivery, 10)
	m.start(t, conn, bus.ConsumerConfig{Durable: "acks"}, bus.ConsumerRunConfig{}, testSink{handle: func(_ context.Context, d bus.Delivery) error {
		got <- d
		return nil
	}}, newTestMetrics(t, reg))

	env := newTestEnvelope("r1", 1)
	ack := mustPublish(t, p, env)
	d := receive(t, got)
	if d.Envelope.EventID != env.EventID || d.Subject != "room.events.app1.r1.seat_changed" || d.StreamSeq != ack.Sequence ||
		d.NumDelivered != 1 || d.Consumer != "acks" || d.ReplayOf != 0 || string(d.Envelope.Payload) != string(env.Payload) {
		t.Fatalf("delivery %+v of %+v at %d", d, env, ack.Sequence)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "acks", ack.Sequence))
	testenv.Eventually(t, 5*time.Second, func() error {
		if v := testenv.MetricValue(t, reg, "voiceroom_bus_messages_acked_total", "consumer", "acks"); v != 1 {
			return fmt.Errorf("acked counter %v", v)
		}
		return nil
	})
}

func testRetryThenSucceed(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	var calls atomic.Int32
	delivered := make(chan uint64, 10)
	m.start(t, conn, bus.ConsumerConfig{Durable: "retry", AckWait: 5 * time.Second},
		bus.ConsumerRunConfig{NakDelays: []time.Duration{20 * time.Millisecond}}, testSink{handle: func(_ context.Context, d bus.Delivery) error {
			delivered <- d.NumDelivered
			if calls.Add(1) == 1 {
				return errRetry
			}
			return nil
		}}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	if n := receive(t, delivered); n != 1 {
		t.Fatalf("first delivery numbered %d", n)
	}
	// Redelivered after the nak delay, long before the 5s ack wait.
	select {
	case n := <-delivered:
		if n != 2 {
			t.Fatalf("second delivery numbered %d", n)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("not redelivered after nak")
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "retry", ack.Sequence))
	if n := mustStreamMsgs(t, js, bus.DLQStreamName); n != 0 {
		t.Fatalf("%d dead letters", n)
	}
}

func testPanicIsRetried(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	var calls atomic.Int32
	m.start(t, conn, bus.ConsumerConfig{Durable: "panic"}, bus.ConsumerRunConfig{NakDelays: []time.Duration{10 * time.Millisecond}},
		testSink{
			take: func(bus.Delivery) {
				if calls.Add(1) == 1 {
					panic("boom")
				}
			},
			handle: ok,
		}, nil)
	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	testenv.Eventually(t, 5*time.Second, settled(js, "panic", ack.Sequence))
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler called %d times, want 2", c)
	}
	if n := mustStreamMsgs(t, js, bus.DLQStreamName); n != 0 {
		t.Fatalf("%d dead letters: a panic is retryable", n)
	}
}

func testPermanentDeadLetters(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	m.start(t, conn, bus.ConsumerConfig{Durable: "perm", AckWait: 200 * time.Millisecond}, bus.ConsumerRunConfig{},
		testSink{handle: counted(&calls, bus.Permanent(errors.New("room 'r1' unknown to IM:\nno such group")))}, newTestMetrics(t, reg))

	env := newTestEnvelope("r1", 1)
	ack := mustPublish(t, p, env)
	l := testenv.WaitDeadLetters(t, js, 1)[0]
	if l.Consumer != "perm" || l.OriginalSubject != "room.events.app1.r1.seat_changed" ||
		l.Subject != "dlq.perm.room.events.app1.r1.seat_changed" || l.OriginalStreamSeq != ack.Sequence || l.Deliveries != 1 {
		t.Fatalf("letter %+v", l)
	}
	if !strings.Contains(l.Reason, "unknown to IM") || strings.ContainsAny(l.Reason, "\r\n") {
		t.Fatalf("reason %q", l.Reason)
	}
	for _, h := range []string{bus.HeaderDLQConsumer, bus.HeaderDLQReason, bus.HeaderDLQDeliveries, bus.HeaderDLQSubject, bus.HeaderDLQStreamSeq} {
		if l.Header.Get(h) == "" {
			t.Errorf("header %s missing", h)
		}
	}
	if got := l.Header.Get(jetstream.MsgIDHeader); got != "perm:"+strconv.FormatUint(ack.Sequence, 10) {
		t.Errorf("dead letter msg id %q", got)
	}
	back, err := bus.DecodeEnvelope(l.Data)
	if err != nil || back.EventID != env.EventID {
		t.Fatalf("letter data not the original: %v", err)
	}
	// Terminated: nothing pending, ack floor past it, never redelivered
	// (the ack wait passed several times meanwhile).
	testenv.Eventually(t, 5*time.Second, settled(js, "perm", ack.Sequence))
	if info := mustConsumerInfo(t, js, "perm"); info.NumRedelivered != 0 {
		t.Fatalf("redelivered %d", info.NumRedelivered)
	}
	if c := calls.Load(); c != 1 {
		t.Fatalf("handler called %d times", c)
	}
	if v := testenv.MetricValue(t, reg, "voiceroom_bus_messages_dead_lettered_total", "consumer", "perm"); v != 1 {
		t.Fatalf("dead-lettered counter %v", v)
	}
}

func testUndecodableDeadLetters(t *testing.T, m consumerMode) {
	conn, js, _ := newTestBus(t)
	var calls atomic.Int32
	// Classify never says permanent: an undecodable envelope is anyway.
	m.start(t, conn, bus.ConsumerConfig{Durable: "junk"}, bus.ConsumerRunConfig{Classify: func(error) bool { return false }},
		testSink{handle: counted(&calls, nil)}, nil)

	msg := nats.NewMsg("room.events.app1.r1.created")
	msg.Data = []byte("not json")
	msg.Header.Set("Trace-Id", "t-1")
	ack, err := js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	l := testenv.WaitDeadLetters(t, js, 1)[0]
	if !strings.Contains(l.Reason, "invalid envelope") || string(l.Data) != "not json" || l.Header.Get("Trace-Id") != "t-1" {
		t.Fatalf("letter %+v", l)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "junk", ack.Sequence))
	if c := calls.Load(); c != 0 {
		t.Fatalf("handler saw an undecodable message %d times", c)
	}
}

func testClassify(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	errBadRequest := errors.New("400 bad request")
	m.start(t, conn, bus.ConsumerConfig{Durable: "classify"}, bus.ConsumerRunConfig{
		Classify: func(err error) bool { return errors.Is(err, errBadRequest) },
	}, testSink{handle: func(context.Context, bus.Delivery) error {
		return fmt.Errorf("send: %w", errBadRequest)
	}}, nil)
	mustPublish(t, p, newTestEnvelope("r1", 1))
	if l := testenv.WaitDeadLetters(t, js, 1)[0]; !strings.Contains(l.Reason, "400 bad request") || l.Deliveries != 1 {
		t.Fatalf("letter %+v", l)
	}
}

func testMaxDeliverDeadLetters(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	var calls atomic.Int32
	m.start(t, conn, bus.ConsumerConfig{
		Durable:    "maxdel",
		BackOff:    []time.Duration{time.Second, time.Second}, // equal: nak delays hold exactly (see serverNakDelay)
		MaxDeliver: 3,
	}, bus.ConsumerRunConfig{NakDelays: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		testSink{handle: counted(&calls, errRetry)}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	l := testenv.WaitDeadLetters(t, js, 1)[0]
	if l.Deliveries != 3 || !strings.Contains(l.Reason, "delivery 3 of 3") || !strings.Contains(l.Reason, errRetry.Error()) {
		t.Fatalf("letter %+v", l)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "maxdel", ack.Sequence))
	if c := calls.Load(); c != 3 {
		t.Fatalf("handler called %d times, want 3", c)
	}
}

// The server gives up on its own when the last delivery is never answered
// (a crashed or hung process); the advisory path dead-letters the message.
func testMaxDeliveriesAdvisory(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	const durable = "advisory"
	cc := bus.ConsumerConfig{Durable: durable, AckWait: 1500 * time.Millisecond, MaxDeliver: 1}
	mustProvisionConsumer(t, conn, cc)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	// Another instance takes the only delivery and dies without answering.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := js.Consumer(ctx, bus.StreamName, durable)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Next(jetstream.FetchMaxWait(2 * time.Second)); err != nil {
		t.Fatalf("take the delivery: %v", err)
	}

	var calls atomic.Int32
	m.start(t, conn, cc, bus.ConsumerRunConfig{}, testSink{handle: counted(&calls, nil)}, nil)
	if info := mustConsumerInfo(t, js, durable); info.NumAckPending != 1 {
		t.Fatalf("the delivery expired before the consumer subscribed (ack pending %d); ack wait too short for this machine", info.NumAckPending)
	}
	l := testenv.WaitDeadLetters(t, js, 1)[0]
	if l.Reason != bus.ReasonMaxDeliveries || l.OriginalStreamSeq != ack.Sequence || l.Consumer != durable {
		t.Fatalf("letter %+v", l)
	}
	if c := calls.Load(); c != 0 {
		t.Fatalf("handler called %d times after max deliveries", c)
	}
}

// With MaxDeliver 1 every delivery is marked; a handled message and a
// dead-lettered one both lose their mark, so the gap check finds nothing.
func testLastDeliveryMarksRemoved(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	const durable = "marks"
	m.start(t, conn, bus.ConsumerConfig{Durable: durable, MaxDeliver: 1}, bus.ConsumerRunConfig{},
		testSink{handle: func(_ context.Context, d bus.Delivery) error {
			if d.Envelope.RoomID == "bad" {
				return bus.Permanent(errors.New("refused"))
			}
			return nil
		}}, nil)
	mustPublish(t, p, newTestEnvelope("good", 1))
	last := mustPublish(t, p, newTestEnvelope("bad", 1))
	testenv.WaitDeadLetters(t, js, 1)
	testenv.Eventually(t, 5*time.Second, settled(js, durable, last.Sequence))
	gc, err := bus.NewGapChecker(js, bus.GapCheckConfig{Durable: durable}, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := gc.Check(context.Background()); err != nil || n != 0 {
		t.Fatalf("gap check: %d letters, %v", n, err)
	}
	testenv.WaitDeadLetters(t, js, 1)
}

// A replay is handled by its own sink alone, and its letter is removed;
// the other sink acks it unseen.
func testReplayReachesOnlyItsSink(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	reg := prometheus.NewRegistry()
	met := newTestMetrics(t, reg)
	dm, err := bus.NewDLQMetrics(reg, "sinka", "sinkb")
	if err != nil {
		t.Fatal(err)
	}
	a := &switchHandler{reason: "permanent"}
	b := &switchHandler{}
	m.start(t, conn, bus.ConsumerConfig{Durable: "sinka"}, bus.ConsumerRunConfig{}, testSink{handle: a.handle}, met)
	m.start(t, conn, bus.ConsumerConfig{Durable: "sinkb"}, bus.ConsumerRunConfig{}, testSink{handle: b.handle}, met)
	q := newTestDLQ(t, conn, bus.DLQConfig{Sinks: []string{"sinka", "sinkb"}}, dm)

	env := envelopeOf("app1", "r1", 1)
	orig := mustPublish(t, p, env)
	letter := waitLetters(t, q, "sinka", "app1", 1)[0]
	b.waitDeliveries(t, 1)

	a.fail("")
	if res := mustReplay(t, q, "sinka", "app1"); res.Replayed != 1 || res.Skipped != 0 || res.More {
		t.Fatalf("replay: %+v", res)
	}
	d := a.waitDeliveries(t, 2)[1]
	if d.ReplayOf != letter.Sequence || d.Envelope.EventID != env.EventID || d.Subject != "room.events.app1.r1.seat_changed" ||
		d.StreamSeq == orig.Sequence || d.Consumer != "sinka" || string(d.Envelope.Payload) != string(env.Payload) {
		t.Fatalf("replayed delivery %+v, letter %d", d, letter.Sequence)
	}
	// Handled: the letter is gone, so it is offered neither in a list nor
	// by another replay.
	waitLetters(t, q, "sinka", "app1", 0)
	if res := mustReplay(t, q, "sinka", "app1"); res.Replayed != 0 {
		t.Errorf("second replay of all: %+v", res)
	}
	if res := mustReplay(t, q, "sinka", "app1", letter.Sequence); res.Replayed != 0 || res.Skipped != 1 {
		t.Errorf("replay of the handled letter by seq: %+v", res)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "sinka", d.StreamSeq))
	if v := testenv.MetricValue(t, reg, "voiceroom_bus_dlq_replayed_total", "sink", "sinka"); v != 1 {
		t.Errorf("replayed counter %v", v)
	}

	// sinkb acked the replay unseen: it is settled past it and saw only
	// the original.
	testenv.Eventually(t, 5*time.Second, settled(js, "sinkb", d.StreamSeq))
	if got := b.deliveries(); len(got) != 1 || got[0].ReplayOf != 0 {
		t.Fatalf("sinkb saw %+v", got)
	}
	if v := testenv.MetricValue(t, reg, "voiceroom_bus_other_sinks_replays_total", "consumer", "sinkb"); v != 1 {
		t.Fatalf("sinkb skipped %v replays, want 1", v)
	}
}

func testInProgressKeepsLongHandler(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	var calls atomic.Int32
	done := make(chan struct{})
	m.start(t, conn, bus.ConsumerConfig{Durable: "slow", AckWait: 300 * time.Millisecond}, bus.ConsumerRunConfig{},
		testSink{handle: func(ctx context.Context, _ bus.Delivery) error {
			if calls.Add(1) > 1 {
				return nil
			}
			defer close(done)
			// Work for several ack waits.
			t := time.NewTimer(time.Second)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			return nil
		}}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	receive(t, done)
	testenv.Eventually(t, 5*time.Second, settled(js, "slow", ack.Sequence))
	if info := mustConsumerInfo(t, js, "slow"); info.NumRedelivered != 0 || calls.Load() != 1 {
		t.Fatalf("redelivered while the handler ran: %d redelivered, %d calls", info.NumRedelivered, calls.Load())
	}
}

// At shutdown the messages fetched and not yet handed over are nakked, to
// come again at once; the one in the handler finishes and is acked.
func testShutdownNaksQueued(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	reg := prometheus.NewRegistry()
	const durable = "queued"
	cc := bus.ConsumerConfig{Durable: durable, AckWait: 30 * time.Second} // only a nak brings a message back soon
	started := make(chan struct{})
	release := make(chan struct{})
	var taken atomic.Int32
	rc := m.start(t, conn, cc, bus.ConsumerRunConfig{Concurrency: 1}, testSink{
		take: func(bus.Delivery) {
			if taken.Add(1) == 1 {
				close(started)
				<-release
			}
		},
		handle: ok,
	}, newTestMetrics(t, reg))

	first := mustPublish(t, p, newTestEnvelope("r1", 1))
	receive(t, started)
	for v := int64(2); v <= 4; v++ {
		mustPublish(t, p, newTestEnvelope("r1", v))
	}
	// All four are delivered: three wait behind the first, which blocks.
	// The server counts a message delivered before the client has queued
	// it; one still on its way at shutdown is not nakked (it comes back
	// after the ack wait), so wait for the client's queue too.
	testenv.Eventually(t, 5*time.Second, func() error {
		if info := mustConsumerInfo(t, js, durable); info.NumAckPending != 4 {
			return fmt.Errorf("ack pending %d, want 4", info.NumAckPending)
		}
		if n := bus.QueuedCount(rc.Consumer); n != 4 {
			return fmt.Errorf("queued %d, want 4", n)
		}
		return nil
	})
	rc.cancel()
	close(release)
	rc.stop(t, 10*time.Second)
	if n := taken.Load(); n != 1 {
		t.Fatalf("%d deliveries handed over after shutdown began", n-1)
	}
	if v := testenv.MetricValue(t, reg, "voiceroom_bus_messages_nakked_total", "consumer", durable); v != 3 {
		t.Fatalf("nakked %v, want 3", v)
	}
	if v := testenv.MetricValue(t, reg, "voiceroom_bus_messages_acked_total", "consumer", durable); v != 1 {
		t.Fatalf("acked %v, want 1", v)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if floor := mustConsumerInfo(t, js, durable).AckFloor.Stream; floor != first.Sequence {
			return fmt.Errorf("ack floor %d, want %d", floor, first.Sequence)
		}
		return nil
	})

	// The next instance gets them again well before the ack wait: the
	// server had the naks. (Order across redeliveries is not kept.)
	got := make(chan bus.Delivery, 3)
	m.start(t, conn, cc, bus.ConsumerRunConfig{}, testSink{take: func(d bus.Delivery) { got <- d }, handle: ok}, nil)
	again := map[int64]uint64{}
	for range 3 {
		d := receive(t, got)
		again[d.Envelope.RoomVersion] = d.NumDelivered
	}
	if fmt.Sprint(again) != "map[2:2 3:2 4:2]" {
		t.Fatalf("redelivered version:delivery %v, want 2, 3 and 4 on their second delivery", again)
	}
}

func testShutdownLetsHandlerFinish(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	started := make(chan struct{})
	release := make(chan struct{})
	var handlerCtxErr atomic.Value
	rc := m.start(t, conn, bus.ConsumerConfig{Durable: "drain"}, bus.ConsumerRunConfig{ShutdownTimeout: 10 * time.Second},
		testSink{handle: func(ctx context.Context, _ bus.Delivery) error {
			close(started)
			<-release
			handlerCtxErr.Store(fmt.Sprint(ctx.Err()))
			return nil
		}}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	receive(t, started)
	rc.cancel()
	select {
	case <-rc.done:
		t.Fatal("run returned while a handler was in flight")
	default:
	}
	close(release)
	rc.stop(t, 5*time.Second)
	if got := handlerCtxErr.Load(); got != "<nil>" {
		t.Fatalf("handler ctx err %v, want nil (inside the bound)", got)
	}
	// The handler's result was acked (and flushed) before Run returned; the
	// server applies acks asynchronously, so consumer info may lag a moment.
	testenv.Eventually(t, 2*time.Second, settled(js, "drain", ack.Sequence))
}

func testShutdownCancelsStuckHandler(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	const shutdownTimeout = 200 * time.Millisecond
	rc := m.start(t, conn, bus.ConsumerConfig{Durable: "stuck", MaxDeliver: 1}, bus.ConsumerRunConfig{ShutdownTimeout: shutdownTimeout},
		testSink{handle: func(ctx context.Context, _ bus.Delivery) error {
			close(started)
			<-ctx.Done()
			handlerDone <- ctx.Err()
			return ctx.Err()
		}}, nil)

	mustPublish(t, p, newTestEnvelope("r1", 1))
	receive(t, started)
	took := rc.stop(t, 5*time.Second)
	if err := receive(t, handlerDone); !errors.Is(err, context.Canceled) {
		t.Fatalf("handler ctx err %v", err)
	}
	if took < shutdownTimeout {
		t.Fatalf("run returned after %s, before the shutdown timeout", took)
	}
	// Cut short by shutdown, even on its last delivery: nakked, not
	// dead-lettered.
	if n := mustStreamMsgs(t, js, bus.DLQStreamName); n != 0 {
		t.Fatalf("%d dead letters after a shutdown", n)
	}
}

func testShutdownAbandonsHandlerIgnoringCtx(t *testing.T, m consumerMode) {
	conn, _, p := newTestBus(t)
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: "deaf"})
	c, err := m.new(conn.JetStream(), bus.ConsumerRunConfig{Durable: "deaf", ShutdownTimeout: 100 * time.Millisecond},
		testSink{handle: func(context.Context, bus.Delivery) error {
			close(started)
			<-release // ignores its ctx
			return nil
		}}, nil, nil) // no test logger: the handler outlives Run
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	mustPublish(t, p, newTestEnvelope("r1", 1))
	receive(t, started)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return while a handler ignored its ctx")
	}
}

// Events of one room are handed over in stream order, and (but for an
// async handler, which may hold several) handled one at a time, while
// rooms are handled in parallel: Concurrency workers, each with its
// rooms. A batch consumer runs several batches at once.
func testPerRoomOrder(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	const rooms, perRoom = 8, 40
	var (
		mu       sync.Mutex
		seen     = map[string][]int64{}
		inRoom   = map[string]int{}
		overlap  bool
		running  atomic.Int32
		parallel atomic.Int32
		total    atomic.Int32
	)
	m.start(t, conn, bus.ConsumerConfig{Durable: "order"}, bus.ConsumerRunConfig{Concurrency: 4, FetchBatch: 64}, testSink{
		take: func(d bus.Delivery) {
			mu.Lock()
			defer mu.Unlock()
			seen[d.Envelope.RoomID] = append(seen[d.Envelope.RoomID], d.Envelope.RoomVersion)
		},
		handle: func(_ context.Context, d bus.Delivery) error {
			room := d.Envelope.RoomID
			mu.Lock()
			inRoom[room]++
			if inRoom[room] > 1 {
				overlap = true
			}
			mu.Unlock()
			if n := running.Add(1); n > parallel.Load() {
				parallel.Store(n)
			}
			time.Sleep(time.Millisecond) // simulated work, not a wait
			running.Add(-1)
			mu.Lock()
			inRoom[room]--
			mu.Unlock()
			total.Add(1)
			return nil
		},
	}, nil)

	var envs []bus.Envelope
	for v := 1; v <= perRoom; v++ {
		for r := range rooms {
			envs = append(envs, newTestEnvelope(fmt.Sprintf("room%d", r), int64(v)))
		}
	}
	for i, r := range p.PublishEnvelopes(context.Background(), envs) {
		if r.Err != nil {
			t.Fatalf("publish %d: %v", i, r.Err)
		}
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := total.Load(); n != rooms*perRoom {
			return fmt.Errorf("%d of %d handled", n, rooms*perRoom)
		}
		return nil
	})
	testenv.Eventually(t, 5*time.Second, settled(js, "order", uint64(rooms*perRoom)))

	mu.Lock()
	defer mu.Unlock()
	if overlap && !m.holds {
		t.Error("two handlers ran for one room at once")
	}
	for room, versions := range seen {
		for i, v := range versions {
			if v != int64(i+1) {
				t.Fatalf("room %s handed over out of order: %v", room, versions)
			}
		}
	}
	if parallel.Load() < 2 {
		t.Errorf("rooms never handled in parallel (max %d at once)", parallel.Load())
	}
}

func testAckSync(t *testing.T, m consumerMode) {
	conn, js, p := newTestBus(t)
	m.start(t, conn, bus.ConsumerConfig{Durable: "acksync"}, bus.ConsumerRunConfig{AckSync: true}, testSink{handle: ok}, nil)
	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	testenv.Eventually(t, 5*time.Second, settled(js, "acksync", ack.Sequence))
}
