package webhooks_test

import (
	"context"
	"testing"
	"time"

	"voiceroom/internal/testenv"
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
	all := idsByRoom(first)
	for room, ids := range idsByRoom(second) {
		all[room] = append(all[room], ids...)
	}
	rc.waitAccepted(all, 30*time.Second)
}
