package rooms

import (
	"context"
	"testing"
)

// TestLoadLeavesPendingRoomsToTheRelay: a room loaded while events another
// process committed are still pending in the outbox tells the fast path
// the newest of them, so its next events do not overtake them.
func TestLoadLeavesPendingRoomsToTheRelay(t *testing.T) {
	first := newTestEnv(t, Config{})
	v := first.create(t, "app1", 1)
	first.mustDo(t, "app1", v.RoomID, KindJoinRoom, 2, Args{})
	var newest string
	if err := first.db.QueryRow(`SELECT event_id FROM room_outbox WHERE room_id = ? ORDER BY room_version DESC, id DESC LIMIT 1`,
		v.RoomID).Scan(&newest); err != nil {
		t.Fatal(err)
	}

	// Another process takes the room over; nothing was published yet.
	next := newTestEnvOn(t, first.db, Config{})
	if _, err := next.svc.Get(context.Background(), "app1", v.RoomID); err != nil {
		t.Fatal(err)
	}
	next.mustDo(t, "app1", v.RoomID, KindJoinRoom, 3, Args{})
	got := next.fast.behind[RoomKey{AppCode: "app1", RoomID: v.RoomID}]
	if got != newest {
		t.Fatalf("fast path told %q, want the newest pending event %q", got, newest)
	}

	// Once published, a later load tells nothing.
	if _, err := first.db.Exec(`UPDATE room_outbox SET status = 'published' WHERE room_id = ?`, v.RoomID); err != nil {
		t.Fatal(err)
	}
	third := newTestEnvOn(t, first.db, Config{})
	third.mustDo(t, "app1", v.RoomID, KindJoinRoom, 4, Args{})
	if got, ok := third.fast.behind[RoomKey{AppCode: "app1", RoomID: v.RoomID}]; ok {
		t.Fatalf("fast path told %q with nothing pending", got)
	}
}
