package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
	"voiceroom/wallet"
)

// LedgerKind is the kind of the wallet ledger rows of activity rewards.
const LedgerKind = "activity"

// LedgerOperator is the operator column of activity id's ledger rows: the
// ledger shows which activity paid each coin (the entry key says for what).
func LedgerOperator(id int64) string { return "activity:" + strconv.FormatInt(id, 10) }

// Payout is one reward owed (a row of activity_payouts).
type Payout struct {
	ActivityID    int64  `json:"activity_id"`
	Reason        string `json:"reason"`
	PeriodStartMs int64  `json:"period_start_ms"`
	UserID        int64  `json:"user_id"`
	AppCode       string `json:"-"`
	Subject       string `json:"subject"`
	Rank          int    `json:"rank"`
	Score         int64  `json:"score"`
	Coins         int64  `json:"coins"`
	EntryKey      string `json:"entry_key"`
	CreatedAtMs   int64  `json:"created_at_ms"`
	PaidAtMs      int64  `json:"paid_at_ms"` // 0: not paid yet
}

// payoutCols are the columns scanPayout reads, in its order.
const payoutCols = `activity_id, reason, period_start_ms, user_id, app_code, subject, rank_no, score, coins, entry_key, created_at_ms, paid_at_ms`

func scanPayout(rows *sql.Rows) (Payout, error) {
	var p Payout
	err := rows.Scan(&p.ActivityID, &p.Reason, &p.PeriodStartMs, &p.UserID, &p.AppCode, &p.Subject, &p.Rank, &p.Score,
		&p.Coins, &p.EntryKey, &p.CreatedAtMs, &p.PaidAtMs)
	return p, err
}

// decodeBands reads the rewards column (JSON, or "null").
func decodeBands(raw []byte, bands *[]Band) error {
	if len(raw) == 0 || string(raw) == "null" {
		*bands = nil
		return nil
	}
	return json.Unmarshal(raw, bands)
}

// payBatch bounds the unpaid rows read at a time.
const payBatch = 100

// payAll pays every unpaid payout of a, each in a transaction of its own,
// renewing the lease as it goes. It stops at the first failure; what is
// left unpaid is paid by the next round (or by the process that takes
// the lease over).
func (s *Settler) payAll(ctx context.Context, a settleRow) error {
	renewed := s.now()
	for {
		unpaid, err := s.unpaid(ctx, a.ID)
		if err != nil {
			return err
		}
		if len(unpaid) == 0 {
			return nil
		}
		for _, p := range unpaid {
			if s.now().Sub(renewed) > s.cfg.Lease/3 {
				held, err := s.takeLease(ctx, a.ID)
				if err != nil || !held {
					return err
				}
				renewed = s.now()
			}
			paid, err := s.pay(ctx, a, p)
			if err != nil {
				return settleErr(a.ID, "pay "+p.key(), err)
			}
			if paid && s.afterPay != nil {
				if err := s.afterPay(p); err != nil {
					return fmt.Errorf("activity %d: after paying %s: %w", a.ID, p.key(), err)
				}
			}
		}
		if len(unpaid) < payBatch {
			return nil
		}
	}
}

func (p Payout) key() string { return EntryKey(p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID) }

// unpaid reads up to payBatch unpaid payouts of activity id, ranks first
// in rank order, then tasks by period.
func (s *Settler) unpaid(ctx context.Context, id int64) ([]Payout, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+payoutCols+` FROM activity_payouts WHERE activity_id = ? AND paid_at_ms = 0
		ORDER BY reason, rank_no, period_start_ms, user_id LIMIT ?`, id, payBatch)
	if err != nil {
		return nil, fmt.Errorf("activity %d: unpaid payouts: %w", id, err)
	}
	defer rows.Close()
	var out []Payout
	for rows.Next() {
		p, err := scanPayout(rows)
		if err != nil {
			return nil, fmt.Errorf("activity %d: unpaid payouts: %w", id, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// pay pays p in one transaction: under the activity's lease (its row
// locked, the fence), if p is still unpaid, credit the wallet through
// the ledger with p's entry key, mark p paid and write its
// ActivityRewarded outbox row. It reports whether it paid (false: paid
// already).
func (s *Settler) pay(ctx context.Context, a settleRow, p Payout) (paid bool, err error) {
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		paid = false
		if _, err := s.lockHeld(ctx, tx, a.ID, StateOpen, StatePaying); err != nil {
			return err
		}
		var paidAt int64
		err := tx.QueryRowContext(ctx, `SELECT paid_at_ms FROM activity_payouts
			WHERE activity_id = ? AND reason = ? AND period_start_ms = ? AND user_id = ? FOR UPDATE`,
			p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID).Scan(&paidAt)
		if errors.Is(err, sql.ErrNoRows) || (err == nil && paidAt != 0) {
			return nil
		}
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		key := p.key()
		replayed, err := wallet.CreditTx(ctx, tx, wallet.Entry{AppCode: a.AppCode, UserID: p.UserID, Amount: p.Coins,
			EntryKey: key, Kind: LedgerKind, Operator: LedgerOperator(a.ID), AtMs: now})
		if err != nil {
			return err
		}
		if replayed {
			// The ledger has it (paid once, and only this row's transaction
			// writes that key): mark the row, move nothing again.
			s.log.Warn("activity payout found in the ledger already", "activity_id", a.ID, "entry_key", key)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE activity_payouts SET paid_at_ms = ?
			WHERE activity_id = ? AND reason = ? AND period_start_ms = ? AND user_id = ?`,
			now, p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID); err != nil {
			return err
		}
		version, err := paidCount(ctx, tx, a.ID) // this one included
		if err != nil {
			return err
		}
		p.PaidAtMs = now
		body := roomevent.Rewarded{ActivityID: a.ID, Name: a.Name, Reason: p.Reason, PeriodStartMs: p.PeriodStartMs,
			UserID: p.UserID, Subject: p.Subject, Rank: p.Rank, Score: p.Score, Coins: p.Coins, EntryKey: key, PaidAtMs: now}
		if err := writeEvent(ctx, tx, a.Activity, version, roomevent.ActivityRewarded, key, body, now); err != nil {
			return err
		}
		if s.beforeCommit != nil {
			if err := s.beforeCommit(p); err != nil {
				return err
			}
		}
		paid = !replayed
		return nil
	})
	if err == nil && paid {
		s.metrics.paid(p.Reason, p.Coins)
	}
	return paid, err
}

// paidCount is the number of a's payouts paid: the room_version of the
// ActivityRewarded of the one just paid (they are paid one at a time
// under the activity's row lock), and, plus one, of ActivitySettled.
func paidCount(ctx context.Context, tx *sql.Tx, id int64) (int64, error) {
	var n int64
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM activity_payouts WHERE activity_id = ? AND paid_at_ms > 0`, id).Scan(&n)
	return n, err
}

// writeEvent writes one of a's events to the outbox in tx: room_id
// activity-<id>, room_version version, published by the relay like a
// room's.
func writeEvent(ctx context.Context, tx *sql.Tx, a Activity, version int64, eventType, commandID string, body any, nowMs int64) error {
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	env := bus.Envelope{EventID: uuid.Must(uuid.NewV7()).String(), AppCode: a.AppCode, RoomID: roomevent.ActivityRoomID(a.ID),
		RoomVersion: version, EventType: eventType, CommandID: commandID, OccurredAtMs: nowMs, Payload: payload}
	msg, err := env.Message()
	if err != nil {
		return err
	}
	_, err = outboxrelay.InsertRows(ctx, tx, []voiceroom.OutboxRow{{AppCode: a.AppCode, EventID: env.EventID, RoomID: env.RoomID,
		RoomVersion: version, EventType: eventType, Envelope: msg.Data, CreatedAtMs: nowMs}}, false, nowMs)
	return err
}

// finish ends a's settlement when no payout is left unpaid: it writes
// ActivitySettled (with the winners) and moves a to settled, in one
// transaction. It reports whether a is settled.
func (s *Settler) finish(ctx context.Context, a settleRow) (bool, error) {
	done := false
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		done = false
		cur, err := s.lockHeld(ctx, tx, a.ID, StatePaying)
		if err != nil {
			return err
		}
		var unpaid, payouts, coins int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(SUM(paid_at_ms = 0), 0), COUNT(*), COALESCE(SUM(coins), 0)
			FROM activity_payouts WHERE activity_id = ?`, a.ID).Scan(&unpaid, &payouts, &coins); err != nil {
			return err
		}
		if unpaid > 0 {
			return nil
		}
		winners, err := readWinners(ctx, tx, a.ID)
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		body := roomevent.ActivityResult{ActivityID: a.ID, Name: cur.Name, Kind: string(cur.Kind), Metric: string(cur.Metric),
			StartsAtMs: cur.StartsAtMs, EndsAtMs: cur.EndsAtMs, SettledAtMs: now, Payouts: payouts, Coins: coins, Winners: winners}
		if err := writeEvent(ctx, tx, cur.Activity, payouts+1, roomevent.ActivitySettled,
			"activity:"+strconv.FormatInt(a.ID, 10)+":settled", body, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE activities SET settle_state = 'settled', status = 'settled', settled_at_ms = ?,
			updated_at_ms = ?, settle_owner = '', settle_lease_until_ms = 0 WHERE activity_id = ?`, now, now, a.ID); err != nil {
			return err
		}
		done = true
		return nil
	})
	if err != nil {
		return false, settleErr(a.ID, "finish", err)
	}
	if done {
		s.metrics.moved(StateSettled)
		s.log.Info("activity settlement", "activity_id", a.ID, "state", string(StateSettled))
	}
	return done, nil
}

// readWinners reads the ranks an activity paid, in rank order.
func readWinners(ctx context.Context, q mysqldb.Querier, id int64) ([]roomevent.Winner, error) {
	rows, err := q.QueryContext(ctx, `SELECT rank_no, subject, user_id, score, coins FROM activity_payouts
		WHERE activity_id = ? AND reason = 'rank' ORDER BY rank_no, user_id`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	winners := []roomevent.Winner{}
	for rows.Next() {
		var w roomevent.Winner
		if err := rows.Scan(&w.Rank, &w.Subject, &w.UserID, &w.Score, &w.Coins); err != nil {
			return nil, err
		}
		winners = append(winners, w)
	}
	return winners, rows.Err()
}
