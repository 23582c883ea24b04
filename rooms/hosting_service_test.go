package rooms

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// TestHostsCommandsRecover runs every hosts' command through the pipeline
// against MySQL, then recovers the room four ways (the cell dropped, a new
// process, the creation snapshot with the whole log, an eviction) and
// gets the same state, view and queue each time; requests and invitations
// then lapse on the service's clock.
func TestHostsCommandsRecover(t *testing.T) {
	cfg := Config{SnapshotEvery: 4, MicRequestTTL: 2 * time.Minute}
	e := newTestEnv(t, cfg)
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	key := roomKey{AppCode: "app1", RoomID: room}
	var created []byte
	if err := e.db.QueryRow("SELECT state FROM room_snapshots WHERE room_id = ?", room).Scan(&created); err != nil {
		t.Fatal(err)
	}
	for u := int64(2); u <= 7; u++ {
		e.mustDo(t, "app1", room, KindJoinRoom, u, Args{})
	}
	steps := []struct {
		kind  Kind
		actor int64
		args  Args
	}{
		{KindAddRoomAdmin, 1, Args{TargetUserID: 2}},
		{KindMuteSeat, 2, Args{SeatIndex: 1, Muted: true}},
		{KindMicUp, 3, Args{SeatIndex: 0}},
		{KindSelfMute, 3, Args{Muted: true}},
		{KindSetSeatMode, 1, Args{SeatMode: roomevent.SeatModeApply}},
		{KindRequestMic, 4, Args{SeatIndex: AnySeat}},
		{KindRequestMic, 5, Args{SeatIndex: 2}},
		{KindRequestMic, 6, Args{SeatIndex: AnySeat}},
		{KindApproveMicRequest, 2, Args{TargetUserID: 4, SeatIndex: AnySeat}}, // seat 1, muted
		{KindRejectMicRequest, 1, Args{TargetUserID: 6}},
		{KindRequestMic, 6, Args{SeatIndex: AnySeat}},
		{KindCancelMicRequest, 6, Args{}},
		{KindInviteToMic, 2, Args{TargetUserID: 7, SeatIndex: 4}},
		{KindAcceptMicInvitation, 7, Args{}},
		{KindInviteToMic, 1, Args{TargetUserID: 6, SeatIndex: AnySeat}},
		{KindDeclineMicInvitation, 6, Args{}},
		{KindUpdateRoomInfo, 2, Args{Info: &RoomInfo{Title: new(" Late show "), Notice: new("Be kind"),
			CoverURL: new("https://cdn.example/late.png")}}},
		{KindMuteChat, 2, Args{TargetUserID: 5, MuteSeconds: 600}},
		{KindMuteChat, 1, Args{TargetUserID: 6, MuteSeconds: 600}},
		{KindMuteChat, 1, Args{TargetUserID: 6}},
		{KindChangeMicSeat, 3, Args{SeatIndex: 3}},
		{KindAddRoomAdmin, 1, Args{TargetUserID: 6}},
		{KindRemoveRoomAdmin, 1, Args{TargetUserID: 6}},
		{KindInviteToMic, 2, Args{TargetUserID: 6, SeatIndex: AnySeat}},
	}
	for _, s := range steps {
		e.mustDo(t, "app1", room, s.kind, s.actor, s.args)
	}
	// Bad input is refused before the room and writes nothing.
	rows := rowCounts(t, e.db, room)
	for _, bad := range []struct {
		kind  Kind
		args  Args
		field string
	}{
		{KindMuteChat, Args{MuteSeconds: 60}, "user_id"},
		{KindAddRoomAdmin, Args{}, "user_id"},
		{KindInviteToMic, Args{SeatIndex: AnySeat}, "user_id"},
		{KindMuteChat, Args{TargetUserID: 4, MuteSeconds: -1}, "seconds"},
		{KindRequestMic, Args{SeatIndex: -2}, "seat_index"},
		{KindApproveMicRequest, Args{TargetUserID: 5, SeatIndex: MaxSeatCount}, "seat_index"},
		{KindSetSeatMode, Args{SeatMode: "open"}, "seat_mode"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{}}, "room_name"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{Title: new("  ")}}, "room_name"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{Notice: new(strings.Repeat("é", MaxNotice+1))}}, "notice"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{Description: new("a\x00b")}}, "room_description"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{CoverURL: new("javascript:alert(1)")}}, "room_avatar"},
	} {
		if _, err := e.do(t, "app1", room, bad.kind, 1, bad.args); apperr.FieldOf(err) != bad.field {
			t.Errorf("%s %+v: %v, want field %s", bad.kind, bad.args, err, bad.field)
		}
	}
	if after := rowCounts(t, e.db, room); after != rows {
		t.Fatalf("refused commands wrote rows: %v -> %v", rows, after)
	}

	want := e.mustGet(t, "app1", room)
	if want.Title != "Late show" || want.Notice != "Be kind" || want.SeatMode != roomevent.SeatModeApply ||
		fmt.Sprint(want.AdminUserIDs) != "[2]" || want.MicRequestCount != 1 || len(want.MicInvitations) != 1 || len(want.ChatMutes) != 1 ||
		fmt.Sprint(want.Seats) != "[{0 0 false false false} {1 4 false true false} {2 0 false false false} {3 3 false false true} {4 7 false false false}]" {
		t.Fatalf("view after the commands %+v", want)
	}
	wantQueue, err := e.svc.MicRequests(ctx, "app1", room, Actor{UserID: 2})
	if err != nil || len(wantQueue) != 1 || wantQueue[0].UserID != 5 || wantQueue[0].SeatIndex != 2 {
		t.Fatalf("queue %+v %v", wantQueue, err)
	}
	if _, err := e.svc.MicRequests(ctx, "app1", room, Actor{UserID: 5}); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("a member reads the queue: %v", err)
	}
	wantState := e.svc.loadedCell(key).state.Load()
	same := func(how string, svc *Service) {
		t.Helper()
		got, err := svc.current(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if !sameJSON(t, wantState, got) {
			t.Fatalf("%s: state differs:\n%+v\n%+v", how, got, wantState)
		}
		if v, err := svc.Get(ctx, "app1", room); err != nil || !sameJSON(t, want, v) {
			t.Fatalf("%s: view differs (%v):\n%+v\n%+v", how, err, v, want)
		}
		if q, err := svc.MicRequests(ctx, "app1", room, Actor{UserID: 1}); err != nil || !sameJSON(t, wantQueue, q) {
			t.Fatalf("%s: queue %+v %v", how, q, err)
		}
		if after := rowCounts(t, e.db, room); after != rows {
			t.Fatalf("%s: recovery wrote rows: %v -> %v", how, rows, after)
		}
	}
	e.svc.drop(e.svc.loadedCell(key))
	same("cell dropped (snapshot and log)", e.svc)
	same("new process", newTestEnvOn(t, e.db, cfg).svc)
	if _, err := e.db.Exec("UPDATE room_snapshots SET room_version = 1, state = ? WHERE room_id = ?", created, room); err != nil {
		t.Fatal(err)
	}
	same("creation snapshot and the whole log", newTestEnvOn(t, e.db, cfg).svc)
	e.svc.evict(ctx, e.svc.loadedCell(key))
	if e.svc.loadedCell(key) != nil {
		t.Fatal("not evicted")
	}
	same("evicted", e.svc)

	// Each kind wrote its event once; the room's new name and cover are on
	// the card of the change.
	for _, typ := range []string{roomevent.RoomSeatMuteChanged, roomevent.RoomSelfMuteChanged,
		roomevent.RoomSeatModeChanged, roomevent.RoomMicRequestApproved, roomevent.RoomMicRequestRejected, roomevent.RoomMicRequestCancelled,
		roomevent.RoomMicInvitationAccepted, roomevent.RoomMicInvitationDeclined, roomevent.RoomInfoChanged, roomevent.RoomAdminRemoved} {
		if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = ?", room, typ); n != 1 {
			t.Errorf("%d %s events", n, typ)
		}
	}
	for typ, want := range map[string]int{roomevent.RoomAdminAdded: 2, roomevent.RoomMicRequested: 4, roomevent.RoomMicInvited: 3, roomevent.RoomChatMuted: 3} {
		if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = ?", room, typ); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
	}
	var raw []byte
	if err := e.db.QueryRow("SELECT envelope FROM room_outbox WHERE room_id = ? AND event_type = ?", room, roomevent.RoomInfoChanged).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var info struct {
		roomevent.InfoChanged
		Room roomevent.Card `json:"room"`
	}
	mustPayload(t, raw, &info)
	if info.Title != "Late show" || info.ByUserID != 2 || info.Room.Title != "Late show" || info.Room.CoverURL != "https://cdn.example/late.png" {
		t.Fatalf("RoomInfoChanged %+v", info)
	}

	// On the service's clock: the invitation lapses after a minute, the
	// request after two; each stays in the view until the next change.
	e.clock.Advance(InvitationTTLMs * time.Millisecond)
	if _, err := e.do(t, "app1", room, KindAcceptMicInvitation, 6, Args{}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("lapsed invitation accepted: %v", err)
	}
	if q, _ := e.svc.MicRequests(ctx, "app1", room, Actor{UserID: 2}); len(q) != 1 {
		t.Fatalf("request lapsed early: %+v", q)
	}
	e.clock.Advance(cfg.MicRequestTTL - InvitationTTLMs*time.Millisecond)
	if q, err := e.svc.MicRequests(ctx, "app1", room, Actor{UserID: 2}); err != nil || len(q) != 0 {
		t.Fatalf("lapsed request listed: %+v %v", q, err)
	}
	if _, err := e.do(t, "app1", room, KindApproveMicRequest, 2, Args{TargetUserID: 5, SeatIndex: AnySeat}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("lapsed request approved: %v", err)
	}
	if v := e.mustGet(t, "app1", room); v.MicRequestCount != 1 || len(v.MicInvitations) != 1 {
		t.Fatalf("lapsed entries dropped without a change: %+v", v)
	}
	if v := e.mustDo(t, "app1", room, KindJoinRoom, 8, Args{}); v.MicRequestCount != 0 || len(v.MicInvitations) != 0 || len(v.ChatMutes) != 1 {
		t.Fatalf("after the next change: %+v", v)
	}
}

// TestSnapshotBeforeHostsTools: a room whose snapshot was written before
// seat modes and room admins (no seat_mode, admins, notice, requests,
// invitations, chat mutes or seat mutes in its JSON) reads and recovers as
// a free room without admins, and takes the new commands.
func TestSnapshotBeforeHostsTools(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	v := e.create(t, "app1", 1)
	room := v.RoomID
	old := fmt.Sprintf(`{"app_code":"app1","room_id":%q,"room_short_id":"app1-u1","owner_user_id":1,"host_user_id":1,`+
		`"visible_region_id":5,"status":"active","mode":"voice","title":"Old room","cover_url":"https://cdn.example/old.png",`+
		`"seats":[{},{},{"locked":true},{},{}],"heat":0,"room_version":1,"created_at_ms":%d,"updated_at_ms":%d}`,
		room, v.CreatedAtMs, v.CreatedAtMs)
	if _, err := e.db.Exec("UPDATE room_snapshots SET state = ? WHERE room_id = ? AND room_version = 1", old, room); err != nil {
		t.Fatal(err)
	}
	check := func(how string, v View) {
		t.Helper()
		if v.Title != "Old room" || v.SeatMode != roomevent.SeatModeFree || v.AdminUserIDs == nil || len(v.AdminUserIDs) != 0 ||
			v.MicRequestCount != 0 || v.MicInvitations == nil || v.ChatMutes == nil || v.Notice != "" || !v.Seats[2].Locked {
			t.Fatalf("%s: %+v", how, v)
		}
		for _, seat := range v.Seats {
			if seat.Muted || seat.SelfMuted {
				t.Fatalf("%s: seat %+v", how, seat)
			}
		}
	}
	// Read from the stored snapshot, then loaded into a cell.
	e2 := newTestEnvOn(t, e.db, Config{})
	check("stored snapshot", e2.mustGet(t, "app1", room))
	e2.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	check("loaded", e2.mustGet(t, "app1", room))
	if res, err := e2.do(t, "app1", room, KindSetSeatMode, 1, Args{SeatMode: roomevent.SeatModeFree}); err != nil || res.View.RoomVersion != 2 {
		t.Fatalf("free on a room from before seat modes: version %d, %v", res.View.RoomVersion, err)
	}
	e2.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 1})
	e2.mustDo(t, "app1", room, KindSelfMute, 2, Args{Muted: true})
	e2.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})
	e2.mustDo(t, "app1", room, KindAddRoomAdmin, 1, Args{TargetUserID: 3})
	if _, err := e2.do(t, "app1", room, KindSetSeatMode, 3, Args{SeatMode: roomevent.SeatModeApply}); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("an admin sets the seat mode: %v", err)
	}
	want := e2.mustDo(t, "app1", room, KindMuteSeat, 3, Args{SeatIndex: 1, Muted: true})

	// The old snapshot and the log after it recover the same room.
	e3 := newTestEnvOn(t, e.db, Config{})
	got, err := e3.svc.Get(ctx, "app1", room)
	if err != nil || !sameJSON(t, want, got) {
		t.Fatalf("recovered view differs (%v):\n%+v\n%+v", err, got, want)
	}
}
