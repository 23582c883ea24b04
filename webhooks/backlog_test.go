package webhooks_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// TestFailingEndpointIsPausedAndResumed: an endpoint failing for longer
// than PauseAfter is paused with the reason; another endpoint of the app
// gets every event meanwhile; events keep coming while it is paused; once
// resumed it gets all of them, each room's in order.
func TestFailingEndpointIsPausedAndResumed(t *testing.T) {
	h := newHarness(t)
	down, e := h.newEndpoint("app1")
	other, _ := h.newEndpoint("app1")
	failing := down.failWith(answer{status: 503, body: "maintenance"})
	cfg := testConfig()
	cfg.PauseAfter = 500 * time.Millisecond
	h.startSink(cfg)
	before := roomEvents("app1", []string{"r1", "r2"}, 3)
	h.publish(before...)
	var got webhooks.Endpoint
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		if got, err = h.endpoints.Get(context.Background(), "app1", e.ID); err != nil {
			return err
		}
		if got.Enabled {
			return errWaiting
		}
		return nil
	})
	if !strings.Contains(got.PausedReason, "paused automatically") || !strings.Contains(got.PausedReason, "HTTP 503: maintenance") || got.PausedAtMs == 0 {
		t.Errorf("paused: reason %q at %d, want the failure named", got.PausedReason, got.PausedAtMs)
	}
	during := roomEvents("app1", []string{"r1", "r2"}, 3)
	h.publish(during...)
	all := idsByRoom(append(before, during...))
	other.waitAccepted(all, 30*time.Second)
	// Paused, it holds nothing: the durable acks everything.
	waitDrained(t, h)
	if n := countAccepted(down); n != 0 {
		t.Fatalf("the failing endpoint accepted %d events", n)
	}
	failing.Store(false)
	h.setEnabled("app1", e.ID, true)
	down.waitAccepted(all, 30*time.Second)
	down.checkVerified()
	waitCursor(t, h, e.ID, false)
}

// TestSlowEndpointDoesNotHoldOthers: an endpoint failing (not yet long
// enough to be paused) holds at most MaxHeld events of the durable, then
// reads its backlog back from the stream; another app's endpoint keeps
// getting its events; once the first recovers it gets everything, in
// order, and goes live again.
func TestSlowEndpointDoesNotHoldOthers(t *testing.T) {
	h := newHarness(t)
	slow, s := h.newEndpoint("app1")
	fast, _ := h.newEndpoint("app2")
	failing := slow.failWith(answer{status: 500})
	cfg := testConfig()
	cfg.MaxHeld = 5
	cfg.Consumer.FetchBatch = 20 // the endpoints' events together pass 3/4 of it: the fast one may move too
	h.startSink(cfg)
	slowEvents := roomEvents("app1", []string{"r1", "r2", "r3"}, 10)
	fastEvents := roomEvents("app2", []string{"x1", "x2"}, 10)
	h.publish(slowEvents...)
	h.publish(fastEvents...)
	fast.waitAccepted(idsByRoom(fastEvents), 30*time.Second)
	// The slow endpoint's events were acked too: it reads them back.
	waitDrained(t, h)
	waitCursor(t, h, s.ID, true)
	if v := testenv.MetricValue(t, h.reg, "voiceroom_webhooks_endpoints", "state", "backlog"); v < 1 {
		t.Errorf("endpoints in backlog mode: %v, want the slow one at least", v)
	}
	failing.Store(false)
	slow.waitAccepted(idsByRoom(slowEvents), 30*time.Second)
	waitCursor(t, h, s.ID, false)
	testenv.Eventually(t, 10*time.Second, func() error {
		if v := testenv.MetricValue(t, h.reg, "voiceroom_webhooks_endpoints", "state", "live"); v != 2 {
			return fmt.Errorf("%v endpoints live", v)
		}
		return nil
	})
}

// TestRestartReadsBacklogFromCursor: a paused endpoint's backlog outlives
// the process: another sink, later, delivers it once the endpoint is
// resumed.
func TestRestartReadsBacklogFromCursor(t *testing.T) {
	h := newHarness(t)
	rc, e := h.newEndpoint("app1")
	h.setEnabled("app1", e.ID, false)
	first := h.newSink("first", testConfig())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	waitServing(t, first)
	envs := roomEvents("app1", []string{"r1", "r2"}, 5)
	h.publish(envs...)
	waitDrained(t, h)
	waitCursor(t, h, e.ID, true)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("a paused endpoint got %d requests", n)
	}
	h.setEnabled("app1", e.ID, true)
	h.startSink(testConfig())
	rc.waitAccepted(idsByRoom(envs), 30*time.Second)
}

// waitDrained waits until the webhooks durable has nothing pending or
// unacked.
func waitDrained(t *testing.T, h *harness) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		info := durableInfo(t, h)
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return fmt.Errorf("%d pending, %d unacked", info.NumPending, info.NumAckPending)
		}
		return nil
	})
}

// waitCursor waits until endpoint id has a stored cursor (set) or none.
func waitCursor(t *testing.T, h *harness, id int64, set bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		var c sql.NullInt64
		if err := h.db.QueryRow(`SELECT cursor_seq FROM webhook_endpoints WHERE endpoint_id = ?`, id).Scan(&c); err != nil {
			return err
		}
		if c.Valid != set {
			return fmt.Errorf("cursor %v, want set %v", c, set)
		}
		return nil
	})
}

// countAccepted is how many events rc accepted.
func countAccepted(rc *receiver) int {
	n := 0
	for _, ids := range rc.accepted() {
		n += len(ids)
	}
	return n
}

// TestPressureKeepsRoomOrder: an endpoint that keeps reaching MaxHeld
// moves to backlog mode again and again while the durable's consumer,
// sharded by room over several workers, hands events over in stream
// order per room only. Every move must start its reader at or below the
// lowest event not handed over yet, or that event comes as a straggler
// after its room's later events read back: each room's events must first
// arrive in order.
func TestPressureKeepsRoomOrder(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	rc.setAnswer(func(request) answer {
		time.Sleep(time.Millisecond) // a receiver a little slower than the burst
		return answer{status: 204}
	})
	cfg := testConfig()
	cfg.MaxHeld = 4
	cfg.Consumer.FetchBatch = 64
	cfg.Consumer.Concurrency = 4
	h.startSink(cfg)
	rooms := make([]string, 16)
	for i := range rooms {
		rooms[i] = fmt.Sprintf("r%02d", i)
	}
	events := roomEvents("app1", rooms, 40)
	h.publish(events...)
	rc.waitFirstInOrder(idsByRoom(events), 60*time.Second)
	rc.checkVerified()
}
