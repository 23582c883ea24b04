package activity

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
)

// Store keeps the activities' definitions and status in MySQL (table
// activities, migration 00016). Every method of one app acts within it:
// another app's activity is NOT_FOUND. MySQL failing is UNAVAILABLE.
type Store struct {
	db  *sql.DB
	now func() time.Time
}

// NewStore returns the store over db; now is the clock the derived
// statuses are read with (nil: time.Now).
func NewStore(db *sql.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

// DB is the store's database, for the parts of the package that keep
// their own tables beside it (scores, payouts).
func (s *Store) DB() *sql.DB { return s.db }

// activityColumns are read by scanActivity, in its order.
const activityColumns = `app_code, activity_id, name, kind, metric, gift_ids, region_ids, starts_at_ms, ends_at_ms,
	rewards, target, period, reward_coins, status, settle_state, created_by, created_at_ms, updated_at_ms,
	catchup_state, catchup_seq, live_from_seq, catchup_lost_from_seq, catchup_lost_to_seq`

type scanner interface{ Scan(dest ...any) error }

// scanActivity reads one row of activityColumns; its Status is derived at
// nowMs (DeriveStatus).
func scanActivity(s scanner, nowMs int64) (Activity, error) {
	var a Activity
	var gifts, regions, rewards sql.NullString
	var status, state string
	err := s.Scan(&a.AppCode, &a.ID, &a.Name, &a.Kind, &a.Metric, &gifts, &regions, &a.StartsAtMs, &a.EndsAtMs,
		&rewards, &a.Target, &a.Period, &a.RewardCoins, &status, &state, &a.CreatedBy, &a.CreatedAtMs, &a.UpdatedAtMs,
		&a.Catchup.State, &a.Catchup.Seq, &a.Catchup.LiveFromSeq, &a.Catchup.LostFromSeq, &a.Catchup.LostToSeq)
	if err != nil {
		return Activity{}, err
	}
	a.Catchup.Incomplete = a.Catchup.LostToSeq > 0
	if err := unmarshalColumn("gift_ids", gifts, &a.GiftIDs); err != nil {
		return Activity{}, fmt.Errorf("activity %d: %w", a.ID, err)
	}
	if err := unmarshalColumn("region_ids", regions, &a.RegionIDs); err != nil {
		return Activity{}, fmt.Errorf("activity %d: %w", a.ID, err)
	}
	if err := unmarshalColumn("rewards", rewards, &a.Rewards); err != nil {
		return Activity{}, fmt.Errorf("activity %d: %w", a.ID, err)
	}
	a.SettleState = SettleState(state)
	a.Status = DeriveStatus(Status(status), a.SettleState, a.StartsAtMs, a.EndsAtMs, nowMs)
	return a, nil
}

func unmarshalColumn(name string, v sql.NullString, dst any) error {
	if !v.Valid || v.String == "" || v.String == "null" {
		return nil
	}
	if err := json.Unmarshal([]byte(v.String), dst); err != nil {
		return fmt.Errorf("column %s: %w", name, err)
	}
	return nil
}

// jsonColumn is v as a JSON column: NULL when the list is empty (every
// gift, every region, no bands).
func jsonColumn[T any](v []T) (any, error) {
	if len(v) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// DeriveStatus is an activity's status as the API answers it: settled and
// cancelled are stored (the stored status, or the settlement state, says
// so); the others follow from the clock and the settlement state:
// scheduled before its start, running until its end, settling from its
// end (or from freezing, for one settled early) until it is settled.
func DeriveStatus(stored Status, state SettleState, startsAtMs, endsAtMs, nowMs int64) Status {
	switch {
	case stored == Cancelled || state == StateCancelled:
		return Cancelled
	case stored == Settled || state == StateSettled:
		return Settled
	case state == StateFrozen || state == StatePaying:
		return Settling
	case nowMs < startsAtMs:
		return Scheduled
	case nowMs < endsAtMs:
		return Running
	default:
		return Settling
	}
}

// errNotFound is an unknown activity, or one of another app.
var errNotFound = apperr.New(apperr.NotFound, "activity not found")

// storage passes nil and the kinds of errors through and makes anything
// else (MySQL failing) UNAVAILABLE.
func storage(err error) error {
	var ae *apperr.Error
	if err == nil || errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, "activities unavailable, try again", err)
}

// RetroactiveMargin is how far after its start an activity may be
// created and still be scored by the live durable alone: one created
// later (a start in the past) is read back from ROOM_EVENTS first
// (catchup.go). It covers the clocks of the processes differing.
const RetroactiveMargin = 2 * time.Second

// Create stores a (already validated: see Definer.Create) as a new
// activity of a.AppCode and returns it with its id, times and status. Its
// stored status is scheduled and its settlement state open; its catch-up
// state is reading when it starts before its creation plus
// RetroactiveMargin (it is read back), else none. An app with
// MaxOpenPerApp activities not yet ended is FAILED_PRECONDITION.
func (s *Store) Create(ctx context.Context, a Activity) (Activity, error) {
	gifts, err := jsonColumn(a.GiftIDs)
	if err != nil {
		return Activity{}, err
	}
	regions, err := jsonColumn(a.RegionIDs)
	if err != nil {
		return Activity{}, err
	}
	rewards, err := jsonColumn(a.Rewards)
	if err != nil {
		return Activity{}, err
	}
	nowMs := s.now().UnixMilli()
	a.CreatedAtMs, a.UpdatedAtMs = nowMs, nowMs
	a.SettleState = StateOpen
	a.Catchup = Catchup{State: CatchupNone}
	if a.StartsAtMs < nowMs+RetroactiveMargin.Milliseconds() {
		a.Catchup.State = CatchupReading
	}
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		// Locks the app's range of the index, so that two creates take
		// turns and the count holds.
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM activities WHERE app_code = ?
			AND settle_state = ? AND ends_at_ms > ? FOR UPDATE`, a.AppCode, StateOpen, nowMs).Scan(&n); err != nil {
			return err
		}
		if n >= MaxOpenPerApp {
			return apperr.New(apperr.FailedPrecondition, "an app has at most %d activities not yet ended; cancel one or wait for one to end", MaxOpenPerApp)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO activities (app_code, name, kind, metric, gift_ids, region_ids,
			starts_at_ms, ends_at_ms, rewards, target, period, reward_coins, status, settle_state, created_by,
			created_at_ms, updated_at_ms, catchup_state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.AppCode, a.Name, a.Kind, a.Metric, gifts, regions, a.StartsAtMs, a.EndsAtMs, rewards, a.Target,
			a.Period, a.RewardCoins, Scheduled, StateOpen, a.CreatedBy, nowMs, nowMs, a.Catchup.State)
		if err != nil {
			return err
		}
		a.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return Activity{}, storage(fmt.Errorf("insert activity of %s: %w", a.AppCode, err))
	}
	a.Status = DeriveStatus(Scheduled, StateOpen, a.StartsAtMs, a.EndsAtMs, nowMs)
	return a, nil
}

// Get returns app's activity id; NOT_FOUND when it has none of that id.
func (s *Store) Get(ctx context.Context, app string, id int64) (Activity, error) {
	a, err := scanActivity(s.db.QueryRowContext(ctx, `SELECT `+activityColumns+` FROM activities
		WHERE activity_id = ? AND app_code = ?`, id, app), s.now().UnixMilli())
	if errors.Is(err, sql.ErrNoRows) {
		return Activity{}, errNotFound
	}
	if err != nil {
		return Activity{}, storage(fmt.Errorf("read activity %d of %s: %w", id, app, err))
	}
	return a, nil
}

// Page bounds of List.
const (
	DefaultListLimit = 20
	MaxListLimit     = 100
)

// List returns up to limit of app's activities with an id above after,
// oldest first (limit 0: DefaultListLimit; it is clipped to MaxListLimit),
// and whether more follow.
func (s *Store) List(ctx context.Context, app string, after int64, limit int) ([]Activity, bool, error) {
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	out, err := s.query(ctx, `SELECT `+activityColumns+` FROM activities
		WHERE app_code = ? AND activity_id > ? ORDER BY activity_id LIMIT ?`, app, after, limit+1)
	if err != nil {
		return nil, false, storage(fmt.Errorf("list activities of %s: %w", app, err))
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

// Open returns every app's activities that are neither settled nor
// cancelled (settlement state open, frozen or paying), in id order: those
// the consumer matches events against and settlement drives.
func (s *Store) Open(ctx context.Context) ([]Activity, error) {
	out, err := s.query(ctx, `SELECT `+activityColumns+` FROM activities
		WHERE settle_state IN (?, ?, ?) ORDER BY activity_id`, StateOpen, StateFrozen, StatePaying)
	if err != nil {
		return nil, storage(fmt.Errorf("read open activities: %w", err))
	}
	return out, nil
}

// MaxOpenPerApp bounds how many activities an app may have not yet ended
// (scheduled or running) at once: each one is matched against every event
// of its app, and users list them all.
const MaxOpenPerApp = 100

// Visible returns app's activities a user of region sees: not cancelled,
// not yet ended at nowMs (scheduled or running), without region_ids or
// with region among them; soonest end first, at most MaxOpenPerApp.
func (s *Store) Visible(ctx context.Context, app string, region int64) ([]Activity, error) {
	nowMs := s.now().UnixMilli()
	out, err := s.query(ctx, `SELECT `+activityColumns+` FROM activities
		WHERE app_code = ? AND settle_state = ? AND ends_at_ms > ?
		AND (region_ids IS NULL OR JSON_CONTAINS(region_ids, ?))
		ORDER BY ends_at_ms, activity_id LIMIT ?`, app, StateOpen, nowMs, fmt.Sprint(region), MaxOpenPerApp)
	if err != nil {
		return nil, storage(fmt.Errorf("list visible activities of %s: %w", app, err))
	}
	return out, nil
}

// Cancel cancels app's activity id: its status and settlement state
// become cancelled, so that scoring and settlement stop and nothing is
// paid. No event that occurs after it commits is counted for the activity
// (the scorers read its state again before each transaction: stillOpen);
// a scorer's transaction under way when it commits may still write the
// rows of events that occurred before, which are never paid. Only before any payout: an activity paying or settled is
// FAILED_PRECONDITION. Cancelling a cancelled activity answers it as it is.
func (s *Store) Cancel(ctx context.Context, app string, id int64) (Activity, error) {
	var a Activity
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		nowMs := s.now().UnixMilli()
		var err error
		a, err = scanActivity(tx.QueryRowContext(ctx, `SELECT `+activityColumns+` FROM activities
			WHERE activity_id = ? AND app_code = ? FOR UPDATE`, id, app), nowMs)
		if errors.Is(err, sql.ErrNoRows) {
			return errNotFound
		}
		if err != nil {
			return err
		}
		switch a.SettleState {
		case StateCancelled:
			return nil
		case StatePaying, StateSettled:
			return apperr.New(apperr.FailedPrecondition, "activity %d is %s: its settlement has begun paying; it can no longer be cancelled", id, a.Status)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE activities SET status = ?, settle_state = ?, cancelled_at_ms = ?,
			updated_at_ms = ?, settle_owner = '', settle_lease_until_ms = 0 WHERE activity_id = ?`,
			Cancelled, StateCancelled, nowMs, nowMs, id); err != nil {
			return err
		}
		a.Status, a.SettleState, a.UpdatedAtMs = Cancelled, StateCancelled, nowMs
		return nil
	})
	if err != nil {
		return Activity{}, storage(fmt.Errorf("cancel activity %d of %s: %w", id, app, err))
	}
	return a, nil
}

func (s *Store) query(ctx context.Context, q string, args ...any) ([]Activity, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	nowMs := s.now().UnixMilli()
	out := []Activity{}
	for rows.Next() {
		a, err := scanActivity(rows, nowMs)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}
