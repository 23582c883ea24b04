package activity

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"

	"voiceroom/mysqldb"
)

// One transaction scores a whole delivery batch. Its row locks are taken
// in one order, the same in every scorer, so that N scorers on one
// durable (and the read back beside them) wait for each other but never
// deadlock: first the gifts' activity_seen rows, in (activity, event)
// order; then the mic seat rows, in (activity, room, speaker, version)
// order; then the score rows, in (activity, period, subject) order, each
// written by an upsert (never a locking read of a row that may be missing,
// whose gap lock is what two inserts deadlocked on); then the task
// payouts, in key order.

// scoreKey is a row of activity_scores.
type scoreKey struct {
	activityID, periodStartMs int64
	subject                   string
}

func (k scoreKey) compare(o scoreKey) int {
	return cmp.Or(cmp.Compare(k.activityID, o.activityID), cmp.Compare(k.periodStartMs, o.periodStartMs),
		strings.Compare(k.subject, o.subject))
}

// scoreOp is a change to a score row that a transaction's events make,
// written by applyTx at its end.
type scoreOp struct {
	a           Activity
	key         scoreKey
	periodEndMs int64
	app         string
	ownerID     int64 // a room's owner, paid a room's task reward
	v           int64 // added to the score (a mic correction may be negative)
	// reached raises reached_at_ms (GREATEST), or, when exact, sets it
	// (a mic correction that ends the last session earlier).
	reached int64
	exact   bool
	lowered bool // the board in Redis must be rebuilt (a correction down)
}

// txWork is what one transaction's events change in the scores, and the
// board entries of its duplicates (written again after the commit).
type txWork struct {
	ops    []scoreOp
	raised []raisedEntry
}

// addGift adds ev's gift to a's score of its subject.
func (w *txWork) addGift(s *Scorer, a Activity, ev event) {
	subject, v := ev.giftScore(a)
	at := ev.env.OccurredAtMs
	ps, pe := s.period(a, at)
	w.ops = append(w.ops, scoreOp{a: a, key: scoreKey{a.ID, ps, subject}, periodEndMs: pe, app: ev.env.AppCode,
		ownerID: ev.card.OwnerUserID, v: v, reached: at})
}

// batchTx scores evs inside tx and returns the board entries raised and
// each (event, activity)'s result.
func (s *Scorer) batchTx(ctx context.Context, tx *sql.Tx, evs []pendingEvent, now int64) ([]raisedEntry, []string, error) {
	var w txWork
	var keys []seenKey
	type micItem struct {
		a  Activity
		ev *event
	}
	var mics []micItem
	for i := range evs {
		for _, a := range evs[i].work {
			if a.Metric == MicSeconds {
				mics = append(mics, micItem{a, &evs[i].ev})
				continue
			}
			keys = append(keys, seenKey{a.ID, evs[i].ev.env.EventID})
		}
	}
	fresh, err := markSeenAllTx(ctx, tx, keys)
	if err != nil {
		return nil, nil, err
	}
	results := make([]string, 0, len(keys)+len(mics))
	for _, pe := range evs {
		for _, a := range pe.work {
			if a.Metric == MicSeconds {
				continue
			}
			k := seenKey{a.ID, pe.ev.env.EventID}
			if !fresh[k] {
				res, err := s.duplicateTx(ctx, tx, a, pe.ev, &w)
				if err != nil {
					return nil, nil, err
				}
				results = append(results, res)
				continue
			}
			fresh[k] = false // a second copy in the batch counts nothing
			w.addGift(s, a, pe.ev)
			results = append(results, resultScored)
		}
	}
	// The pairing of mic_seconds does not depend on the order its events
	// are scored in (score_mic.go): take them in key order.
	slices.SortStableFunc(mics, func(x, y micItem) int {
		return cmp.Or(cmp.Compare(x.a.ID, y.a.ID), strings.Compare(x.ev.env.RoomID, y.ev.env.RoomID),
			cmp.Compare(x.ev.userID, y.ev.userID), cmp.Compare(x.ev.env.RoomVersion, y.ev.env.RoomVersion))
	})
	for _, m := range mics {
		res, err := s.micTx(ctx, tx, m.a, *m.ev, now, &w)
		if err != nil {
			return nil, nil, err
		}
		results = append(results, res)
	}
	raised, err := s.applyTx(ctx, tx, &w, now)
	if err != nil {
		return nil, nil, err
	}
	return raised, results, nil
}

// seenKey is a row of activity_seen.
type seenKey struct {
	activityID int64
	eventID    string
}

// markSeenAllTx writes the activity_seen rows of keys, in key order, and
// reports which were new (the others were counted before).
func markSeenAllTx(ctx context.Context, tx *sql.Tx, keys []seenKey) (map[seenKey]bool, error) {
	return mysqldb.InsertFresh(ctx, tx, "activity_seen", "activity_id, event_id", "(?, ?)", keys,
		func(x, y seenKey) int {
			return cmp.Or(cmp.Compare(x.activityID, y.activityID), strings.Compare(x.eventID, y.eventID))
		},
		func(k seenKey) []any { return []any{k.activityID, k.eventID} })
}

// scoreChunk bounds the rows of one upsert.
const scoreChunk = 500

// applyTx writes w's score changes inside tx, in key order: one upsert
// per chunk of rows (each row's changes added up), the exact reach times,
// then a read back of the rows (locked by the upsert) for the board
// entries and the task targets reached, whose payouts it writes. It
// returns every entry raised, w's duplicates' first.
func (s *Scorer) applyTx(ctx context.Context, tx *sql.Tx, w *txWork, now int64) ([]raisedEntry, error) {
	if len(w.ops) == 0 {
		return w.raised, nil
	}
	byKey := map[scoreKey][]int{}
	var keys []scoreKey
	for i, op := range w.ops {
		if _, ok := byKey[op.key]; !ok {
			keys = append(keys, op.key)
		}
		byKey[op.key] = append(byKey[op.key], i)
	}
	slices.SortFunc(keys, scoreKey.compare)
	type sum struct {
		v, reached int64
		exact      bool
		exactAt    int64
	}
	sums := make(map[scoreKey]sum, len(keys))
	for _, k := range keys {
		var x sum
		for _, i := range byKey[k] {
			op := w.ops[i]
			x.v += op.v
			switch {
			case op.exact:
				x.exact, x.exactAt = true, op.reached
			default:
				x.reached = max(x.reached, op.reached)
				if x.exact {
					x.exactAt = max(x.exactAt, op.reached)
				}
			}
		}
		sums[k] = x
	}
	for rest := keys; len(rest) > 0; {
		chunk := rest[:min(len(rest), scoreChunk)]
		rest = rest[len(chunk):]
		var rows mysqldb.Rows
		for _, k := range chunk {
			x := sums[k]
			rows.Add("(?, ?, ?, ?, ?, ?)", k.activityID, k.periodStartMs, k.subject, x.v, x.reached, now)
		}
		if _, err := rows.Exec(ctx, tx, `INSERT INTO activity_scores (activity_id, period_start_ms, subject, score, reached_at_ms, updated_at_ms) VALUES `,
			` ON DUPLICATE KEY UPDATE score = score + VALUES(score), reached_at_ms = GREATEST(reached_at_ms, VALUES(reached_at_ms)),
			updated_at_ms = VALUES(updated_at_ms)`); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		if x := sums[k]; x.exact {
			if _, err := tx.ExecContext(ctx, `UPDATE activity_scores SET reached_at_ms = ? WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
				x.exactAt, k.activityID, k.periodStartMs, k.subject); err != nil {
				return nil, err
			}
		}
	}
	final, err := readScoresTx(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	raised := w.raised
	var payouts []Payout
	for _, k := range keys {
		e := final[k]
		cur := e.Score - sums[k].v // the score before this transaction
		lowered := false
		var last scoreOp
		for _, i := range byKey[k] {
			op := w.ops[i]
			prev := cur
			cur += op.v
			lowered = lowered || op.lowered
			last = op
			a := op.a
			if a.Kind != Task || a.Target <= 0 || prev >= a.Target || cur < a.Target {
				continue
			}
			user := op.ownerID
			if !a.ByRoom() {
				user, _ = strconv.ParseInt(k.subject, 10, 64)
			}
			if user <= 0 {
				s.log.Warn("activity: task reached by a room without an owner: nothing to pay", "activity_id", a.ID, "subject", k.subject)
				continue
			}
			payouts = append(payouts, Payout{ActivityID: a.ID, Reason: ReasonTask, PeriodStartMs: k.periodStartMs, UserID: user,
				AppCode: op.app, Subject: k.subject, Score: cur, Coins: a.RewardCoins})
		}
		raised = append(raised, raisedEntry{activityID: k.activityID, periodStartMs: k.periodStartMs, periodEndMs: last.periodEndMs,
			entry: e, lowered: lowered})
	}
	if err := insertTaskPayoutsTx(ctx, tx, payouts, now); err != nil {
		return nil, err
	}
	return raised, nil
}

// readScoresTx reads the rows of keys (sorted), locked already by this
// transaction's upsert: a locking read, so that it sees their latest
// version even where the upsert changed nothing, through the primary key
// only (a locking scan of the board index would lock its gaps, where
// other scorers' score changes insert: the deadlocks this order avoids).
func readScoresTx(ctx context.Context, tx *sql.Tx, keys []scoreKey) (map[scoreKey]Entry, error) {
	out := make(map[scoreKey]Entry, len(keys))
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && j-i < scoreChunk && keys[j].activityID == keys[i].activityID && keys[j].periodStartMs == keys[i].periodStartMs {
			j++
		}
		args := []any{keys[i].activityID, keys[i].periodStartMs}
		for _, k := range keys[i:j] {
			args = append(args, k.subject)
		}
		rows, err := tx.QueryContext(ctx, `SELECT subject, score, reached_at_ms FROM activity_scores FORCE INDEX (PRIMARY) WHERE activity_id = ? AND period_start_ms = ?
			AND subject IN (`+mysqldb.Placeholders(j-i)+`) FOR UPDATE`, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var e Entry
			if err := rows.Scan(&e.Subject, &e.Score, &e.ReachedAtMs); err != nil {
				rows.Close()
				return nil, err
			}
			out[scoreKey{keys[i].activityID, keys[i].periodStartMs, e.Subject}] = e
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		i = j
	}
	return out, nil
}

// insertTaskPayoutsTx writes the task rewards reached, in key order (a
// period's reward is owed once: INSERT IGNORE).
func insertTaskPayoutsTx(ctx context.Context, tx *sql.Tx, ps []Payout, now int64) error {
	if len(ps) == 0 {
		return nil
	}
	slices.SortStableFunc(ps, func(x, y Payout) int {
		return cmp.Or(cmp.Compare(x.ActivityID, y.ActivityID), cmp.Compare(x.PeriodStartMs, y.PeriodStartMs), cmp.Compare(x.UserID, y.UserID))
	})
	var rows mysqldb.Rows
	for _, p := range ps {
		rows.Add("(?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)", p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID, p.AppCode, p.Subject, p.Score, p.Coins,
			EntryKey(p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID), now)
	}
	_, err := rows.Exec(ctx, tx, `INSERT IGNORE INTO activity_payouts (activity_id, reason, period_start_ms, user_id, app_code, subject, rank_no, score, coins,
		entry_key, created_at_ms) VALUES `, "")
	return err
}
