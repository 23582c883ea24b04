package rooms

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"voiceroom/apperr"
)

// TestExecuteRefusesWhatNoCallerSends: the kinds only the service issues
// (the presence sweep) and kinds that do not exist are refused, naming
// the field, before anything runs or is counted.
func TestExecuteRefusesWhatNoCallerSends(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	for _, kind := range []Kind{KindSweepStale, "", "DropTable"} {
		res, err := e.svc.Execute(context.Background(), &Command{Kind: kind, AppCode: "app1", RoomID: room, CommandID: NewCommandID(),
			Actor: Actor{Admin: true, Operator: "presence-sweeper"}, Args: Args{UserIDs: []int64{2}}})
		if !apperr.Is(err, apperr.InvalidArgument) || apperr.FieldOf(err) != "kind" {
			t.Fatalf("%q: %+v %v, want INVALID_ARGUMENT naming kind", kind, res, err)
		}
	}
	if v := e.mustGet(t, "app1", room); v.OnlineCount != 1 {
		t.Fatalf("a refused sweep changed the room: %d online", v.OnlineCount)
	}
}

// TestExecuteResolvesInputsItself: what prepare resolves (a join's
// verified hash, a gift's price, a new room's region) is the service's,
// whatever the command came with: a caller who copies the room's hash
// into a join does not get in, one who prices a gift at 0 pays the
// catalog's price.
func TestExecuteResolvesInputsItself(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	e.users.regions[1] = 7
	room := e.create(t, "app1", 1).RoomID
	if _, err := e.svc.Execute(ctx, &Command{Kind: KindSetRoomPassword, AppCode: "app1", RoomID: room, CommandID: NewCommandID(),
		Actor: Actor{UserID: 1}, Password: "open sesame"}); err != nil {
		t.Fatal(err)
	}
	st, err := e.svc.current(ctx, roomKey{AppCode: "app1", RoomID: room})
	if err != nil || st.PasswordHash == "" {
		t.Fatalf("room not locked: %v", err)
	}
	_, err = e.svc.Execute(ctx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: NewCommandID(),
		Actor: Actor{UserID: 2}, Args: Args{PasswordHash: st.PasswordHash, PasswordGiven: true}})
	if !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("join with a copied hash: %v, want PERMISSION_DENIED", err)
	}
	if _, err := e.svc.Execute(ctx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: NewCommandID(),
		Actor: Actor{UserID: 2}, Password: "open sesame"}); err != nil {
		t.Fatalf("join with the password: %v", err)
	}

	// A gift priced and named by its sender costs what the catalog says.
	e.mustDo(t, "app1", room, KindJoinRoom, 1, Args{})
	giftTo(t, e, "app1", room, 2, 1, 100)
	res, err := e.svc.Execute(ctx, &Command{Kind: KindSendGift, AppCode: "app1", RoomID: room, CommandID: NewCommandID(),
		Actor: Actor{UserID: 2}, Args: Args{GiftID: 1, Count: 2, TargetUserID: 1, Price: 0, HeatPer: 1000, GiftName: "free"}})
	if err != nil || res.View.Heat != 10 {
		t.Fatalf("gift: %+v %v", res.View, err)
	}
	if b := e.mustBalance(t, "app1", 2); b != 80 {
		t.Fatalf("sender's balance %d, want 80 (2 × the catalog's 10)", b)
	}

	// A new room's short id and region are its owner's.
	v, err := e.svc.Execute(ctx, createCmd("app1", 4, Args{Title: "mine", RegionID: 99, ShortID: "forged"}))
	if err != nil || v.View.VisibleRegionID != 5 || v.View.RoomShortID != "app1-u4" {
		t.Fatalf("create: %+v %v", v.View, err)
	}
}

// TestCommandLogHoldsTheProjection: the log stores a command's kind,
// actor, clock and arguments, never its password, room or ids; a reason
// sent with a kind that carries none is dropped.
func TestCommandLogHoldsTheProjection(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	for _, cmd := range []*Command{
		{Kind: KindSetRoomPassword, Actor: Actor{UserID: 1}, Password: "open sesame"},
		{Kind: KindJoinRoom, Actor: Actor{UserID: 2}, Password: "open sesame", Args: Args{Reason: "not mine to give"}},
		as(adminCmd(room, "close-1"), KindCloseRoom, " done "),
	} {
		cmd.AppCode, cmd.RoomID = "app1", room
		if cmd.CommandID == "" {
			cmd.CommandID = NewCommandID()
		}
		if _, err := e.svc.Execute(ctx, cmd); err != nil {
			t.Fatalf("%s: %v", cmd.Kind, err)
		}
	}
	rows, err := e.db.QueryContext(ctx, "SELECT command_type, command FROM room_command_log WHERE room_id = ? ORDER BY room_version", room)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var kind string
		var body []byte
		if err := rows.Scan(&kind, &body); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, kind)
		if strings.Contains(string(body), "sesame") {
			t.Errorf("%s logged the password: %s", kind, body)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err != nil {
			t.Fatal(err)
		}
		if keys := slices.Sorted(maps.Keys(fields)); !slices.Equal(keys, []string{"actor", "args", "kind", "now_ms"}) {
			t.Errorf("%s logged %v", kind, keys)
		}
		var args Args
		if err := json.Unmarshal(fields["args"], &args); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"CloseRoom": "done"}[kind]
		if args.Reason != want {
			t.Errorf("%s logged reason %q, want %q", kind, args.Reason, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kinds, []string{"CreateRoom", "SetRoomPassword", "JoinRoom", "CloseRoom"}) {
		t.Fatalf("logged %v", kinds)
	}
}
