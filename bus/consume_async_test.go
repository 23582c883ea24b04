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
)

// TestAsyncConsumer: an async handler holds several events of one room at
// once, handed over in stream order; done(nil) acks, a retryable error
// redelivers, a permanent one dead-letters; at shutdown Run waits for the
// outstanding done calls.
func TestAsyncConsumer(t *testing.T) {
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	p := testenv.NewPublisher(t, conn)
	mustProvisionConsumer(t, conn, bus.ConsumerConfig{Durable: "async", MaxDeliver: -1})

	var (
		mu    sync.Mutex
		held  []func(error)
		order []int64
		seen  = map[int64]int{}
	)
	c, err := bus.NewAsyncConsumer(js, bus.ConsumerRunConfig{Durable: "async", NakDelays: []time.Duration{50 * time.Millisecond}},
		func(_ context.Context, d bus.Delivery, done func(error)) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, d.Envelope.RoomVersion)
			seen[d.Envelope.RoomVersion]++
			switch {
			case d.Envelope.RoomVersion == 2 && seen[2] == 1:
				done(errors.New("retry me"))
			case d.Envelope.RoomVersion == 3:
				done(bus.Permanent(errors.New("refused")))
			default:
				held = append(held, done)
			}
		}, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	for v := int64(1); v <= 5; v++ {
		mustPublish(t, p, newTestEnvelope("r1", v))
	}
	// 1, 4, 5 and the redelivered 2 are held at once: the handler runs for
	// a room's next event before the previous one is done.
	testenv.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(held) != 4 {
			return fmt.Errorf("holding %d, order %v", len(held), order)
		}
		return nil
	})
	mu.Lock()
	if fmt.Sprint(order[:5]) != "[1 2 3 4 5]" {
		t.Fatalf("handed over in order %v", order)
	}
	for _, done := range held[:3] {
		done(nil)
	}
	last := held[3]
	mu.Unlock()
	testenv.WaitDeadLetters(t, js, 1)

	cancel()
	select {
	case <-ran:
		t.Fatal("Run returned with a done call outstanding")
	case <-time.After(100 * time.Millisecond):
	}
	last(nil)
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		info := mustConsumerInfo(t, js, "async")
		if info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("ack pending %d, pending %d", info.NumAckPending, info.NumPending)
		}
		return nil
	})
}
