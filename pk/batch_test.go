package pk_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/pk"
)

// TestScoreBatch: a batch is scored in one transaction with what one gift
// at a time would count: a gift twice in the batch, or seen before, counts
// once; gifts outside the window, of rooms not at battle or not gifts
// count nothing; an unreadable payload fails alone (permanent); score_seq
// rises by one per gift scored. A gift whose count fails in MySQL (a
// total out of range) fails alone: the batch is retried one gift per
// transaction, and nothing of the failed one is counted.
func TestScoreBatch(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c, d, idle := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3), h.room(t, app, 4), h.room(t, app, 5)
	b1 := h.battle(t, a, b, 1, 2, 60)
	b2 := h.battle(t, c, d, 3, 4, 60)
	at := b1.StartsAtMs + 1
	seenBefore := gift(t, a, 11, 1000, at)
	if err := pk.Score(ctx, h.db, seenBefore); err != nil {
		t.Fatal(err)
	}
	twice := gift(t, b, 12, 30, at)
	bad := gift(t, c, 13, 5, at)
	bad.Payload = []byte("{")
	batch := []bus.Envelope{
		gift(t, a, 11, 100, at), twice, twice, seenBefore, gift(t, b, 14, 7, at), gift(t, b, 12, 3, at),
		gift(t, c, 15, 40, b2.StartsAtMs), gift(t, d, 16, 9, b2.EndsAtMs-1), gift(t, d, 16, 500, b2.EndsAtMs), // at the end: outside
		gift(t, idle, 17, 50, at), bad,
	}
	errs := pk.ScoreBatch(ctx, h.db, batch)
	for i, err := range errs {
		if (err != nil) != (i == len(batch)-1) || (err != nil && !bus.IsPermanent(err)) {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	if errs == nil {
		t.Fatal("the unreadable event did not fail")
	}
	want := func(battle string, room, opp int64, seq int, senders map[string]int64) {
		t.Helper()
		got, err := h.svc.Get(ctx, app, battle)
		if err != nil || got.RoomScore != room || got.OpponentScore != opp {
			t.Fatalf("%s: scores %d:%d, want %d:%d (%v)", battle, got.RoomScore, got.OpponentScore, room, opp, err)
		}
		if n := h.count(t, `SELECT score_seq FROM pk_battles WHERE battle_id = ?`, battle); n != seq {
			t.Fatalf("%s: score_seq %d, want %d", battle, n, seq)
		}
		got2 := senderCoins(t, h, battle)
		if fmt.Sprint(got2) != fmt.Sprint(senders) {
			t.Fatalf("%s: senders %v, want %v", battle, got2, senders)
		}
	}
	want(b1.BattleID, 1100, 40, 5, map[string]int64{a + "/11": 1100, b + "/12": 33, b + "/14": 7})
	want(b2.BattleID, 40, 9, 2, map[string]int64{c + "/15": 40, d + "/16": 9})

	// One gift overflows its side's total: it fails alone, the others count.
	huge := gift(t, a, 18, math.MaxInt64, at)
	errs = pk.ScoreBatch(ctx, h.db, []bus.Envelope{gift(t, b, 12, 1, at), huge, gift(t, c, 15, 2, at)})
	if len(errs) != 3 || errs[0] != nil || errs[1] == nil || errs[2] != nil {
		t.Fatalf("errors %v, want the second alone", errs)
	}
	want(b1.BattleID, 1100, 41, 6, map[string]int64{a + "/11": 1100, b + "/12": 34, b + "/14": 7})
	want(b2.BattleID, 42, 9, 3, map[string]int64{c + "/15": 42, d + "/16": 9})
	if n := h.count(t, `SELECT COUNT(*) FROM pk_seen WHERE event_id = ?`, huge.EventID); n != 0 {
		t.Fatalf("the failed gift is marked seen")
	}
}

// TestTwoScorersOnOneDurable: two scorers share the durable and many gifts
// go to the same battles, each gift published twice (the second under
// another message id, past the stream's de-duplication: a redelivery).
// The totals, every sender's coins, the top senders and score_seq are
// exactly what the gifts add up to, each counted once, and no event fails.
func TestTwoScorersOnOneDurable(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	conn, js := startScorers(t, h, 2, 32)

	const battles, gifts, senders = 3, 600, 7
	var rooms [battles][2]string
	var ids [battles]string
	for i := range battles {
		rooms[i] = [2]string{h.room(t, app, int64(10*i+1)), h.room(t, app, int64(10*i+2))}
		ids[i] = h.battle(t, rooms[i][0], rooms[i][1], int64(10*i+1), int64(10*i+2), 600).BattleID
	}
	at := h.clock.Now().UnixMilli() + 1
	pub := testenv.NewPublisher(t, conn)
	wantScore := map[string]int64{}  // room
	wantSender := map[string]int64{} // room/user
	for g := range gifts {
		room := rooms[g%battles][(g/battles)%2]
		user, value := int64(100+g%senders), int64(1+g%13)
		env := gift(t, room, user, value, at)
		wantScore[room] += value
		wantSender[fmt.Sprintf("%s/%d", room, user)] += value
		if _, err := pub.Publish(ctx, env); err != nil {
			t.Fatal(err)
		}
		if g%2 == 0 {
			msg, err := env.Message()
			if err != nil {
				t.Fatal(err)
			}
			msg.ID += "-again"
			if _, err := pub.PublishMessage(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := gifts + gifts/2
	waitAcked(t, js, uint64(total))
	for i, id := range ids {
		got, err := h.svc.Get(ctx, app, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.RoomScore != wantScore[rooms[i][0]] || got.OpponentScore != wantScore[rooms[i][1]] {
			t.Fatalf("battle %d: scores %d:%d, want %d:%d", i, got.RoomScore, got.OpponentScore, wantScore[rooms[i][0]], wantScore[rooms[i][1]])
		}
		if n := h.count(t, `SELECT score_seq FROM pk_battles WHERE battle_id = ?`, id); n != gifts/battles {
			t.Fatalf("battle %d: score_seq %d, want %d", i, n, gifts/battles)
		}
		for side, top := range [][]pk.Sender{got.RoomTopSenders, got.OpponentTopSenders} {
			if len(top) != pk.TopSenders {
				t.Fatalf("battle %d: top senders %+v", i, top)
			}
			for _, s := range top {
				if w := wantSender[fmt.Sprintf("%s/%d", rooms[i][side], s.UserID)]; s.Coins != w {
					t.Fatalf("battle %d: sender %d has %d, want %d", i, s.UserID, s.Coins, w)
				}
			}
		}
	}
	if got := senderCoins(t, h, ""); fmt.Sprint(got) != fmt.Sprint(wantSender) {
		t.Fatalf("senders %v, want %v", got, wantSender)
	}
	if n := h.count(t, `SELECT COUNT(*) FROM pk_seen`); n != gifts {
		t.Fatalf("%d pk_seen rows, want %d", n, gifts)
	}
}

// senderCoins is battle's pk_senders rows (every battle's when ""), by
// "room/user".
func senderCoins(t *testing.T, h *harness, battle string) map[string]int64 {
	t.Helper()
	rows, err := h.db.Query(`SELECT room_id, user_id, coins FROM pk_senders WHERE ? = '' OR battle_id = ?`, battle, battle)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]int64{}
	for rows.Next() {
		var room string
		var user, coins int64
		if err := rows.Scan(&room, &user, &coins); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s/%d", room, user)] = coins
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}
