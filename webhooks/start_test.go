package webhooks_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// publishSeq stores envs in ROOM_EVENTS, in order, and returns the stream
// sequence of the last.
func (h *harness) publishSeq(envs ...bus.Envelope) uint64 {
	h.t.Helper()
	var seq uint64
	for _, r := range h.pub.PublishEnvelopes(context.Background(), envs) {
		if r.Err != nil {
			h.t.Fatalf("publish: %v", r.Err)
		}
		seq = r.Ack.Sequence
	}
	return seq
}

// waitAcked waits until the webhooks durable has acked every event up to
// seq: its handler has been through them.
func waitAcked(t *testing.T, h *harness, seq uint64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		if floor := durableInfo(t, h).AckFloor.Stream; floor < seq {
			return fmt.Errorf("ack floor %d, want %d", floor, seq)
		}
		return nil
	})
}

// waitStartCleared waits until the sink has made sure of endpoint id's
// start (start_seq NULL), so that no later tenure reads back from it.
func waitStartCleared(t *testing.T, h *harness, id int64) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		var start sql.NullInt64
		if err := h.db.QueryRow(`SELECT start_seq FROM webhook_endpoints WHERE endpoint_id = ?`, id).Scan(&start); err != nil {
			return err
		}
		if start.Valid {
			return fmt.Errorf("start_seq %d still set", start.Int64)
		}
		return nil
	})
}

// TestNewEndpointGetsEventsCommittedAfterCreation: an event stored right
// after Create returned reaches the new endpoint, although the sink's
// handler acks it before the sink reads the new row (its refresh comes a
// second later); an event of the same room stored before the creation
// does not. The start is cleared once made sure of, and the endpoint goes
// live: a later tenure does not read back from it.
func TestNewEndpointGetsEventsCommittedAfterCreation(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig()
	cfg.RefreshInterval = time.Second
	h.startSink(cfg)
	before := testenv.NewEnvelope("app1", "r1", 1, "RoomCreated")
	waitAcked(t, h, h.publishSeq(before))

	rc, e := h.newEndpoint("app1")
	after := []bus.Envelope{testenv.NewEnvelope("app1", "r1", 2, "RoomUserJoined"), testenv.NewEnvelope("app1", "r2", 1, "RoomCreated")}
	h.publishSeq(after...)
	rc.waitAccepted(idsByRoom(after), 30*time.Second) // exactly these: nothing stored before it
	waitStartCleared(t, h, e.ID)
	waitCursor(t, h, e.ID, false)
}

// TestNewEndpointGetsEventsWhicheverProcessDelivers: the process holding
// the delivery lease acks an event stored after Create returned without
// ever reading the new row (its refresh never comes), then stops; the
// next holder, another process, delivers that event.
func TestNewEndpointGetsEventsWhicheverProcessDelivers(t *testing.T) {
	h := newHarness(t)
	slow := testConfig()
	slow.RefreshInterval = time.Minute // the test ends its tenure long before
	a := h.newSink("a", slow)
	actx, stopA := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	waitServing(t, a)

	rc, e := h.newEndpoint("app1")
	ev := testenv.NewEnvelope("app1", "r1", 1, "RoomCreated")
	waitAcked(t, h, h.publishSeq(ev))
	stopA()
	if err := <-aDone; err != nil {
		t.Fatal(err)
	}
	h.startSink(testConfig())
	rc.waitAccepted(idsByRoom([]bus.Envelope{ev}), 30*time.Second)
	waitStartCleared(t, h, e.ID)
}

// TestWidenedEventTypesApplyFromTheAnswer: an endpoint that wanted only
// RoomClosed gets a RoomUserJoined stored right after the PATCH that added
// the type returned, although the sink's handler passed it before reading
// the change.
func TestWidenedEventTypesApplyFromTheAnswer(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig()
	cfg.RefreshInterval = time.Second
	rc, e := h.newEndpoint("app1", "RoomClosed")
	h.startSink(cfg)
	closed := testenv.NewEnvelope("app1", "r1", 1, "RoomClosed")
	h.publish(closed)
	rc.waitGot("r1", closed.EventID, 30*time.Second) // the sink has the endpoint
	waitStartCleared(t, h, e.ID)

	types := []string{"RoomClosed", "RoomUserJoined"}
	if _, err := h.endpoints.Update(context.Background(), "app1", "admin:7", e.ID, webhooks.Patch{EventTypes: &types}); err != nil {
		t.Fatal(err)
	}
	joined := testenv.NewEnvelope("app1", "r2", 1, "RoomUserJoined")
	h.publish(joined)
	rc.waitAccepted(idsByRoom([]bus.Envelope{closed, joined}), 30*time.Second)
	waitStartCleared(t, h, e.ID)

	// Narrowing needs no start: the row keeps none.
	types = []string{"RoomUserJoined"}
	if _, err := h.endpoints.Update(context.Background(), "app1", "admin:7", e.ID, webhooks.Patch{EventTypes: &types}); err != nil {
		t.Fatal(err)
	}
	var start sql.NullInt64
	if err := h.db.QueryRow(`SELECT start_seq FROM webhook_endpoints WHERE endpoint_id = ?`, e.ID).Scan(&start); err != nil || start.Valid {
		t.Errorf("start_seq after narrowing: %v, %v; want NULL", start, err)
	}
}

// TestResumedEndpointGetsEventsCommittedAfterResume: a paused endpoint,
// resumed, gets its backlog and then an event stored right after the
// resume returned, each room's in order.
func TestResumedEndpointGetsEventsCommittedAfterResume(t *testing.T) {
	h := newHarness(t)
	cfg := testConfig()
	cfg.RefreshInterval = time.Second
	rc, e := h.newEndpoint("app1")
	h.startSink(cfg)
	first := testenv.NewEnvelope("app1", "r1", 1, "RoomCreated")
	h.publish(first)
	rc.waitGot("r1", first.EventID, 30*time.Second)

	h.setEnabled("app1", e.ID, false)
	waitCursor(t, h, e.ID, true) // the sink has paused it
	during := testenv.NewEnvelope("app1", "r1", 2, "RoomUserJoined")
	waitAcked(t, h, h.publishSeq(during))
	h.setEnabled("app1", e.ID, true)
	after := testenv.NewEnvelope("app1", "r1", 3, "RoomUserLeft")
	h.publish(after)
	rc.waitAccepted(idsByRoom([]bus.Envelope{first, during, after}), 30*time.Second)
}
