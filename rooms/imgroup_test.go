package rooms

import (
	"context"
	"strings"
	"testing"
	"time"
	"voiceroom/roomevent"
)

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
	if len(group) > roomevent.MaxIMGroupIDLen || group == snap.RoomID {
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
