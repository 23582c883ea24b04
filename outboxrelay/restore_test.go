package outboxrelay_test

import (
	"context"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// TestPrepareRestored: in a restored database, pending rows stay pending,
// in-flight groups go back to pending with no in-flight row left, the
// published rows committed within the window before the newest row go back
// to pending and older ones stay published; a repeat changes nothing more.
func TestPrepareRestored(t *testing.T) {
	db := testenv.NewDB(t)
	newest := time.Now()
	old := testenv.RoomEnvelopes("app1", "room1", 1, 3)      // published 10 minutes before the newest row
	recent := testenv.RoomEnvelopes("app1", "room1", 4, 2)   // published 1 minute before it
	inFlight := testenv.RoomEnvelopes("app1", "room2", 1, 2) // in flight, 30 s before it
	pending := testenv.RoomEnvelopes("app1", "room1", 6, 1)  // never published, the newest
	if _, err := testenv.InsertOutboxTx(context.Background(), db, newest.Add(-10*time.Minute), old...); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.InsertOutboxTx(context.Background(), db, newest.Add(-time.Minute), recent...); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, db, `UPDATE room_outbox SET status = 'published', published_at_ms = created_at_ms + 5`)
	testenv.InsertOutboxInFlight(t, db, newest.Add(-30*time.Second), inFlight...)
	if _, err := testenv.InsertOutboxTx(context.Background(), db, newest, pending...); err != nil {
		t.Fatal(err)
	}

	rep, err := outboxrelay.PrepareRestored(context.Background(), db, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := outboxrelay.RestoreReport{InFlightRows: 2, Republished: 2, Pending: 5}
	if rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	for _, e := range old {
		if s := testenv.OutboxState(t, db, e.EventID); s.Status != "published" {
			t.Errorf("row of version %d, older than the window: %s", e.RoomVersion, s.Status)
		}
	}
	for _, group := range [][]bus.Envelope{recent, inFlight, pending} {
		for _, e := range group {
			if s := testenv.OutboxState(t, db, e.EventID); s.Status != "pending" || s.PublishedAtMs != 0 {
				t.Errorf("row %s of version %d: %s published at %d, want pending", e.RoomID, e.RoomVersion, s.Status, s.PublishedAtMs)
			}
		}
	}
	if n := testenv.Scalar[int](t, db, `SELECT COUNT(*) FROM room_outbox_inflight`); n != 0 {
		t.Errorf("%d in-flight rows left", n)
	}

	again, err := outboxrelay.PrepareRestored(context.Background(), db, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := (outboxrelay.RestoreReport{Pending: 5}); again != want {
		t.Errorf("repeated: %+v, want %+v", again, want)
	}
	if _, err := outboxrelay.PrepareRestored(context.Background(), db, -time.Second); err == nil {
		t.Error("a negative window was accepted")
	}
}
