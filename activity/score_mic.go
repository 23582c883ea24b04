package activity

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"voiceroom/mysqldb"
	"voiceroom/roomranks"
)

// mic_seconds pairs a speaker's RoomMicUp with whatever ends that seat:
// RoomMicDown (also a seat's lock, which takes its speaker down first),
// RoomMicChanged (the seat ends and the next one starts at once),
// RoomUserLeft from a seat (leave, sweep, kick, ban, close),
// RoomUserKicked, and RoomClosed or RoomBanned (every seat of the room).
// A session [start, end) adds the seconds of [max(start, starts_at),
// min(end, ends_at)) to the speaker's score, split over the task's days or
// weeks. A session still open at the window's end is ended there by
// CloseMicSessions, which settlement calls.
//
// The pairing does not depend on the order the events are scored in: an
// event redelivered behind the room's later ones (a scorer killed before
// it acknowledged, several scorers on the durable, a read back beside
// the live durable) counts as if it had come in order. Each seat event
// of a speaker (and each room-wide end, user 0) is a row of
// activity_mic_seats; a new row's effect is the speaker's seconds
// computed from all their rows in room order (room_version) minus those
// computed without it, period by period, added to the scores (a
// correction may lower a score; the board in Redis is then dropped and
// rebuilt from MySQL). activity_mic_open holds each speaker's session
// still open in that order (read by CloseMicSessions and the tests).
//
// activity_mic_open says nothing activity_mic_seats does not: a
// speaker's open session in a room is what seatSeconds leaves open over
// their rows and the room's (user 0) in room order, and recountTx
// rewrites the row from exactly that, in the same transaction, each time
// one of those rows is added. It is a derived table kept for its
// readers: CloseMicSessions lists the sessions to end from it by primary
// key (from the seats it would pair every speaker's rows of the
// activity), and the fault suite (chaos/activity_test.go) checks it
// against its own recomputation. Its cost is a DELETE and at most one
// INSERT per recount. Dropping it would mean: CloseMicSessions pairs the
// seat rows of each (room, speaker) with rows, the fault suite reads the
// pairing instead, and a migration drops the table; no score changes.

// seatKind is what a row of activity_mic_seats does to its speaker's seat.
type seatKind int

const (
	seatStart  seatKind = 1 // RoomMicUp
	seatEnd    seatKind = 2 // RoomMicDown, RoomUserLeft from a seat, RoomUserKicked, a room's close or ban, the window's end
	seatChange seatKind = 3 // RoomMicChanged: the seat ends and the next one starts
)

// seatRow is one row of activity_mic_seats (user 0: the room's).
type seatRow struct {
	user, version int64
	kind          seatKind
	atMs          int64
}

// micTx scores ev, a mic event that counts for a, inside tx (its
// activity_seen row not written yet); the score changes go to w.
func (s *Scorer) micTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64, w *txWork) (string, error) {
	var kind seatKind
	switch ev.micOp {
	case micOpen:
		kind = seatStart
	case micReopen:
		kind = seatChange
		if ev.env.OccurredAtMs >= a.EndsAtMs || !inRegions(a, ev.card.VisibleRegionID) {
			kind = seatEnd // the next seat does not count
		}
	case micClose, micCloseRoom:
		kind = seatEnd
	default:
		return resultScored, nil
	}
	user := ev.userID
	if ev.micOp == micCloseRoom {
		user = 0
	} else if user <= 0 || (ev.micOp == micClose && !ev.seatEnd) {
		return resultScored, nil // a listener's leave: no seat ends
	}
	if kind == seatEnd && !inRegions(a, ev.card.VisibleRegionID) {
		// An end counts where a start of the room may: in a's regions (a
		// room's start elsewhere never counted) or after a row of the
		// speaker's (the room moved). Only a room outside a's regions
		// needs the read.
		q, args := `SELECT EXISTS (SELECT 1 FROM activity_mic_seats WHERE activity_id = ? AND room_id = ? AND user_id IN (?, 0))`, []any{a.ID, ev.env.RoomID, user}
		if user == 0 { // a room's close: any speaker's row
			q, args = `SELECT EXISTS (SELECT 1 FROM activity_mic_seats WHERE activity_id = ? AND room_id = ?)`, args[:2]
		}
		var any int
		if err := tx.QueryRowContext(ctx, q, args...).Scan(&any); err != nil {
			return "", err
		}
		if any == 0 {
			return resultScored, nil
		}
	}
	if fresh, err := markSeenTx(ctx, tx, a, ev); err != nil {
		return "", err
	} else if !fresh {
		return s.duplicateTx(ctx, tx, a, ev, w)
	}
	if _, err := s.seatTx(ctx, tx, a, ev.env.AppCode, ev.env.RoomID, user, seatRow{user: user, version: ev.env.RoomVersion, kind: kind, atMs: ev.env.OccurredAtMs}, now, w); err != nil {
		return "", err
	}
	return resultScored, nil
}

// seatTx inserts row for user (0: every speaker of the room) in room and
// adds the difference it makes to each speaker's seconds to w. inserted
// is false when the row was there already (nothing changes).
func (s *Scorer) seatTx(ctx context.Context, tx *sql.Tx, a Activity, app, room string, user int64, row seatRow, now int64, w *txWork) (bool, error) {
	res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO activity_mic_seats (activity_id, room_id, user_id, room_version, kind, at_ms)
		VALUES (?, ?, ?, ?, ?, ?)`, a.ID, room, user, row.version, int(row.kind), row.atMs)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	users := []int64{user}
	if user == 0 {
		if users, err = seatUsers(ctx, tx, a.ID, room); err != nil {
			return false, err
		}
	}
	for _, u := range users {
		if err := s.recountTx(ctx, tx, a, app, room, u, row, now, w); err != nil {
			return false, err
		}
	}
	return true, nil
}

// seatUsers lists the speakers with rows of their own in room. It is a
// locking read: a plain one would read the transaction's snapshot, fixed
// by its first read (an earlier event of the batch), and miss a speaker
// whose first row another scorer committed since, whose session the
// room's end would then leave open. The rows it locks are those
// recountTx locks next (in the same order); a scorer adding a speaker's
// row to the room meanwhile waits, or deadlocks and is run again.
func seatUsers(ctx context.Context, tx *sql.Tx, activityID int64, room string) ([]int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT user_id FROM activity_mic_seats WHERE activity_id = ? AND room_id = ? AND user_id > 0
		ORDER BY user_id FOR UPDATE`, activityID, room)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var u int64
		if err := rows.Scan(&u); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// recountTx adds to w the difference added, a new row of user's (or of
// the room's), makes to user's seconds in room, and stores user's session
// still open.
func (s *Scorer) recountTx(ctx context.Context, tx *sql.Tx, a Activity, app, room string, user int64, added seatRow, now int64, w *txWork) error {
	rows, err := tx.QueryContext(ctx, `SELECT user_id, room_version, kind, at_ms FROM activity_mic_seats WHERE activity_id = ? AND room_id = ? AND user_id IN (?, 0)
		ORDER BY room_version, user_id DESC FOR UPDATE`, a.ID, room, user)
	if err != nil {
		return err
	}
	var all, without []seatRow
	for rows.Next() {
		var r seatRow
		var k int
		if err := rows.Scan(&r.user, &r.version, &k, &r.atMs); err != nil {
			rows.Close()
			return err
		}
		r.kind = seatKind(k)
		all = append(all, r)
		if r.user != added.user || r.version != added.version {
			without = append(without, r)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	after, open := s.seatSeconds(a, all)
	before, _ := s.seatSeconds(a, without)
	subject := strconv.FormatInt(user, 10)
	for _, ps := range periodKeys(after, before) {
		d := after[ps].seconds - before[ps].seconds
		earlier := after[ps].lastEndMs < before[ps].lastEndMs
		if d == 0 && after[ps].lastEndMs == before[ps].lastEndMs {
			continue
		}
		op := scoreOp{a: a, app: app, v: d, reached: after[ps].lastEndMs, lowered: d < 0 || earlier}
		var pe int64
		op.key.periodStartMs, pe = s.period(a, ps)
		op.key.activityID, op.key.subject, op.periodEndMs = a.ID, subject, pe
		if d < 0 {
			op.reached = 0 // unchanged
		}
		if earlier {
			// The room's last session in the period now ends earlier: the
			// speaker reached the score at the latest end of any room's.
			others, err := s.otherRoomsLastEnd(ctx, tx, a, room, user, ps)
			if err != nil {
				return err
			}
			op.reached, op.exact = max(after[ps].lastEndMs, others), true
		}
		w.ops = append(w.ops, op)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM activity_mic_open WHERE activity_id = ? AND room_id = ? AND user_id = ?`, a.ID, room, user); err != nil {
		return err
	}
	if open != nil {
		if _, err := tx.ExecContext(ctx, `INSERT INTO activity_mic_open (activity_id, room_id, user_id, since_ms, since_version) VALUES (?, ?, ?, ?, ?)`,
			a.ID, room, user, open.atMs, open.version); err != nil {
			return err
		}
	}
	return nil
}

// otherRoomsLastEnd is the end of user's last session in period ps in
// the rooms other than room (0 for none).
func (s *Scorer) otherRoomsLastEnd(ctx context.Context, tx *sql.Tx, a Activity, room string, user, ps int64) (int64, error) {
	rows, err := tx.QueryContext(ctx, `SELECT room_id, user_id, room_version, kind, at_ms FROM activity_mic_seats
		WHERE activity_id = ? AND room_id <> ? AND (user_id = ? OR (user_id = 0 AND room_id IN
			(SELECT room_id FROM activity_mic_seats WHERE activity_id = ? AND user_id = ?)))
		ORDER BY room_id, room_version, user_id DESC`, a.ID, room, user, a.ID, user)
	if err != nil {
		return 0, err
	}
	byRoom := map[string][]seatRow{}
	for rows.Next() {
		var r seatRow
		var k int
		var rm string
		if err := rows.Scan(&rm, &r.user, &r.version, &k, &r.atMs); err != nil {
			rows.Close()
			return 0, err
		}
		r.kind = seatKind(k)
		byRoom[rm] = append(byRoom[rm], r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var last int64
	for _, rs := range byRoom {
		secs, _ := s.seatSeconds(a, rs)
		last = max(last, secs[ps].lastEndMs)
	}
	return last, nil
}

// periodSeconds is a speaker's seconds in one period of an activity, and
// the end of their last session in it.
type periodSeconds struct {
	seconds, lastEndMs int64
}

// seatSeconds pairs rows (in room order) into sessions: a start opens
// one (a start while one is open keeps the first), an end ends the open
// one, a change ends it and opens the next. It returns the seconds by
// period start, and the session left open (its start), if any.
func (s *Scorer) seatSeconds(a Activity, rows []seatRow) (map[int64]periodSeconds, *seatRow) {
	out := map[int64]periodSeconds{}
	var open *seatRow
	add := func(since, end int64) {
		for _, p := range micPieces(s.cal, a, since, end) {
			if p.seconds <= 0 {
				continue
			}
			ps, _ := s.period(a, p.atMs)
			x := out[ps]
			x.seconds += p.seconds
			x.lastEndMs = max(x.lastEndMs, p.endMs)
			out[ps] = x
		}
	}
	for i := range rows {
		r := rows[i]
		switch r.kind {
		case seatStart:
			if open == nil {
				open = &rows[i]
			}
		case seatEnd:
			if open != nil {
				add(open.atMs, r.atMs)
				open = nil
			}
		case seatChange:
			if open != nil {
				add(open.atMs, r.atMs)
			}
			open = &rows[i]
		}
	}
	return out, open
}

// periodKeys are the period starts of a and b, in order.
func periodKeys(a, b map[int64]periodSeconds) []int64 {
	var out []int64
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// micPiece is the part of a session in one period of an activity.
type micPiece struct {
	atMs, endMs int64 // [atMs, endMs) within one period
	seconds     int64
}

// micPieces splits the session [since, end) clipped to a's window over
// a's periods.
func micPieces(cal *roomranks.Calendar, a Activity, since, end int64) []micPiece {
	from, to := max(since, a.StartsAtMs), min(end, a.EndsAtMs)
	var out []micPiece
	for from < to {
		_, pe := periodOf(cal, a, from)
		stop := min(pe, to)
		if stop <= from { // cannot happen with a sane calendar; never loop
			break
		}
		out = append(out, micPiece{atMs: from, endMs: stop, seconds: (stop - from) / 1000})
		from = stop
	}
	return out
}

// CloseMicSessions ends every mic session of a still open (a
// mic_seconds activity) at its window's end, adding their seconds up to
// ends_at_ms, and returns how many it ended (none once a's row is no
// longer open: cancelled, frozen or settled). Settlement calls it once
// the consumer has passed the end (plus grace), before it reads the
// ranks; it is safe to repeat and to run beside the consumer (each
// session ends once, in its own transaction). rdb may be nil (the boards
// are then rebuilt from MySQL when read).
func CloseMicSessions(ctx context.Context, db *sql.DB, rdb redis.UniversalClient, cfg ScoreConfig, a Activity) (int, error) {
	if a.Metric != MicSeconds {
		return 0, nil
	}
	s, err := newScorer(db, rdb, cfg, nil, nil)
	if err != nil {
		return 0, err
	}
	rows, err := db.QueryContext(ctx, `SELECT room_id, user_id FROM activity_mic_open WHERE activity_id = ? ORDER BY room_id, user_id`, a.ID)
	if err != nil {
		return 0, fmt.Errorf("activity %d: open mic sessions: %w", a.ID, err)
	}
	type session struct {
		room string
		user int64
	}
	var open []session
	for rows.Next() {
		var x session
		if err := rows.Scan(&x.room, &x.user); err != nil {
			rows.Close()
			return 0, err
		}
		open = append(open, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n := 0
	for _, x := range open {
		var raised []raisedEntry
		ended := false
		err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
			// Settlement calls this for an open activity, but a cancel
			// may commit meanwhile: the activity's row, locked first
			// (as every transaction that locks it does), says whether it
			// still scores. Not the scorers' hot path.
			ended, raised = false, nil
			var state string
			if err := tx.QueryRowContext(ctx, `SELECT settle_state FROM activities WHERE activity_id = ? LOCK IN SHARE MODE`, a.ID).
				Scan(&state); err != nil {
				return err
			}
			if state != string(StateOpen) {
				return nil
			}
			var err error
			var w txWork
			now := s.cfg.Now().UnixMilli()
			// The window's end ends the seat, after every event of the
			// room (the greatest version).
			if ended, err = s.seatTx(ctx, tx, a, a.AppCode, x.room, x.user,
				seatRow{user: x.user, version: math.MaxInt64, kind: seatEnd, atMs: a.EndsAtMs}, now, &w); err != nil {
				return err
			}
			raised, err = s.applyTx(ctx, tx, &w, now)
			return err
		})
		if err != nil {
			return n, fmt.Errorf("activity %d: end the mic session of %d in %s: %w", a.ID, x.user, x.room, err)
		}
		if ended {
			n++
		}
		if err := s.writeBoards(ctx, coalesce(raised)); err != nil {
			s.log.Warn("activity: board write failed after ending mic sessions", "activity_id", a.ID, "error", err)
		}
	}
	return n, nil
}
