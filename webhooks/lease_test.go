package webhooks_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// TestOneProcessDelivers: of two sinks one holds the lease and delivers,
// the other stands by; once the first stops, the second takes over and
// the events keep arriving, each room's in order.
func TestOneProcessDelivers(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	cfg := testConfig()
	a, b := h.newSink("a", cfg), h.newSink("b", cfg)
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	waitServing(t, a)
	testenv.Start(t, b.Run)
	first := roomEvents("app1", []string{"r1", "r2"}, 5)
	h.publish(first...)
	rc.waitAccepted(idsByRoom(first), 30*time.Second)
	select {
	case <-b.Serving():
		t.Fatal("the standby delivers while the holder does")
	default:
	}
	if v := testenv.MetricValue(t, h.reg, "voiceroom_webhooks_lease_held"); v != 1 {
		t.Errorf("lease_held %v, want 1", v)
	}
	stopA()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	waitServing(t, b)
	second := roomEvents("app1", []string{"r1", "r2"}, 5)
	h.publish(second...)
	all := idsByRoom(slices.Concat(first, second))
	rc.waitAccepted(all, 30*time.Second)
}

// TestHolderCrashKeepsRoomOrder: a holder that dies leaves the events it
// held unacked, and the durable hands them out again only after its ack
// wait; the next holder still delivers each room's events in order (it
// reads back from the first unsettled event), and at once.
func TestHolderCrashKeepsRoomOrder(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	first := roomEvents("app1", []string{"r1", "r2"}, 5)
	h.publish(first...)
	// The dead holder: it took the first events from the durable and
	// never settled them.
	cons, err := h.js.Conn().JetStream().Consumer(context.Background(), bus.StreamName, bus.DurableWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.FetchNoWait(len(first))
	if err != nil {
		t.Fatal(err)
	}
	taken := 0
	for range batch.Messages() {
		taken++
	}
	if taken != len(first) {
		t.Fatalf("the dead holder took %d events, want %d", taken, len(first))
	}
	second := roomEvents("app1", []string{"r1", "r2"}, 5)
	h.publish(second...)
	h.startSink(testConfig())
	all := idsByRoom(slices.Concat(first, second))
	// Well within the durable's ack wait: the events the dead holder took
	// are read back, not waited for.
	if ack := durableInfo(t, h).Config.AckWait; ack < 20*time.Second {
		t.Fatalf("the durable's ack wait is %s: too short for this test to tell a read-back from a redelivery", ack)
	}
	rc.waitAccepted(all, 15*time.Second)
	waitDrained(t, h)
}

// TestDeliversAfterJetStreamRestart: the lease bucket is in memory, so a
// restarted server has lost it; the sink provisions it again and goes on
// delivering (it stood by forever before).
func TestDeliversAfterJetStreamRestart(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	h.startSink(testConfig())
	first := roomEvents("app1", []string{"r1"}, 3)
	h.publish(first...)
	rc.waitAccepted(idsByRoom(first), 30*time.Second)
	h.js.Stop()
	h.js.Start()
	second := roomEvents("app1", []string{"r1"}, 3)
	h.publish(second...)
	all := idsByRoom(slices.Concat(first, second))
	rc.waitAccepted(all, 30*time.Second)
}

// TestNewTenureAfterReconnect: once its connection to NATS is lost and
// made again, a tenure hands nothing more over and ends; the next one
// reads back from the durable's first unsettled event. The durable may
// have sent events that never arrived, and would give them again only
// after its ack wait, behind later events of their rooms.
func TestNewTenureAfterReconnect(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	var logs testenv.LogBuffer
	cfg := testConfig()
	// A lease that outlives the restart: the tenure must end because of
	// the reconnect, not because its renewals failed meanwhile.
	cfg.LeaseTTL = 20 * time.Second
	s, err := webhooks.New(h.db, h.js.Conn().JetStream(), h.sealer, "test-reconnect", cfg, logs.JSONLogger(), h.metrics, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(t, s.Run)
	waitServing(t, s)
	first := roomEvents("app1", []string{"r1", "r2"}, 3)
	h.publish(first...)
	rc.waitAccepted(idsByRoom(first), 30*time.Second)

	h.js.Stop()
	h.js.Start()
	second := roomEvents("app1", []string{"r1", "r2"}, 3)
	h.publish(second...)
	all := idsByRoom(slices.Concat(first, second))
	rc.waitFirstInOrder(all, 30*time.Second)
	// The tenure ends at the first event handed over after the reconnect;
	// when the restarted JetStream answers slowly, its lease renewals may
	// fail first and end it the other way. Either way a new tenure reads
	// back what the first left unsettled.
	out := logs.String()
	if !strings.Contains(out, "the connection to NATS was lost and made again") && !strings.Contains(out, "delivery lease lost") {
		t.Fatalf("the tenure did not end after the reconnect; logs:\n%s", out)
	}
	if n := strings.Count(out, "delivery lease taken: delivering"); n < 2 {
		t.Fatalf("no new tenure after the reconnect (%d taken); logs:\n%s", n, out)
	}
}
