package roomcluster_test

import (
	"testing"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// TestRoutedReads: an api router without a rooms node of its own reads a
// room's view and its queue of requests to speak from the room's owner
// node over NATS: the queue in order of arrival to the host's powers, []
// when empty, and the owner's refusals (a plain member, a room admin out
// of the room, an unknown room) with their kinds.
func TestRoutedReads(t *testing.T) {
	api, n, roomID, ctx := routedRoom(t)

	run := func(kind rooms.Kind, user int64, args rooms.Args) rooms.Result {
		t.Helper()
		cmd := &rooms.Command{Kind: kind, AppCode: testApp, RoomID: roomID, CommandID: rooms.NewCommandID(),
			Actor: rooms.Actor{UserID: user}, Args: args}
		res, err := api.Execute(ctx, cmd)
		if err != nil {
			t.Fatalf("%s by %d: %v", kind, user, err)
		}
		if res.Node != n.node.ID() {
			t.Fatalf("%s answered by %q, want the owner node %s", kind, res.Node, n.node.ID())
		}
		return res
	}
	for _, u := range []int64{1, 2, 3, 4} {
		run(rooms.KindJoinRoom, u, rooms.Args{})
	}
	run(rooms.KindAddRoomAdmin, 1, rooms.Args{TargetUserID: 4})

	empty, err := api.MicRequests(ctx, testApp, roomID, rooms.Actor{UserID: 1})
	if err != nil || empty == nil || len(empty) != 0 {
		t.Fatalf("empty queue: %v (nil %v), %v; want []", empty, empty == nil, err)
	}
	run(rooms.KindRequestMic, 3, rooms.Args{SeatIndex: rooms.AnySeat})
	run(rooms.KindRequestMic, 2, rooms.Args{SeatIndex: 4})

	for _, actor := range []rooms.Actor{{UserID: 1}, {UserID: 4}, {Admin: true, Operator: "admin:7"}} {
		reqs, err := api.MicRequests(ctx, testApp, roomID, actor)
		if err != nil {
			t.Fatalf("queue read by %+v: %v", actor, err)
		}
		if len(reqs) != 2 || reqs[0].UserID != 3 || reqs[0].SeatIndex != rooms.AnySeat || reqs[1].UserID != 2 || reqs[1].SeatIndex != 4 ||
			reqs[0].ExpiresAtMs <= reqs[0].RequestedAtMs {
			t.Fatalf("queue read by %+v: %+v, want 3 (any seat) then 2 (seat 4), with expiries", actor, reqs)
		}
	}
	v, err := api.Get(ctx, testApp, roomID)
	if err != nil || v.MicRequestCount != 2 || len(v.AdminUserIDs) != 1 || v.AdminUserIDs[0] != 4 {
		t.Fatalf("routed view: requests %d, admins %v, %v", v.MicRequestCount, v.AdminUserIDs, err)
	}

	if _, err := api.MicRequests(ctx, testApp, roomID, rooms.Actor{UserID: 2}); apperr.CodeOf(err) != apperr.PermissionDenied {
		t.Fatalf("a plain member reads the queue: %v, want PERMISSION_DENIED", err)
	}
	run(rooms.KindLeaveRoom, 4, rooms.Args{})
	if _, err := api.MicRequests(ctx, testApp, roomID, rooms.Actor{UserID: 4}); apperr.CodeOf(err) != apperr.PermissionDenied {
		t.Fatalf("a room admin out of the room reads the queue: %v, want PERMISSION_DENIED", err)
	}
	if _, err := api.MicRequests(ctx, testApp, testApp+"_00000000-0000-0000-0000-000000000000", rooms.Actor{UserID: 1}); apperr.CodeOf(err) != apperr.NotFound {
		t.Fatalf("an unknown room's queue: %v, want NOT_FOUND", err)
	}
}
