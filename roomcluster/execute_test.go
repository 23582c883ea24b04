package roomcluster_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// TestRoutedCommandInputs: a router without a rooms node of its own ships
// each command as it is, its inputs with it (a join's password, a gift,
// an operator's reason), and the owner resolves them; a command without
// a room is refused before it is routed, and a kind only the service
// issues (the presence sweep) is refused by the owner.
func TestRoutedCommandInputs(t *testing.T) {
	api, n, roomID, ctx := routedRoom(t)
	if err := api.UpsertGift(ctx, testApp, rooms.Gift{GiftID: 3, Name: "Rose", Heat: 5, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	run := func(cmd rooms.Command) (rooms.Result, error) {
		cmd.AppCode, cmd.RoomID, cmd.CommandID = testApp, roomID, rooms.NewCommandID()
		return api.Execute(ctx, &cmd)
	}
	if _, err := run(rooms.Command{Kind: rooms.KindSetRoomPassword, Actor: rooms.Actor{UserID: 1}, Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(rooms.Command{Kind: rooms.KindJoinRoom, Actor: rooms.Actor{UserID: 2}, Password: "wrong"}); apperr.CodeOf(err) != apperr.PermissionDenied {
		t.Fatalf("join with a wrong password: %v", err)
	}
	if _, err := run(rooms.Command{Kind: rooms.KindJoinRoom, Actor: rooms.Actor{UserID: 2}, Password: "secret"}); err != nil {
		t.Fatalf("join with the password: %v", err)
	}
	if _, err := run(rooms.Command{Kind: rooms.KindJoinRoom, Actor: rooms.Actor{UserID: 1}}); err != nil {
		t.Fatal(err)
	}
	res, err := run(rooms.Command{Kind: rooms.KindSendGift, Actor: rooms.Actor{UserID: 2}, Args: rooms.Args{GiftID: 3, Count: 2, TargetUserID: 1}})
	if err != nil || res.View.Heat != 10 || res.Node != n.node.ID() {
		t.Fatalf("gift: heat %d by %q, %v", res.View.Heat, res.Node, err)
	}
	res, err = run(rooms.Command{Kind: rooms.KindBanRoom, Actor: rooms.Actor{Admin: true, Operator: "admin:1"}, Args: rooms.Args{Reason: " spam "}})
	if err != nil || res.View.Status != "banned" {
		t.Fatalf("ban: %+v %v", res.View.Status, err)
	}
	page, err := api.Audit(ctx, testApp, roomID, 1, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].Reason != "spam" {
		t.Fatalf("audit: %+v %v", page, err)
	}

	if _, err := api.Execute(ctx, &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: testApp, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: 9}, Args: rooms.Args{Title: "nowhere"}}); apperr.FieldOf(err) != "room_id" {
		t.Fatalf("a command without a room: %v, want room_id refused", err)
	}
	if _, err := run(rooms.Command{Kind: rooms.KindSweepStale, Actor: rooms.Actor{Admin: true}, Args: rooms.Args{UserIDs: []int64{2}}}); apperr.FieldOf(err) != "kind" {
		t.Fatalf("SweepStale from a router: %v, want kind refused", err)
	}
}

// TestRoutedCommandWithoutView: a command whose caller answers without
// the room's view (NoView: the HTTP edge's leave and heartbeat) comes back
// from a remote owner without it, and one that wants it still has it.
func TestRoutedCommandWithoutView(t *testing.T) {
	api, n, roomID, ctx := routedRoom(t)
	run := func(cmd rooms.Command) (rooms.Result, error) {
		cmd.AppCode, cmd.RoomID, cmd.CommandID = testApp, roomID, rooms.NewCommandID()
		return api.Execute(ctx, &cmd)
	}
	res, err := run(rooms.Command{Kind: rooms.KindJoinRoom, Actor: rooms.Actor{UserID: 2}})
	if err != nil || res.View.RoomID != roomID || res.View.OnlineCount == 0 {
		t.Fatalf("join: view of %q with %d online, %v", res.View.RoomID, res.View.OnlineCount, err)
	}
	res, err = run(rooms.Command{Kind: rooms.KindHeartbeat, Actor: rooms.Actor{UserID: 2}, NoView: true})
	if err != nil || res.Node != n.node.ID() || res.View.RoomID != "" {
		t.Fatalf("heartbeat without view: node %q, view of %q, %v; want no view from %s", res.Node, res.View.RoomID, err, n.node.ID())
	}
	res, err = run(rooms.Command{Kind: rooms.KindLeaveRoom, Actor: rooms.Actor{UserID: 2}, NoView: true})
	if err != nil || res.View.RoomID != "" {
		t.Fatalf("leave without view: view of %q, %v", res.View.RoomID, err)
	}
	v, err := api.Get(ctx, testApp, roomID)
	if err != nil || v.OnlineCount != 0 {
		t.Fatalf("after the leave: %d online, %v", v.OnlineCount, err)
	}
}

// TestRoutedCommandViewJSON: a command whose caller writes the view out
// as JSON (ViewJSON: the HTTP edge) gets it from a remote owner as the
// owner encoded it, undecoded: the same JSON as the room's view read
// after it; a command run in process still answers the view itself.
func TestRoutedCommandViewJSON(t *testing.T) {
	api, n, roomID, ctx := routedRoom(t)
	res, err := api.Execute(ctx, &rooms.Command{Kind: rooms.KindJoinRoom, AppCode: testApp, RoomID: roomID, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: 2}, ViewJSON: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.ViewJSON == nil || res.View.RoomID != "" {
		t.Fatalf("remote join with ViewJSON: %d bytes of JSON, decoded view of %q; want the JSON alone", len(res.ViewJSON), res.View.RoomID)
	}
	v, err := api.Get(ctx, testApp, roomID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var got rooms.View
	if err := json.Unmarshal(res.ViewJSON, &got); err != nil || got.OnlineCount != 1 || !bytes.Equal(res.ViewJSON, want) {
		t.Fatalf("view JSON %s (%v), want %s", res.ViewJSON, err, want)
	}
	local, err := n.svc.Execute(ctx, &rooms.Command{Kind: rooms.KindHeartbeat, AppCode: testApp, RoomID: roomID, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: 2}, ViewJSON: true})
	if err != nil || local.ViewJSON != nil || local.View.RoomID != roomID {
		t.Fatalf("in process: %d bytes of JSON, view of %q, %v; want the view", len(local.ViewJSON), local.View.RoomID, err)
	}
}
