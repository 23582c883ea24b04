package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
)

// Settlements are the operators' controls of settlement (the admin API):
// settle now, re-run, and the payouts with the settlement's progress.
// They only change the stored state; the Settler loop of the activity role
// does the work.
type Settlements struct {
	db  *sql.DB
	now func() time.Time
}

// NewSettlements returns the controls on db; now is the clock.
func NewSettlements(db *sql.DB, now func() time.Time) *Settlements {
	return &Settlements{db: db, now: now}
}

// SettlementProgress is where an activity's settlement stands.
type SettlementProgress struct {
	ActivityID  int64  `json:"activity_id"`
	SettleState string `json:"settle_state"`
	Status      string `json:"status"`
	EndsAtMs    int64  `json:"ends_at_ms"`
	// Owner is the process holding the settlement ("" when none) until
	// LeaseUntilMs.
	Owner        string `json:"owner"`
	LeaseUntilMs int64  `json:"lease_until_ms"`
	SettledAtMs  int64  `json:"settled_at_ms"`
	Payouts      int64  `json:"payouts"`
	Paid         int64  `json:"paid"`
	Unpaid       int64  `json:"unpaid"`
	CoinsOwed    int64  `json:"coins_owed"`
	CoinsPaid    int64  `json:"coins_paid"`
}

// errUnknown is the NOT_FOUND of an activity another app's operator, or
// nobody, defined.
func errUnknown(id int64) error { return apperr.New(apperr.NotFound, "activity %d not found", id) }

// Progress reads the settlement of app's activity id.
func (s *Settlements) Progress(ctx context.Context, app string, id int64) (SettlementProgress, error) {
	p := SettlementProgress{ActivityID: id}
	var owner sql.NullString
	var startsAtMs int64
	err := s.db.QueryRowContext(ctx, `SELECT settle_state, status, starts_at_ms, ends_at_ms, settle_owner, settle_lease_until_ms, settled_at_ms
		FROM activities WHERE app_code = ? AND activity_id = ?`, app, id).
		Scan(&p.SettleState, &p.Status, &startsAtMs, &p.EndsAtMs, &owner, &p.LeaseUntilMs, &p.SettledAtMs)
	if errors.Is(err, sql.ErrNoRows) {
		return p, errUnknown(id)
	}
	if err != nil {
		return p, unavailable(err)
	}
	// The answer's status is the API's (as GET .../{activity_id} gives
	// it), not the stored column, which holds only settled and cancelled.
	p.Status = string(DeriveStatus(Status(p.Status), SettleState(p.SettleState), startsAtMs, p.EndsAtMs, s.now().UnixMilli()))
	p.Owner = owner.String
	if p.LeaseUntilMs < s.now().UnixMilli() {
		p.Owner, p.LeaseUntilMs = "", 0 // lapsed: nobody holds it
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(paid_at_ms > 0), 0), COALESCE(SUM(coins), 0),
		COALESCE(SUM(IF(paid_at_ms > 0, coins, 0)), 0) FROM activity_payouts WHERE activity_id = ?`, id).
		Scan(&p.Payouts, &p.Paid, &p.CoinsOwed, &p.CoinsPaid); err != nil {
		return p, unavailable(err)
	}
	p.Unpaid = p.Payouts - p.Paid
	return p, nil
}

func unavailable(err error) error {
	return apperr.Wrap(apperr.Unavailable, "activities unavailable", err)
}

// SettleNowMargin is how far after the request a settled-now activity
// ends. The scorers read an activity's end from a cached list, without a
// lock of its row (score.go), so a list read while the change commits
// still holds the old end; every event that list can count occurred
// before the change committed, which the margin keeps before the new
// end: the score is then exactly the events before ends_at_ms, as the
// stored window says.
const SettleNowMargin = RetroactiveMargin

// SettleNow ends app's activity id at once: a running activity's
// ends_at_ms becomes now plus SettleNowMargin, and it settles as any ended
// one does (after the grace and once the scoring durable has passed the
// new end). An activity that has ended already, or ends within the
// margin, is left as it is; one not started yet, cancelled or settled is
// FAILED_PRECONDITION. A change that could not commit within half the
// margin is rolled back, UNAVAILABLE: asking again is safe.
func (s *Settlements) SettleNow(ctx context.Context, app string, id int64) (SettlementProgress, error) {
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		var starts, ends int64
		var status, state string
		err := tx.QueryRowContext(ctx, `SELECT starts_at_ms, ends_at_ms, status, settle_state FROM activities
			WHERE app_code = ? AND activity_id = ? FOR UPDATE`, app, id).Scan(&starts, &ends, &status, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return errUnknown(id)
		}
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		switch {
		case status == string(Cancelled) || state == string(StateCancelled):
			return apperr.New(apperr.FailedPrecondition, "activity %d is cancelled: it pays nothing", id)
		case state == string(StateSettled):
			return apperr.New(apperr.FailedPrecondition, "activity %d is settled already", id)
		case now < starts:
			return apperr.New(apperr.FailedPrecondition, "activity %d has not started (it starts at %d): cancel it instead", id, starts)
		case state != string(StateOpen) || now+SettleNowMargin.Milliseconds() >= ends:
			return nil // ended already: settling, or about to
		}
		if _, err := tx.ExecContext(ctx, `UPDATE activities SET ends_at_ms = ?, updated_at_ms = ? WHERE activity_id = ?`,
			now+SettleNowMargin.Milliseconds(), now, id); err != nil {
			return err
		}
		if took := s.now().UnixMilli() - now; took > SettleNowMargin.Milliseconds()/2 {
			return apperr.New(apperr.Unavailable, "settling activity %d took %d ms: rolled back, ask again", id, took)
		}
		return nil
	})
	if err != nil {
		return SettlementProgress{}, keepAppErr(err)
	}
	return s.Progress(ctx, app, id)
}

// Rerun re-runs a settlement that stopped half-way (frozen or paying with
// rewards unpaid, its process gone or failing): it frees the lease, so
// that the next round of any activity process takes it and pays what is
// still unpaid, and only that. An activity that is still open, cancelled
// or settled is FAILED_PRECONDITION.
func (s *Settlements) Rerun(ctx context.Context, app string, id int64) (SettlementProgress, error) {
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		var status, state string
		err := tx.QueryRowContext(ctx, `SELECT status, settle_state FROM activities WHERE app_code = ? AND activity_id = ? FOR UPDATE`,
			app, id).Scan(&status, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return errUnknown(id)
		}
		if err != nil {
			return err
		}
		switch {
		case status == string(Cancelled) || state == string(StateCancelled):
			return apperr.New(apperr.FailedPrecondition, "activity %d is cancelled: it pays nothing", id)
		case state == string(StateSettled):
			return apperr.New(apperr.FailedPrecondition, "activity %d is settled: every reward is paid", id)
		case state == string(StateOpen):
			return apperr.New(apperr.FailedPrecondition, "activity %d is not settling yet (settle it now to end it)", id)
		}
		_, err = tx.ExecContext(ctx, `UPDATE activities SET settle_owner = '', settle_lease_until_ms = 0, updated_at_ms = ?
			WHERE activity_id = ?`, s.now().UnixMilli(), id)
		return err
	})
	if err != nil {
		return SettlementProgress{}, keepAppErr(err)
	}
	return s.Progress(ctx, app, id)
}

func keepAppErr(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return unavailable(err)
}

// MaxPayoutsPage bounds a page of payouts.
const MaxPayoutsPage = 200

// PayoutsPage is one page of an activity's payouts, in (reason, rank,
// period, user) order; Next is the cursor of the next page ("" at the
// end).
type PayoutsPage struct {
	Payouts []Payout `json:"payouts"`
	Next    string   `json:"next_cursor"`
}

// Payouts lists app's activity id's payouts from cursor (""; the start),
// limit at a time (1..MaxPayoutsPage).
func (s *Settlements) Payouts(ctx context.Context, app string, id int64, cursor string, limit int) (PayoutsPage, error) {
	if limit < 1 || limit > MaxPayoutsPage {
		return PayoutsPage{}, apperr.Invalid("limit", "must be 1..%d", MaxPayoutsPage)
	}
	c, err := decodePayoutCursor(cursor)
	if err != nil {
		return PayoutsPage{}, err
	}
	var one int
	err = s.db.QueryRowContext(ctx, `SELECT 1 FROM activities WHERE app_code = ? AND activity_id = ?`, app, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return PayoutsPage{}, errUnknown(id)
	}
	if err != nil {
		return PayoutsPage{}, unavailable(err)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+payoutCols+` FROM activity_payouts WHERE activity_id = ?
		AND (reason, period_start_ms, user_id) > (?, ?, ?) ORDER BY reason, period_start_ms, user_id LIMIT ?`,
		id, c.reason, c.period, c.user, limit+1)
	if err != nil {
		return PayoutsPage{}, unavailable(err)
	}
	defer rows.Close()
	page := PayoutsPage{Payouts: []Payout{}}
	for rows.Next() {
		p, err := scanPayout(rows)
		if err != nil {
			return PayoutsPage{}, unavailable(err)
		}
		page.Payouts = append(page.Payouts, p)
	}
	if err := rows.Err(); err != nil {
		return PayoutsPage{}, unavailable(err)
	}
	if len(page.Payouts) > limit {
		page.Payouts = page.Payouts[:limit]
		last := page.Payouts[limit-1]
		page.Next = last.Reason + "." + strconv.FormatInt(last.PeriodStartMs, 10) + "." + strconv.FormatInt(last.UserID, 10)
	}
	return page, nil
}

type payoutCursor struct {
	reason       string
	period, user int64
}

// decodePayoutCursor reads "<reason>.<period_start_ms>.<user_id>"; ""
// is before every payout.
func decodePayoutCursor(s string) (payoutCursor, error) {
	if s == "" {
		return payoutCursor{period: -1 << 63, user: -1 << 63}, nil
	}
	parts := strings.Split(s, ".")
	bad := apperr.Invalid("cursor", "not a cursor of this listing (take next_cursor from the previous page)")
	if len(parts) != 3 || (parts[0] != ReasonRank && parts[0] != ReasonTask) {
		return payoutCursor{}, bad
	}
	period, err1 := strconv.ParseInt(parts[1], 10, 64)
	user, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return payoutCursor{}, bad
	}
	return payoutCursor{parts[0], period, user}, nil
}

// String names p for logs.
func (p SettlementProgress) String() string {
	return fmt.Sprintf("activity %d %s: %d/%d paid", p.ActivityID, p.SettleState, p.Paid, p.Payouts)
}
