package rooms

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// TestModerationRules covers BanRoom and RestoreRoom, and every other
// command on a banned room.
func TestModerationRules(t *testing.T) {
	banned := func(s *State) {
		s.Online, s.Seats[0].UserID = nil, 0
		s.Status = roomevent.StatusBanned
	}
	closed := func(s *State) { s.Status = roomevent.StatusClosed }
	admin := func(c *Command) *Command { c.Actor = Actor{Admin: true, Operator: "admin:9"}; return c }
	left4 := []string{roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft}

	tests := []struct {
		name    string
		setup   func(*State)
		cmd     *Command
		want    apperr.Code // "" = accepted
		msg     string      // part of the refusal's message
		events  []string
		changed bool
		status  string // the status after, when accepted
	}{
		{name: "ban", cmd: admin(cmd(KindBanRoom, 0, Args{Reason: "spam"})),
			events: append(left4, roomevent.RoomBanned), changed: true, status: roomevent.StatusBanned},
		{name: "ban by the owner", cmd: cmd(KindBanRoom, owner, Args{Reason: "x"}), want: apperr.PermissionDenied},
		{name: "ban a banned room", setup: banned, cmd: admin(cmd(KindBanRoom, 0, Args{Reason: "x"})), status: roomevent.StatusBanned},
		{name: "ban a closed room", setup: closed, cmd: admin(cmd(KindBanRoom, 0, Args{Reason: "x"})), want: apperr.FailedPrecondition, msg: "closed"},
		{name: "restore", setup: banned, cmd: admin(cmd(KindRestoreRoom, 0, Args{Reason: "appeal"})),
			events: []string{roomevent.RoomRestored}, changed: true, status: roomevent.StatusActive},
		{name: "restore by the owner", setup: banned, cmd: cmd(KindRestoreRoom, owner, Args{}), want: apperr.PermissionDenied},
		{name: "restore an active room", cmd: admin(cmd(KindRestoreRoom, 0, Args{Reason: "x"})), status: roomevent.StatusActive},
		{name: "restore a closed room", setup: closed, cmd: admin(cmd(KindRestoreRoom, 0, Args{Reason: "x"})), want: apperr.FailedPrecondition, msg: "closed"},

		// Everything else on a banned room.
		{name: "join", setup: banned, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "owner joins", setup: banned, cmd: cmd(KindJoinRoom, owner, Args{}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "heartbeat", setup: banned, cmd: cmd(KindHeartbeat, alice, Args{}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "mic up", setup: banned, cmd: cmd(KindMicUp, alice, Args{SeatIndex: 1}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "mic down", setup: banned, cmd: cmd(KindMicDown, alice, Args{}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "change seat", setup: banned, cmd: cmd(KindChangeMicSeat, alice, Args{SeatIndex: 1}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "seat lock", setup: banned, cmd: cmd(KindSetSeatLock, owner, Args{SeatIndex: 1, Locked: true}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "seat lock by an admin", setup: banned, cmd: admin(cmd(KindSetSeatLock, 0, Args{SeatIndex: 1, Locked: true})), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "host transfer", setup: banned, cmd: cmd(KindTransferRoomHost, owner, Args{TargetUserID: host}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "gift", setup: banned, cmd: cmd(KindSendGift, bob, Args{TargetUserID: alice, Count: 1, Price: 1}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "password", setup: banned, cmd: cmd(KindSetRoomPassword, owner, Args{PasswordHash: "H"}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "kick with ban", setup: banned, cmd: cmd(KindKickUser, owner, Args{TargetUserID: carol, BanSeconds: 60}), want: apperr.FailedPrecondition, msg: "room is banned"},
		{name: "leave finds nobody", setup: banned, cmd: cmd(KindLeaveRoom, alice, Args{}), status: roomevent.StatusBanned},
		{name: "sweep finds nobody", setup: banned, cmd: cmd(KindSweepStale, 0, Args{UserIDs: []int64{alice}}), status: roomevent.StatusBanned},
		{name: "owner closes", setup: banned, cmd: cmd(KindCloseRoom, owner, Args{}), want: apperr.FailedPrecondition, msg: "only an admin"},
		{name: "admin closes", setup: banned, cmd: admin(cmd(KindCloseRoom, 0, Args{Reason: "gone"})),
			events: []string{roomevent.RoomClosed}, changed: true, status: roomevent.StatusClosed},
		{name: "admin changes region", setup: banned, cmd: admin(cmd(KindChangeRoomVisibleRegion, 0, Args{RegionID: 7, Reason: "x"})),
			events: []string{roomevent.RoomVisibleRegionChanged}, changed: true, status: roomevent.StatusBanned},
		{name: "owner changes region", setup: banned, cmd: cmd(KindChangeRoomVisibleRegion, owner, Args{RegionID: 7}), want: apperr.PermissionDenied},
		{name: "anything on a closed room", setup: closed, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.FailedPrecondition, msg: "room is closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := room()
			if tt.setup != nil {
				tt.setup(s)
			}
			before := s.Clone()
			events, changed, err := apply(s, tt.cmd, limits{maxOnline: testMaxOnline}, false)
			if tt.want != "" {
				if apperr.CodeOf(err) != tt.want || !strings.Contains(errMessage(err), tt.msg) {
					t.Fatalf("err = %v, want %s %q", err, tt.want, tt.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if changed != tt.changed {
				t.Fatalf("changed = %v, want %v", changed, tt.changed)
			}
			var types []string
			for _, e := range events {
				types = append(types, e.Type)
			}
			if strings.Join(types, ",") != strings.Join(tt.events, ",") {
				t.Fatalf("events %v, want %v", types, tt.events)
			}
			if !changed && !sameJSON(t, before, s) {
				t.Fatal("unchanged command changed the state")
			}
			if s.Status != tt.status {
				t.Fatalf("status %s, want %s", s.Status, tt.status)
			}
		})
	}
}

// TestBanEmptiesTheRoom checks what a ban leaves: nobody present, every seat
// free (locks kept), one RoomUserLeft with reason banned per user, and a
// RoomBanned with the operator and reason.
func TestBanEmptiesTheRoom(t *testing.T) {
	s := room()
	c := cmd(KindBanRoom, 0, Args{Reason: "spam"})
	c.Actor = Actor{Admin: true, Operator: "admin:9"}
	events, _, err := apply(s, c, limits{}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Online) != 0 || s.occupiedSeats() != 0 || !s.Seats[3].Locked {
		t.Fatalf("online %v seats %+v", s.Online, s.Seats)
	}
	left := map[int64]string{}
	for _, e := range events[:len(events)-1] {
		l := e.Body.(roomevent.UserLeft)
		left[l.UserID] = l.Reason
	}
	for _, u := range []int64{owner, host, alice, bob} {
		if left[u] != roomevent.LeaveReasonBanned {
			t.Fatalf("user %d left with %q", u, left[u])
		}
	}
	if m := events[len(events)-1].Body.(roomevent.Moderated); m.Reason != "spam" || m.Operator != "admin:9" {
		t.Fatalf("RoomBanned body %+v", m)
	}
}

func errMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// adminCmd is a command of operator admin:9 on room, with Idempotency-Key key.
func adminCmd(room, key string) *Command {
	return &Command{AppCode: "app1", RoomID: room, CommandID: key, ClientKey: true, Actor: Actor{Admin: true, Operator: "admin:9"}}
}

// TestBanAndRestore runs ban and restore through the pipeline against MySQL:
// what they write, idempotency by key, the owner's one room, closing a
// banned room, the audit trail and the counters.
func TestBanAndRestore(t *testing.T) {
	e := newTestEnv(t, Config{})
	// The counters on a registry this test can read.
	reg := prometheus.NewRegistry()
	var err error
	if e.svc.moderation, err = NewModerationCounter(reg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	for _, u := range []int64{1, 2, 3} {
		e.mustDo(t, "app1", room, KindJoinRoom, u, Args{})
	}
	e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 0})
	for _, a := range AuditActions {
		if v, ok := testenv.Metric(t, reg, "voiceroom_rooms_moderation_actions_total", "action", string(a)); !ok || v != 0 {
			t.Fatalf("%s counter starts at %v (exists %v)", a, v, ok)
		}
	}

	if _, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-1"), KindBanRoom, " ")); apperr.FieldOf(err) != "reason" {
		t.Fatalf("ban without reason: %v", err)
	}
	if _, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-1"), KindBanRoom, strings.Repeat("é", 257))); apperr.FieldOf(err) != "reason" {
		t.Fatalf("ban with a long reason: %v", err)
	}
	user := adminCmd(room, "ban-u")
	user.Actor = Actor{UserID: 1}
	if _, err := e.svc.Execute(ctx, as(user, KindBanRoom, "mine")); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("owner bans: %v", err)
	}
	rows := rowCounts(t, e.db, room)
	res, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-1"), KindBanRoom, strings.Repeat("é", 256)))
	if err != nil {
		t.Fatal(err)
	}
	snap := res.View
	if snap.Status != roomevent.StatusBanned || snap.OnlineCount != 0 || snap.Seats[0].UserID != 0 || snap.RoomVersion != 6 {
		t.Fatalf("after ban %+v", snap)
	}
	after := rowCounts(t, e.db, room)
	if after[0] != rows[0]+1 || after[1] != rows[1]+4 {
		t.Fatalf("ban wrote %v -> %v (one log row, three RoomUserLeft and a RoomBanned)", rows, after)
	}
	var raw []byte
	if err := e.db.QueryRow(`SELECT envelope FROM room_outbox WHERE room_id = ? AND event_type = 'RoomBanned'`, room).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Room roomevent.Card `json:"room"`
		roomevent.Moderated
	}
	if mustPayload(t, raw, &p); p.Room.Status != roomevent.StatusBanned || p.Room.RoomID != room || p.Operator != "admin:9" {
		t.Fatalf("RoomBanned payload %+v", p)
	}
	if n := count(t, e.db, `SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = 'RoomUserLeft'
		AND JSON_VALUE(CONVERT(envelope USING utf8mb4), '$.payload.reason') = 'banned'`, room); n != 3 {
		t.Fatalf("%d RoomUserLeft with reason banned", n)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM rooms WHERE room_id = ? AND status = 'banned' AND online_count = 0", room); n != 1 {
		t.Fatal("rooms row not banned")
	}

	// The same key answers the first result and writes nothing.
	again, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-1"), KindBanRoom, "other"))
	if err != nil || !again.Replayed || again.View.RoomVersion != 6 {
		t.Fatalf("repeated ban: %+v %v", again, err)
	}
	if rowCounts(t, e.db, room) != after {
		t.Fatal("repeated ban wrote rows")
	}
	// Another ban without the key changes nothing either.
	if res, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-2"), KindBanRoom, "again")); err != nil || res.View.RoomVersion != 6 {
		t.Fatalf("ban of a banned room: %+v %v", res.View, err)
	}

	if _, err := e.do(t, "app1", room, KindJoinRoom, 4, Args{}); !apperr.Is(err, apperr.FailedPrecondition) || !strings.Contains(err.Error(), "banned") {
		t.Fatalf("join a banned room: %v", err)
	}
	// Still the owner's one room.
	_, err = e.svc.Execute(ctx, createCmd("app1", 1, Args{Title: "another"}))
	var ae *apperr.Error
	if !apperr.Is(err, apperr.AlreadyExists) || !errorsAs(err, &ae) || ae.Details.(map[string]string)["room_id"] != room {
		t.Fatalf("owner of a banned room creates another: %v", err)
	}

	res, err = e.svc.Execute(ctx, as(adminCmd(room, "restore-1"), KindRestoreRoom, "appeal accepted"))
	if err != nil || res.View.Status != roomevent.StatusActive || res.View.RoomVersion != 7 {
		t.Fatalf("restore: %+v %v", res.View, err)
	}
	if again, err := e.svc.Execute(ctx, as(adminCmd(room, "restore-1"), KindRestoreRoom, "appeal accepted")); err != nil || !again.Replayed {
		t.Fatalf("repeated restore: %+v %v", again, err)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = 'RoomRestored'", room); n != 1 {
		t.Fatalf("%d RoomRestored", n)
	}
	e.mustDo(t, "app1", room, KindJoinRoom, 4, Args{})

	// Banned again, the owner cannot close it; an admin can, and that frees the owner.
	if _, err := e.svc.Execute(ctx, as(adminCmd(room, "ban-3"), KindBanRoom, "relapse")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.do(t, "app1", room, KindCloseRoom, 1, Args{}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("owner closes a banned room: %v", err)
	}
	if _, err := e.svc.Execute(ctx, as(adminCmd(room, "close-1"), KindCloseRoom, "")); err != nil {
		t.Fatal(err)
	}
	e.create(t, "app1", 1)

	page, err := e.svc.Audit(ctx, "app1", room, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range page.Items {
		got = append(got, string(it.Action)+":"+it.Reason)
	}
	if strings.Join(got, ",") != "close:,ban:relapse,restore:appeal accepted,ban:"+strings.Repeat("é", 256) || page.NextCursor != "" {
		t.Fatalf("audit %v next %q", got, page.NextCursor)
	}
	ban := page.Items[3]
	if ban.Operator != "admin:9" || ban.RoomVersion != 6 || string(ban.Before) != `{"status":"active","visible_region_id":5,"online_count":3}` ||
		string(ban.After) != `{"status":"banned","visible_region_id":5,"online_count":0}` || ban.CreatedAtMs != e.clock.Now().UnixMilli() {
		t.Fatalf("ban audit %+v before %s after %s", ban, ban.Before, ban.After)
	}
	for action, want := range map[AuditAction]float64{AuditBan: 2, AuditRestore: 1, AuditClose: 1, AuditRegionChange: 0, AuditPin: 0} {
		if v := testenv.MetricValue(t, reg, "voiceroom_rooms_moderation_actions_total", "action", string(action)); v != want {
			t.Fatalf("%s counted %v, want %v", action, v, want)
		}
	}
}

// TestBanRestoreRecovery replays ban and restore from the command log (the
// stored snapshot being older) and checks the same state comes back with no
// row written.
func TestBanRestoreRecovery(t *testing.T) {
	e := newTestEnv(t, Config{SnapshotEvery: 1000})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	var created []byte
	if err := e.db.QueryRow("SELECT state FROM room_snapshots WHERE room_id = ?", room).Scan(&created); err != nil {
		t.Fatal(err)
	}
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 1})
	if _, err := e.svc.Execute(ctx, as(adminCmd(room, "b1"), KindBanRoom, "spam")); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"banned", func() error { return nil }},
		{"restored", func() error {
			_, err := e.svc.Execute(ctx, as(adminCmd(room, "r1"), KindRestoreRoom, "ok"))
			return err
		}},
		{"rejoined", func() error { _, err := e.do(t, "app1", room, KindJoinRoom, 3, Args{}); return err }},
		{"banned again", func() error { _, err := e.svc.Execute(ctx, as(adminCmd(room, "b2"), KindBanRoom, "again")); return err }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		want := e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}).state.Load()
		// Back to the creation snapshot: recovery must replay every command.
		if _, err := e.db.Exec("UPDATE room_snapshots SET room_version = 1, state = ? WHERE room_id = ?", created, room); err != nil {
			t.Fatal(err)
		}
		rows := rowCounts(t, e.db, room)
		audits := count(t, e.db, "SELECT COUNT(*) FROM room_audit WHERE room_id = ?", room)
		e2 := newTestEnvOn(t, e.db, Config{SnapshotEvery: 1000})
		got, err := e2.svc.current(ctx, roomKey{AppCode: "app1", RoomID: room})
		if err != nil {
			t.Fatalf("%s: recover: %v", step.name, err)
		}
		if !sameJSON(t, want, got) {
			t.Fatalf("%s: recovered state differs:\n%+v\n%+v", step.name, want, got)
		}
		if rowCounts(t, e.db, room) != rows || count(t, e.db, "SELECT COUNT(*) FROM room_audit WHERE room_id = ?", room) != audits {
			t.Fatalf("%s: recovery wrote rows", step.name)
		}
	}
}

// TestAuditTrail covers the trail's API for actions outside the room
// commands (pins, hides), paging newest first, and app scoping.
func TestAuditTrail(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	if _, err := e.svc.Execute(ctx, region(adminCmd(room, "region-1"), 7, "BD move")); err != nil {
		t.Fatal(err)
	}
	// Inside a caller's transaction: committed with it, or not at all.
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InsertAudit(ctx, tx, AuditEntry{AppCode: "app1", RoomID: room, Operator: "admin:9", Action: AuditPin,
		Reason: "rolled back", CreatedAtMs: 1}); err != nil {
		t.Fatal(err)
	}
	tx.Rollback()
	for i, a := range []AuditAction{AuditPin, AuditHide, AuditUnhide, AuditUnpin} {
		if _, err := e.svc.RecordAudit(ctx, AuditEntry{AppCode: "app1", RoomID: room, Operator: "admin:9", Action: a, Reason: string(a),
			After: json.RawMessage(`{"pin_id":1}`), CreatedAtMs: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []AuditEntry{
		{AppCode: "app1", RoomID: room, Operator: "admin:9", Action: "promote"},
		{AppCode: "app1", RoomID: room, Action: AuditPin},
		{AppCode: "app1", RoomID: room, Operator: "admin:9", Action: AuditPin, Reason: strings.Repeat("r", 257)},
		{AppCode: "app1", RoomID: room, Operator: "admin:9", Action: AuditPin, Before: json.RawMessage(`{`)},
		{RoomID: room, Operator: "admin:9", Action: AuditPin},
	} {
		if _, err := InsertAudit(ctx, e.db, bad); !apperr.Is(err, apperr.InvalidArgument) {
			t.Fatalf("bad entry %+v: %v", bad, err)
		}
	}

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		page, err := e.svc.Audit(ctx, "app1", room, 2, cursor)
		if err != nil {
			t.Fatal(err)
		}
		if pages > 3 || len(page.Items) > 2 {
			t.Fatalf("paging does not end: page %d %+v", pages, page)
		}
		for _, it := range page.Items {
			got = append(got, string(it.Action))
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if strings.Join(got, ",") != "unpin,unhide,hide,pin,region_change" {
		t.Fatalf("trail %v", got)
	}
	page, err := e.svc.Audit(ctx, "app1", room, 1, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("first audit entry: %+v %v", page, err)
	}
	if string(page.Items[0].After) != `{"pin_id":1}` || page.Items[0].Before != nil {
		t.Fatalf("values %s %s", page.Items[0].Before, page.Items[0].After)
	}
	if _, err := e.svc.Audit(ctx, "app2", room, 0, ""); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("other app: %v", err)
	}
	for _, c := range []struct {
		limit  int
		cursor string
		field  string
	}{{-1, "", "limit"}, {MaxAuditLimit + 1, "", "limit"}, {0, "x", "cursor"}, {0, "-5", "cursor"}} {
		if _, err := e.svc.Audit(ctx, "app1", room, c.limit, c.cursor); apperr.FieldOf(err) != c.field {
			t.Fatalf("limit %d cursor %q: %v", c.limit, c.cursor, err)
		}
	}
}
