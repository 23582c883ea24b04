package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/docs"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
)

// testDurable is the scoring durable the settlement tests stand in for.
const testDurable = "activitysettletest"

// settleEnv is one test's MySQL, JetStream with a scoring durable, and
// clock (the settlers'; the stream keeps real time).
type settleEnv struct {
	t        *testing.T
	db       *sql.DB
	conn     *bus.Conn
	stream   jetstream.Stream
	progress *bus.DurableProgress
	clock    *testenv.Clock
	reg      *prometheus.Registry
}

func newTestSettleEnv(t *testing.T) *settleEnv {
	t.Helper()
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	ctx := context.Background()
	if err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{}, bus.ConsumerConfig{Durable: testDurable}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	stream, err := conn.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	return &settleEnv{t: t, db: db, conn: conn, stream: stream, progress: bus.NewDurableProgress(db, stream, testDurable, time.Now),
		clock: testenv.NewClock(time.Time{}), reg: prometheus.NewRegistry()}
}

// newSettler returns a settler named owner on e's clock, with a lease of
// 30s and a grace of 30s.
func (e *settleEnv) newSettler(owner string) *Settler {
	e.t.Helper()
	m, err := NewSettleMetrics(e.reg)
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := NewSettler(e.db, nil, e.progress, SettleConfig{Owner: owner}, e.clock.Now, testenv.Logger(e.t), m)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// mustActivity inserts an activity of app "a1" ending at the clock's
// time, started an hour before; kind leaderboard with bands, or task.
func (e *settleEnv) mustActivity(kind Kind, metric Metric, bands []Band) int64 {
	e.t.Helper()
	now := e.clock.Now().UnixMilli()
	var rewards any
	if bands != nil {
		b, err := json.Marshal(bands)
		if err != nil {
			e.t.Fatal(err)
		}
		rewards = string(b)
	}
	res, err := e.db.Exec(`INSERT INTO activities (app_code, name, kind, metric, starts_at_ms, ends_at_ms, rewards, target, period,
		reward_coins, created_at_ms, updated_at_ms) VALUES ('a1', 'Weekend', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		string(kind), string(metric), now-3_600_000, now, rewards, map[bool]int64{true: 5}[kind == Task],
		map[bool]string{true: "window"}[kind == Task], map[bool]int64{true: 10}[kind == Task], now, now)
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *settleEnv) mustScore(id int64, subject string, score, reachedMs int64) {
	e.t.Helper()
	testenv.Exec(e.t, e.db, fmt.Sprintf(`INSERT INTO activity_scores (activity_id, period_start_ms, subject, score, reached_at_ms, updated_at_ms)
		SELECT %d, starts_at_ms, '%s', %d, starts_at_ms + %d, 0 FROM activities WHERE activity_id = %d`, id, subject, score, reachedMs, id))
}

// mustTaskPayout inserts a task reward owed, as the scoring consumer does.
func (e *settleEnv) mustTaskPayout(id, period, user, coins int64) {
	e.t.Helper()
	testenv.Exec(e.t, e.db, fmt.Sprintf(`INSERT INTO activity_payouts (activity_id, reason, period_start_ms, user_id, app_code, subject,
		score, coins, entry_key, created_at_ms) VALUES (%d, 'task', %d, %d, 'a1', '%d', 5, %d, '%s', 0)`,
		id, period, user, user, coins, EntryKey(id, ReasonTask, period, user)))
}

func (e *settleEnv) state(id int64) string {
	e.t.Helper()
	return testenv.Scalar[string](e.t, e.db, `SELECT settle_state FROM activities WHERE activity_id = ?`, id)
}

func (e *settleEnv) balance(user int64) int64 {
	e.t.Helper()
	return testenv.Scalar[int64](e.t, e.db, `SELECT COALESCE(SUM(balance), 0) FROM wallets WHERE app_code = 'a1' AND user_id = ?`, user)
}

// outboxEvent is one outbox row of an activity, its envelope decoded.
type outboxEvent struct {
	version int64
	typ     string
	env     bus.Envelope
}

// events reads activity id's outbox rows, in id order, and checks each
// against docs/asyncapi.yaml.
func (e *settleEnv) events(id int64) []outboxEvent {
	e.t.Helper()
	rows, err := e.db.Query(`SELECT room_version, event_type, envelope FROM room_outbox WHERE app_code = 'a1' AND room_id = ? ORDER BY id`,
		roomevent.ActivityRoomID(id))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []outboxEvent
	for rows.Next() {
		var ev outboxEvent
		var raw []byte
		if err := rows.Scan(&ev.version, &ev.typ, &raw); err != nil {
			e.t.Fatal(err)
		}
		if ev.env, err = bus.DecodeEnvelope(raw); err != nil {
			e.t.Fatal(err)
		}
		if err := docs.CheckEvent(raw); err != nil {
			e.t.Errorf("outbox event %s: %v", raw, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// checkExactlyOnce checks that activity id paid want (user -> coins) and
// nothing else: one ledger row per payout, every payout marked paid, one
// ActivityRewarded per payout (payouts of them) with room_versions 1..n, and, when settled,
// one ActivitySettled at n+1.
func (e *settleEnv) checkExactlyOnce(id int64, want map[int64]int64, payouts int, settled bool) []outboxEvent {
	e.t.Helper()
	var total int64
	for user, coins := range want {
		if got := e.balance(user); got != coins {
			e.t.Errorf("user %d has %d coins, want %d", user, got, coins)
		}
		total += coins
	}
	if n := testenv.Scalar[int64](e.t, e.db, `SELECT COUNT(*) FROM wallet_ledger WHERE app_code = 'a1' AND kind = 'activity' AND operator = ?`,
		LedgerOperator(id)); n != int64(payouts) {
		e.t.Errorf("%d ledger rows, want %d", n, payouts)
	}
	if sum := testenv.Scalar[int64](e.t, e.db, `SELECT COALESCE(SUM(delta), 0) FROM wallet_ledger WHERE app_code = 'a1' AND operator = ?`,
		LedgerOperator(id)); sum != total {
		e.t.Errorf("ledger pays %d coins, want %d", sum, total)
	}
	if n := testenv.Scalar[int64](e.t, e.db, `SELECT COUNT(*) FROM activity_payouts WHERE activity_id = ? AND paid_at_ms = 0`, id); n != 0 {
		e.t.Errorf("%d payouts unpaid", n)
	}
	evs := e.events(id)
	rewarded := 0
	for i, ev := range evs {
		if ev.version != int64(i+1) {
			e.t.Errorf("event %d (%s) has room_version %d, want %d", i, ev.typ, ev.version, i+1)
		}
		switch ev.typ {
		case roomevent.ActivityRewarded:
			rewarded++
			var r roomevent.Rewarded
			if err := json.Unmarshal(ev.env.Payload, &r); err != nil {
				e.t.Fatal(err)
			}
			if want[r.UserID] == 0 || r.EntryKey != EntryKey(id, r.Reason, r.PeriodStartMs, r.UserID) {
				e.t.Errorf("rewarded %+v: not owed", r)
			}
		case roomevent.ActivitySettled:
			if !settled || i != len(evs)-1 {
				e.t.Errorf("ActivitySettled at %d of %d events", i, len(evs))
			}
		}
	}
	if rewarded != payouts {
		e.t.Errorf("%d ActivityRewarded events, want %d", rewarded, payouts)
	}
	if settled && (len(evs) == 0 || evs[len(evs)-1].typ != roomevent.ActivitySettled) {
		e.t.Errorf("no ActivitySettled last: %d events", len(evs))
	}
	return evs
}

func mustRound(t *testing.T, s *Settler) {
	t.Helper()
	if err := s.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestLeaderboardSettlesOnceWithTies: after the grace, one round freezes
// the board, pays each band's ranks (ties to whoever reached the score
// first) once through the ledger, announces each, and settles; more
// rounds pay nothing again.
func TestLeaderboardSettlesOnceWithTies(t *testing.T) {
	e := newTestSettleEnv(t)
	id := e.mustActivity(Leaderboard, GiftValueSent, []Band{{1, 1, 500}, {2, 3, 100}})
	e.mustScore(id, "101", 900, 50)
	e.mustScore(id, "102", 700, 30) // tied: third (reached after 103)
	e.mustScore(id, "103", 700, 20) // tied: second
	e.mustScore(id, "104", 700, 40) // tied: fourth, no band
	e.mustScore(id, "105", 0, 10)   // no score: never ranked
	s := e.newSettler("a")

	mustRound(t, s) // the end has just passed; the grace has not
	if st := e.state(id); st != "open" {
		t.Fatalf("state %s before the grace is over", st)
	}
	e.clock.Advance(30 * time.Second)
	mustRound(t, s)
	if st := e.state(id); st != "settled" {
		t.Fatalf("state %s, want settled", st)
	}
	mustRound(t, s)
	evs := e.checkExactlyOnce(id, map[int64]int64{101: 500, 103: 100, 102: 100}, 3, true)
	var res roomevent.ActivityResult
	if err := json.Unmarshal(evs[len(evs)-1].env.Payload, &res); err != nil {
		t.Fatal(err)
	}
	got := ""
	for _, w := range res.Winners {
		got += fmt.Sprintf("%d:%s:%d ", w.Rank, w.Subject, w.Coins)
	}
	if got != "1:101:500 2:103:100 3:102:100 " || res.Coins != 700 || res.Payouts != 3 {
		t.Errorf("ActivitySettled winners %q coins %d payouts %d", got, res.Coins, res.Payouts)
	}
	if n := testenv.MetricValue(t, e.reg, "voiceroom_activity_payouts_paid_total", "reason", "rank"); n != 3 {
		t.Errorf("payouts paid metric %v, want 3", n)
	}
	if n := testenv.MetricValue(t, e.reg, "voiceroom_activity_coins_paid_total", "reason", "rank"); n != 700 {
		t.Errorf("coins paid metric %v, want 700", n)
	}
	if n := testenv.MetricValue(t, e.reg, "voiceroom_activity_settlement_state_activities", "state", "settled"); n != 1 {
		t.Errorf("settled activities metric %v, want 1", n)
	}
}

// TestRoomGiftValuePaysTheRoomOwner: a room's rank is paid to its owner.
func TestRoomGiftValuePaysTheRoomOwner(t *testing.T) {
	e := newTestSettleEnv(t)
	testenv.Exec(t, e.db, `INSERT INTO rooms (app_code, room_id, owner_user_id, status, created_at_ms, updated_at_ms)
		VALUES ('a1', 'a1_r1', 77, 'active', 0, 0), ('a1', 'a1_r2', 78, 'closed', 0, 0)`)
	id := e.mustActivity(Leaderboard, RoomGiftValue, []Band{{1, 2, 50}})
	e.mustScore(id, "a1_r1", 10, 1)
	e.mustScore(id, "a1_r2", 20, 1)
	e.clock.Advance(time.Minute)
	mustRound(t, e.newSettler("a"))
	e.checkExactlyOnce(id, map[int64]int64{77: 50, 78: 50}, 2, true)
	if s := testenv.Scalar[string](t, e.db, `SELECT subject FROM activity_payouts WHERE activity_id = ? AND user_id = 78`, id); s != "a1_r2" {
		t.Errorf("owner 78's payout names subject %q", s)
	}
}

// TestKilledHalfWayAnotherTakesOver: a settler fails after two payments
// (its third rolled back, as a process killed before its commit), keeps
// its lease and is gone; a second settler waits for the lease to lapse,
// takes it and pays only what is unpaid. The first, back, pays nothing.
func TestKilledHalfWayAnotherTakesOver(t *testing.T) {
	e := newTestSettleEnv(t)
	id := e.mustActivity(Leaderboard, GiftCount, []Band{{1, 6, 10}})
	want := map[int64]int64{}
	for u := int64(1); u <= 6; u++ {
		e.mustScore(id, strconv.FormatInt(200+u, 10), 100-u, u)
		want[200+u] = 10
	}
	e.clock.Advance(time.Minute)
	a, b := e.newSettler("a"), e.newSettler("b")
	n := 0
	a.beforeCommit = func(Payout) error {
		if n++; n == 3 {
			return errors.New("killed")
		}
		return nil
	}
	if err := a.Round(context.Background()); err == nil {
		t.Fatal("the failing settler's round succeeded")
	}
	if paid := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM activity_payouts WHERE activity_id = ? AND paid_at_ms > 0`, id); paid != 2 {
		t.Fatalf("%d paid before the failure, want 2", paid)
	}
	mustRound(t, b) // a's lease holds: b waits
	if st := e.state(id); st != "paying" {
		t.Fatalf("state %s while a's lease holds", st)
	}
	if paid := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM activity_payouts WHERE activity_id = ? AND paid_at_ms > 0`, id); paid != 2 {
		t.Fatalf("%d paid while a's lease holds, want 2", paid)
	}
	e.clock.Advance(31 * time.Second)
	mustRound(t, b)
	if st := e.state(id); st != "settled" {
		t.Fatalf("state %s after the take-over", st)
	}
	a.beforeCommit = nil
	mustRound(t, a)
	evs := e.checkExactlyOnce(id, want, len(want), true)
	e.relayPublishes(evs)
}

// relayPublishes runs the outbox relay and waits until each of evs is in
// ROOM_EVENTS, once.
func (e *settleEnv) relayPublishes(evs []outboxEvent) {
	e.t.Helper()
	m, err := outboxrelay.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := outboxrelay.New(e.db, testenv.NewPublisher(e.t, e.conn), testenv.Logger(e.t), m, outboxrelay.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	testenv.Start(e.t, r.Run)
	js := e.conn.JetStream()
	testenv.Eventually(e.t, 20*time.Second, func() error {
		for _, ev := range evs {
			if n := testenv.StreamCount(e.t, js, ev.env.EventID); n != 1 {
				return fmt.Errorf("%s %s in the stream %d times", ev.typ, ev.env.EventID, n)
			}
		}
		return nil
	})
}

// TestTwoSettlersAtOnce: two settlers racing on many activities pay each
// reward once.
func TestTwoSettlersAtOnce(t *testing.T) {
	e := newTestSettleEnv(t)
	want := map[int64]int64{}
	var ids []int64
	for i := range 5 {
		id := e.mustActivity(Leaderboard, GiftValueSent, []Band{{1, 3, int64(10 + i)}})
		ids = append(ids, id)
		for u := int64(1); u <= 3; u++ {
			user := int64(1000*(i+1)) + u
			e.mustScore(id, strconv.FormatInt(user, 10), 10*u, 0)
			want[user] = int64(10 + i)
		}
	}
	e.clock.Advance(time.Minute)
	settlers := []*Settler{e.newSettler("a"), e.newSettler("b")}
	var wg sync.WaitGroup
	for _, s := range settlers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if err := s.Round(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	// Whatever a lapsed race left: rounds until every one is settled.
	testenv.Eventually(t, 10*time.Second, func() error {
		e.clock.Advance(31 * time.Second)
		for _, s := range settlers {
			if err := s.Round(context.Background()); err != nil {
				return err
			}
		}
		for _, id := range ids {
			if st := e.state(id); st != "settled" {
				return fmt.Errorf("activity %d %s", id, st)
			}
		}
		return nil
	})
	for i, id := range ids {
		w := map[int64]int64{}
		for u := int64(1); u <= 3; u++ {
			w[int64(1000*(i+1))+u] = want[int64(1000*(i+1))+u]
		}
		e.checkExactlyOnce(id, w, len(w), true)
	}
}

// TestCancelledPaysNothing: neither ranks nor tasks of a cancelled
// activity are paid, and it never settles.
func TestCancelledPaysNothing(t *testing.T) {
	e := newTestSettleEnv(t)
	lb := e.mustActivity(Leaderboard, GiftValueSent, []Band{{1, 1, 500}})
	e.mustScore(lb, "301", 10, 1)
	task := e.mustActivity(Task, GiftCount, nil)
	e.mustTaskPayout(task, 0, 302, 10)
	testenv.Exec(t, e.db, `UPDATE activities SET status = 'cancelled', settle_state = 'cancelled', cancelled_at_ms = 1`)
	e.clock.Advance(time.Hour)
	s := e.newSettler("a")
	mustRound(t, s)
	mustRound(t, s)
	for _, id := range []int64{lb, task} {
		if st := e.state(id); st != "cancelled" {
			t.Errorf("activity %d state %s", id, st)
		}
		if evs := e.events(id); len(evs) != 0 {
			t.Errorf("activity %d announced %d events", id, len(evs))
		}
	}
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM wallet_ledger`); n != 0 {
		t.Errorf("%d ledger rows", n)
	}
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM activity_payouts WHERE paid_at_ms > 0 OR reason = 'rank'`); n != 0 {
		t.Errorf("%d payouts paid or ranked", n)
	}
}

// TestTaskRewardsPaidWhileRunning: a task's rewards are paid as they are
// owed, before the end; at the end the task settles with no winners.
func TestTaskRewardsPaidWhileRunning(t *testing.T) {
	e := newTestSettleEnv(t)
	id := e.mustActivity(Task, GiftCount, nil)
	testenv.Exec(t, e.db, fmt.Sprintf(`UPDATE activities SET ends_at_ms = ends_at_ms + 3600000 WHERE activity_id = %d`, id))
	e.mustTaskPayout(id, 0, 401, 10)
	s := e.newSettler("a")
	mustRound(t, s)
	if got := e.balance(401); got != 10 {
		t.Fatalf("running task paid %d, want 10", got)
	}
	e.mustTaskPayout(id, 86_400_000, 401, 10) // the next day's
	e.mustTaskPayout(id, 0, 402, 10)
	mustRound(t, s)
	if st := e.state(id); st != "open" {
		t.Fatalf("running task is %s", st)
	}
	e.clock.Advance(time.Hour + time.Minute)
	mustRound(t, s)
	evs := e.checkExactlyOnce(id, map[int64]int64{401: 20, 402: 10}, 3, true)
	if len(evs) != 4 {
		t.Fatalf("%d events, want 3 rewarded and 1 settled", len(evs))
	}
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM wallet_ledger WHERE user_id = 401`); n != 2 {
		t.Errorf("user 401 has %d ledger rows, want one per period", n)
	}
}

// TestSettleWaitsForTheScoringDurable: past the grace, settlement still
// waits while an event committed before the end is in the outbox (a relay
// backlog), then while the durable has not acked it; once acked, it
// settles, with the late event's score counted.
func TestSettleWaitsForTheScoringDurable(t *testing.T) {
	e := newTestSettleEnv(t)
	ctx := context.Background()
	id := e.mustActivity(Leaderboard, GiftValueSent, []Band{{1, 1, 100}})
	e.mustScore(id, "501", 10, 1)
	endsAt := testenv.Scalar[int64](t, e.db, `SELECT ends_at_ms FROM activities WHERE activity_id = ?`, id)
	// A gift committed a second before the end, still in the outbox.
	env := testenv.NewEnvelope("a1", "a1_room", 1, roomevent.RoomGiftSent)
	msgs, err := testenv.InsertOutboxTx(ctx, e.db, time.UnixMilli(endsAt-1000), env)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	s := e.newSettler("a")
	mustRound(t, s)
	mustRound(t, s)
	if st := e.state(id); st != "open" {
		t.Fatalf("froze with the relay's backlog: %s", st)
	}
	// The relay publishes it: in the stream, not scored yet.
	if _, err := testenv.NewPublisher(t, e.conn).PublishMessage(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, e.db, `UPDATE room_outbox SET status = 'published'`)
	mustRound(t, s)
	mustRound(t, s)
	if st := e.state(id); st != "open" {
		t.Fatalf("froze before the durable scored the late outboxEvent: %s", st)
	}
	// The scoring consumer scores it (502 overtakes 501) and acks.
	cons, err := e.stream.Consumer(ctx, testDurable)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for m := range batch.Messages() {
		e.mustScore(id, "502", 30, 2)
		if err := m.DoubleAck(ctx); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := s.Round(ctx); err != nil {
			return err
		}
		if st := e.state(id); st != "settled" {
			return fmt.Errorf("state %s", st)
		}
		return nil
	})
	e.checkExactlyOnce(id, map[int64]int64{502: 100}, 1, true)
}

// TestSettleNowRerunAndPayouts: settle now ends a running activity; a
// settlement that stopped half-way is re-run at once (its lease freed)
// and pays only what was unpaid; the payouts page through.
func TestSettleNowRerunAndPayouts(t *testing.T) {
	e := newTestSettleEnv(t)
	ctx := context.Background()
	ctl := NewSettlements(e.db, e.clock.Now)
	id := e.mustActivity(Leaderboard, GiftValueSent, []Band{{1, 3, 25}})
	testenv.Exec(t, e.db, fmt.Sprintf(`UPDATE activities SET ends_at_ms = ends_at_ms + 86400000 WHERE activity_id = %d`, id))
	for u := int64(1); u <= 3; u++ {
		e.mustScore(id, strconv.FormatInt(600+u, 10), u, 0)
	}
	if _, err := ctl.Rerun(ctx, "a1", id); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("rerun of a running activity: %v", err)
	}
	if _, err := ctl.SettleNow(ctx, "a2", id); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("settle now from another app: %v", err)
	}
	p, err := ctl.SettleNow(ctx, "a1", id)
	if err != nil {
		t.Fatal(err)
	}
	if p.EndsAtMs != e.clock.Now().Add(SettleNowMargin).UnixMilli() || p.SettleState != "open" || p.Status != string(Running) {
		t.Fatalf("after settle now: %+v", p)
	}
	e.clock.Advance(SettleNowMargin)
	if p, err = ctl.Progress(ctx, "a1", id); err != nil || p.Status != string(Settling) {
		t.Fatalf("at its new end: %+v %v", p, err)
	}
	a := e.newSettler("a")
	n := 0
	a.beforeCommit = func(Payout) error {
		if n++; n == 2 {
			return errors.New("killed")
		}
		return nil
	}
	e.clock.Advance(30 * time.Second)
	if err := a.Round(ctx); err == nil {
		t.Fatal("failing round succeeded")
	}
	p, err = ctl.Progress(ctx, "a1", id)
	if err != nil || p.SettleState != "paying" || p.Status != string(Settling) || p.Paid != 1 || p.Unpaid != 2 || p.Owner != "a" {
		t.Fatalf("stopped half-way: %+v %v", p, err)
	}
	if p, err = ctl.Rerun(ctx, "a1", id); err != nil || p.Owner != "" {
		t.Fatalf("rerun: %+v %v", p, err)
	}
	mustRound(t, e.newSettler("b")) // no wait for a's lease
	p, err = ctl.Progress(ctx, "a1", id)
	if err != nil || p.SettleState != "settled" || p.Status != string(Settled) || p.Paid != 3 || p.CoinsPaid != 75 {
		t.Fatalf("after the rerun: %+v %v", p, err)
	}
	e.checkExactlyOnce(id, map[int64]int64{601: 25, 602: 25, 603: 25}, 3, true)
	if _, err := ctl.Rerun(ctx, "a1", id); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("rerun of a settled activity: %v", err)
	}
	if _, err := ctl.SettleNow(ctx, "a1", id); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("settle now of a settled activity: %v", err)
	}
	var seen []int64
	cursor := ""
	for range 3 {
		page, err := ctl.Payouts(ctx, "a1", id, cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range page.Payouts {
			seen = append(seen, p.UserID)
			if p.PaidAtMs == 0 || p.EntryKey != EntryKey(id, ReasonRank, p.PeriodStartMs, p.UserID) {
				t.Errorf("payout %+v", p)
			}
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if fmt.Sprint(seen) != "[601 602 603]" {
		t.Errorf("paged payouts %v", seen)
	}
	if _, err := ctl.Payouts(ctx, "a1", id, "x", 2); apperr.FieldOf(err) != "cursor" {
		t.Errorf("bad cursor: %v", err)
	}
	if _, err := ctl.Payouts(ctx, "a1", id, "", 0); apperr.FieldOf(err) != "limit" {
		t.Errorf("bad limit: %v", err)
	}
}

// TestMicSessionsEndAtFreeze: a mic session still open at a mic_seconds
// activity's end counts up to the end, before the board freezes.
func TestMicSessionsEndAtFreeze(t *testing.T) {
	e := newTestSettleEnv(t)
	id := e.mustActivity(Leaderboard, MicSeconds, []Band{{1, 2, 30}})
	e.mustScore(id, "701", 100, 1) // 100 seconds, sessions ended
	// 702's seat started 150 s before the end (its RoomMicUp's row, and
	// its session open) and never ended.
	testenv.Exec(t, e.db, fmt.Sprintf(`INSERT INTO activity_mic_seats (activity_id, room_id, user_id, room_version, kind, at_ms)
		SELECT %d, 'a1_room', 702, 1, 1, ends_at_ms - 150000 FROM activities WHERE activity_id = %d`, id, id))
	testenv.Exec(t, e.db, fmt.Sprintf(`INSERT INTO activity_mic_open (activity_id, room_id, user_id, since_ms, since_version)
		SELECT %d, 'a1_room', 702, ends_at_ms - 150000, 1 FROM activities WHERE activity_id = %d`, id, id))
	e.clock.Advance(time.Minute)
	mustRound(t, e.newSettler("a"))
	if n := testenv.Scalar[int64](t, e.db, `SELECT COUNT(*) FROM activity_mic_open WHERE activity_id = ?`, id); n != 0 {
		t.Errorf("%d mic sessions still open", n)
	}
	if s := testenv.Scalar[int64](t, e.db, `SELECT score FROM activity_scores WHERE activity_id = ? AND subject = '702'`, id); s != 150 {
		t.Errorf("the open session scored %d seconds, want 150", s)
	}
	e.checkExactlyOnce(id, map[int64]int64{701: 30, 702: 30}, 2, true)
	if r := testenv.Scalar[int64](t, e.db, `SELECT rank_no FROM activity_payouts WHERE activity_id = ? AND user_id = 702`, id); r != 1 {
		t.Errorf("the open session's speaker ranks %d, want 1", r)
	}
}

// TestSettleNowEndsWhereScoringStops: a scorer's list read while a settle
// now commits still holds the old end and counts an event that occurred
// after the request; the new end (SettleNowMargin after the request)
// keeps every event such a list can count inside the window, so the
// score is exactly the gifts before the stored ends_at_ms. A gift at the
// new end or after it is read against the new list and counts nothing.
func TestSettleNowEndsWhereScoringStops(t *testing.T) {
	e := newScoreEnv(t, nil)
	ctx := context.Background()
	id := e.activity(Activity{Metric: GiftValueSent})
	s := e.newScorer(nil)
	r := e.room("a1", 11, 100)
	type gift struct{ sender, value, atMs int64 }
	score := func(gs ...gift) {
		t.Helper()
		for _, g := range gs {
			e.mustScore(s, e.gift(r, g.sender, 9, 7, g.value, 1, g.atMs))
		}
	}
	now := e.clock.Now().UnixMilli()
	// The scorer's list is read at now.
	gifts := []gift{{1, 10, now - 10}}
	score(gifts...)
	// A settle now asked just before the list was read, committed after.
	requested := now - 5
	ctl := NewSettlements(e.db, func() time.Time { return time.UnixMilli(requested) })
	p, err := ctl.SettleNow(ctx, "a1", id)
	if err != nil {
		t.Fatal(err)
	}
	if p.EndsAtMs != requested+SettleNowMargin.Milliseconds() {
		t.Fatalf("ends at %d, want the request plus the margin %d", p.EndsAtMs, requested+SettleNowMargin.Milliseconds())
	}
	// Occurred after the request, before the list was read: the old list
	// counts it. At the new end and after it: read against the new list.
	late := []gift{{2, 100, now - 2}, {3, 1000, p.EndsAtMs}, {4, 10000, p.EndsAtMs + hour}}
	score(late...)
	gifts = append(gifts, late...)

	a := e.get(id)
	want := map[string]int64{}
	for _, g := range gifts {
		if g.atMs >= a.StartsAtMs && g.atMs < a.EndsAtMs {
			want[strconv.FormatInt(g.sender, 10)] += g.value
		}
	}
	e.mustEqualScores(id, t0, want)
}
