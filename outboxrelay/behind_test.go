package outboxrelay_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// TestBehindAnAlreadyBlockedRoomWaitsForTheNewerEvent: a room already left
// to the relay (blocked on v1) loads again after a group commit whose
// outcome was unknown (v2 committed in flight, never handed to the fast
// path). Behind(v2) must make the room wait for v2, not only for v1:
// otherwise the fast path frees the room once the relay has published v1,
// and publishes v3 while v2 is not in the stream yet (scenario 7's
// "458 after 462").
func TestBehindAnAlreadyBlockedRoomWaitsForTheNewerEvent(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	m := newTestMetrics(t, prometheus.NewRegistry())
	const check = 20 * time.Millisecond
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), m,
		outboxrelay.FastPathConfig{CheckInterval: check})
	if err != nil {
		t.Fatal(err)
	}
	runTaking(t, fp)
	key := voiceroom.RoomKey{AppCode: testApp, RoomID: "room1"}

	// First reload: v1 is pending, the room waits for it.
	v1 := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 1, "gift_sent"))
	fp.Behind(key, v1[0].ID)
	// v2's group commit: COMMIT unanswered (KILL), committed in flight,
	// never handed over. The room loads again and names v2.
	v2, _ := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 2, "gift_sent"))
	fp.Behind(key, v2[0].ID)

	// The relay publishes v1; v2 is in flight (young), so not yet.
	relay := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{InFlightGrace: time.Hour})
	if res := relay.Pass(context.Background()); res.Published != 1 {
		t.Fatalf("relay pass %+v: want v1 published", res)
	}
	// Many checks later the room must still wait for v2.
	time.Sleep(25 * check)
	if n, _ := fp.BlockedRooms(); n != 1 {
		t.Fatalf("%d rooms left to the relay after v1 was published: the room no longer waits for v2", n)
	}

	// v3: must go to the relay behind v2, not out at once.
	v3, g3 := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 3, "gift_sent"))
	fp.Committed(v3, g3, time.Now())
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox_inflight WHERE first_id = ?", g3.FirstID); n != 0 {
			return fmt.Errorf("v3's group not settled yet")
		}
		return nil
	})
	// v2's group expires (its fast path never settles it); the relay
	// publishes v2 and v3.
	if _, err := db.Exec("UPDATE room_outbox_inflight SET created_at_ms = 0"); err != nil {
		t.Fatal(err)
	}
	relay.Pass(context.Background())
	relay.Pass(context.Background())
	if got := roomVersions(t, conn, "room1"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("room1 in the stream: versions %v, want [1 2 3]", got)
	}
}
