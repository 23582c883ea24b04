package webhooks_test

import (
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
	"voiceroom/webhooks"
)

// TestDeliversSignedEventsInOrder: events of several rooms arrive at the
// endpoint, each room's in order, each once, every request signed so the
// README's verify accepts it, with the event ids in a header.
func TestDeliversSignedEventsInOrder(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1")
	h.startSink(testConfig())
	envs := roomEvents("app1", []string{"r1", "r2", "r3"}, 10)
	h.publish(envs...)
	rc.waitAccepted(idsByRoom(envs), 30*time.Second)
	rc.checkVerified()
	for _, r := range rc.requests() {
		if got := r.header.Get(webhooks.HeaderEventIDs); got == "" {
			t.Errorf("request %s: no %s", r.id, webhooks.HeaderEventIDs)
		}
	}
}

// TestEventTypesFilter: an endpoint gets only the types it names; another
// app's events never.
func TestEventTypesFilter(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1", "RoomClosed")
	h.startSink(testConfig())
	joined := testenv.NewEnvelope("app1", "r1", 1, "RoomUserJoined")
	closed := testenv.NewEnvelope("app1", "r1", 2, "RoomClosed")
	other := testenv.NewEnvelope("app2", "r1", 1, "RoomClosed")
	h.publish(joined, closed, other)
	rc.waitAccepted(map[string][]string{"r1": {closed.EventID}}, 30*time.Second)
	waitDrained(t, h)
	if got := rc.accepted()["r1"]; len(got) != 1 {
		t.Errorf("accepted %v, want only %s", got, closed.EventID)
	}
}

// TestDeliversActivityEvents: an activity's results (package activity:
// room activity-<id>, no card) reach an endpoint that subscribed to them,
// signed and in order, like any room's events.
func TestDeliversActivityEvents(t *testing.T) {
	h := newHarness(t)
	rc, _ := h.newEndpoint("app1", roomevent.ActivityRewarded, roomevent.ActivitySettled)
	h.startSink(testConfig())
	room := roomevent.ActivityRoomID(7)
	rewarded := testenv.NewEnvelope("app1", room, 1, roomevent.ActivityRewarded)
	settled := testenv.NewEnvelope("app1", room, 2, roomevent.ActivitySettled)
	joined := testenv.NewEnvelope("app1", "r1", 1, roomevent.RoomUserJoined)
	h.publish(rewarded, joined, settled)
	rc.waitAccepted(map[string][]string{room: {rewarded.EventID, settled.EventID}}, 30*time.Second)
	rc.checkVerified()
	waitDrained(t, h)
	if got := rc.accepted()["r1"]; len(got) != 0 {
		t.Errorf("an endpoint of activity events got a room's: %v", got)
	}
}
