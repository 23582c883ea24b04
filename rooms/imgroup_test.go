package rooms

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestIMGroupID(t *testing.T) {
	app32 := strings.Repeat("a", 32)
	long := app32 + "_0196a3c4-8c55-7d2e-9b1f-3c5a7e9d1b2f"
	for _, tc := range []struct {
		name, app, room string
		same            bool
	}{
		{"short room id is kept", "demo", "demo_0196a3c4-8c55-7d2e-9b1f-3c5a7e9d1b2f", true},
		{"long room id is derived", app32, long, false},
		{"invalid characters are derived", "demo", "demo_a.b", false},
		{"our own prefix is derived", "demo", "vr-abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := IMGroupID(tc.app, tc.room)
			if !ValidIMGroupID(g) || len(g) > MaxIMGroupIDLen {
				t.Fatalf("IMGroupID = %q (%d bytes): not a valid GroupId", g, len(g))
			}
			if (g == tc.room) != tc.same {
				t.Fatalf("IMGroupID = %q, room %q, want same=%v", g, tc.room, tc.same)
			}
			if g != IMGroupID(tc.app, tc.room) {
				t.Fatal("not stable")
			}
		})
	}
	if IMGroupID(app32, long) == IMGroupID(app32, long+"x") || IMGroupID("a", long) == IMGroupID("b", long) {
		t.Fatal("derived ids collide")
	}
}

// TestIMGroupMember: present after JoinRoom, absent after leave, kick,
// sweep, unknown for an unloaded room; a derived GroupId maps back to its
// room. (A 27-character app code: room_id is VARCHAR(64) today.)
func TestIMGroupMember(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MySQL")
	}
	e := newTestEnv(t, Config{PresenceTTL: 30 * time.Second})
	app := strings.Repeat("x", 27)
	snap := e.create(t, app, 1)
	group := snap.IMGroupID
	if len(group) > MaxIMGroupIDLen || group == snap.RoomID {
		t.Fatalf("im_group_id %q for room %q", group, snap.RoomID)
	}
	check := func(user int64, want bool) {
		t.Helper()
		gotApp, found, present := e.svc.IMGroupMember(group, user)
		if !found || gotApp != app || present != want {
			t.Fatalf("IMGroupMember(%d) = %q %v %v, want present=%v", user, gotApp, found, present, want)
		}
	}
	check(2, false)
	e.mustDo(t, app, snap.RoomID, KindJoinRoom, 2, Args{})
	e.mustDo(t, app, snap.RoomID, KindJoinRoom, 3, Args{})
	e.mustDo(t, app, snap.RoomID, KindJoinRoom, 4, Args{})
	check(2, true)
	e.mustDo(t, app, snap.RoomID, KindLeaveRoom, 2, Args{})
	check(2, false)
	e.mustDo(t, app, snap.RoomID, KindKickUser, 1, Args{TargetUserID: 3})
	check(3, false)
	check(4, true)
	e.clock.Advance(31 * time.Second)
	e.svc.sweep(context.Background())
	check(4, false)
	if _, found, _ := e.svc.IMGroupMember("vr-0000000000000000000000000000000000000000", 4); found {
		t.Fatal("unknown group found")
	}
}
