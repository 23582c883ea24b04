//go:build chaos

package chaos

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"voiceroom/activity"
	"voiceroom/bus"
	"voiceroom/roomevent"
)

// Scenarios 12 and 13: the activity role under faults. Scenario 12
// defines four activities and SIGKILLs the activity process mid-window
// under load; afterwards every activity's scores, seen events, open mic
// sessions and task payouts must equal a recomputation from MySQL's record
// of what committed. Scenario 13 settles the four now and SIGKILLs the
// process paying one of them half-way, while a second activity process
// runs: that one takes the settlement over when the lease lapses, and
// every reward must be paid exactly once.

const (
	// giftPrice is the price of the load's gift (newDriver's catalog):
	// a gift's count is its ledger debit over the price.
	giftPrice = 2
	// taskTarget is the gift_count task's target (window period).
	taskTarget = 3
	// micExact makes scenario 12 fail when mic time differs from the exact
	// pairing: the scorer pairs each speaker's seat events in room order
	// whatever order they are scored in (activity/score_mic.go).
	micExact = true
	// holdRank is the rank of the room_gift_value board whose payment
	// scenario 13 holds (and kills the payer at): ranks 1..holdRank-1 are
	// paid before the kill.
	holdRank = 5
)

// activitySet is what scenario 12 defines and scenario 13 settles.
type activitySet struct {
	sent, task, mic, rooms int64 // activity ids
}

func (s *activitySet) ids() []int64 { return []int64{s.sent, s.task, s.mic, s.rooms} }

// defined reports whether scenario 12 defined the activities.
func (s *activitySet) defined() bool { return s.sent != 0 }

// activityDef is one activity read back from MySQL.
type activityDef struct {
	id                         int64
	kind, metric               string
	startsMs, endsMs, createMs int64
	target, rewardCoins        int64
	state                      string
	lastRank                   int // a leaderboard's last rank rewarded
}

// defineActivities waits until the activity durable has scored every
// event committed so far (so that no event committed before the
// activities exist is scored after them: none of those counts), then
// defines the four activities over a window starting in 3 s and an
// hour long.
func defineActivities(t *testing.T, c *cluster, d *driver, set *activitySet) {
	t.Helper()
	if err := until(c.mode.quiet, func() error { return c.activityDrained(context.Background()) }); err != nil {
		t.Fatalf("the activity durable did not drain before the activities were defined: %v", err)
	}
	// A start 3 s ahead: not before the definition (plus
	// activity.RetroactiveMargin), so the live durable scores the
	// activities from their start; a retroactive start's read back is
	// activity's own tests' (it also opens the seats of the two hours
	// before the start, which this recomputation does not).
	start := time.Now().Add(3 * time.Second).UnixMilli()
	end := start + time.Hour.Milliseconds()
	define := func(body map[string]any) int64 {
		body["starts_at_ms"], body["ends_at_ms"] = start, end
		st, code, data := d.send(context.Background(), http.MethodPost, "/admin/v1/activities", d.admin, "", body)
		if st != http.StatusOK {
			t.Fatalf("define activity %v: %d %s", body["name"], st, code)
		}
		var a struct {
			ID int64 `json:"activity_id"`
		}
		if err := json.Unmarshal(data, &a); err != nil || a.ID == 0 {
			t.Fatalf("define activity %v: answer %s: %v", body["name"], data, err)
		}
		return a.ID
	}
	set.sent = define(map[string]any{"name": "chaos top senders", "kind": "leaderboard", "metric": "gift_value_sent",
		"gift_ids": []int{giftID}, "rewards": []map[string]any{{"from_rank": 1, "to_rank": 48, "coins": 10}}})
	set.task = define(map[string]any{"name": "chaos send 3 gifts", "kind": "task", "metric": "gift_count",
		"target": taskTarget, "period": "window", "reward_coins": 5})
	set.mic = define(map[string]any{"name": "chaos on the mic", "kind": "leaderboard", "metric": "mic_seconds",
		"rewards": []map[string]any{{"from_rank": 1, "to_rank": 10, "coins": 7}}})
	set.rooms = define(map[string]any{"name": "chaos top rooms", "kind": "leaderboard", "metric": "room_gift_value",
		"rewards": []map[string]any{{"from_rank": 1, "to_rank": len(d.rooms), "coins": 100}}})
	// The load starts once the window has.
	time.Sleep(time.Until(time.UnixMilli(start)))
}

// activityDrained returns nil once the activity durable has nothing
// pending or unacknowledged.
func (c *cluster) activityDrained(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cons, err := c.js.Consumer(ctx, bus.StreamName, bus.DurableActivity)
	if err != nil {
		return fmt.Errorf("activity durable: %w", err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("activity durable: %w", err)
	}
	if info.NumPending > 0 || info.NumAckPending > 0 {
		return fmt.Errorf("activity durable: %d pending, %d unacknowledged", info.NumPending, info.NumAckPending)
	}
	return nil
}

// killActivity is scenario 12's fault: the activity process SIGKILLed
// while it scores the load, restarted after a third of the fault's length.
func killActivity(t *testing.T, c *cluster, r *row, set *activitySet) {
	t.Helper()
	ctx := context.Background()
	var seen int64
	if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM activity_seen WHERE activity_id IN (?, ?, ?, ?)", set.sent, set.task, set.mic, set.rooms).Scan(&seen); err != nil {
		t.Fatalf("count seen events: %v", err)
	}
	var unacked int
	if cons, err := c.js.Consumer(ctx, bus.StreamName, bus.DurableActivity); err == nil {
		if info, err := cons.Info(ctx); err == nil {
			unacked = info.NumAckPending + int(info.NumPending)
		}
	}
	c.activity.signal(t, syscall.SIGKILL)
	r.note = fmt.Sprintf("activity process killed after %d events counted, %d events unacknowledged or not yet delivered", seen, unacked)
	if seen == 0 {
		r.problems = append(r.problems, "the activity process had counted no event when killed: the kill proves nothing")
	}
	time.Sleep(c.mode.fault / 3)
	c.activity.start(t)
}

// expected is a recomputation of one activity's board from MySQL's
// record of what committed.
type expected struct {
	scores  map[string]int64 // subject -> score
	reached map[string]int64 // subject -> when the score last rose
	events  map[string]bool  // event ids the activity counts (gifts; a mic session's start)
	ends    map[string]bool  // mic: the events that may end a session (counted when they end one)
	open    map[string]int64 // mic: "room/user" -> since, sessions open now
}

// giftRow is one committed gift: its command-log row and its ledger debit.
type giftRow struct {
	room           string
	sender         int64
	atMs           int64
	value, count   int64
	eventID, cmdID string
}

// committedGifts reads every committed gift of the app: the SendGift
// command-log rows, their debits in the wallet ledger (entry key
// gift:<room>:<command id>, delta minus the value) and the RoomGiftSent
// event each committed (by room and version).
func (c *cluster) committedGifts(ctx context.Context) ([]giftRow, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT l.room_id, l.actor_user_id, l.created_at_ms, -g.delta, l.command_id, COALESCE(o.event_id, '')
		FROM room_command_log l
		JOIN wallet_ledger g ON g.app_code = l.app_code AND g.entry_key = CONCAT('gift:', l.room_id, ':', l.command_id)
		LEFT JOIN room_outbox o ON o.app_code = l.app_code AND o.room_id = l.room_id AND o.room_version = l.room_version AND o.event_type = ?
		WHERE l.app_code = ? AND l.command_type = 'SendGift'`, roomevent.RoomGiftSent, app)
	if err != nil {
		return nil, fmt.Errorf("read gifts: %w", err)
	}
	defer rows.Close()
	var out []giftRow
	for rows.Next() {
		var g giftRow
		if err := rows.Scan(&g.room, &g.sender, &g.atMs, &g.value, &g.cmdID, &g.eventID); err != nil {
			return nil, fmt.Errorf("read gifts: %w", err)
		}
		g.count = g.value / giftPrice
		out = append(out, g)
	}
	return out, rows.Err()
}

// expectGifts recomputes a gift activity: each gift committed in the
// window counts once for its subject.
func expectGifts(a activityDef, gifts []giftRow) expected {
	e := expected{scores: map[string]int64{}, reached: map[string]int64{}, events: map[string]bool{}}
	for _, g := range gifts {
		if g.atMs < a.startsMs || g.atMs >= a.endsMs || g.value <= 0 {
			continue
		}
		subject, v := strconv.FormatInt(g.sender, 10), g.value
		switch a.metric {
		case string(activity.RoomGiftValue):
			subject = g.room
		case string(activity.GiftCount):
			v = max(g.count, 1)
		}
		e.scores[subject] += v
		e.reached[subject] = max(e.reached[subject], g.atMs)
		e.events[g.eventID] = true
	}
	return e
}

// micEvent is one committed event that starts or ends a seat.
type micEvent struct {
	id, room, typ string
	version       int64
	user          int64
	atMs          int64
}

// committedMicEvents reads the committed events that start or end a seat,
// each room's in room_version order. Mic time is paired from these, not
// from the command log: a SweepStale or KickUser row of the log names its
// actor, not the speakers it took off their seats, while the events it
// committed in the same transaction name each of them.
func (c *cluster) committedMicEvents(ctx context.Context) ([]micEvent, error) {
	types := []any{app, roomevent.RoomMicUp, roomevent.RoomMicDown, roomevent.RoomMicChanged, roomevent.RoomUserLeft,
		roomevent.RoomUserKicked, roomevent.RoomClosed, roomevent.RoomBanned}
	rows, err := c.db.QueryContext(ctx, `SELECT event_id, room_id, room_version, event_type, envelope FROM room_outbox
		WHERE app_code = ? AND event_type IN (?, ?, ?, ?, ?, ?, ?) ORDER BY room_id, room_version, id`, types...)
	if err != nil {
		return nil, fmt.Errorf("read mic events: %w", err)
	}
	defer rows.Close()
	var out []micEvent
	for rows.Next() {
		var ev micEvent
		var raw []byte
		if err := rows.Scan(&ev.id, &ev.room, &ev.version, &ev.typ, &raw); err != nil {
			return nil, fmt.Errorf("read mic events: %w", err)
		}
		env, err := bus.DecodeEnvelope(raw)
		if err != nil {
			return nil, fmt.Errorf("mic event %s: %w", ev.id, err)
		}
		var body struct {
			UserID int64 `json:"user_id"`
		}
		if err := json.Unmarshal(env.Payload, &body); err != nil {
			return nil, fmt.Errorf("mic event %s: %w", ev.id, err)
		}
		ev.user, ev.atMs = body.UserID, env.OccurredAtMs
		out = append(out, ev)
	}
	return out, rows.Err()
}

// expectMic recomputes a mic_seconds leaderboard (one period: the
// window) from the seats' starts and ends: a session starts at a
// RoomMicUp or RoomMicChanged (before the window's end) and ends at
// whatever ends that seat; its whole seconds within the window count
// when it ends. Events committed before the activity existed start
// nothing. With closeAtEnd (settled), a session still open counts up to
// the end, as settlement ends it.
func expectMic(a activityDef, evs []micEvent, closeAtEnd bool) expected {
	e := expected{scores: map[string]int64{}, reached: map[string]int64{}, events: map[string]bool{}, ends: map[string]bool{}, open: map[string]int64{}}
	open := map[string]map[int64]int64{} // room -> user -> since
	end := func(room string, user, atMs int64) {
		since, ok := open[room][user]
		if !ok {
			return
		}
		delete(open[room], user)
		from, to := max(since, a.startsMs), min(atMs, a.endsMs)
		if s := (to - from) / 1000; to > from && s > 0 {
			subject := strconv.FormatInt(user, 10)
			e.scores[subject] += s
			e.reached[subject] = max(e.reached[subject], to)
		}
	}
	for _, ev := range evs {
		if ev.atMs < a.createMs {
			continue
		}
		if open[ev.room] == nil {
			open[ev.room] = map[int64]int64{}
		}
		switch ev.typ {
		case roomevent.RoomMicUp:
			if ev.atMs < a.endsMs {
				e.events[ev.id] = true
			}
			if _, ok := open[ev.room][ev.user]; !ok && ev.atMs < a.endsMs && ev.user > 0 {
				open[ev.room][ev.user] = ev.atMs
			}
		case roomevent.RoomMicChanged:
			e.events[ev.id] = true
			end(ev.room, ev.user, ev.atMs)
			if ev.atMs < a.endsMs && ev.user > 0 {
				open[ev.room][ev.user] = ev.atMs
			}
		case roomevent.RoomMicDown, roomevent.RoomUserLeft, roomevent.RoomUserKicked:
			e.ends[ev.id] = true
			end(ev.room, ev.user, ev.atMs)
		case roomevent.RoomClosed, roomevent.RoomBanned:
			e.ends[ev.id] = true
			for u := range open[ev.room] {
				end(ev.room, u, ev.atMs)
			}
		}
	}
	for room, users := range open {
		for u, since := range users {
			if closeAtEnd {
				end(room, u, a.endsMs)
				continue
			}
			e.open[room+"/"+strconv.FormatInt(u, 10)] = since
		}
	}
	return e
}

// readActivity reads an activity's definition and settlement state.
func (c *cluster) readActivity(ctx context.Context, id int64) (activityDef, error) {
	a := activityDef{id: id}
	var rewards []byte
	err := c.db.QueryRowContext(ctx, `SELECT kind, metric, starts_at_ms, ends_at_ms, created_at_ms, target, reward_coins, settle_state,
		COALESCE(rewards, 'null') FROM activities WHERE activity_id = ?`, id).Scan(&a.kind, &a.metric, &a.startsMs, &a.endsMs, &a.createMs,
		&a.target, &a.rewardCoins, &a.state, &rewards)
	if err != nil {
		return a, fmt.Errorf("activity %d: %w", id, err)
	}
	var bands []activity.Band
	if err := json.Unmarshal(rewards, &bands); err != nil {
		return a, fmt.Errorf("activity %d rewards: %w", id, err)
	}
	for _, b := range bands {
		a.lastRank = max(a.lastRank, b.ToRank)
	}
	return a, nil
}

// boardRow is a subject's stored score.
type boardRow struct {
	subject        string
	score, reached int64
}

// storedBoard reads an activity's activity_scores (its one period: the
// window).
func (c *cluster) storedBoard(ctx context.Context, a activityDef) (map[string]boardRow, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT period_start_ms, subject, score, reached_at_ms FROM activity_scores WHERE activity_id = ?`, a.id)
	if err != nil {
		return nil, fmt.Errorf("activity %d scores: %w", a.id, err)
	}
	defer rows.Close()
	out := map[string]boardRow{}
	for rows.Next() {
		var ps int64
		var b boardRow
		if err := rows.Scan(&ps, &b.subject, &b.score, &b.reached); err != nil {
			return nil, fmt.Errorf("activity %d scores: %w", a.id, err)
		}
		if ps != a.startsMs {
			return nil, fmt.Errorf("activity %d: a score in period %d, not the window's %d", a.id, ps, a.startsMs)
		}
		out[b.subject] = b
	}
	return out, rows.Err()
}

// activityAccount compares one activity with its recomputation.
type activityAccount struct {
	subjects      int   // subjects with a score
	counted       int   // events counted (activity_seen rows)
	twice, missed int64 // score units counted beyond the recomputation, and short of it
	diffs         []string
	// micDiffs are a mic_seconds activity's differences from the exact
	// pairing, and micTwice and micMissed their seconds: reported, not
	// failed (see checkActivities).
	micDiffs            []string
	micTwice, micMissed int64
	payouts, paid       int
	payoutProblems      []string
}

// checkActivity compares activity id's stored scores (and, for gift
// metrics, the events it counted; for mic_seconds, its open sessions;
// for a task, its payouts) with a recomputation.
func (c *cluster) checkActivity(ctx context.Context, id int64, gifts []giftRow, mics []micEvent) (activityAccount, error) {
	var acc activityAccount
	a, err := c.readActivity(ctx, id)
	if err != nil {
		return acc, err
	}
	settled := a.state != string(activity.StateOpen)
	var exp expected
	if a.metric == string(activity.MicSeconds) {
		exp = expectMic(a, mics, settled)
	} else {
		exp = expectGifts(a, gifts)
	}
	got, err := c.storedBoard(ctx, a)
	if err != nil {
		return acc, err
	}
	acc.subjects = len(got)
	subjects := map[string]bool{}
	for s := range got {
		subjects[s] = true
	}
	for s := range exp.scores {
		subjects[s] = true
	}
	mic := a.metric == string(activity.MicSeconds)
	for _, s := range slices.Sorted(maps.Keys(subjects)) {
		g, w := got[s], exp.scores[s]
		switch {
		case g.score > w:
			acc.twice += g.score - w
		case g.score < w:
			acc.missed += w - g.score
		}
		if g.score != w || (w > 0 && g.reached != exp.reached[s]) {
			d := fmt.Sprintf("activity %d %s: stored %d reached %d, recomputed %d reached %d", id, s, g.score, g.reached, w, exp.reached[s])
			if mic {
				acc.micDiffs = append(acc.micDiffs, d)
			} else {
				acc.diffs = append(acc.diffs, d)
			}
		}
	}
	seen, err := strings1id(ctx, c, "SELECT event_id FROM activity_seen WHERE activity_id = ?", id)
	if err != nil {
		return acc, err
	}
	acc.counted = len(seen)
	if a.metric != string(activity.MicSeconds) {
		for _, ev := range seen {
			if !exp.events[ev] {
				acc.diffs = append(acc.diffs, fmt.Sprintf("activity %d counted event %s, which the recomputation does not", id, ev))
			}
		}
		for ev := range exp.events {
			if !slices.Contains(seen, ev) {
				acc.diffs = append(acc.diffs, fmt.Sprintf("activity %d missed event %s", id, ev))
			}
		}
	} else {
		// Every seat's start after the activity existed (before its end)
		// is counted, and nothing but the seats' starts and ends is.
		for ev := range exp.events {
			if !slices.Contains(seen, ev) {
				acc.diffs = append(acc.diffs, fmt.Sprintf("activity %d missed the seat start %s", id, ev))
			}
		}
		for _, ev := range seen {
			if !exp.ends[ev] && !exp.events[ev] {
				acc.diffs = append(acc.diffs, fmt.Sprintf("activity %d counted event %s, neither a seat's start nor its end", id, ev))
			}
		}
		if !settled {
			open, err := c.openMic(ctx, id)
			if err != nil {
				return acc, err
			}
			for k, since := range exp.open {
				if open[k] != since {
					acc.micDiffs = append(acc.micDiffs, fmt.Sprintf("activity %d: mic session %s open since %d, stored %d", id, k, since, open[k]))
				}
			}
			for k, since := range open {
				if _, ok := exp.open[k]; !ok {
					acc.micDiffs = append(acc.micDiffs, fmt.Sprintf("activity %d: mic session %s stored open since %d, the recomputation has none", id, k, since))
				}
			}
		}
		if len(acc.micDiffs) > 0 {
			acc.micTwice, acc.micMissed, acc.twice, acc.missed = acc.twice, acc.missed, 0, 0
		}
	}
	if a.kind == string(activity.Task) {
		if err := c.checkTaskPayouts(ctx, a, exp, &acc); err != nil {
			return acc, err
		}
	}
	return acc, nil
}

// openMic reads an activity's open mic sessions: "room/user" -> since.
func (c *cluster) openMic(ctx context.Context, id int64) (map[string]int64, error) {
	rows, err := c.db.QueryContext(ctx, "SELECT room_id, user_id, since_ms FROM activity_mic_open WHERE activity_id = ?", id)
	if err != nil {
		return nil, fmt.Errorf("activity %d open mic sessions: %w", id, err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var room string
		var user, since int64
		if err := rows.Scan(&room, &user, &since); err != nil {
			return nil, err
		}
		out[room+"/"+strconv.FormatInt(user, 10)] = since
	}
	return out, rows.Err()
}

// checkTaskPayouts: a task owes one payout per user whose recomputed
// score reached the target (the window is its one period), and no other.
func (c *cluster) checkTaskPayouts(ctx context.Context, a activityDef, exp expected, acc *activityAccount) error {
	rows, err := c.db.QueryContext(ctx, `SELECT user_id, period_start_ms, coins, paid_at_ms FROM activity_payouts WHERE activity_id = ? AND reason = 'task'`, a.id)
	if err != nil {
		return fmt.Errorf("activity %d payouts: %w", a.id, err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var user, ps, coins, paidAt int64
		if err := rows.Scan(&user, &ps, &coins, &paidAt); err != nil {
			return err
		}
		subject := strconv.FormatInt(user, 10)
		have[subject] = true
		acc.payouts++
		if paidAt > 0 {
			acc.paid++
		}
		if exp.scores[subject] < a.target || ps != a.startsMs || coins != a.rewardCoins {
			acc.payoutProblems = append(acc.payoutProblems, fmt.Sprintf("activity %d: payout to %s (period %d, %d coins), recomputed score %d of target %d",
				a.id, subject, ps, coins, exp.scores[subject], a.target))
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for s, v := range exp.scores {
		if v >= a.target && !have[s] {
			acc.payoutProblems = append(acc.payoutProblems, fmt.Sprintf("activity %d: %s reached %d of target %d and has no payout", a.id, s, v, a.target))
		}
	}
	return nil
}

func strings1id(ctx context.Context, c *cluster, q string, id int64) ([]string, error) {
	rows, err := c.db.QueryContext(ctx, q, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// checkActivities waits until the activity durable has drained and every
// activity of set equals its recomputation (at most m.quiet), and returns
// what still differs, and a summary for the report.
func checkActivities(c *cluster, set *activitySet) (problems []string, note string) {
	ctx := context.Background()
	var last []string
	var summary []string
	err := until(c.mode.quiet, func() error {
		if err := c.activityDrained(ctx); err != nil {
			return err
		}
		gifts, err := c.committedGifts(ctx)
		if err != nil {
			return err
		}
		mics, err := c.committedMicEvents(ctx)
		if err != nil {
			return err
		}
		last, summary = nil, nil
		for _, id := range set.ids() {
			acc, err := c.checkActivity(ctx, id, gifts, mics)
			if err != nil {
				return err
			}
			if acc.twice > 0 || acc.missed > 0 {
				last = append(last, fmt.Sprintf("activity %d: %d counted twice, %d missed (score units)", id, acc.twice, acc.missed))
			}
			last = append(last, first(acc.diffs)...)
			if micExact {
				last = append(last, first(acc.micDiffs)...)
			}
			last = append(last, first(acc.payoutProblems)...)
			s := fmt.Sprintf("#%d %d subjects, %d events counted, %d twice, %d missed", id, acc.subjects, acc.counted, acc.twice, acc.missed)
			if len(acc.micDiffs) > 0 {
				s += fmt.Sprintf(" (mic_seconds: %d differences from the exact pairing, %d s more and %d s less, e.g. %v: a known limit, see activity's doc)",
					len(acc.micDiffs), acc.micTwice, acc.micMissed, acc.micDiffs[:min(len(acc.micDiffs), 4)])
			}
			if acc.payouts > 0 {
				s += fmt.Sprintf(", %d task payouts (%d paid)", acc.payouts, acc.paid)
			}
			summary = append(summary, s)
		}
		if len(last) > 0 {
			return errors.New(strings.Join(last, "; "))
		}
		return nil
	})
	note = "scores equal a recomputation from the command log, ledger and outbox: " + strings.Join(summary, "; ")
	if err != nil {
		if len(last) == 0 {
			last = []string{err.Error()}
		}
		return append([]string{fmt.Sprintf("activities differ from their recomputation after %s", c.mode.quiet)}, last...), note
	}
	return nil, note
}

// settleKilled is scenario 13's fault. The owners of the load's rooms
// (who never send a command) are paid the room_gift_value board's ranks;
// the test holds a lock on each owner's wallet row, one transaction each.
// The four activities are settled now; once the room board is frozen, the
// test releases the locks of ranks 1..holdRank-1 in rank order, so the
// payer pays those and then waits for rank holdRank's lock. The process
// holding the settlement then is SIGKILLed (its open transaction rolls
// back once the lock is released), and the other activity process must
// take the settlement over when the lease lapses and pay the rest.
func settleKilled(t *testing.T, c *cluster, d *driver, r *row, set *activitySet) {
	t.Helper()
	ctx := context.Background()
	// One connection and transaction per owner's wallet.
	locks := map[int64]*sql.Tx{}
	release := func(user int64) {
		if tx := locks[user]; tx != nil {
			tx.Rollback()
			delete(locks, user)
		}
	}
	defer func() {
		for u := range locks {
			release(u)
		}
	}()
	for i := range d.rooms {
		owner := int64(10_000 + i)
		tx, err := c.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatalf("lock owner %d's wallet: %v", owner, err)
		}
		var bal int64
		if err := tx.QueryRowContext(ctx, "SELECT balance FROM wallets WHERE app_code = ? AND user_id = ? FOR UPDATE", app, owner).Scan(&bal); err != nil {
			tx.Rollback()
			t.Fatalf("lock owner %d's wallet: %v", owner, err)
		}
		locks[owner] = tx
	}
	for _, id := range set.ids() {
		st, code, _ := d.send(ctx, http.MethodPost, fmt.Sprintf("/admin/v1/activities/%d/settle", id), d.admin, "", map[string]any{})
		if st != http.StatusOK {
			t.Fatalf("settle activity %d now: %d %s", id, st, code)
		}
	}
	// The room board's ranks, once frozen.
	var ranks []int64 // owner by rank
	if err := until(c.mode.quiet, func() error {
		ranks = ranks[:0]
		rows, err := c.db.QueryContext(ctx, "SELECT user_id FROM activity_payouts WHERE activity_id = ? AND reason = 'rank' ORDER BY rank_no", set.rooms)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var u int64
			if err := rows.Scan(&u); err != nil {
				return err
			}
			ranks = append(ranks, u)
		}
		if len(ranks) == 0 {
			return errors.New("the room board is not frozen yet")
		}
		return rows.Err()
	}); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("the room board did not freeze: %v", err))
		return
	}
	if len(ranks) < holdRank {
		r.problems = append(r.problems, fmt.Sprintf("the room board has %d ranks, fewer than %d: the kill proves nothing", len(ranks), holdRank))
		return
	}
	for _, u := range ranks[:holdRank-1] {
		release(u)
	}
	// The payer pays ranks 1..holdRank-1 and waits for rank holdRank's
	// wallet.
	var owner string
	if err := until(c.mode.quiet, func() error {
		var paid int
		if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM activity_payouts WHERE activity_id = ? AND reason = 'rank' AND paid_at_ms > 0", set.rooms).Scan(&paid); err != nil {
			return err
		}
		if paid != holdRank-1 {
			return fmt.Errorf("%d ranks paid", paid)
		}
		var waits int
		if err := c.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS").Scan(&waits); err != nil {
			return err
		}
		if waits == 0 {
			return errors.New("no payment waits for a lock")
		}
		return c.db.QueryRowContext(ctx, "SELECT settle_owner FROM activities WHERE activity_id = ?", set.rooms).Scan(&owner)
	}); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("the payer never waited for rank %d's wallet: %v", holdRank, err))
		return
	}
	var victim, other *proc
	for _, p := range []*proc{c.activity, c.activity2} {
		if strings.HasSuffix(owner, ":"+strconv.Itoa(p.pid())) {
			victim = p
		} else {
			other = p
		}
	}
	if victim == nil {
		r.problems = append(r.problems, fmt.Sprintf("the settlement's holder %q is none of the activity processes", owner))
		return
	}
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	// Its transaction, waiting for the lock, runs on once it is released,
	// and rolls back: its client is gone and never commits.
	for u := range locks {
		release(u)
	}
	var took time.Duration
	var next string
	if err := until(c.mode.quiet, func() error {
		var state string
		if err := c.db.QueryRowContext(ctx, "SELECT settle_state, settle_owner FROM activities WHERE activity_id = ?", set.rooms).Scan(&state, &next); err != nil {
			return err
		}
		if next == owner || (next == "" && state != string(activity.StateSettled)) {
			return fmt.Errorf("settlement %s, held by %q", state, next)
		}
		took = time.Since(killed)
		return nil
	}); err != nil {
		r.problems = append(r.problems, fmt.Sprintf("no process took the settlement over from the killed %s: %v", victim.name, err))
	}
	r.note = fmt.Sprintf("%s killed paying rank %d of %d of the room board (%d paid); %s took it over %s after the kill", victim.name, holdRank, len(ranks),
		holdRank-1, other.name, took.Round(10*time.Millisecond))
	victim.start(t)
}

// pid is the process id of the process launched last (0: none).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// checkSettled waits until the four activities are settled and checks
// that every reward was paid exactly once: each payout row paid, with
// exactly one ledger entry of its key (the payout's user and coins, kind
// activity, the activity as operator) and one ActivityRewarded in the
// outbox; no other ledger entry of the activity; the ranks those of the
// recomputed board; one ActivitySettled each; and every one of those
// events accepted by the app's webhook receiver.
func checkSettled(c *cluster, set *activitySet) (problems []string, note string) {
	ctx := context.Background()
	var last []string
	var summary []string
	err := until(c.mode.quiet, func() error {
		last, summary = nil, nil
		gifts, err := c.committedGifts(ctx)
		if err != nil {
			return err
		}
		mics, err := c.committedMicEvents(ctx)
		if err != nil {
			return err
		}
		for _, id := range set.ids() {
			a, err := c.readActivity(ctx, id)
			if err != nil {
				return err
			}
			if a.state != string(activity.StateSettled) {
				return fmt.Errorf("activity %d is %s, not settled", id, a.state)
			}
			bad, s, err := c.checkPaidOnce(ctx, a, gifts, mics)
			if err != nil {
				return err
			}
			last = append(last, bad...)
			summary = append(summary, s)
		}
		if len(last) > 0 {
			return errors.New(strings.Join(last, "; "))
		}
		return nil
	})
	note = strings.Join(summary, "; ")
	if err != nil {
		if len(last) == 0 {
			last = []string{err.Error()}
		}
		return append([]string{"settlement not paid exactly once"}, first(last)...), note
	}
	return nil, note
}

// checkPaidOnce checks one settled activity (see checkSettled).
func (c *cluster) checkPaidOnce(ctx context.Context, a activityDef, gifts []giftRow, mics []micEvent) ([]string, string, error) {
	var bad []string
	type payout struct {
		reason              string
		rank                int
		user, coins, paidAt int64
		key, subject        string
	}
	rows, err := c.db.QueryContext(ctx, `SELECT reason, rank_no, user_id, coins, paid_at_ms, entry_key, subject FROM activity_payouts
		WHERE activity_id = ? ORDER BY reason, rank_no, user_id`, a.id)
	if err != nil {
		return nil, "", err
	}
	var payouts []payout
	for rows.Next() {
		var p payout
		if err := rows.Scan(&p.reason, &p.rank, &p.user, &p.coins, &p.paidAt, &p.key, &p.subject); err != nil {
			rows.Close()
			return nil, "", err
		}
		payouts = append(payouts, p)
	}
	if err := closeRows(rows); err != nil {
		return nil, "", err
	}
	// The ledger entries of the activity, by key.
	type entry struct {
		user, delta int64
		kind        string
		n           int
	}
	ledger := map[string]*entry{}
	rows, err = c.db.QueryContext(ctx, "SELECT entry_key, user_id, delta, kind FROM wallet_ledger WHERE app_code = ? AND operator = ?", app, activity.LedgerOperator(a.id))
	if err != nil {
		return nil, "", err
	}
	for rows.Next() {
		var k string
		var e entry
		if err := rows.Scan(&k, &e.user, &e.delta, &e.kind); err != nil {
			rows.Close()
			return nil, "", err
		}
		if old := ledger[k]; old != nil {
			old.n++ // the primary key makes this impossible; counted all the same
			continue
		}
		e.n = 1
		ledger[k] = &e
	}
	if err := closeRows(rows); err != nil {
		return nil, "", err
	}
	// The activity's events in the outbox, and at the receiver.
	rewarded := map[string]int{}
	settledEvents, atReceiver, events := 0, 0, 0
	rows, err = c.db.QueryContext(ctx, "SELECT event_id, event_type, envelope FROM room_outbox WHERE app_code = ? AND room_id = ?", app, roomevent.ActivityRoomID(a.id))
	if err != nil {
		return nil, "", err
	}
	for rows.Next() {
		var id, typ string
		var raw []byte
		if err := rows.Scan(&id, &typ, &raw); err != nil {
			rows.Close()
			return nil, "", err
		}
		env, err := bus.DecodeEnvelope(raw)
		if err != nil {
			rows.Close()
			return nil, "", fmt.Errorf("event %s: %w", id, err)
		}
		cmd := env.CommandID // a reward's entry key
		events++
		switch typ {
		case roomevent.ActivityRewarded:
			rewarded[cmd]++
		case roomevent.ActivitySettled:
			settledEvents++
		}
		c.hooks.mu.Lock()
		if c.hooks.accepted[id] > 0 {
			atReceiver++
		}
		c.hooks.mu.Unlock()
	}
	if err := closeRows(rows); err != nil {
		return nil, "", err
	}

	var coins int64
	for _, p := range payouts {
		coins += p.coins
		e := ledger[p.key]
		switch {
		case p.paidAt == 0:
			bad = append(bad, fmt.Sprintf("activity %d: %s unpaid", a.id, p.key))
		case e == nil:
			bad = append(bad, fmt.Sprintf("activity %d: %s marked paid, no ledger entry", a.id, p.key))
		case e.n != 1 || e.user != p.user || e.delta != p.coins || e.kind != activity.LedgerKind:
			bad = append(bad, fmt.Sprintf("activity %d: %s: %d ledger entries, user %d delta %d kind %s; payout user %d coins %d", a.id, p.key, e.n, e.user, e.delta, e.kind, p.user, p.coins))
		}
		if n := rewarded[p.key]; n != 1 {
			bad = append(bad, fmt.Sprintf("activity %d: %s announced by %d ActivityRewarded events", a.id, p.key, n))
		}
	}
	for k := range ledger {
		if !slices.ContainsFunc(payouts, func(p payout) bool { return p.key == k }) {
			bad = append(bad, fmt.Sprintf("activity %d: ledger entry %s of no payout", a.id, k))
		}
	}
	if len(rewarded) != len(payouts) {
		bad = append(bad, fmt.Sprintf("activity %d: %d ActivityRewarded keys for %d payouts", a.id, len(rewarded), len(payouts)))
	}
	if settledEvents != 1 {
		bad = append(bad, fmt.Sprintf("activity %d: %d ActivitySettled events", a.id, settledEvents))
	}
	if atReceiver != events {
		bad = append(bad, fmt.Sprintf("activity %d: %d of its %d events at the webhook receiver", a.id, atReceiver, events))
	}
	// A leaderboard's ranks are those of the recomputed final board.
	if a.kind == string(activity.Leaderboard) {
		var exp expected
		if a.metric == string(activity.MicSeconds) {
			// The stored board: mic time after a kill may differ from the
			// exact pairing (a known limit, reported by scenario 12); what
			// settlement must do is pay the board it froze.
			stored, err := c.storedBoard(ctx, a)
			if err != nil {
				return nil, "", err
			}
			exp = expected{scores: map[string]int64{}, reached: map[string]int64{}}
			for s, b := range stored {
				exp.scores[s], exp.reached[s] = b.score, b.reached
			}
		} else {
			exp = expectGifts(a, gifts)
		}
		type ranked struct {
			subject        string
			score, reached int64
		}
		var board []ranked
		for s, v := range exp.scores {
			if v > 0 {
				board = append(board, ranked{s, v, exp.reached[s]})
			}
		}
		sort.Slice(board, func(i, j int) bool {
			x, y := board[i], board[j]
			if x.score != y.score {
				return x.score > y.score
			}
			if x.reached != y.reached {
				return x.reached < y.reached
			}
			return x.subject < y.subject
		})
		var ranks []payout
		for _, p := range payouts {
			if p.reason == activity.ReasonRank {
				ranks = append(ranks, p)
			}
		}
		if want := min(len(board), a.lastRank); len(ranks) != want {
			bad = append(bad, fmt.Sprintf("activity %d: %d ranks paid, the recomputed board rewards %d", a.id, len(ranks), want))
		}
		for _, p := range ranks {
			if p.rank < 1 || p.rank > len(board) || board[p.rank-1].subject != p.subject {
				want := "nobody"
				if p.rank >= 1 && p.rank <= len(board) {
					want = board[p.rank-1].subject
				}
				bad = append(bad, fmt.Sprintf("activity %d: rank %d paid to %s, the recomputed board has %s", a.id, p.rank, p.subject, want))
			}
		}
	}
	s := fmt.Sprintf("#%d %d payouts, %d coins, each paid once; %d of %d events at the receiver", a.id, len(payouts), coins, atReceiver, events)
	return bad, s, nil
}

// creditOwners gives each room's owner a wallet (they never send a
// command): scenario 13 locks those rows.
func creditOwners(t *testing.T, d *driver) {
	t.Helper()
	for i := range d.rooms {
		id := int64(10_000 + i)
		if st, code, _ := d.send(context.Background(), http.MethodPost, fmt.Sprintf("/admin/v1/wallets/%d/credit", id), d.admin, "",
			map[string]any{"amount": 1000, "idempotency_key": fmt.Sprintf("chaos-owner-%d", id)}); st != http.StatusOK {
			t.Fatalf("credit owner %d: %d %s", id, st, code)
		}
	}
}

// activityChecksCatch breaks scenario 12's and 13's record on purpose and
// expects their checks to say so: a gift counted twice (a score one unit
// up), a task payout missing, and a reward credited a second time under
// another key. Each is undone after.
func activityChecksCatch(t *testing.T, c *cluster, set *activitySet) {
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := c.db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	gifts, err := c.committedGifts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mics, err := c.committedMicEvents(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var subject string
	if err := c.db.QueryRowContext(ctx, "SELECT subject FROM activity_scores WHERE activity_id = ? LIMIT 1", set.sent).Scan(&subject); err != nil {
		t.Fatal(err)
	}
	exec("UPDATE activity_scores SET score = score + 1 WHERE activity_id = ? AND subject = ?", set.sent, subject)
	acc, err := c.checkActivity(ctx, set.sent, gifts, mics)
	exec("UPDATE activity_scores SET score = score - 1 WHERE activity_id = ? AND subject = ?", set.sent, subject)
	if err != nil {
		t.Fatal(err)
	}
	if acc.twice != 1 || len(acc.diffs) == 0 {
		t.Errorf("a score one unit up: twice %d, diffs %v; want 1 counted twice", acc.twice, acc.diffs)
	}

	// One task payout taken away, then put back as it was.
	conn, err := c.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var user, ps int64
	if err := conn.QueryRowContext(ctx, "SELECT user_id, period_start_ms FROM activity_payouts WHERE activity_id = ? AND reason = 'task' LIMIT 1", set.task).Scan(&user, &ps); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TEMPORARY TABLE chaos_payout AS SELECT * FROM activity_payouts WHERE activity_id = ? AND reason = 'task' AND user_id = ? AND period_start_ms = ?",
		"DELETE FROM activity_payouts WHERE activity_id = ? AND reason = 'task' AND user_id = ? AND period_start_ms = ?",
	} {
		if _, err := conn.ExecContext(ctx, q, set.task, user, ps); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	acc, err = c.checkActivity(ctx, set.task, gifts, mics)
	for _, q := range []string{"INSERT INTO activity_payouts SELECT * FROM chaos_payout", "DROP TEMPORARY TABLE chaos_payout"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(acc.payoutProblems) != 1 {
		t.Errorf("a task payout missing: problems %v, want the one", acc.payoutProblems)
	}

	a, err := c.readActivity(ctx, set.rooms)
	if err != nil {
		t.Fatal(err)
	}
	key := "chaos-extra-" + strconv.FormatInt(set.rooms, 10)
	exec("INSERT INTO wallet_ledger (app_code, entry_key, user_id, delta, kind, operator, created_at_ms) VALUES (?, ?, 10000, 100, ?, ?, 1)",
		app, key, activity.LedgerKind, activity.LedgerOperator(set.rooms))
	bad, _, err := c.checkPaidOnce(ctx, a, gifts, mics)
	exec("DELETE FROM wallet_ledger WHERE app_code = ? AND entry_key = ?", app, key)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(bad, func(s string) bool { return strings.Contains(s, key) }) {
		t.Errorf("a second credit of the activity: problems %v, want %s named", bad, key)
	}
}
