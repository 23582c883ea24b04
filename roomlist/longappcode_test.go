package roomlist_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"voiceroom"
	"voiceroom/internal/testenv"
	"voiceroom/regions"
	"voiceroom/roomevent"
	"voiceroom/roomlist"
	"voiceroom/rooms"
)

// TestLongestAppCode: an app_code of the longest allowed length (32) gives
// room ids of 69 bytes ("<app_code>_<uuid>"). Such a room is created,
// takes commands, is listed and has a valid IM GroupId, against real
// MySQL (the room_id columns are VARCHAR(96) since migration 00008).
func TestLongestAppCode(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MySQL, Redis and JetStream")
	}
	s := newStack(t)
	app := strings.Repeat("a", voiceroom.AppCodeMax)
	if _, err := s.regions.Seed(context.Background(), app, regions.DemoData()); err != nil {
		t.Fatal(err)
	}
	owner, guest := app+":11", app+":12"
	s.user(owner, "long11", "SG")
	s.user(guest, "long12", "SG")

	roomID := s.createRoom(owner, "Long app")
	if want := len(app) + 1 + 36; len(roomID) != want || !strings.HasPrefix(roomID, app+"_") {
		t.Fatalf("room id %q: want %d bytes with the app's prefix", roomID, want)
	}
	rp := "/api/v1/rooms/" + roomID
	s.mustOK("POST", rp+"/join", guest, "", nil)
	var view rooms.View
	s.mustOK("POST", rp+"/mic/up", guest, `{"seat_index":1}`, &view)
	if view.RoomVersion != 3 {
		t.Fatalf("room version %d after create, join and mic up, want 3", view.RoomVersion)
	}
	s.mustOK("GET", rp, guest, "", &view)
	if view.RoomID != roomID {
		t.Fatalf("GET %s answered room %q", rp, view.RoomID)
	}

	group := roomevent.IMGroupID(app, roomID)
	if !roomevent.ValidIMGroupID(group) || len(group) > roomevent.MaxIMGroupIDLen {
		t.Fatalf("IM GroupId %q of room %q is not a valid GroupId", group, roomID)
	}
	var listed []roomlist.Item
	testenv.Eventually(t, 10*time.Second, func() error {
		listed = s.walk(guest, "hot", "", 20)
		for _, it := range listed {
			if it.RoomID == roomID && it.OnlineCount == 1 {
				return nil
			}
		}
		return fmt.Errorf("room %s not listed with one user present: %+v", roomID, listed)
	})
	for _, it := range listed {
		if it.RoomID == roomID && it.IMGroupID != group {
			t.Fatalf("listed IM GroupId %q, want %q", it.IMGroupID, group)
		}
	}

	// The other tables that hold room ids: the command log and the outbox.
	for _, table := range []string{"rooms", "room_snapshots", "room_command_log", "room_outbox", "room_list_entries"} {
		var n int
		q := "SELECT COUNT(*) FROM " + table + " WHERE app_code = ? AND room_id = ?"
		if err := s.db.QueryRow(q, app, roomID).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		if n == 0 && table != "room_snapshots" {
			t.Fatalf("%s holds no row of room %s", table, roomID)
		}
	}
}
