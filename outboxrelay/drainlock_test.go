package outboxrelay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// TestOneRelayDrainsAtATime: of two relays on one database, the first to
// pass drains and the other stands by; when the draining relay's MySQL
// session ends (KILLed here, as when its process dies) the other takes
// over at its next pass, and a relay that stops hands over the same way.
func TestOneRelayDrainsAtATime(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	a := newTestRelay(t, db, testenv.NewPublisher(t, conn), newTestMetrics(t, regA), outboxrelay.Config{})
	b := newTestRelay(t, db, testenv.NewPublisher(t, conn), newTestMetrics(t, regB), outboxrelay.Config{})
	draining := func(reg *prometheus.Registry) float64 {
		return testenv.MustMetric(t, reg, "voiceroom_outbox_relay_draining")
	}
	insert := func(from int64) {
		testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", from, 5)...)
	}

	insert(1)
	if res := a.Pass(context.Background()); res.Published != 5 {
		t.Fatalf("a's pass %+v: want 5 published", res)
	}
	insert(6)
	if res := b.Pass(context.Background()); res.Claimed != 0 {
		t.Fatalf("b's pass %+v while a drains: want nothing claimed", res)
	}
	if da, db := draining(regA), draining(regB); da != 1 || db != 0 {
		t.Fatalf("draining gauges a=%v b=%v, want 1 and 0", da, db)
	}

	session := outboxrelay.DrainLockSession(t, a)
	if session == 0 {
		t.Fatal("no session holds the drain lock")
	}
	if _, err := db.Exec(fmt.Sprintf("KILL %d", session)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if res := b.Pass(context.Background()); res.Published != 5 {
			return fmt.Errorf("b's pass %+v after a's session was killed: want 5 published", res)
		}
		return nil
	})
	insert(11)
	if res := a.Pass(context.Background()); res.Claimed != 0 {
		t.Fatalf("a's pass %+v after b took over: want nothing claimed", res)
	}

	run := runInBackground(t, b.Run) // publishes 11..15, then stops
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n != 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	run.stop(t, 10*time.Second)
	insert(16)
	if res := a.Pass(context.Background()); res.Published != 5 {
		t.Fatalf("a's pass %+v after b stopped: want 5 published", res)
	}
	if got := roomVersions(t, conn, "room1"); len(got) != 20 {
		t.Fatalf("room1 in the stream: %v, want versions 1..20", got)
	}
}
