package rooms

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

func TestCreateRoom(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	e.users.regions[1] = 7
	snap := e.create(t, "app1", 1)
	if snap.RoomShortID != "app1-u1" || snap.VisibleRegionID != 7 || snap.OwnerUserID != 1 || snap.HostUserID != 1 ||
		snap.RoomVersion != 1 || snap.SeatCount != 5 || snap.Status != roomevent.StatusActive || snap.CoverURL == "" || snap.IMGroupID != snap.RoomID {
		t.Fatalf("snapshot %+v", snap)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM rooms WHERE app_code = 'app1' AND room_id = ? AND visible_region_id = 7 AND room_short_id = 'app1-u1'", snap.RoomID); n != 1 {
		t.Fatal("rooms row missing")
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = 'RoomCreated' AND status = 'pending'", snap.RoomID); n != 1 {
		t.Fatal("RoomCreated outbox row missing")
	}

	// One active room per owner: the second names the first.
	_, err := e.svc.Execute(ctx, createCmd("app1", 1, Args{Title: "again"}))
	var ae *apperr.Error
	if !apperr.Is(err, apperr.AlreadyExists) || !errorsAs(err, &ae) || ae.Details.(map[string]string)["room_id"] != snap.RoomID {
		t.Fatalf("second create: %v", err)
	}
	// Another app's owner 1 is someone else.
	e.create(t, "app2", 1)

	// The owner changing region later does not move the room.
	e.users.regions[1] = 5
	got, err := e.svc.Get(ctx, "app1", snap.RoomID)
	if err != nil || got.VisibleRegionID != 7 {
		t.Fatalf("get: %+v %v", got, err)
	}

	// No profile: FAILED_PRECONDITION.
	if _, err := e.svc.Execute(ctx, createCmd("app1", 5_000_000, Args{Title: "x"})); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("create without profile: %v", err)
	}
	// Bad input names the field.
	for _, tt := range []struct {
		req   Args
		field string
	}{
		{Args{Title: " "}, "room_name"},
		{Args{Title: string(make([]byte, 65))}, "room_name"},
		{Args{Title: "a", SeatCount: MaxSeatCount + 1}, "seat_count"},
		{Args{Title: "a", SeatCount: -1}, "seat_count"},
		{Args{Title: "a", CoverURL: "javascript:alert(1)"}, "room_avatar"},
		{Args{Title: "a", Mode: "Voice Mode"}, "mode"},
	} {
		if _, err := e.svc.Execute(ctx, createCmd("app1", 2, tt.req)); apperr.FieldOf(err) != tt.field {
			t.Errorf("create %+v: %v, want field %s", tt.req, err, tt.field)
		}
	}

	// Closing lets the owner create again.
	e.mustDo(t, "app1", snap.RoomID, KindCloseRoom, 1, Args{})
	again := e.create(t, "app1", 1)
	if again.RoomID == snap.RoomID {
		t.Fatal("same room id")
	}
	if _, err := e.do(t, "app1", snap.RoomID, KindJoinRoom, 2, Args{}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("join closed room: %v", err)
	}
}

func errorsAs(err error, target **apperr.Error) bool {
	for err != nil {
		if e, ok := err.(*apperr.Error); ok {
			*target = e
			return true
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		err = u.Unwrap()
	}
	return false
}

// TestAcceptedCommandWritesLogAndOutboxTogether checks an accepted command's
// rows: one command-log row and its outbox rows at the room's new version,
// envelopes that decode with the full card, and the fast path told.
func TestAcceptedCommandWritesLogAndOutboxTogether(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	snap := e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 1})
	if snap.RoomVersion != 3 {
		t.Fatalf("version %d", snap.RoomVersion)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ? AND room_version = 3 AND command_type = 'MicUp'", room); n != 1 {
		t.Fatal("command log row missing")
	}
	var raw []byte
	if err := e.db.QueryRow("SELECT envelope FROM room_outbox WHERE room_id = ? AND room_version = 3", room).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Room      roomevent.Card `json:"room"`
		UserID    int64          `json:"user_id"`
		SeatIndex int            `json:"seat_index"`
	}
	env := mustPayload(t, raw, &p)
	if env.EventType != roomevent.RoomMicUp || env.RoomVersion != 3 || p.UserID != 2 || p.SeatIndex != 1 ||
		p.Room.OccupiedSeatCount != 1 || p.Room.OnlineCount != 1 || p.Room.RoomVersion != 3 || p.Room.Title == "" || p.Room.SeatCount != 5 {
		t.Fatalf("envelope %+v payload %+v", env, p)
	}
	msgs := e.fast.all()
	if len(msgs) != 3 || msgs[2].ID != env.EventID || string(msgs[2].Data) != string(raw) {
		t.Fatalf("fast path got %d messages; last %+v", len(msgs), msgs[len(msgs)-1].ID)
	}
}

func TestRejectedCommandPersistsNothing(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	before := rowCounts(t, e.db, room)
	fastBefore := len(e.fast.all())
	for _, c := range []struct {
		kind  Kind
		actor int64
		args  Args
	}{
		{KindMicUp, 3, Args{SeatIndex: 0}},               // not present
		{KindMicUp, 2, Args{SeatIndex: 9}},               // no such seat
		{KindKickUser, 2, Args{TargetUserID: 1}},         // guest kicks owner
		{KindCloseRoom, 2, Args{}},                       // guest closes
		{KindTransferRoomHost, 2, Args{TargetUserID: 9}}, // not the host
	} {
		if _, err := e.do(t, "app1", room, c.kind, c.actor, c.args); err == nil {
			t.Fatalf("%s accepted", c.kind)
		}
	}
	if after := rowCounts(t, e.db, room); after != before || len(e.fast.all()) != fastBefore {
		t.Fatalf("rows %v -> %v", before, after)
	}
	got := e.mustGet(t, "app1", room)
	if got.RoomVersion != 2 {
		t.Fatalf("version moved to %d", got.RoomVersion)
	}
}

// TestMySQLFailureLeavesMemoryUnchanged breaks the outbox table under a
// command: the command fails UNAVAILABLE, nothing of it is written (not even
// its command-log row: one transaction) and the room in memory is as before.
func TestMySQLFailureLeavesMemoryUnchanged(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	before := e.mustGet(t, "app1", room)
	logRows := count(t, e.db, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ?", room)

	if _, err := e.db.Exec("RENAME TABLE room_outbox TO room_outbox_away"); err != nil {
		t.Fatal(err)
	}
	_, err := e.do(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 0})
	if !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("mic up with the outbox gone: %v", err)
	}
	if _, err := e.db.Exec("RENAME TABLE room_outbox_away TO room_outbox"); err != nil {
		t.Fatal(err)
	}
	after := e.mustGet(t, "app1", room)
	if !sameJSON(t, before, after) {
		t.Fatalf("memory changed:\n%+v\n%+v", before, after)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ?", room); n != logRows {
		t.Fatalf("command log has %d rows, had %d: the failed command's row survived", n, logRows)
	}
	// The room works again and takes the next version.
	if snap := e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 0}); snap.RoomVersion != before.RoomVersion+1 {
		t.Fatalf("version %d after %d", snap.RoomVersion, before.RoomVersion)
	}
}

func TestIdempotentReplayByCommandID(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})
	giftTo(t, e, "app1", room, 2, 3, 100)

	send := func() Result {
		t.Helper()
		cmd := &Command{Kind: KindSendGift, AppCode: "app1", RoomID: room, CommandID: "client-key-1", ClientKey: true, Actor: Actor{UserID: 2},
			Args: Args{GiftID: 1, Count: 2, TargetUserID: 3}}
		res, err := e.svc.Execute(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := send()
	rows := rowCounts(t, e.db, room)
	balance := e.mustBalance(t, "app1", 2)
	second := send()
	if !second.Replayed || first.Replayed || !sameJSON(t, first.View, second.View) {
		t.Fatalf("replay: first %v second %v", first.Replayed, second.Replayed)
	}
	// Something else happens; the replay still answers the first result.
	e.mustDo(t, "app1", room, KindMicUp, 3, Args{SeatIndex: 2})
	third := send()
	if !sameJSON(t, first.View, third.View) {
		t.Fatal("later replay answered another snapshot")
	}
	if got := rowCounts(t, e.db, room); got[0] != rows[0]+1 || got[1] != rows[1]+1 || got[2] != rows[2] {
		t.Fatalf("replays wrote rows: %v -> %v", rows, got)
	}
	if b := e.mustBalance(t, "app1", 2); b != balance {
		t.Fatalf("balance %d -> %d: replay debited", balance, b)
	}
	// After the cell is dropped the log still answers.
	e.svc.drop(e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}))
	if fourth := send(); !fourth.Replayed || !sameJSON(t, first.View, fourth.View) {
		t.Fatal("replay after reload differs")
	}
	// A repeated create key finds the first room, not a second one.
	create := func() Result {
		cmd := createCmd("app1", 9, Args{Title: "t"})
		cmd.CommandID, cmd.ClientKey = "create-key", true
		res, err := e.svc.Execute(ctx, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	c1, c2 := create(), create()
	if c1.View.RoomID != c2.View.RoomID || !c2.Replayed {
		t.Fatalf("repeated create: %s vs %s", c1.View.RoomID, c2.View.RoomID)
	}
}

// giftTo creates gift 1 (price, heat 2 per coin... simply heat 5) and
// credits the sender.
func giftTo(tb testing.TB, e *testEnv, app, room string, sender, receiver, coins int64) {
	tb.Helper()
	ctx := context.Background()
	if err := e.svc.UpsertGift(ctx, app, Gift{GiftID: 1, Name: "Rose", Price: 10, Heat: 5, Enabled: true}); err != nil {
		tb.Fatal(err)
	}
	if coins > 0 {
		if _, err := e.svc.Wallet().Credit(ctx, app, sender, coins, fmt.Sprintf("seed-%s-%d", room, sender), "test"); err != nil {
			tb.Fatal(err)
		}
	}
}

func TestGiftDebitsInTheCommandTransaction(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})
	giftTo(t, e, "app1", room, 2, 3, 25)

	gift := func(count int64) (Result, error) {
		return e.svc.Execute(ctx, &Command{Kind: KindSendGift, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: 2},
			Args: Args{GiftID: 1, Count: count, TargetUserID: 3}})
	}
	res, err := gift(2)
	if err != nil || res.View.Heat != 10 || len(res.View.GiftRank) != 1 || res.View.GiftRank[0].Value != 20 {
		t.Fatalf("gift: %+v %v", res.View, err)
	}
	if b := e.mustBalance(t, "app1", 2); b != 5 {
		t.Fatalf("balance %d, want 5", b)
	}
	// The ledger row names the receiver and carries the command's time,
	// the event's occurred_at_ms (package roomranks puts both in the same
	// day and week).
	var sent int64
	for _, m := range e.fast.all() {
		if env := mustPayload(t, m.Data, &struct{}{}); env.EventType == roomevent.RoomGiftSent && env.RoomVersion == res.View.RoomVersion {
			sent = env.OccurredAtMs
		}
	}
	var peer, at int64
	if err := e.db.QueryRow(`SELECT peer_user_id, created_at_ms FROM wallet_ledger WHERE app_code = 'app1' AND room_id = ? AND kind = 'gift'
		ORDER BY created_at_ms DESC LIMIT 1`, room).Scan(&peer, &at); err != nil || peer != 3 || sent == 0 || at != sent {
		t.Fatalf("ledger row: receiver %d at %d (%v), want 3 at the event's %d", peer, at, err, sent)
	}
	rows := rowCounts(t, e.db, room)
	if _, err := gift(1); !apperr.Is(err, apperr.InsufficientBalance) {
		t.Fatalf("gift beyond balance: %v", err)
	}
	if got := rowCounts(t, e.db, room); got != rows {
		t.Fatalf("a refused gift wrote rows: %v -> %v", rows, got)
	}
	snap := e.mustGet(t, "app1", room)
	if snap.Heat != 10 || snap.RoomVersion != res.View.RoomVersion {
		t.Fatalf("a refused gift changed the room: heat %d version %d", snap.Heat, snap.RoomVersion)
	}
	if _, err := e.svc.Execute(ctx, &Command{Kind: KindSendGift, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: 2},
		Args: Args{GiftID: 99, Count: 1, TargetUserID: 3}}); apperr.FieldOf(err) != "gift_id" {
		t.Fatalf("unknown gift: %v", err)
	}
}

// TestConcurrentGiftsNeverOverdraw sends gifts from one wallet in several
// rooms at once: exactly as many as the coins pay for succeed, in any rooms.
func TestConcurrentGiftsNeverOverdraw(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	var roomIDs []string
	for owner := int64(1); owner <= 4; owner++ {
		r := e.create(t, "app1", owner).RoomID
		e.mustDo(t, "app1", r, KindJoinRoom, 50, Args{})
		e.mustDo(t, "app1", r, KindJoinRoom, owner, Args{})
		roomIDs = append(roomIDs, r)
	}
	giftTo(t, e, "app1", roomIDs[0], 50, 1, 1000) // price 10: 100 gifts' worth
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, short := 0, 0
	for i := range 160 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := roomIDs[i%4]
			_, err := e.svc.Execute(ctx, &Command{Kind: KindSendGift, AppCode: "app1", RoomID: r, CommandID: NewCommandID(), Actor: Actor{UserID: 50},
				Args: Args{GiftID: 1, Count: 1, TargetUserID: int64(i%4) + 1}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case apperr.Is(err, apperr.InsufficientBalance):
				short++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	balance := e.mustBalance(t, "app1", 50)
	if ok != 100 || short != 60 || balance != 0 {
		t.Fatalf("%d paid, %d short, balance %d", ok, short, balance)
	}
	var heat int64
	for _, r := range roomIDs {
		s := e.mustGet(t, "app1", r)
		heat += s.Heat
	}
	if heat != 100*5 {
		t.Fatalf("total heat %d, want %d", heat, 500)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM wallet_ledger WHERE kind = 'gift'"); n != 100 {
		t.Fatalf("%d ledger rows", n)
	}
}

// TestConcurrentCommandsOnOneRoomSerialize joins many users at once and
// races them for one seat.
func TestConcurrentCommandsOnOneRoomSerialize(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	const users = 60
	var wg sync.WaitGroup
	for u := int64(100); u < 100+users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.do(t, "app1", room, KindJoinRoom, u, Args{}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	var won sync.Map
	for u := int64(100); u < 100+users; u++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.do(t, "app1", room, KindMicUp, u, Args{SeatIndex: 2}); err == nil {
				won.Store(u, true)
			} else if !apperr.Is(err, apperr.FailedPrecondition) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	winners := 0
	won.Range(func(any, any) bool { winners++; return true })
	snap := e.mustGet(t, "app1", room)
	if winners != 1 || snap.OnlineCount != users || snap.RoomVersion != 1+users+1 {
		t.Fatalf("%d winners, %d online, version %d", winners, snap.OnlineCount, snap.RoomVersion)
	}
	if n := count(t, e.db, "SELECT COUNT(DISTINCT room_version) FROM room_command_log WHERE room_id = ?", room); n != int(snap.RoomVersion) {
		t.Fatalf("%d logged versions for version %d", n, snap.RoomVersion)
	}
}

// TestReloadGivesSameState drops the cell (and, separately, starts a new
// service on the same database as a restart after kill -9 would) and checks
// the recovered room equals the one in memory, with no side effect replayed.
func TestReloadGivesSameState(t *testing.T) {
	e := newTestEnv(t, Config{SnapshotEvery: 4})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	giftTo(t, e, "app1", room, 2, 3, 1000)
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})
	e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 1})
	e.mustDo(t, "app1", room, KindSetSeatLock, 1, Args{SeatIndex: 4, Locked: true})
	if _, err := e.svc.Execute(ctx, &Command{Kind: KindSetRoomPassword, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: 1},
		Password: "secret"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := e.svc.Execute(ctx, &Command{Kind: KindSendGift, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: 2},
			Args: Args{GiftID: 1, Count: 3, TargetUserID: 3}}); err != nil {
			t.Fatal(err)
		}
	}
	e.mustDo(t, "app1", room, KindKickUser, 1, Args{TargetUserID: 3, BanSeconds: 600})
	e.mustDo(t, "app1", room, KindTransferRoomHost, 1, Args{TargetUserID: 2})
	want := e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}).state.Load()
	rows := rowCounts(t, e.db, room)
	balance := e.mustBalance(t, "app1", 2)
	if want.Version != 11 {
		t.Fatalf("version %d", want.Version)
	}

	e.svc.drop(e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}))
	if _, err := e.svc.current(ctx, roomKey{AppCode: "app1", RoomID: room}); err != nil {
		t.Fatal(err)
	}
	if got := e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}).state.Load(); !sameJSON(t, want, got) {
		t.Fatalf("reloaded state differs:\n%+v\n%+v", want, got)
	}

	// A new process on the same database (the old one never closed).
	e2 := newTestEnvOn(t, e.db, Config{SnapshotEvery: 4})
	got, err := e2.svc.current(ctx, roomKey{AppCode: "app1", RoomID: room})
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, want, got) {
		t.Fatalf("recovered state differs:\n%+v\n%+v", want, got)
	}
	if after := rowCounts(t, e.db, room); after != rows {
		t.Fatalf("recovery wrote rows: %v -> %v", rows, after)
	}
	if b := e2.mustBalance(t, "app1", 2); b != balance {
		t.Fatalf("recovery moved coins: %d -> %d", balance, b)
	}
	// The recovered room takes the next version, and the old banned user stays out.
	if snap := e2.mustDo(t, "app1", room, KindMicDown, 2, Args{}); snap.RoomVersion != 12 {
		t.Fatalf("next version %d", snap.RoomVersion)
	}
	if _, err := e2.do(t, "app1", room, KindJoinRoom, 3, Args{}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("banned user joined after recovery: %v", err)
	}
}

// TestSecondWriterIsFenced runs two services on one database, as two
// processes that both believe they own a room: the second to write a
// version fails and reloads instead of forking the room's history.
func TestSecondWriterIsFenced(t *testing.T) {
	a := newTestEnv(t, Config{})
	b := newTestEnvOn(t, a.db, Config{})
	room := a.create(t, "app1", 1).RoomID
	a.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	b.mustDo(t, "app1", room, KindJoinRoom, 3, Args{}) // b loads version 2, writes 3
	if _, err := a.do(t, "app1", room, KindJoinRoom, 4, Args{}); !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("stale writer: %v", err)
	}
	// a reloaded: its next command sees b's write.
	snap := a.mustDo(t, "app1", room, KindJoinRoom, 4, Args{})
	if snap.RoomVersion != 4 || snap.OnlineCount != 3 {
		t.Fatalf("after fencing: version %d online %d", snap.RoomVersion, snap.OnlineCount)
	}
}

func TestStaleSweeperRemovesSilentUsers(t *testing.T) {
	e := newTestEnv(t, Config{PresenceTTL: 30 * time.Second})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})
	e.mustDo(t, "app1", room, KindMicUp, 2, Args{SeatIndex: 0})

	e.clock.Advance(20 * time.Second)
	e.mustDo(t, "app1", room, KindHeartbeat, 3, Args{}) // 3 keeps beating, 2 goes silent
	e.clock.Advance(15 * time.Second)
	e.svc.sweep(ctx)

	snap := e.mustGet(t, "app1", room)
	if snap.OnlineCount != 1 || snap.OnlineUsers[0].UserID != 3 || snap.Seats[0].UserID != 0 {
		t.Fatalf("after sweep: %+v", snap)
	}
	var raw []byte
	if err := e.db.QueryRow("SELECT envelope FROM room_outbox WHERE room_id = ? AND event_type = 'RoomUserLeft'", room).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p roomevent.UserLeft
	mustPayload(t, raw, &p)
	if p.UserID != 2 || p.Reason != roomevent.LeaveReasonStale || p.SeatIndex != 0 {
		t.Fatalf("left event %+v", p)
	}
	// 3 goes silent too.
	e.clock.Advance(31 * time.Second)
	e.svc.sweep(ctx)
	if snap := e.mustGet(t, "app1", room); snap.OnlineCount != 0 {
		t.Fatalf("still online: %+v", snap.OnlineUsers)
	}
	// Idle and empty: evicted at IdleEvict, with a snapshot written.
	e.clock.Advance(e.svc.cfg.IdleEvict)
	e.svc.sweep(ctx)
	if e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}) != nil {
		t.Fatal("idle empty room not evicted")
	}
	if _, ok, err := e.svc.store.storedSnapshot(ctx, "app1", room); err != nil || !ok {
		t.Fatalf("eviction left the stored snapshot behind the log (read error: %v)", err)
	}
}

// TestRestartSweepsUsersWhoLeftWhileDown: users present when the process
// died, who never come back, are swept after one TTL of the new process.
func TestRestartSweepsUsersWhoLeftWhileDown(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})

	e2 := newTestEnvOn(t, e.db, Config{PresenceTTL: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e2.svc.Run(ctx) }()
	// Loaded means the cell holds its state: the cell is in the map before
	// its load finishes, and cancelling then would cancel the load.
	testenv.Eventually(t, 10*time.Second, func() error {
		if c := e2.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}); c == nil || c.state.Load() == nil {
			return errors.New("room with users not loaded at start")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e2.clock.Advance(31 * time.Second)
	e2.svc.sweep(context.Background())
	if snap := e2.mustGet(t, "app1", room); snap.OnlineCount != 0 {
		t.Fatalf("user still present after restart and TTL: %+v", snap.OnlineUsers)
	}
	if n := count(t, e.db, "SELECT online_count FROM rooms WHERE room_id = ?", room); n != 0 {
		t.Fatalf("rooms.online_count = %d", n)
	}
}

func TestPasswordsAndAttemptLimit(t *testing.T) {
	e := newTestEnv(t, Config{PasswordAttempts: 3})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	set := func(actor int64, pw string) error {
		_, err := e.svc.Execute(ctx, &Command{Kind: KindSetRoomPassword, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: actor},
			Password: pw})
		return err
	}
	join := func(user int64, pw string) error {
		_, err := e.svc.Execute(ctx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: Actor{UserID: user},
			Password: pw})
		return err
	}
	if err := set(1, "open sesame"); err != nil {
		t.Fatal(err)
	}
	if err := set(2, "x1234"); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("guest set password: %v", err)
	}
	if err := set(1, "abc"); apperr.FieldOf(err) != "password" {
		t.Fatalf("short password: %v", err)
	}
	// Stored only as a hash: not in the state, snapshot, log or outbox.
	for _, table := range []string{"room_snapshots", "room_command_log", "room_outbox"} {
		if n := count(t, e.db, "SELECT COUNT(*) FROM "+table+" WHERE CAST(room_id AS BINARY) = ? AND "+
			map[string]string{"room_snapshots": "state", "room_command_log": "command", "room_outbox": "envelope"}[table]+" LIKE '%open sesame%'", room); n != 0 {
			t.Fatalf("password in clear in %s", table)
		}
	}
	snap := e.mustGet(t, "app1", room)
	if !snap.Locked {
		t.Fatal("not locked")
	}
	if err := join(2, ""); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("join without password: %v", err)
	}
	if err := join(2, "open sesame"); err != nil {
		t.Fatalf("right password: %v", err)
	}
	for range 3 {
		if err := join(3, "guess"); !apperr.Is(err, apperr.PermissionDenied) {
			t.Fatalf("wrong password: %v", err)
		}
	}
	if err := join(3, "open sesame"); !apperr.Is(err, apperr.RateLimited) {
		t.Fatalf("after 3 wrong passwords: %v", err)
	}
	if err := join(4, "open sesame"); err != nil {
		t.Fatalf("another user is not limited: %v", err)
	}
	e.clock.Advance(time.Minute)
	if err := join(3, "open sesame"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if err := set(1, ""); err != nil {
		t.Fatal(err)
	}
	if snap := e.mustGet(t, "app1", room); snap.Locked {
		t.Fatal("still locked after unlock")
	}
}

func TestChangeVisibleRegionIsAudited(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	change := func(actor Actor, regionID int64, reason string) (Result, error) {
		return e.svc.Execute(ctx, region(&Command{AppCode: "app1", RoomID: room, CommandID: NewCommandID(), Actor: actor}, regionID, reason))
	}
	if _, err := change(Actor{UserID: 1}, 7, "mine"); !apperr.Is(err, apperr.PermissionDenied) {
		t.Fatalf("owner changed region: %v", err)
	}
	if _, err := change(Actor{Admin: true, Operator: "admin:9"}, 8, "x"); apperr.FieldOf(err) != "region_id" {
		t.Fatalf("unknown region: %v", err)
	}
	if _, err := change(Actor{Admin: true, Operator: "admin:9"}, 7, ""); apperr.FieldOf(err) != "reason" {
		t.Fatalf("no reason: %v", err)
	}
	res, err := change(Actor{Admin: true, Operator: "admin:9"}, 7, "BD request #12")
	if err != nil || res.View.VisibleRegionID != 7 {
		t.Fatalf("change: %+v %v", res.View, err)
	}
	if n := count(t, e.db, `SELECT COUNT(*) FROM room_region_audit WHERE app_code = 'app1' AND room_id = ? AND old_region_id = 5
		AND new_region_id = 7 AND operator = 'admin:9' AND reason = 'BD request #12' AND room_version = ?`, room, res.View.RoomVersion); n != 1 {
		t.Fatal("audit row missing")
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM rooms WHERE room_id = ? AND visible_region_id = 7", room); n != 1 {
		t.Fatal("rooms row not moved")
	}
}

func TestOtherAppsRoomIsInvisible(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	if _, err := e.svc.Get(ctx, "app2", room); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("get from app2: %v", err)
	}
	if _, err := e.do(t, "app2", room, KindJoinRoom, 2, Args{}); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("join from app2: %v", err)
	}
	if _, err := e.svc.Get(ctx, "app1", "app1_nope"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("unknown room: %v", err)
	}
	if e.svc.loadedCell(roomKey{AppCode: "app2", RoomID: room}) != nil {
		t.Fatal("a cell was left for a room that does not exist")
	}
}

// A command without an Idempotency-Key stores no result (no client can
// repeat it); a router's retry of it (the same command_id, now looked up)
// is answered with the room's view now, and applies nothing twice.
func TestResultStoredOnlyForIdempotencyKeys(t *testing.T) {
	e := newTestEnv(t, Config{})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID
	keyed := &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: "key-2", ClientKey: true, Actor: Actor{UserID: 2}}
	if _, err := e.svc.Execute(ctx, keyed); err != nil {
		t.Fatal(err)
	}
	plain := &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: "plain-3", Actor: Actor{UserID: 3}}
	if _, err := e.svc.Execute(ctx, plain); err != nil {
		t.Fatal(err)
	}
	stored := func(id string) bool {
		var n int
		if err := e.db.QueryRow("SELECT COUNT(*) FROM room_command_log WHERE room_id = ? AND command_id = ? AND result IS NOT NULL",
			room, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if !stored("key-2") || stored("plain-3") {
		t.Fatalf("result stored: keyed %v, plain %v; want true, false", stored("key-2"), stored("plain-3"))
	}
	e.mustDo(t, "app1", room, KindMicUp, 3, Args{SeatIndex: 1})
	retry := &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: room, CommandID: "plain-3", ClientKey: true, Actor: Actor{UserID: 3}}
	res, err := e.svc.Execute(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Replayed || res.View.RoomVersion != 4 || res.View.OnlineCount != 2 {
		t.Fatalf("retry: replayed %v, version %d, online %d; want true, 4, 2", res.Replayed, res.View.RoomVersion, res.View.OnlineCount)
	}
	// After a reload, too, and nothing was logged twice.
	e.svc.drop(e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}))
	if res, err := e.svc.Execute(ctx, retry); err != nil || !res.Replayed || res.View.RoomVersion != 4 {
		t.Fatalf("retry after reload: %+v, %v", res, err)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ?", room); n != 4 {
		t.Fatalf("%d logged commands, want 4", n)
	}
}

// The rooms row is written when what other queries read of it changes
// (status, region, whether anyone is online) and with snapshots, not by
// every command; a read of an unloaded room still finds its current state.
func TestRoomsRowWrittenOnlyWhenReadColumnsChange(t *testing.T) {
	e := newTestEnv(t, Config{SnapshotEvery: 1000})
	ctx := context.Background()
	room := e.create(t, "app1", 1).RoomID // v1, row written
	row := func() (version int64, online int) {
		t.Helper()
		if err := e.db.QueryRow("SELECT room_version, online_count FROM rooms WHERE room_id = ?", room).Scan(&version, &online); err != nil {
			t.Fatal(err)
		}
		return version, online
	}
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{}) // v2: 0 -> 1 online, written
	if v, n := row(); v != 2 || n != 1 {
		t.Fatalf("after the first join: row v%d online %d, want v2 online 1", v, n)
	}
	e.mustDo(t, "app1", room, KindJoinRoom, 3, Args{})          // v3: still someone online
	e.mustDo(t, "app1", room, KindMicUp, 3, Args{SeatIndex: 1}) // v4
	e.mustDo(t, "app1", room, KindLeaveRoom, 2, Args{})         // v5
	if v, n := row(); v != 2 || n != 1 {
		t.Fatalf("after commands that change no read column: row v%d online %d, want v2 online 1", v, n)
	}
	e.mustDo(t, "app1", room, KindLeaveRoom, 3, Args{}) // v6: 1 -> 0 online, written
	if v, n := row(); v != 6 || n != 0 {
		t.Fatalf("after the last leave: row v%d online %d, want v6 online 0", v, n)
	}
	// An unloaded room's read is current: the snapshot (v1) is behind the
	// log, so it loads rather than answering the stored snapshot.
	e.svc.drop(e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}))
	view, err := e.svc.Get(ctx, "app1", room)
	if err != nil {
		t.Fatal(err)
	}
	if view.RoomVersion != 6 {
		t.Fatalf("read of the unloaded room: v%d, want v6", view.RoomVersion)
	}
}

// With a fast path taking events, a group commit writes its outbox rows in
// flight: 'published' with one room_outbox_inflight row covering exactly
// the messages handed over, which stay pending for a room's load.
func TestGroupCommitWritesOutboxInFlight(t *testing.T) {
	e := newTestEnv(t, Config{})
	e.fast.mu.Lock()
	e.fast.taking = true
	e.fast.mu.Unlock()
	room := e.create(t, "app1", 1).RoomID
	e.mustDo(t, "app1", room, KindJoinRoom, 2, Args{})
	e.fast.mu.Lock()
	groups, msgs := append([]voiceroom.OutboxGroup(nil), e.fast.groups...), append([]bus.Message(nil), e.fast.msgs...)
	e.fast.mu.Unlock()
	if len(groups) != 2 || len(msgs) != 2 {
		t.Fatalf("%d groups, %d messages handed over; want 2 and 2", len(groups), len(msgs))
	}
	for i, g := range groups {
		if !g.InFlight() || g.Rows() != 1 {
			t.Fatalf("group %d: %+v, want one in-flight row", i, g)
		}
		var eventID, status string
		if err := e.db.QueryRow("SELECT event_id, status FROM room_outbox WHERE id = ?", g.FirstID).Scan(&eventID, &status); err != nil {
			t.Fatal(err)
		}
		if eventID != msgs[i].ID || status != voiceroom.OutboxPublished {
			t.Fatalf("row %d: %s %s, want %s written published (in flight)", g.FirstID, eventID, status, msgs[i].ID)
		}
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox_inflight"); n != 2 {
		t.Fatalf("%d in-flight rows, want 2", n)
	}
	id, err := e.svc.store.newestPending(context.Background(), "app1", room, 0)
	if err != nil {
		t.Fatal(err)
	}
	if id != msgs[1].ID {
		t.Fatalf("newest pending %q, want the in-flight %s", id, msgs[1].ID)
	}
	// Loaded anew (another node, or after a restart), the room sets its
	// in-flight rows back to pending and its next events wait behind them.
	e.svc.drop(e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: room}))
	if _, err := e.svc.Get(context.Background(), "app1", room); err != nil {
		t.Fatal(err)
	}
	if n := count(t, e.db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND status = 'pending'", room); n != 2 {
		t.Fatalf("%d of the room's rows pending after its load, want 2", n)
	}
	e.fast.mu.Lock()
	behind := e.fast.behind[roomKey{AppCode: "app1", RoomID: room}]
	e.fast.mu.Unlock()
	if behind != msgs[1].ID {
		t.Fatalf("fast path told the room is behind %q, want %s", behind, msgs[1].ID)
	}
}
