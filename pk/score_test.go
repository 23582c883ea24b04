package pk_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"voiceroom/bus"
	"voiceroom/pk"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// gift is a RoomGiftSent of room at atMs: sender gave value coins.
func gift(t testing.TB, room string, sender, value, atMs int64) bus.Envelope {
	t.Helper()
	payload, err := json.Marshal(roomevent.GiftSent{SenderUserID: sender, ReceiverUserID: 1, GiftID: 7, GiftName: "rose", Count: 1, Value: value})
	if err != nil {
		t.Fatal(err)
	}
	return bus.Envelope{EventID: uuid.NewString(), AppCode: app, RoomID: room, RoomVersion: 5, EventType: roomevent.RoomGiftSent,
		OccurredAtMs: atMs, Payload: payload}
}

// TestScoreCountsEachGiftOnceInTheWindow: gifts received in either room
// inside [start, end) add their value to that side, once by event id;
// gifts outside the window, in another room or before the battle starts
// count nothing. The clock tells both rooms the absolute totals with a
// sequence number, once per change, and settles with the final scores
// only once the scoring durable has passed the end. GET shows the top 3
// senders of each side.
func TestScoreCountsEachGiftOnceInTheWindow(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3)
	inv, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	score := func(env bus.Envelope) {
		t.Helper()
		if err := pk.Score(ctx, h.db, env); err != nil {
			t.Fatal(err)
		}
	}
	score(gift(t, a, 11, 1000, h.clock.Now().UnixMilli())) // pending: nothing
	battle, err := h.svc.Accept(ctx, app, 2, inv.BattleID)
	if err != nil {
		t.Fatal(err)
	}
	start, end := battle.StartsAtMs, battle.EndsAtMs
	first := gift(t, a, 11, 100, start)
	score(first)
	score(first) // redelivered
	score(gift(t, b, 12, 30, start+10))
	score(gift(t, b, 13, 50, start+20))
	score(gift(t, b, 14, 10, start+30))
	score(gift(t, b, 15, 5, start+40))
	score(gift(t, b, 12, 1, start-1))   // before the start
	score(gift(t, b, 12, 1000, end))    // at the end: outside
	score(gift(t, c, 16, 500, start+1)) // not in the battle
	heat := gift(t, a, 11, 0, start+50)
	heat.EventType = roomevent.RoomHeatChanged
	score(heat)

	got, err := h.svc.Get(ctx, app, inv.BattleID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RoomScore != 100 || got.OpponentScore != 95 {
		t.Fatalf("scores %d:%d, want 100:95", got.RoomScore, got.OpponentScore)
	}
	wantTop := []pk.Sender{{UserID: 13, Coins: 50}, {UserID: 12, Coins: 30}, {UserID: 14, Coins: 10}}
	if len(got.OpponentTopSenders) != 3 || got.OpponentTopSenders[0] != wantTop[0] || got.OpponentTopSenders[1] != wantTop[1] ||
		got.OpponentTopSenders[2] != wantTop[2] || len(got.RoomTopSenders) != 1 || got.RoomTopSenders[0] != (pk.Sender{UserID: 11, Coins: 100}) {
		t.Fatalf("top senders %+v / %+v", got.RoomTopSenders, got.OpponentTopSenders)
	}

	// The clock tells both rooms, once.
	h.round(t)
	h.round(t)
	for _, side := range []struct {
		room         string
		mine, theirs int64
	}{{a, 100, 95}, {b, 95, 100}} {
		v := h.view(t, app, side.room)
		if v.PK == nil || v.PK.MyScore != side.mine || v.PK.OpponentScore != side.theirs || v.PK.Seq != 5 {
			t.Fatalf("view of %s: %+v", side.room, v.PK)
		}
		if n := h.events(t, side.room, roomevent.RoomPKScoreChanged); n != 1 {
			t.Fatalf("%s: %d RoomPKScoreChanged after two rounds, want 1", side.room, n)
		}
	}
	// A stale score (a lower seq) changes nothing.
	if _, err := h.rooms.Execute(ctx, &rooms.Command{Kind: rooms.KindPKScore, AppCode: app, RoomID: a, CommandID: rooms.NewCommandID(),
		Actor: rooms.PKActor, Args: rooms.Args{PK: &rooms.PKArgs{BattleID: inv.BattleID, OpponentRoomID: b, MyScore: 1, Seq: 2}}}); err != nil {
		t.Fatal(err)
	}
	if v := h.view(t, app, a); v.PK.MyScore != 100 {
		t.Fatalf("a stale score applied: %+v", v.PK)
	}

	score(gift(t, b, 12, 10, end-1))
	h.clock.Advance(61 * time.Second)
	h.progress.passed.Store(false) // the durable is behind the end
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, inv.BattleID); got.Status != pk.StatusRunning {
		t.Fatalf("settled before the scorer passed the end: %+v", got)
	}
	if v := h.view(t, app, b); v.PK == nil || v.PK.MyScore != 105 || v.PK.Seq != 6 {
		t.Fatalf("the last score was not told: %+v", v.PK)
	}
	h.progress.passed.Store(true)
	h.round(t)
	got, _ = h.svc.Get(ctx, app, inv.BattleID)
	if got.Status != pk.StatusEnded || got.RoomScore != 100 || got.OpponentScore != 105 || got.WinnerRoomID != b {
		t.Fatalf("settled: %+v", got)
	}
	var settled roomevent.PKResult
	raw := h.count(t, `SELECT COUNT(*) FROM room_outbox WHERE room_id = ?`, roomevent.PKRoomID(inv.BattleID))
	if raw != 1 {
		t.Fatalf("%d PKSettled", raw)
	}
	var envelope []byte
	if err := h.db.QueryRow(`SELECT envelope FROM room_outbox WHERE room_id = ?`, roomevent.PKRoomID(inv.BattleID)).Scan(&envelope); err != nil {
		t.Fatal(err)
	}
	env, err := bus.DecodeEnvelope(envelope)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(env.Payload, &settled); err != nil || settled.OpponentScore != 105 || settled.WinnerRoomID != b {
		t.Fatalf("PKSettled %+v %v", settled, err)
	}
	// A gift scored after the settlement changes nothing.
	score(gift(t, a, 11, 1000, end-2))
	if got, _ := h.svc.Get(ctx, app, inv.BattleID); got.RoomScore != 100 {
		t.Fatalf("scored after the settlement: %+v", got)
	}
}
