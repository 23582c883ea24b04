package webhooks_test

import (
	"testing"
	"time"

	"voiceroom/webhooks"
)

// TestDeliversSignedEventsInOrder: events of several rooms arrive at the
// endpoint, each room's in order, each once, every request signed so the
// README's verify accepts it, with the event ids in a header.
func TestDeliversSignedEventsInOrder(t *testing.T) {
	h := newHarness(t)
	rc := newReceiver(t)
	e := h.create("app1", rc.url())
	rc.setSecrets(e.Secret)
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
