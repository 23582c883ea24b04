package activity

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"

	"github.com/redis/go-redis/v9"

	"voiceroom/mysqldb"
	"voiceroom/roomranks"
)

// mic_seconds pairs a speaker's RoomMicUp with whatever ends that seat:
// RoomMicDown (also a seat's lock, which takes its speaker down first),
// RoomMicChanged (the seat ends and the next one starts at once),
// RoomUserLeft (leave, sweep, kick, ban, close), RoomUserKicked, and
// RoomClosed or RoomBanned (every session of the room). An open session
// is a row of activity_mic_open; its end adds the seconds of
// [max(since, starts_at), min(end, ends_at)) to the speaker's score,
// split over the task's days or weeks. A session still open at the
// window's end is closed by CloseMicSessions, which settlement calls.

// openMicTx opens ev's speaker's session in a (its activity_seen row is
// written); a seat change first closes the session it ends.
func (s *Scorer) openMicTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64) (string, []raisedEntry, error) {
	var raised []raisedEntry
	if ev.micOp == micReopen {
		r, err := s.closeSessionTx(ctx, tx, a, ev.env.AppCode, ev.env.RoomID, ev.userID, ev.env.OccurredAtMs, ev.env.RoomVersion, now)
		if err != nil {
			return "", nil, err
		}
		raised = r
		if ev.env.OccurredAtMs >= a.EndsAtMs || !inRegions(a, ev.card.VisibleRegionID) {
			return resultScored, raised, nil
		}
	}
	if ev.userID <= 0 {
		return resultScored, raised, nil
	}
	// A session already open (a RoomMicUp not closed: a missed end) keeps
	// its start.
	if _, err := tx.ExecContext(ctx, `INSERT IGNORE INTO activity_mic_open (activity_id, room_id, user_id, since_ms, since_version) VALUES (?, ?, ?, ?, ?)`,
		a.ID, ev.env.RoomID, ev.userID, ev.env.OccurredAtMs, ev.env.RoomVersion); err != nil {
		return "", nil, err
	}
	return resultScored, raised, nil
}

// closeMicTx ends the sessions ev ends in a: those opened by an earlier
// event of the room (a smaller room_version). It writes an activity_seen
// row only when it ends one: an end with nothing open changes nothing,
// however often it comes. An end scored again out of order (at the seam
// of a read back, the read back and the live durable both see it, each in
// the room's order but one ahead of the other) therefore either finds
// its seen row (it ended something the first time) or finds nothing to
// end: a session opened later in the room has a greater version.
func (s *Scorer) closeMicTx(ctx context.Context, tx *sql.Tx, a Activity, ev event, now int64) (string, []raisedEntry, error) {
	var users []int64
	if ev.micOp == micCloseRoom {
		rows, err := tx.QueryContext(ctx, `SELECT user_id FROM activity_mic_open WHERE activity_id = ? AND room_id = ? AND since_version < ?
			ORDER BY user_id FOR UPDATE`, a.ID, ev.env.RoomID, ev.env.RoomVersion)
		if err != nil {
			return "", nil, err
		}
		for rows.Next() {
			var u int64
			if err := rows.Scan(&u); err != nil {
				rows.Close()
				return "", nil, err
			}
			users = append(users, u)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return "", nil, err
		}
	} else if ev.userID > 0 {
		users = []int64{ev.userID}
	}
	var raised []raisedEntry
	closed := false
	for _, u := range users {
		var since int64
		err := tx.QueryRowContext(ctx, `SELECT since_ms FROM activity_mic_open WHERE activity_id = ? AND room_id = ? AND user_id = ? AND since_version < ? FOR UPDATE`,
			a.ID, ev.env.RoomID, u, ev.env.RoomVersion).Scan(&since)
		if err == sql.ErrNoRows {
			continue
		}
		if err != nil {
			return "", nil, err
		}
		if !closed {
			res, err := tx.ExecContext(ctx, `INSERT IGNORE INTO activity_seen (activity_id, event_id) VALUES (?, ?)`, a.ID, ev.env.EventID)
			if err != nil {
				return "", nil, err
			}
			if n, err := res.RowsAffected(); err != nil {
				return "", nil, err
			} else if n == 0 {
				return s.duplicateTx(ctx, tx, a, ev)
			}
			closed = true
		}
		r, err := s.closeSessionTx(ctx, tx, a, ev.env.AppCode, ev.env.RoomID, u, ev.env.OccurredAtMs, ev.env.RoomVersion, now)
		if err != nil {
			return "", nil, err
		}
		raised = append(raised, r...)
	}
	if !closed {
		return resultScored, nil, nil
	}
	return resultScored, raised, nil
}

// closeSessionTx deletes the open session of user in room opened before
// room version beforeVersion, if any, and adds its seconds in a's window,
// up to endMs, to the user's scores.
func (s *Scorer) closeSessionTx(ctx context.Context, tx *sql.Tx, a Activity, app, room string, user, endMs, beforeVersion, now int64) ([]raisedEntry, error) {
	var since int64
	err := tx.QueryRowContext(ctx, `SELECT since_ms FROM activity_mic_open WHERE activity_id = ? AND room_id = ? AND user_id = ? AND since_version < ? FOR UPDATE`,
		a.ID, room, user, beforeVersion).Scan(&since)
	if err == sql.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM activity_mic_open WHERE activity_id = ? AND room_id = ? AND user_id = ?`, a.ID, room, user); err != nil {
		return nil, err
	}
	var raised []raisedEntry
	for _, p := range micPieces(s.cal, a, since, endMs) {
		if p.seconds <= 0 {
			continue
		}
		r, err := s.addTx(ctx, tx, a, app, strconv.FormatInt(user, 10), 0, p.atMs, p.seconds, p.endMs, now)
		if err != nil {
			return nil, err
		}
		raised = append(raised, r)
	}
	return raised, nil
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
// ends_at_ms, and returns how many it ended. Settlement calls it once
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
		err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
			var err error
			raised, err = s.closeSessionTx(ctx, tx, a, a.AppCode, x.room, x.user, a.EndsAtMs, math.MaxInt64, s.cfg.Now().UnixMilli())
			return err
		})
		if err != nil {
			return n, fmt.Errorf("activity %d: end the mic session of %d in %s: %w", a.ID, x.user, x.room, err)
		}
		n++
		if err := s.writeBoards(ctx, raised); err != nil {
			s.log.Warn("activity: board write failed after ending mic sessions", "activity_id", a.ID, "error", err)
		}
	}
	return n, nil
}
