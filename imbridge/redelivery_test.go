package imbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// redeliver publishes e again under a new Nats-Msg-Id, so the stream keeps
// it: the bridge sees the event a second time, as it does when the server
// redelivers an event whose ack was lost.
func redeliver(tb testing.TB, js jetstream.JetStream, envs ...bus.Envelope) {
	tb.Helper()
	p, err := bus.NewPublisher(js, bus.PublisherConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, e := range envs {
		subject, err := e.Subject()
		if err != nil {
			tb.Fatal(err)
		}
		data, err := json.Marshal(e)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := p.PublishMessage(ctx, bus.Message{Subject: subject, ID: uuid.NewString(), Data: data}); err != nil {
			tb.Fatal(err)
		}
	}
}

// slowGroups makes a room's waiting events travel together: one message
// per second per group, no burst.
var slowGroups = imbridge.Config{GroupMessagesPerSecond: 1, GroupBurst: 1}

// TestAcceptedEventDeliveredAgainIsNotShownTwice: an event Tencent
// accepted comes again (a lost ack) and would be grouped with the room's
// next event into a message of another Random, which Tencent's duplicate
// check cannot drop; the bridge acks it without a call.
func TestAcceptedEventDeliveredAgainIsNotShownTwice(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	created, first := r.event(roomevent.RoomCreated, nil), r.joined(2)
	publish(t, js, created, first)
	reg, m := newTestMetrics(t)
	if n := duplicates(t, reg, roomevent.RoomUserJoined); n != 0 {
		t.Fatalf("duplicates at start %v, want a series at 0", n)
	}
	runBridgeMetrics(t, js, testApps(url), slowGroups, m)
	waitShown(t, emu, first)

	second := r.joined(3)
	redeliver(t, js, first)
	publish(t, js, second)
	waitShown(t, emu, first, second)
	waitDrained(t, js)
	if ev, ok := emu.Event(first.EventID); !ok || ev.Shown != 1 {
		t.Fatalf("event delivered again shown %d times, want 1", ev.Shown)
	}
	if n := duplicates(t, reg, roomevent.RoomUserJoined); n != 1 {
		t.Fatalf("duplicates %v, want 1", n)
	}
}

// duplicates reads voiceroom_imbridge_events_total{outcome="duplicate"} of an event
// type; -1 when the series does not exist.
func duplicates(tb testing.TB, reg *prometheus.Registry, eventType string) float64 {
	tb.Helper()
	v, ok := testenv.Metric(tb, reg, "voiceroom_imbridge_events_total", "event_type", eventType, "outcome", "duplicate")
	if !ok {
		return -1
	}
	return v
}

// TestEventDeliveredAgainWhileHeldIsShownOnce: an event the bridge still
// holds (its calls fail) comes again (the server lost its in-progress
// signals); both deliveries are settled by the one message.
func TestEventDeliveredAgainWhileHeldIsShownOnce(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	publish(t, js, r.event(roomevent.RoomCreated, nil))
	runBridge(t, js, testApps(url), slowGroups)
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(emu.Groups()) != 1 {
			return fmt.Errorf("no group")
		}
		return nil
	})
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 90994, API: imbridge.APISendGroupMsg}); err != nil {
		t.Fatal(err)
	}
	first, second := r.joined(2), r.joined(3)
	publish(t, js, first)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := emu.Stats().Calls[imbridge.APISendGroupMsg]; n < 1 {
			return fmt.Errorf("%d sends", n)
		}
		return nil
	})
	redeliver(t, js, first)
	publish(t, js, second)
	emu.ClearFault()
	waitShown(t, emu, first, second)
	waitDrained(t, js)
	if ev, ok := emu.Event(first.EventID); !ok || ev.Shown != 1 {
		t.Fatalf("event delivered again shown %d times, want 1", ev.Shown)
	}
}

// TestJetStreamRestartShowsNoEventTwice restarts the server while events
// flow: events whose acks or in-progress signals the restart lost come
// again, and none is shown twice.
func TestJetStreamRestartShowsNoEventTwice(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	srv := testenv.RunJetStream(t)
	js := srv.Conn().JetStream()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.StreamConfig{}, bus.ConsumerConfig{Durable: bus.DurableIMBridge, MaxDeliver: -1, MaxAckPending: 20000, AckWait: 2 * time.Second}); err != nil {
		t.Fatal(err)
	}
	const roomsN, perRoom = 20, 30
	var all []bus.Envelope
	batches := make([][]bus.Envelope, perRoom+1)
	for range roomsN {
		r := newTestRoom("demo")
		batches[0] = append(batches[0], r.event(roomevent.RoomCreated, nil))
		for i := 1; i <= perRoom; i++ {
			e := r.joined(int64(i))
			batches[i] = append(batches[i], e)
			all = append(all, e)
		}
	}
	publish(t, js, batches[0]...)
	runBridge(t, js, testApps(url), imbridge.Config{GroupMessagesPerSecond: 5, GroupBurst: 2})

	var wg sync.WaitGroup
	wg.Go(func() {
		for _, b := range batches[1:] {
			publishRetrying(t, js, b)
			// Pace, not a wait for anything: the events flow across the
			// restart instead of all before it.
			time.Sleep(50 * time.Millisecond)
		}
	})
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := emu.Stats().EventsShown; n < roomsN*3 {
			return fmt.Errorf("%d events shown", n)
		}
		return nil
	})
	srv.Stop()
	// An outage longer than the ack wait (2 s), so that held events come
	// again: a length of time, with nothing to poll while the server is
	// down.
	time.Sleep(3 * time.Second)
	srv.Start()
	wg.Wait()
	testenv.Eventually(t, 60*time.Second, func() error {
		for _, e := range all {
			ev, ok := emu.Event(e.EventID)
			if !ok {
				return fmt.Errorf("event %s not shown", e.EventID)
			}
			if ev.Shown != 1 {
				t.Fatalf("event %s shown %d times", e.EventID, ev.Shown)
			}
		}
		return nil
	})
}

// publishRetrying publishes envs, again while the server is down.
func publishRetrying(tb testing.TB, js jetstream.JetStream, envs []bus.Envelope) {
	tb.Helper()
	p, err := bus.NewPublisher(js, bus.PublisherConfig{})
	if err != nil {
		tb.Error(err)
		return
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var failed []bus.Envelope
		for i, r := range p.PublishEnvelopes(ctx, envs) {
			if r.Err != nil {
				failed = append(failed, envs[i])
			}
		}
		cancel()
		if len(failed) == 0 {
			return
		}
		if time.Now().After(deadline) {
			tb.Errorf("publish: %d events failed", len(failed))
			return
		}
		envs = failed
		time.Sleep(200 * time.Millisecond) // the retry's backoff (this runs beside the test: no Eventually)
	}
}

// TestEventAcceptedBeforeARestartIsNotShownTwice: a bridge process that
// did not send an event (it restarted, or another instance sent it) gets
// it again as a redelivery; the accepted-events bucket every process
// writes tells it Tencent accepted the event, and it is acked without a
// call. (Sent again, it would travel with the room's next event in a
// message of another Random, which Tencent's duplicate check cannot drop.)
func TestEventAcceptedBeforeARestartIsNotShownTwice(t *testing.T) {
	skipShort(t)
	emu, url := newTestEmulator(t)
	js := newTestJetStream(t)
	r := newTestRoom("demo")
	created, first := r.event(roomevent.RoomCreated, nil), r.joined(2)
	publish(t, js, created, first)
	stopA := runBridge(t, js, testApps(url), imbridge.Config{})
	waitShown(t, emu, first)
	stopA() // graceful: its queued bucket writes are made

	reg, m := newTestMetrics(t)
	b, err := imbridge.New(js, testApps(url), slowGroups, testenv.Logger(t), m, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	second := r.joined(3)
	publish(t, js, second)
	waitShown(t, emu, second) // the new process consumes

	// The group's next message waits a second (slowGroups): the
	// redelivered event and the room's next one arrive meanwhile.
	third := r.joined(4)
	firstDone, thirdDone := make(chan error, 1), make(chan error, 1)
	go func() {
		firstDone <- imbridge.Handle(b, bus.Delivery{Envelope: first, NumDelivered: 2, Consumer: bus.DurableIMBridge})
	}()
	// In stream order: the third comes once the bridge has taken the first
	// (settled it, or holds it for the group's next message).
	testenv.Eventually(t, 10*time.Second, func() error {
		if len(firstDone) == 0 && !imbridge.Holds(b, first) {
			return errors.New("the redelivered event is not taken yet")
		}
		return nil
	})
	go func() {
		thirdDone <- imbridge.Handle(b, bus.Delivery{Envelope: third, NumDelivered: 1, Consumer: bus.DurableIMBridge})
	}()
	for _, done := range []chan error{firstDone, thirdDone} {
		if err := <-done; err != nil {
			t.Fatalf("settled with %v", err)
		}
	}
	waitShown(t, emu, third)
	if ev, ok := emu.Event(first.EventID); !ok || ev.Shown != 1 {
		t.Fatalf("event accepted before the restart shown %d times, want 1", ev.Shown)
	}
	if n := duplicates(t, reg, roomevent.RoomUserJoined); n != 1 {
		t.Fatalf("duplicates %v, want 1", n)
	}
}
