package bus_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// newTestEnvelope returns a valid envelope with a fresh event_id.
func newTestEnvelope(room string, version int64) bus.Envelope {
	return bus.Envelope{
		EventID:      uuid.NewString(),
		AppCode:      "app1",
		RoomID:       room,
		RoomVersion:  version,
		EventType:    "seat_changed",
		CommandID:    uuid.NewString(),
		RequestID:    "req-1",
		OccurredAtMs: 1_700_000_000_000 + version,
		Payload:      []byte(`{"seat":3,"user_id":"u9"}`),
	}
}

func mustPublish(tb testing.TB, p *bus.Publisher, env bus.Envelope) bus.PubAck {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ack, err := p.Publish(ctx, env)
	if err != nil {
		tb.Fatalf("publish: %v", err)
	}
	return ack
}

// mustProvisionConsumer creates (or updates) one durable with test settings.
func mustProvisionConsumer(tb testing.TB, conn *bus.Conn, cc bus.ConsumerConfig) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{}, cc); err != nil {
		tb.Fatalf("provision %s: %v", cc.Durable, err)
	}
}

// runningConsumer is a Consumer whose Run goroutine the test controls.
type runningConsumer struct {
	*bus.Consumer
	cancel context.CancelFunc
	done   chan struct{} // closed when Run returned
	err    error         // Run's result, set before done is closed
}

// stop cancels Run and waits for it to return, failing after limit.
func (r *runningConsumer) stop(tb testing.TB, limit time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	r.cancel()
	select {
	case <-r.done:
		if r.err != nil {
			tb.Errorf("run: %v", r.err)
		}
	case <-time.After(limit):
		tb.Fatalf("run did not return within %s of cancel", limit)
	}
	return time.Since(start)
}

// newTestConsumer provisions cc, starts a Consumer of h over it and waits
// until it runs. It is stopped when the test ends unless the test stops it.
func newTestConsumer(tb testing.TB, conn *bus.Conn, cc bus.ConsumerConfig, rc bus.ConsumerRunConfig, h bus.Handler, m *bus.Metrics) *runningConsumer {
	tb.Helper()
	return startTestConsumer(tb, conn, cc, rc, func(js jetstream.JetStream, rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
		return bus.NewConsumer(js, rc, h, testenv.Logger(tb), m)
	})
}

// startTestConsumer is newTestConsumer for a Consumer that newConsumer
// makes (of any mode).
func startTestConsumer(tb testing.TB, conn *bus.Conn, cc bus.ConsumerConfig, rc bus.ConsumerRunConfig,
	newConsumer func(jetstream.JetStream, bus.ConsumerRunConfig) (*bus.Consumer, error)) *runningConsumer {
	tb.Helper()
	mustProvisionConsumer(tb, conn, cc)
	rc.Durable = cc.Durable
	c, err := newConsumer(conn.JetStream(), rc)
	if err != nil {
		tb.Fatalf("new consumer: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningConsumer{Consumer: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		r.err = c.Run(ctx)
		close(r.done)
	}()
	select {
	case <-c.Running():
	case <-r.done:
		tb.Fatalf("run: %v", r.err)
	case <-time.After(10 * time.Second):
		tb.Fatalf("consumer not running after 10s")
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			tb.Errorf("consumer %s did not stop", cc.Durable)
		}
	})
	return r
}

// consumerInfo fetches fresh state of a durable.
func mustConsumerInfo(tb testing.TB, js jetstream.JetStream, durable string) *jetstream.ConsumerInfo {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, bus.StreamName, durable)
	if err != nil {
		tb.Fatalf("consumer %s: %v", durable, err)
	}
	return c.CachedInfo()
}

// streamMsgs returns the number of messages in a stream.
func mustStreamMsgs(tb testing.TB, js jetstream.JetStream, name string) uint64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, name)
	if err != nil {
		tb.Fatalf("stream %s: %v", name, err)
	}
	return s.CachedInfo().State.Msgs
}

// settled returns a check that passes once the durable has nothing
// pending and its ack floor reached seq.
func settled(js jetstream.JetStream, durable string, seq uint64) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := js.Consumer(ctx, bus.StreamName, durable)
		if err != nil {
			return err
		}
		info := c.CachedInfo()
		if info.NumAckPending != 0 || info.AckFloor.Stream < seq {
			return fmt.Errorf("ack pending %d, ack floor %d, want 0 and >= %d", info.NumAckPending, info.AckFloor.Stream, seq)
		}
		return nil
	}
}

var errRetry = errors.New("downstream unavailable")

// newTestMetrics returns bus metrics registered on reg.
func newTestMetrics(tb testing.TB, reg prometheus.Registerer) *bus.Metrics {
	tb.Helper()
	m, err := bus.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}
