package bus_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"

	"github.com/nats-io/nats.go/jetstream"
)

// TestBatchConsumer: a batch handler sees every event, each room's in
// stream order, in batches; a per-delivery result is settled per delivery:
// nil acks, a permanent error dead-letters, a retryable one redelivers.
func TestBatchConsumer(t *testing.T) {
	conn := testenv.NewJetStream(t)
	pub := testenv.NewPublisher(t, conn)
	cc := bus.ConsumerConfig{Durable: "batchsink", AckWait: 5 * time.Second, MaxDeliver: 5}
	mustProvisionConsumer(t, conn, cc)
	const rooms, versions = 5, 40
	for v := int64(1); v <= versions; v++ {
		for r := range rooms {
			mustPublish(t, pub, newTestEnvelope(fmt.Sprintf("room%d", r), v))
		}
	}
	var (
		mu        sync.Mutex
		last      = map[string]int64{}
		batches   int
		biggest   int
		failedYet bool
	)
	poison := errors.New("poison")
	h := func(_ context.Context, ds []bus.Delivery) []error {
		mu.Lock()
		defer mu.Unlock()
		batches++
		biggest = max(biggest, len(ds))
		errs := make([]error, len(ds))
		for i, d := range ds {
			e := d.Envelope
			switch {
			case e.RoomID == "room0" && e.RoomVersion == 7:
				errs[i] = bus.Permanent(poison)
				continue
			case e.RoomID == "room1" && e.RoomVersion == 9 && !failedYet:
				failedYet = true
				errs[i] = errors.New("try again")
				continue
			}
			if d.NumDelivered == 1 && e.RoomVersion <= last[e.RoomID] {
				t.Errorf("%s: version %d after %d", e.RoomID, e.RoomVersion, last[e.RoomID])
			}
			last[e.RoomID] = max(last[e.RoomID], e.RoomVersion)
		}
		return errs
	}
	c, err := bus.NewBatchConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: cc.Durable, FetchBatch: 64,
		NakDelays: []time.Duration{10 * time.Millisecond}}, h, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	testenv.Eventually(t, 20*time.Second, func() error {
		info := mustConsumerInfo(t, conn.JetStream(), cc.Durable)
		if info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("pending %d, ack pending %d", info.NumPending, info.NumAckPending)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for r := range rooms {
		if v := last[fmt.Sprintf("room%d", r)]; v != versions {
			t.Errorf("room%d reached version %d", r, v)
		}
	}
	if biggest < 2 || batches >= rooms*versions {
		t.Errorf("%d batches, biggest %d: no batching", batches, biggest)
	}
	if !failedYet {
		t.Error("the retryable failure never happened")
	}
	testenv.WaitDeadLetters(t, conn.JetStream(), 1)
}

// TestBatchConsumerWithinMaxAckPending: the consumer holds no more
// messages than the durable's MaxAckPending, so a FetchBatch above it is
// cut to it (the next pull waits for a batch's worth of free slots, which
// must not be more than there are), and the backlog drains.
func TestBatchConsumerWithinMaxAckPending(t *testing.T) {
	conn, js, p := newTestBus(t)
	const maxAckPending, events = 5, 40
	var (
		mu      sync.Mutex
		biggest int
		handled int
	)
	startTestConsumer(t, conn, bus.ConsumerConfig{Durable: "narrow", MaxAckPending: maxAckPending}, bus.ConsumerRunConfig{FetchBatch: 64},
		func(js jetstream.JetStream, rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
			return bus.NewBatchConsumer(js, rc, func(_ context.Context, ds []bus.Delivery) []error {
				mu.Lock()
				defer mu.Unlock()
				biggest = max(biggest, len(ds))
				handled += len(ds)
				return nil
			}, testenv.Logger(t), nil)
		})
	var last bus.PubAck
	for v := range int64(events) {
		last = mustPublish(t, p, newTestEnvelope(fmt.Sprintf("room%d", v%7), v+1))
	}
	testenv.Eventually(t, 20*time.Second, settled(js, "narrow", last.Sequence))
	mu.Lock()
	defer mu.Unlock()
	if handled != events || biggest > maxAckPending {
		t.Fatalf("handled %d of %d, biggest batch %d (max ack pending %d)", handled, events, biggest, maxAckPending)
	}
}

// TestHoldingBatchConsumer: a holding handler may settle deliveries after
// it returns. A held message stays unacked and is kept in progress past the
// ack wait (never redelivered), the fetch goes on beside the held ones,
// and Run's stop waits until the handler settles what it holds.
func TestHoldingBatchConsumer(t *testing.T) {
	conn, js, p := newTestBus(t)
	const events = 30
	var (
		mu      sync.Mutex
		held    []func()
		handled = map[string]int{}
	)
	r := startTestConsumer(t, conn, bus.ConsumerConfig{Durable: "holder", AckWait: time.Second}, bus.ConsumerRunConfig{FetchBatch: 8, Held: 20},
		func(js jetstream.JetStream, rc bus.ConsumerRunConfig) (*bus.Consumer, error) {
			return bus.NewHoldingBatchConsumer(js, rc, func(_ context.Context, ds []bus.Delivery, settle func(int, error)) {
				mu.Lock()
				defer mu.Unlock()
				for i, d := range ds {
					handled[d.Envelope.EventID]++
					if d.Envelope.RoomID == "held" {
						held = append(held, func() { settle(i, nil) })
						continue
					}
					settle(i, nil)
				}
			}, testenv.Logger(t), nil)
		})
	var last bus.PubAck
	for v := range int64(events) {
		room := "free"
		if v%3 == 0 {
			room = "held"
		}
		last = mustPublish(t, p, newTestEnvelope(room, v+1))
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if info := mustConsumerInfo(t, js, "holder"); info.NumAckPending != events/3 || info.NumPending != 0 {
			return fmt.Errorf("ack pending %d, pending %d, want %d and 0", info.NumAckPending, info.NumPending, events/3)
		}
		return nil
	})
	time.Sleep(2500 * time.Millisecond) // past two ack waits: the heartbeat keeps them
	stopped := make(chan time.Duration, 1)
	go func() { stopped <- r.stop(t, 20*time.Second) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while the handler held deliveries")
	case <-time.After(300 * time.Millisecond):
	}
	mu.Lock()
	for _, settle := range held {
		settle()
	}
	mu.Unlock()
	<-stopped
	testenv.Eventually(t, 10*time.Second, settled(js, "holder", last.Sequence))
	mu.Lock()
	defer mu.Unlock()
	if len(handled) != events {
		t.Errorf("%d events handled, want %d", len(handled), events)
	}
	for id, n := range handled {
		if n != 1 {
			t.Errorf("event %s handled %d times: a held message was redelivered", id, n)
		}
	}
}
