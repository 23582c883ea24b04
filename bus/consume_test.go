package bus_test

import (
	"context"
	"errors"
	"fmt"
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

func TestConsumeAcks(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)

	got := make(chan bus.Delivery, 10)
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "acks"}, bus.ConsumerRunConfig{},
		func(_ context.Context, d bus.Delivery) error {
			got <- d
			return nil
		}, m)

	env := newTestEnvelope("r1", 1)
	ack := mustPublish(t, p, env)
	d := <-got
	want := bus.Delivery{Envelope: env, Subject: "room.events.app1.r1.seat_changed", StreamSeq: ack.Sequence, NumDelivered: 1, Consumer: "acks"}
	if d.Envelope.EventID != want.Envelope.EventID || d.Subject != want.Subject || d.StreamSeq != want.StreamSeq ||
		d.NumDelivered != 1 || d.Consumer != want.Consumer || string(d.Envelope.Payload) != string(env.Payload) {
		t.Fatalf("delivery %+v, want %+v", d, want)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "acks", ack.Sequence))
	testenv.Eventually(t, 5*time.Second, func() error {
		if v := testenv.MetricValue(t, reg, "voiceroom_bus_messages_acked_total", "consumer", "acks"); v != 1 {
			return fmt.Errorf("acked counter %v", v)
		}
		return nil
	})
}

func TestConsumeRetryThenSucceed(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

	var calls atomic.Int32
	delivered := make(chan uint64, 10)
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "retry", AckWait: 5 * time.Second},
		bus.ConsumerRunConfig{NakDelays: []time.Duration{20 * time.Millisecond}},
		func(_ context.Context, d bus.Delivery) error {
			delivered <- d.NumDelivered
			if calls.Add(1) == 1 {
				return errRetry
			}
			return nil
		}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	if n := <-delivered; n != 1 {
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

func TestConsumePermanentDeadLetters(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)

	var calls atomic.Int32
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "perm", AckWait: 200 * time.Millisecond}, bus.ConsumerRunConfig{},
		func(context.Context, bus.Delivery) error {
			calls.Add(1)
			return bus.Permanent(errors.New("room 'r1' unknown to IM:\nno such group"))
		}, m)

	env := newTestEnvelope("r1", 1)
	ack := mustPublish(t, p, env)

	letters := mustDeadLetters(t, js, 1)
	l := letters[0]
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

	// Terminated: nothing pending, ack floor past it, never redelivered.
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

func TestConsumeUndecodableDeadLetters(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	var calls atomic.Int32
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "junk"}, bus.ConsumerRunConfig{},
		func(context.Context, bus.Delivery) error {
			calls.Add(1)
			return nil
		}, nil)

	msg := nats.NewMsg("room.events.app1.r1.created")
	msg.Data = []byte("not json")
	msg.Header.Set("Trace-Id", "t-1")
	ack, err := js.PublishMsg(context.Background(), msg)
	if err != nil {
		t.Fatal(err)
	}
	l := mustDeadLetters(t, js, 1)[0]
	if !strings.Contains(l.Reason, "invalid envelope") || string(l.Data) != "not json" || l.Header.Get("Trace-Id") != "t-1" {
		t.Fatalf("letter %+v", l)
	}
	testenv.Eventually(t, 5*time.Second, settled(js, "junk", ack.Sequence))
	if c := calls.Load(); c != 0 {
		t.Fatalf("handler saw an undecodable message %d times", c)
	}
}

func TestConsumeMaxDeliverDeadLetters(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

	var calls atomic.Int32
	newTestConsumer(t, conn, bus.ConsumerConfig{
		Durable:    "maxdel",
		BackOff:    []time.Duration{time.Second, time.Second}, // equal: nak delays hold exactly (see serverNakDelay)
		MaxDeliver: 3,
	}, bus.ConsumerRunConfig{NakDelays: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}},
		func(context.Context, bus.Delivery) error {
			calls.Add(1)
			return errRetry
		}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	l := mustDeadLetters(t, js, 1)[0]
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
func TestConsumeMaxDeliveriesAdvisory(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	const durable = "advisory"
	const ackWait = 1500 * time.Millisecond
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: durable, AckWait: ackWait, MaxDeliver: 1})

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	// Another instance takes the only delivery and dies without answering.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	raw, err := js.Consumer(ctx, bus.StreamName, durable)
	if err != nil {
		t.Fatal(err)
	}
	taken, err := raw.Next(jetstream.FetchMaxWait(2 * time.Second))
	if err != nil {
		t.Fatalf("take the delivery: %v", err)
	}
	_ = taken // never acked

	var calls atomic.Int32
	c, err := bus.NewConsumer(js, bus.ConsumerRunConfig{Durable: durable}, func(context.Context, bus.Delivery) error {
		calls.Add(1)
		return nil
	}, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()
	<-c.Running()
	if info := mustConsumerInfo(t, js, durable); info.NumAckPending != 1 {
		t.Fatalf("the delivery expired before the consumer subscribed (ack pending %d); ack wait too short for this machine", info.NumAckPending)
	}

	l := mustDeadLetters(t, js, 1)[0]
	if l.Reason != bus.ReasonMaxDeliveries || l.OriginalStreamSeq != ack.Sequence || l.Consumer != durable {
		t.Fatalf("letter %+v", l)
	}
	if c := calls.Load(); c != 0 {
		t.Fatalf("handler called %d times after max deliveries", c)
	}
}

func TestConsumeInProgressKeepsLongHandler(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

	var calls atomic.Int32
	done := make(chan struct{})
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "slow", AckWait: 300 * time.Millisecond}, bus.ConsumerRunConfig{},
		func(ctx context.Context, _ bus.Delivery) error {
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
		}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	<-done
	testenv.Eventually(t, 5*time.Second, settled(js, "slow", ack.Sequence))
	if info := mustConsumerInfo(t, js, "slow"); info.NumRedelivered != 0 || calls.Load() != 1 {
		t.Fatalf("redelivered while the handler ran: %d redelivered, %d calls", info.NumRedelivered, calls.Load())
	}
}

func TestConsumeShutdownLetsHandlerFinish(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

	started := make(chan struct{})
	release := make(chan struct{})
	var handlerCtxErr atomic.Value
	rc := newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "drain"}, bus.ConsumerRunConfig{ShutdownTimeout: 10 * time.Second},
		func(ctx context.Context, _ bus.Delivery) error {
			close(started)
			<-release
			handlerCtxErr.Store(fmt.Sprint(ctx.Err()))
			return nil
		}, nil)

	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	<-started
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

func TestConsumeShutdownCancelsStuckHandler(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	const shutdownTimeout = 200 * time.Millisecond
	rc := newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "stuck", MaxDeliver: 1}, bus.ConsumerRunConfig{ShutdownTimeout: shutdownTimeout},
		func(ctx context.Context, _ bus.Delivery) error {
			close(started)
			<-ctx.Done()
			handlerDone <- ctx.Err()
			return ctx.Err()
		}, nil)

	mustPublish(t, p, newTestEnvelope("r1", 1))
	<-started
	took := rc.stop(t, 5*time.Second)
	if err := <-handlerDone; !errors.Is(err, context.Canceled) {
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

func TestConsumeShutdownAbandonsHandlerIgnoringCtx(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)

	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: "deaf"})
	c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "deaf", ShutdownTimeout: 100 * time.Millisecond},
		func(context.Context, bus.Delivery) error {
			close(started)
			<-release // ignores its ctx
			return nil
		}, nil, nil) // no test logger: the handler outlives Run
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	mustPublish(t, p, newTestEnvelope("r1", 1))
	<-started
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

func TestConsumePerRoomOrder(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)

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
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "order"}, bus.ConsumerRunConfig{Concurrency: 4, FetchBatch: 64},
		func(_ context.Context, d bus.Delivery) error {
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
			seen[room] = append(seen[room], d.Envelope.RoomVersion)
			mu.Unlock()
			total.Add(1)
			return nil
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
	if overlap {
		t.Error("two handlers ran for one room at once")
	}
	for room, versions := range seen {
		for i, v := range versions {
			if v != int64(i+1) {
				t.Fatalf("room %s handled out of order: %v", room, versions)
			}
		}
	}
	if parallel.Load() < 2 {
		t.Errorf("rooms never handled in parallel (max %d at once)", parallel.Load())
	}
}

func TestConsumeHandlerPanicIsRetried(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	var calls atomic.Int32
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "panic"}, bus.ConsumerRunConfig{NakDelays: []time.Duration{10 * time.Millisecond}},
		func(context.Context, bus.Delivery) error {
			if calls.Add(1) == 1 {
				panic("boom")
			}
			return nil
		}, nil)
	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	testenv.Eventually(t, 5*time.Second, settled(js, "panic", ack.Sequence))
	if c := calls.Load(); c != 2 {
		t.Fatalf("handler called %d times, want 2", c)
	}
}

func TestConsumeClassify(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	errBadRequest := errors.New("400 bad request")
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "classify"}, bus.ConsumerRunConfig{
		Classify: func(err error) bool { return errors.Is(err, errBadRequest) },
	}, func(context.Context, bus.Delivery) error {
		return fmt.Errorf("send: %w", errBadRequest)
	}, nil)
	mustPublish(t, p, newTestEnvelope("r1", 1))
	if l := mustDeadLetters(t, js, 1)[0]; !strings.Contains(l.Reason, "400 bad request") {
		t.Fatalf("letter %+v", l)
	}
}

func TestConsumeAckSync(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	newTestConsumer(t, conn, bus.ConsumerConfig{Durable: "acksync"}, bus.ConsumerRunConfig{AckSync: true},
		func(context.Context, bus.Delivery) error { return nil }, nil)
	ack := mustPublish(t, p, newTestEnvelope("r1", 1))
	testenv.Eventually(t, 5*time.Second, settled(js, "acksync", ack.Sequence))
}

func TestConsumeMissingDurable(t *testing.T) {
	conn := testenv.NewJetStream(t)
	c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "nobody"},
		func(context.Context, bus.Delivery) error { return nil }, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Run(ctx); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("run err %v, want consumer not found", err)
	}
	if err := c.Run(ctx); !errors.Is(err, bus.ErrAlreadyRunning) {
		t.Fatalf("second run err %v", err)
	}
}

func TestConsumerRunConfigValidate(t *testing.T) {
	h := func(context.Context, bus.Delivery) error { return nil }
	for name, cfg := range map[string]bus.ConsumerRunConfig{
		"no durable":        {},
		"bad durable":       {Durable: "a b"},
		"negative workers":  {Durable: "d", Concurrency: -1},
		"negative batch":    {Durable: "d", FetchBatch: -1},
		"negative delay":    {Durable: "d", NakDelays: []time.Duration{-time.Second}},
		"negative shutdown": {Durable: "d", ShutdownTimeout: -time.Second},
	} {
		if _, err := bus.NewConsumer(nil, cfg, h, nil, nil); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: err %v", name, err)
		}
		if err := cfg.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: validate err %v", name, err)
		}
	}
}

func TestPermanent(t *testing.T) {
	base := errors.New("bad")
	if bus.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) != nil")
	}
	err := fmt.Errorf("wrapped: %w", bus.Permanent(base))
	if !bus.IsPermanent(err) || !errors.Is(err, base) || err.Error() != "wrapped: bad" {
		t.Fatalf("permanent error %v", err)
	}
	if bus.IsPermanent(base) {
		t.Fatal("plain error is permanent")
	}
}

func TestMetricsNilSafe(t *testing.T) {
	var m *bus.Metrics
	conn := testenv.NewJetStream(t)
	if _, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: "x"},
		func(context.Context, bus.Delivery) error { return nil }, nil, m); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, b := newTestMetrics(t, reg), newTestMetrics(t, reg) // shared registry is fine
	if a == nil || b == nil {
		t.Fatal("nil metrics")
	}
	if newTestMetrics(t, nil) == nil {
		t.Fatal("nil metrics without registry")
	}
}
