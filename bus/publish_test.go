package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

func TestPublishDeduplicates(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	env := newTestEnvelope("r1", 1)

	first := mustPublish(t, p, env)
	if first.Duplicate || first.Stream != bus.StreamName || first.Sequence != 1 {
		t.Fatalf("first ack %+v", first)
	}
	// Another relay publishes the same outbox row: same event_id.
	second := mustPublish(t, p, env)
	if !second.Duplicate || second.Sequence != first.Sequence {
		t.Fatalf("second ack %+v, want duplicate of seq %d", second, first.Sequence)
	}
	// The stored bytes path (outbox relay) is de-duplicated the same way.
	m, err := env.Message()
	if err != nil {
		t.Fatal(err)
	}
	third, err := p.PublishMessage(context.Background(), m)
	if err != nil || !third.Duplicate {
		t.Fatalf("publish message again: %+v %v", third, err)
	}
	if n := mustStreamMsgs(t, conn.JetStream(), bus.StreamName); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
}

func TestPublishInvalidSendsNothing(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	env := newTestEnvelope("bad room", 1)
	if _, err := p.Publish(context.Background(), env); !errors.Is(err, bus.ErrInvalidEnvelope) {
		t.Fatalf("err %v, want ErrInvalidEnvelope", err)
	}
	if _, err := p.PublishMessage(context.Background(), bus.Message{Subject: "room.events.a.r.t", Data: []byte("{}")}); !errors.Is(err, bus.ErrInvalidMessage) {
		t.Fatalf("err %v, want ErrInvalidMessage", err)
	}
	if n := mustStreamMsgs(t, conn.JetStream(), bus.StreamName); n != 0 {
		t.Fatalf("stream holds %d messages, want 0", n)
	}
}

func TestPublishBatch(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{MaxInFlight: 8})
	if err != nil {
		t.Fatal(err)
	}
	const n = 100
	msgs := make([]bus.Message, 0, n+2)
	for i := range n {
		m, err := newTestEnvelope("r1", int64(i+1)).Message()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	const invalid = 5
	msgs[invalid].Subject = "room.events.app1.r1" // one token short
	msgs = append(msgs, msgs[0])                  // a repeat of the first

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	results := p.PublishBatch(ctx, msgs)
	if len(results) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(results), len(msgs))
	}
	var last uint64
	for i, r := range results {
		switch i {
		case invalid:
			if !errors.Is(r.Err, bus.ErrInvalidMessage) {
				t.Errorf("result %d: err %v, want ErrInvalidMessage", i, r.Err)
			}
		case len(msgs) - 1:
			if r.Err != nil || !r.Ack.Duplicate || r.Ack.Sequence != results[0].Ack.Sequence {
				t.Errorf("repeat: %+v, want duplicate of seq %d", r, results[0].Ack.Sequence)
			}
		default:
			if r.Err != nil {
				t.Fatalf("result %d: %v", i, r.Err)
			}
			// One connection keeps publish order, so results in input
			// order carry rising sequences.
			if r.Ack.Duplicate || r.Ack.Stream != bus.StreamName || r.Ack.Sequence <= last {
				t.Fatalf("result %d: %+v after seq %d", i, r.Ack, last)
			}
			last = r.Ack.Sequence
		}
	}
	if got := mustStreamMsgs(t, conn.JetStream(), bus.StreamName); got != n-1 {
		t.Fatalf("stream holds %d, want %d", got, n-1)
	}
}

func TestPublishBatchCancelled(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	msgs := make([]bus.Message, 10)
	for i := range msgs {
		m, err := newTestEnvelope("r1", int64(i+1)).Message()
		if err != nil {
			t.Fatal(err)
		}
		msgs[i] = m
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i, r := range p.PublishBatch(ctx, msgs) {
		if !errors.Is(r.Err, context.Canceled) {
			t.Errorf("result %d: err %v, want context.Canceled", i, r.Err)
		}
	}
	if n := mustStreamMsgs(t, conn.JetStream(), bus.StreamName); n != 0 {
		t.Fatalf("stream holds %d messages after a cancelled batch", n)
	}
}

func TestPublishBatchNoStream(t *testing.T) {
	// A subject no stream holds gets an error per message, not a hang.
	srv := testenv.NewJetStreamServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: srv.ClientURL()}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	p := testenv.NewPublisher(t, conn)
	m, err := newTestEnvelope("r1", 1).Message()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range p.PublishBatch(ctx, []bus.Message{m}) {
		if r.Err == nil {
			t.Fatal("published without a stream")
		}
	}
	if _, err := p.PublishMessage(ctx, m); err == nil {
		t.Fatal("published without a stream")
	}
}

func TestPublishEnvelopes(t *testing.T) {
	conn := testenv.NewJetStream(t)
	p := testenv.NewPublisher(t, conn)
	envs := []bus.Envelope{newTestEnvelope("r1", 1), newTestEnvelope("r1", 0), newTestEnvelope("r2", 1)}
	results := p.PublishEnvelopes(context.Background(), envs)
	if results[0].Err != nil || results[2].Err != nil || !errors.Is(results[1].Err, bus.ErrInvalidEnvelope) {
		t.Fatalf("results %+v", results)
	}
	if results[2].Ack.Sequence <= results[0].Ack.Sequence {
		t.Fatalf("sequences out of order: %+v", results)
	}
}
