package pk_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/pk"
)

// TestScorerOnItsDurable: the scorer reads its own durable (gifts only),
// and a gift that reaches the stream twice (a replay: the same event id
// under another message id) counts once.
func TestScorerOnItsDurable(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	conn, js := startScorers(t, h, 1, 0)

	a, b := h.room(t, app, 1), h.room(t, app, 2)
	battle := h.battle(t, a, b, 1, 2, 60)
	pub := testenv.NewPublisher(t, conn)
	twice := gift(t, b, 12, 40, battle.StartsAtMs+1)
	for _, env := range []bus.Envelope{gift(t, a, 11, 25, battle.StartsAtMs), twice} {
		if _, err := pub.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := twice.Message()
	if err != nil {
		t.Fatal(err)
	}
	msg.ID += "-again" // past the stream's de-duplication: delivered again
	if _, err := pub.PublishMessage(ctx, msg); err != nil {
		t.Fatal(err)
	}
	waitAcked(t, js, 3)
	got, err := h.svc.Get(ctx, app, battle.BattleID)
	if err != nil || got.RoomScore != 25 || got.OpponentScore != 40 {
		t.Fatalf("scores %d:%d, want 25:40 (%v)", got.RoomScore, got.OpponentScore, err)
	}
}

// startScorers provisions the durable pk on a JetStream of the test's and
// runs n scorers on it (fetchBatch 0: the default), until the test ends.
func startScorers(t *testing.T, h *harness, n, fetchBatch int) (*bus.Conn, jetstream.JetStream) {
	t.Helper()
	ctx := context.Background()
	conn := testenv.NewJetStream(t)
	js := conn.JetStream()
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.ConsumerConfig{Durable: bus.DurablePK, FilterSubject: bus.PKFilterSubject,
		MaxDeliver: -1}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var done []chan error
	for range n {
		scorer, err := pk.NewScorer(h.db, js, bus.ConsumerRunConfig{Durable: bus.DurablePK, MaxDeliver: -1, FetchBatch: fetchBatch}, nil,
			testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan error, 1)
		go func() { ch <- scorer.Run(runCtx) }()
		done = append(done, ch)
	}
	t.Cleanup(func() {
		stop()
		for _, ch := range done {
			<-ch
		}
	})
	return conn, js
}

// waitAcked waits until the durable pk has acked the stream's first n
// messages and holds none pending.
func waitAcked(t *testing.T, js jetstream.JetStream, n uint64) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, 60*time.Second, func() error {
		cons, err := js.Consumer(ctx, bus.StreamName, bus.DurablePK)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumPending != 0 || info.NumAckPending != 0 || info.AckFloor.Stream < n {
			return fmt.Errorf("durable: %d pending, %d unacked, ack floor %d", info.NumPending, info.NumAckPending, info.AckFloor.Stream)
		}
		return nil
	})
}
