package activity

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// TestGiftMetrics: each gift metric scores its subject, through the
// durable consumer, with the gift and region filters and the window by
// occurred_at_ms; another app's events and cancelled or settled
// activities count nothing.
func TestGiftMetrics(t *testing.T) {
	e := newScoreEnv(t, nil)
	sent := e.activity(Activity{Metric: GiftValueSent})
	received := e.activity(Activity{Metric: GiftValueReceived})
	byRoom := e.activity(Activity{Metric: RoomGiftValue})
	count := e.activity(Activity{Metric: GiftCount})
	roses := e.activity(Activity{Metric: GiftValueSent, GiftIDs: []int64{7}})
	sea := e.activity(Activity{Metric: GiftValueSent, RegionIDs: []int64{11, 12}})
	cancelled := e.activity(Activity{Metric: GiftValueSent})
	settled := e.activity(Activity{Metric: GiftValueSent})
	other := e.activity(Activity{AppCode: "a2", Metric: GiftValueSent})
	if _, err := e.db.Exec(`UPDATE activities SET status = 'cancelled', settle_state = 'cancelled' WHERE activity_id = ?`, cancelled); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Exec(`UPDATE activities SET status = 'settled', settle_state = 'settled' WHERE activity_id = ?`, settled); err != nil {
		t.Fatal(err)
	}
	r1, r2 := e.room("a1", 11, 100), e.room("a1", 13, 200)
	e.start(e.rdb)
	e.publish(
		e.gift(r1, 1, 2, 7, 100, 1, t0+hour),                                      // a rose in SEA
		e.gift(r1, 1, 3, 8, 50, 5, t0+2*hour),                                     // five of another gift in SEA
		e.gift(r2, 2, 1, 7, 30, 3, t0+3*hour),                                     // roses outside SEA
		e.gift(r2, 3, 1, 7, 0, 1, t0+3*hour),                                      // a free gift: counts as a gift, no coins
		e.gift(r1, 1, 2, 7, 1000, 1, t0-1),                                        // before the window
		e.gift(r1, 1, 2, 7, 1000, 1, t0+7*day),                                    // at its end: after it
		e.gift(room{app: "a2", id: "a2_x", region: 11}, 1, 2, 7, 500, 1, t0+hour), // another app
	)
	e.waitScores(count, t0, map[string]int64{"1": 6, "2": 3, "3": 1})
	e.waitScores(sent, t0, map[string]int64{"1": 150, "2": 30})
	e.waitScores(received, t0, map[string]int64{"2": 100, "3": 50, "1": 30})
	e.waitScores(byRoom, t0, map[string]int64{r1.id: 150, r2.id: 30})
	e.waitScores(roses, t0, map[string]int64{"1": 100, "2": 30})
	e.waitScores(sea, t0, map[string]int64{"1": 150})
	e.waitScores(other, t0, map[string]int64{"1": 500})
	e.mustEqualScores(cancelled, t0, map[string]int64{})
	e.mustEqualScores(settled, t0, map[string]int64{})
}

// TestMicSeconds: a RoomMicUp is paired with each event that ends the
// seat (down, lock = down, seat change, leave, kick, sweep, close, ban);
// time before the window and after its end does not count, a session
// open at the end counts up to it (CloseMicSessions), and a mic event
// outside the activity's regions opens nothing.
func TestMicSeconds(t *testing.T) {
	e := newScoreEnv(t, nil)
	start, end := t0+hour, t0+10*hour
	id := e.activity(Activity{Metric: MicSeconds, StartsAtMs: start, EndsAtMs: end})
	onlySEA := e.activity(Activity{Metric: MicSeconds, StartsAtMs: start, EndsAtMs: end, RegionIDs: []int64{11}})
	s := e.newScorer(e.rdb)
	r, r2, elsewhere := e.room("a1", 11, 1), e.room("a1", 11, 1), e.room("a1", 99, 1)
	at := func(m int64) int64 { return start + m*60*sec }
	e.mustScore(s,
		// 1: up 30 min before the start, down 10 min after it: 10 min.
		e.mic(r, roomevent.RoomMicUp, 1, at(-30)), e.mic(r, roomevent.RoomMicDown, 1, at(10)),
		// 2: up, seat change after 5 min, down 7 min later: 12 min.
		e.mic(r, roomevent.RoomMicUp, 2, at(0)),
		e.event(r, roomevent.RoomMicChanged, roomevent.MicChanged{UserID: 2, FromSeatIndex: 1, ToSeatIndex: 2}, at(5)),
		e.mic(r, roomevent.RoomMicDown, 2, at(12)),
		// 3: up, leaves after 20 min (a sweep: reason stale).
		e.mic(r, roomevent.RoomMicUp, 3, at(0)),
		e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: 3, Reason: roomevent.LeaveReasonStale, SeatIndex: 1}, at(20)),
		// 4: up, kicked after 3 min.
		e.mic(r, roomevent.RoomMicUp, 4, at(100)),
		e.event(r, roomevent.RoomUserKicked, roomevent.UserKicked{UserID: 4, ByUserID: 1}, at(103)),
		// 5 and 6 in r2: the room closes after 1 min; 7 in r2 after it
		// is banned (its own session).
		e.mic(r2, roomevent.RoomMicUp, 5, at(0)), e.mic(r2, roomevent.RoomMicUp, 6, at(0)),
		e.event(r2, roomevent.RoomClosed, roomevent.Closed{ByUserID: 1}, at(1)),
		e.mic(r2, roomevent.RoomMicUp, 7, at(2)),
		e.event(r2, roomevent.RoomBanned, roomevent.Moderated{Reason: "x"}, at(4)),
		// 8: up 1 min before the end, down 5 min after it: 1 min.
		e.mic(r, roomevent.RoomMicUp, 8, end-60*sec), e.mic(r, roomevent.RoomMicDown, 8, end+5*60*sec),
		// 9: up 2 min before the end and never down: 2 min at the end.
		e.mic(r, roomevent.RoomMicUp, 9, end-120*sec),
		// 10: on a mic in another region.
		e.mic(elsewhere, roomevent.RoomMicUp, 10, at(0)), e.mic(elsewhere, roomevent.RoomMicDown, 10, at(10)),
		// 11: a down with no up, an up after the end.
		e.mic(r, roomevent.RoomMicDown, 11, at(5)), e.mic(r, roomevent.RoomMicUp, 12, end),
	)
	// A lock takes the speaker down first: RoomMicDown, then the lock.
	e.mustScore(s, e.mic(r, roomevent.RoomMicUp, 13, at(0)), e.mic(r, roomevent.RoomMicDown, 13, at(1)),
		e.event(r, roomevent.RoomSeatLockChanged, roomevent.SeatLockChanged{SeatIndex: 1, Locked: true}, at(1)))
	want := map[string]int64{"1": 600, "2": 720, "3": 1200, "4": 180, "5": 60, "6": 60, "7": 120, "8": 60, "10": 600, "13": 60}
	e.mustEqualScores(id, start, want)
	for _, a := range []int64{id, onlySEA} {
		n, err := CloseMicSessions(context.Background(), e.db, e.rdb, e.cfg, e.get(a))
		if err != nil || n != 1 {
			t.Fatalf("close mic sessions of %d: %d %v, want 1 (user 9)", a, n, err)
		}
	}
	want["9"] = 120
	e.mustEqualScores(id, start, want)
	delete(want, "10")
	e.mustEqualScores(onlySEA, start, want)
	// Again: nothing left open, nothing added.
	if n, err := CloseMicSessions(context.Background(), e.db, e.rdb, e.cfg, e.get(id)); err != nil || n != 0 {
		t.Fatalf("close again: %d %v", n, err)
	}
	want["10"] = 600
	e.mustEqualScores(id, start, want)
}

// TestMicSecondsInAnyOrder: a speaker's seat events scored out of room
// order count as in order. The pattern of a killed scorer: the room's
// later events are scored first, then the batch it held comes back (a
// start and end, then a start whose end was among the later events);
// also a seat change and a leave from a seat scored before their start,
// a listener's leave, and a room's close scored before its seats'
// starts. Redelivered again, nothing changes; a correction down (an end
// scored late, after a later end had closed the seat) lowers the score
// and the board in Redis follows.
func TestMicSecondsInAnyOrder(t *testing.T) {
	e := newScoreEnv(t, nil)
	start, end := t0+hour, t0+10*hour
	id := e.activity(Activity{Metric: MicSeconds, StartsAtMs: start, EndsAtMs: end})
	s := e.newScorer(e.rdb)
	r, r2 := e.room("a1", 11, 1), e.room("a1", 11, 1)
	at := func(m int64) int64 { return start + m*60*sec }
	// 1: up, down (10 min), up, down (5 min); the last down first.
	up1, down1 := e.mic(r, roomevent.RoomMicUp, 1, at(0)), e.mic(r, roomevent.RoomMicDown, 1, at(10))
	up2, down2 := e.mic(r, roomevent.RoomMicUp, 1, at(20)), e.mic(r, roomevent.RoomMicDown, 1, at(25))
	// 2: up, seat change after 3 min, leaves from the seat 4 min later.
	up3 := e.mic(r, roomevent.RoomMicUp, 2, at(0))
	change := e.event(r, roomevent.RoomMicChanged, roomevent.MicChanged{UserID: 2, FromSeatIndex: 1, ToSeatIndex: 2}, at(3))
	left := e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: 2, Reason: roomevent.LeaveReasonLeave, SeatIndex: 2}, at(7))
	// 3: a listener's leave (no seat), then a seat for 2 min.
	listenerLeft := e.event(r, roomevent.RoomUserLeft, roomevent.UserLeft{UserID: 3, Reason: roomevent.LeaveReasonLeave, SeatIndex: -1}, at(1))
	up4, down4 := e.mic(r, roomevent.RoomMicUp, 3, at(30)), e.mic(r, roomevent.RoomMicDown, 3, at(32))
	// 4 and 5 in r2: seats from minute 0 and 1, the room closed at 6.
	up5, up6 := e.mic(r2, roomevent.RoomMicUp, 4, at(0)), e.mic(r2, roomevent.RoomMicUp, 5, at(1))
	closed := e.event(r2, roomevent.RoomClosed, roomevent.Closed{ByUserID: 1}, at(6))
	e.mustScore(s, down2, change, left, listenerLeft, down4, closed)
	e.mustScore(s, up1, down1, up2, up4, up3, up6, up5)
	want := map[string]int64{"1": 900, "2": 420, "3": 120, "4": 360, "5": 300}
	e.mustEqualScores(id, start, want)
	e.mustScore(s, up1, down1, up2, down2, up3, change, left, up4, down4, up5, up6, closed) // redelivered
	e.mustEqualScores(id, start, want)
	if n, err := CloseMicSessions(context.Background(), e.db, e.rdb, e.cfg, e.get(id)); err != nil || n != 0 {
		t.Fatalf("close mic sessions: %d %v, want none open", n, err)
	}
	e.mustEqualScores(id, start, want)

	// 6: up at 40, down at 50 and at 45 (a lock's down, scored late):
	// 10 min, corrected to 5; the board shows 5.
	up7, down7 := e.mic(r, roomevent.RoomMicUp, 6, at(40)), e.mic(r, roomevent.RoomMicDown, 6, at(45))
	down8 := e.mic(r, roomevent.RoomMicDown, 6, at(50))
	e.mustScore(s, up7, down8)
	want["6"] = 600
	e.mustEqualScores(id, start, want)
	e.mustScore(s, down7)
	want["6"] = 300
	e.mustEqualScores(id, start, want)
	if got := testenv.Scalar[int64](t, e.db, `SELECT reached_at_ms FROM activity_scores WHERE activity_id = ? AND subject = '6'`, id); got != at(45) {
		t.Errorf("user 6 reached 300 s at %d, want the seat's end %d", got, at(45))
	}
	// Redis only raises a board: the lowered one is dropped, for the next
	// read to rebuild it from MySQL.
	if n, err := e.rdb.Exists(context.Background(), s.boards.keys(id, start)...).Result(); err != nil || n != 0 {
		t.Errorf("the board after a correction down: %d of its keys in Redis (%v), want dropped", n, err)
	}
}

// TestMicSecondsSplitOverDays: a session across local midnight counts in
// each day of a daily task, in the app's time zone.
func TestMicSecondsSplitOverDays(t *testing.T) {
	e := newScoreEnv(t, map[string]string{"a1": "Asia/Shanghai"})
	// Shanghai days start at 16:00 UTC.
	d1 := time.Date(2026, 3, 1, 16, 0, 0, 0, time.UTC).UnixMilli()
	id := e.activity(Activity{Kind: Task, Metric: MicSeconds, Period: Day, Target: 3600, RewardCoins: 5, StartsAtMs: d1, EndsAtMs: d1 + 7*day})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 0, 1)
	e.mustScore(s, e.mic(r, roomevent.RoomMicUp, 1, d1+day-30*60*sec), e.mic(r, roomevent.RoomMicDown, 1, d1+day+90*60*sec))
	e.mustEqualScores(id, d1, map[string]int64{"1": 1800})
	e.mustEqualScores(id, d1+day, map[string]int64{"1": 5400})
	want := []string{fmt.Sprintf("%d:1:5400:5", d1+day)}
	if got := e.payouts(id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("payouts %v, want %v", got, want)
	}
}

// TestTaskPeriodsAndPayouts: a daily task counts by the event's day in
// the app's time zone (not the time of arrival), writes one payout per
// user and day when the score first reaches the target, never two, and
// progress shows the current day and each reached day's status.
func TestTaskPeriodsAndPayouts(t *testing.T) {
	e := newScoreEnv(t, map[string]string{"a1": "Asia/Shanghai"})
	d1 := time.Date(2026, 3, 1, 16, 0, 0, 0, time.UTC).UnixMilli() // Shanghai 2026-03-02 00:00
	id := e.activity(Activity{Kind: Task, Metric: GiftCount, Period: Day, Target: 3, RewardCoins: 10, StartsAtMs: d1, EndsAtMs: d1 + 7*day})
	week := e.activity(Activity{Kind: Task, Metric: GiftValueSent, Period: Week, Target: 100, RewardCoins: 50, StartsAtMs: d1, EndsAtMs: d1 + 14*day})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 0, 1)
	// User 1: 2 gifts on day 1 (one a second before local midnight),
	// 2 on day 2; user 2: 3 at once on day 1, then 1 more.
	e.setClock(d1 + 3*day) // they arrive days later: the day is the event's
	e.mustScore(s, e.gift(r, 1, 9, 1, 10, 1, d1+hour), e.gift(r, 1, 9, 1, 10, 1, d1+day-sec),
		e.gift(r, 1, 9, 1, 10, 1, d1+day), e.gift(r, 1, 9, 1, 10, 1, d1+day+hour),
		e.gift(r, 2, 9, 1, 90, 3, d1+2*hour), e.gift(r, 2, 9, 1, 30, 1, d1+3*hour))
	e.mustEqualScores(id, d1, map[string]int64{"1": 2, "2": 4})
	e.mustEqualScores(id, d1+day, map[string]int64{"1": 2})
	// User 1 reaches 3 on day 2.
	e.mustScore(s, e.gift(r, 1, 9, 1, 10, 1, d1+day+2*hour))
	want := []string{fmt.Sprintf("%d:2:3:10", d1), fmt.Sprintf("%d:1:3:10", d1+day)}
	if got := e.payouts(id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("payouts %v, want %v", got, want)
	}
	want = []string{fmt.Sprintf("%d:2:120:50", d1)}
	if got := e.payouts(week); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("weekly payouts %v, want %v", got, want)
	}
	// Progress on day 2 (the clock): user 1 reached it, pending; then paid.
	e.setClock(d1 + day + 5*hour)
	b := e.boards(e.rdb)
	p, err := b.Progress(context.Background(), ProgressQuery{AppCode: "a1", UserID: 1, ActivityID: id})
	if err != nil {
		t.Fatal(err)
	}
	if p.Current.PeriodStartMs != d1+day || p.Current.PeriodEndMs != d1+2*day || p.Current.Score != 3 || p.Current.Status != RewardPending ||
		len(p.Reached) != 1 || p.Reached[0].Status != RewardPending || p.Reached[0].RewardCoins != 10 {
		t.Fatalf("progress %+v", p)
	}
	if _, err := e.db.Exec(`UPDATE activity_payouts SET paid_at_ms = 1 WHERE activity_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	if p, err = b.Progress(context.Background(), ProgressQuery{AppCode: "a1", UserID: 1, ActivityID: id}); err != nil || p.Current.Status != RewardPaid {
		t.Fatalf("progress after payment %+v %v", p, err)
	}
	// User 2 on day 2: nothing yet; day 1 reached and paid.
	if p, err = b.Progress(context.Background(), ProgressQuery{AppCode: "a1", UserID: 2, ActivityID: id}); err != nil ||
		p.Current.Score != 0 || p.Current.Status != RewardNone || len(p.Reached) != 1 || p.Reached[0].PeriodStartMs != d1 || p.Reached[0].Status != RewardPaid {
		t.Fatalf("progress of 2 %+v %v", p, err)
	}
}

// TestExactlyOnce: two scorers on one durable, every event published
// twice more under other message ids (a relay's repeat after the
// duplicate window: the same event_id), and a board write that fails
// after the commit (Redis stopped: the event is retried): each event
// counts once per activity, and the board in Redis ends equal to MySQL.
func TestExactlyOnce(t *testing.T) {
	e := newScoreEnv(t, nil)
	sent := e.activity(Activity{Metric: GiftValueSent})
	task := e.activity(Activity{Kind: Task, Metric: GiftCount, Period: Window, Target: 5, RewardCoins: 1})
	red := testenv.RunRedis(t)
	rdb := red.Client()
	e.start(rdb)
	e.start(rdb)
	js := e.conn.JetStream()
	r := e.room("a1", 0, 1)
	want, wantCount := map[string]int64{}, map[string]int64{}
	var envs []bus.Envelope
	for i := range 60 {
		u := int64(i%6 + 1)
		envs = append(envs, e.gift(r, u, 99, 1, int64(i+1), 1, t0+int64(i)*sec))
		want[fmt.Sprint(u)] += int64(i + 1)
		wantCount[fmt.Sprint(u)]++
	}
	e.publish(envs[:30]...)
	red.Stop() // board writes fail: events are retried
	e.publish(envs[30:]...)
	for _, env := range envs {
		republish(t, js, env, "again-1")
	}
	e.waitScores(sent, t0, want)
	e.waitScores(task, t0, wantCount)
	red.Start()
	for _, env := range envs[40:] {
		republish(t, js, env, "again-2")
	}
	if got := len(e.payouts(task)); got != 6 {
		t.Fatalf("%d payouts, want 6", got)
	}
	// The retried events wrote the board once Redis was back: a read
	// after a rebuild and the live writes agree with MySQL.
	b := e.boards(rdb)
	testenv.Eventually(t, 20*time.Second, func() error {
		board, err := b.Board(context.Background(), BoardQuery{AppCode: "a1", UserID: 1, ActivityID: sent, Limit: 10})
		if err != nil {
			return err
		}
		got := map[string]int64{}
		for _, it := range board.Items {
			got[fmt.Sprint(it.UserID)] = it.Score
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("board %v, want %v", got, want)
		}
		return nil
	})
	// Every repeat came and counted nothing: 60 + 20 repeats at least
	// (retries after the failed board writes are duplicates too).
	testenv.Eventually(t, 20*time.Second, func() error {
		if d := e.events(resultDuplicate); d < 80 {
			return fmt.Errorf("%v duplicates counted, want at least 80 (each repeat)", d)
		}
		return nil
	})
	e.mustEqualScores(sent, t0, want)
	e.mustEqualScores(task, t0, wantCount)
}

// republish stores env again under another message id: a repeat the
// stream does not drop.
func republish(tb testing.TB, js jetstream.JetStream, env bus.Envelope, tag string) {
	tb.Helper()
	m, err := env.Message()
	if err != nil {
		tb.Fatal(err)
	}
	msg := nats.NewMsg(m.Subject)
	msg.Data = m.Data
	msg.Header.Set(nats.MsgIdHdr, m.ID+":"+tag)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		tb.Fatal(err)
	}
}

// TestScoreSameEventTwice: Score called again with an event (a replayed
// dead letter, a read back) counts nothing, for gifts and mic sessions.
func TestScoreSameEventTwice(t *testing.T) {
	e := newScoreEnv(t, nil)
	gifts := e.activity(Activity{Metric: GiftValueSent})
	mic := e.activity(Activity{Metric: MicSeconds})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 0, 1)
	g := e.gift(r, 1, 2, 1, 10, 1, t0+hour)
	up, down := e.mic(r, roomevent.RoomMicUp, 1, t0+hour), e.mic(r, roomevent.RoomMicDown, 1, t0+hour+60*sec)
	e.mustScore(s, g, up, down, g, up, down, g)
	e.mustEqualScores(gifts, t0, map[string]int64{"1": 10})
	e.mustEqualScores(mic, t0, map[string]int64{"1": 60})
	var open int
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM activity_mic_open`).Scan(&open); err != nil || open != 0 {
		t.Fatalf("%d sessions open (%v): a repeated RoomMicUp reopened one", open, err)
	}
}

// TestBadPayloadIsPermanent: a gift whose body cannot be read is a
// permanent error (dead-lettered by the consumer), not a retry forever.
func TestBadPayloadIsPermanent(t *testing.T) {
	e := newScoreEnv(t, nil)
	e.activity(Activity{Metric: GiftValueSent})
	s := e.newScorer(nil)
	env := e.gift(e.room("a1", 0, 1), 1, 2, 1, 10, 1, t0+hour)
	env.Payload = []byte(`{"room":{"room_id":1}}`)
	err := s.Score(context.Background(), env)
	if err == nil || !bus.IsPermanent(err) {
		t.Fatalf("score of a bad payload: %v, want a permanent error", err)
	}
}

// TestTwoScorersOnOneDurable: two scorers on one durable, each with
// several workers, score gifts of many rooms to the same few senders and
// receivers at once, for several activities (a task among them). Every
// score is exact, every task reward owed once, and no transaction
// deadlocked: none was run again (1213 retried inside) and no event was
// nakked for a deadlock that outlived the retries.
func TestTwoScorersOnOneDurable(t *testing.T) {
	e := newScoreEnv(t, nil)
	sent := e.activity(Activity{Metric: GiftValueSent})
	received := e.activity(Activity{Metric: GiftValueReceived})
	rooms := e.activity(Activity{Metric: RoomGiftValue})
	count := e.activity(Activity{Metric: GiftCount})
	task := e.activity(Activity{Kind: Task, Metric: GiftValueSent, Period: Day, Target: 300, RewardCoins: 5})
	busM, err := bus.NewMetrics(e.reg)
	if err != nil {
		t.Fatal(err)
	}
	run := scoreRun()
	run.Concurrency, run.FetchBatch = 4, 64
	for range 2 {
		s, err := NewScorer(e.db, e.rdb, e.conn.JetStream(), run, busM, e.cfg, testenv.Logger(t), e.m)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Start(t, s.Run)
		<-s.Running()
	}
	wantSent, wantRecv, wantRoom, wantCount := map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	var rs []room
	for range 24 {
		rs = append(rs, e.room("a1", 0, 1))
	}
	var envs []bus.Envelope
	for i := range 960 {
		r := rs[i%len(rs)]
		from, to, v := int64(i%3+1), int64(i%4+11), int64(i%7+1)
		envs = append(envs, e.gift(r, from, to, 1, v, 1, t0+hour+int64(i)*sec))
		wantSent[fmt.Sprint(from)] += v
		wantRecv[fmt.Sprint(to)] += v
		wantRoom[r.id] += v
		wantCount[fmt.Sprint(from)]++
	}
	// Published from several goroutines: the scorers' batches hold
	// different rooms' gifts to the same subjects at once.
	var wg sync.WaitGroup
	for part := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := part; i < len(envs); i += 4 {
				m, err := envs[i].Message()
				if err != nil {
					t.Error(err)
					return
				}
				msg := nats.NewMsg(m.Subject)
				msg.Data = m.Data
				msg.Header.Set(nats.MsgIdHdr, m.ID)
				if _, err := e.conn.JetStream().PublishMsgAsync(msg); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-e.conn.JetStream().PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publish did not complete")
	}
	e.waitScores(sent, t0, wantSent)
	e.waitScores(received, t0, wantRecv)
	e.waitScores(rooms, t0, wantRoom)
	e.waitScores(count, t0, wantCount)
	e.waitScores(task, t0, wantSent)
	if got := e.payouts(task); len(got) != 3 {
		t.Fatalf("task payouts %v, want one for each of the 3 senders", got)
	}
	if got, want := e.events(resultScored), float64(5*len(envs)); got != want {
		t.Errorf("%v (event, activity) scored, want %v", got, want)
	}
	if n := testenv.MetricValue(t, e.reg, "voiceroom_bus_messages_nakked_total", "consumer", bus.DurableActivity); n != 0 {
		t.Errorf("%v events nakked: a transaction failed", n)
	}
	if n := testenv.MustMetric(t, e.reg, "voiceroom_activity_tx_retries_total"); n != 0 {
		t.Errorf("%v scoring transactions ran again after a deadlock or lock wait timeout", n)
	}
}

// TestCancelStopsAStaleList: a scorer's list read before a cancel
// committed still says the activity is open. An event that occurred
// after the cancel committed (published after it, from a room node whose
// clock is 5 ms behind the scorer's: the list counts as newer than the
// event and is not read again) counts nothing for it: no score, no task
// payout, no seen row. The activity beside it counts the event in the
// same batch.
func TestCancelStopsAStaleList(t *testing.T) {
	e := newScoreEnv(t, nil)
	e.cfg.Refresh = time.Hour // read again only for an event newer than the list
	ctx := context.Background()
	task := e.activity(Activity{Kind: Task, Metric: GiftValueSent, Period: Window, Target: 100, RewardCoins: 5})
	board := e.activity(Activity{Metric: GiftValueSent})
	e.start(e.rdb)
	r := e.room("a1", 11, 100)
	now := e.clock.Now().UnixMilli()
	e.publish(e.gift(r, 1, 9, 7, 10, 1, now-10)) // the list is read at now
	e.waitScores(board, t0, map[string]int64{"1": 10})
	e.mustEqualScores(task, t0, map[string]int64{"1": 10})

	if _, err := NewStore(e.db, e.clock.Now).Cancel(ctx, "a1", task); err != nil {
		t.Fatal(err)
	}
	late := e.gift(r, 1, 9, 7, 100, 1, now-5)
	e.publish(late)
	e.waitScores(board, t0, map[string]int64{"1": 110})
	e.mustEqualScores(task, t0, map[string]int64{"1": 10})
	if got := e.payouts(task); len(got) != 0 {
		t.Errorf("the cancelled task owes %v", got)
	}
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM activity_seen WHERE activity_id = ? AND event_id = ?`, task, late.EventID); n != 0 {
		t.Errorf("the late gift is seen for the cancelled task")
	}
	if got := e.events(resultClosed); got != 1 {
		t.Errorf("%v (event, activity) closed, want 1", got)
	}
}

// TestCancelEndsNoMicSession: settlement read a mic_seconds task open and
// ends its mic sessions at its end, but the cancel committed in between:
// no session is ended, no score or payout written.
func TestCancelEndsNoMicSession(t *testing.T) {
	e := newScoreEnv(t, nil)
	ctx := context.Background()
	start, end := t0+hour, t0+2*hour
	id := e.activity(Activity{Kind: Task, Metric: MicSeconds, Period: Window, Target: 60, RewardCoins: 5, StartsAtMs: start, EndsAtMs: end})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 11, 1)
	e.mustScore(s, e.mic(r, roomevent.RoomMicUp, 1, start+10*sec))
	read := e.get(id) // as settlement read it
	if _, err := NewStore(e.db, e.clock.Now).Cancel(ctx, "a1", id); err != nil {
		t.Fatal(err)
	}
	n, err := CloseMicSessions(ctx, e.db, e.rdb, e.cfg, read)
	if err != nil || n != 0 {
		t.Fatalf("close mic sessions of the cancelled task: %d %v, want 0", n, err)
	}
	e.mustEqualScores(id, start, map[string]int64{})
	if got := e.payouts(id); len(got) != 0 {
		t.Errorf("the cancelled task owes %v", got)
	}
}

// TestRoomEndSeesASeatCommittedMidBatch: a batch's transaction whose
// snapshot was fixed by an earlier plain read ends a room's seats (a
// close); a speaker's seat committed by another scorer after that read
// is ended too, not left open until the speaker's next seat event.
func TestRoomEndSeesASeatCommittedMidBatch(t *testing.T) {
	e := newScoreEnv(t, nil)
	ctx := context.Background()
	start, end := t0+hour, t0+10*hour
	id := e.activity(Activity{Metric: MicSeconds, StartsAtMs: start, EndsAtMs: end})
	s := e.newScorer(e.rdb)
	r := e.room("a1", 11, 1)
	e.mustScore(s, e.mic(r, roomevent.RoomMicUp, 1, start))
	a := e.get(id)

	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The batch's first read (a duplicate's check, say) fixes its snapshot.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_mic_seats WHERE activity_id = ?`, id).Scan(&n); err != nil || n != 1 {
		t.Fatalf("seat rows before: %d %v, want 1", n, err)
	}
	// Another scorer commits speaker 2's seat meanwhile.
	e.mustScore(s, e.mic(r, roomevent.RoomMicUp, 2, start+60*sec))
	// The room closes 10 minutes in, after every seat event of the room.
	var w txWork
	ended, err := s.seatTx(ctx, tx, a, "a1", r.id, 0, seatRow{user: 0, version: 1000, kind: seatEnd, atMs: start + 600*sec}, e.clock.Now().UnixMilli(), &w)
	if err != nil || !ended {
		t.Fatalf("the room's end: %v %v", ended, err)
	}
	if _, err := s.applyTx(ctx, tx, &w, e.clock.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if open := testenv.Scalar[int](t, e.db, `SELECT COUNT(*) FROM activity_mic_open WHERE activity_id = ?`, id); open != 0 {
		t.Errorf("%d sessions left open after the room's end", open)
	}
	e.mustEqualScores(id, start, map[string]int64{"1": 600, "2": 540})
}
