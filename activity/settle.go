package activity

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
	"voiceroom/internal/every"
	"voiceroom/internal/rowlease"
	"voiceroom/mysqldb"
)

// SettleConfig configures a Settler.
type SettleConfig struct {
	// Owner names this process in activities.settle_owner (at most 64
	// characters). Required.
	Owner string
	// Grace is how long after an activity's end settlement waits before it
	// may freeze (VOICEROOM_ACTIVITY_SETTLE_GRACE). Default 30s. The
	// scoring durable must also have passed the end (Progress).
	Grace time.Duration
	// Lease is how long an activity's settlement stays with the process
	// that took it without being renewed; another process takes it over
	// once it lapses. Default 30s.
	Lease time.Duration
	// Tick is the pause between two rounds of the loop. Default 1s.
	Tick time.Duration
	// Score is the scoring's configuration (the apps' time zones, the
	// boards in Redis): at freeze, the mic sessions of a mic_seconds
	// activity still open are ended at its end (CloseMicSessions).
	Score ScoreConfig
}

// WithDefaults returns c with zero fields defaulted.
func (c SettleConfig) WithDefaults() SettleConfig {
	if c.Grace == 0 {
		c.Grace = 30 * time.Second
	}
	if c.Lease == 0 {
		c.Lease = 30 * time.Second
	}
	if c.Tick == 0 {
		c.Tick = time.Second
	}
	return c
}

// Validate checks c (after WithDefaults) without changing it.
func (c SettleConfig) Validate() error {
	switch {
	case c.Grace < 0 || c.Grace > 24*time.Hour:
		return apperr.BadConfig("Grace", "activity settler: grace %s: must be 0..24h", c.Grace)
	}
	return rowlease.CheckConfig("activity settler", c.Owner, c.Lease, c.Tick)
}

// Settler drives the settlement of every activity: open -> frozen ->
// paying -> settled (see doc.go). Any number of processes may run one;
// each activity is advanced by the one holding its lease.
type Settler struct {
	db       *sql.DB
	rdb      redis.UniversalClient
	progress ScoringProgress
	cfg      SettleConfig
	now      func() time.Time
	lease    *rowlease.Holder // activities.settle_owner, settle_lease_until_ms
	log      *slog.Logger
	metrics  *SettleMetrics

	// beforeCommit, when set (tests), runs inside each payment's
	// transaction after the credit and the outbox row, before the commit;
	// an error rolls the payment back.
	beforeCommit func(Payout) error
	// afterPay, when set (tests), runs after each committed payment; an
	// error stops the round as a failure would.
	afterPay func(Payout) error
}

// NewSettler returns a Settler. progress tells how far the scoring durable
// got; rdb (the boards, for the mic sessions ended at freeze) and metrics
// may be nil.
func NewSettler(db *sql.DB, rdb redis.UniversalClient, progress ScoringProgress, cfg SettleConfig, now func() time.Time, log *slog.Logger, metrics *SettleMetrics) (*Settler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || progress == nil || now == nil {
		return nil, apperr.BadConfig("DB", "activity settler: db, progress and clock are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	lease := rowlease.NewHolder(rowlease.Columns{Table: "activities", Key: "activity_id", Owner: "settle_owner", Until: "settle_lease_until_ms",
		Where: `settle_state IN ('open', 'frozen', 'paying') AND status <> 'cancelled'`}, cfg.Owner, cfg.Lease, now)
	return &Settler{db: db, rdb: rdb, progress: progress, cfg: cfg, now: now, lease: lease, log: log, metrics: metrics}, nil
}

// Run advances settlements every Tick until ctx ends. Errors are logged
// and counted; the next round tries again.
func (s *Settler) Run(ctx context.Context) error {
	every.Now(ctx, s.cfg.Tick, func() {
		if err := s.Round(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("activity settlement round failed", "err", err)
		}
	})
	return nil
}

// Round runs one round: every activity with something to settle whose
// lease this process holds or can take is advanced as far as it can go
// now. It returns the first error after trying every activity.
func (s *Settler) Round(ctx context.Context) error {
	ids, err := s.candidates(ctx)
	if err != nil {
		s.metrics.failed()
		return err
	}
	var first error
	for _, id := range ids {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := s.advance(ctx, id); err != nil {
			s.metrics.failed()
			s.log.Warn("activity settlement stopped", "activity_id", id, "err", err)
			if first == nil {
				first = err
			}
		}
	}
	s.metrics.observeStates(ctx, s.db)
	return first
}

// candidates lists the activities with something to do: ended (plus the
// grace) and not settled, being settled, or running with task rewards
// to pay.
func (s *Settler) candidates(ctx context.Context) ([]int64, error) {
	nowMs := s.now().UnixMilli()
	rows, err := s.db.QueryContext(ctx, `SELECT activity_id FROM activities WHERE settle_state IN ('frozen', 'paying') AND status <> 'cancelled'
		UNION SELECT activity_id FROM activities WHERE settle_state = 'open' AND ends_at_ms <= ? AND status <> 'cancelled'
		UNION SELECT a.activity_id FROM activities a WHERE a.settle_state = 'open' AND a.kind = 'task' AND a.status <> 'cancelled'
			AND EXISTS (SELECT 1 FROM activity_payouts p WHERE p.activity_id = a.activity_id AND p.paid_at_ms = 0)`,
		nowMs-s.cfg.Grace.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("activity settlement: list: %w", err)
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("activity settlement: list: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// settleRow is what settlement reads of an activity.
type settleRow struct {
	Activity
	state     SettleState
	owner     string
	leaseMs   int64
	cancelled bool
}

// errLost: another process holds the activity's lease now.
var errLost = errors.New("activity settlement: lease lost")

// takeLease takes (or renews) id's lease for this process: when it is
// free, lapsed or ours. It reports whether this process holds it.
func (s *Settler) takeLease(ctx context.Context, id int64) (bool, error) {
	held, err := s.lease.Take(ctx, s.db, id)
	if err != nil {
		return false, fmt.Errorf("activity %d: take lease: %w", id, err)
	}
	return held, nil
}

// advance moves activity id as far as it can go now, if this process
// holds (or takes) its lease.
func (s *Settler) advance(ctx context.Context, id int64) error {
	held, err := s.takeLease(ctx, id)
	if err != nil || !held {
		return err
	}
	for {
		a, err := s.load(ctx, s.db, id, false)
		if err != nil {
			return err
		}
		if a.cancelled || a.state == StateSettled || a.state == StateCancelled {
			return nil
		}
		switch a.state {
		case StateOpen:
			if !s.ended(a) {
				return s.payAll(ctx, a) // a running task's rewards
			}
			if a.Catchup.State != CatchupNone && a.Catchup.State != CatchupJoined {
				// Read back from the stream (catchup.go): its scores are
				// not complete until the live durable alone scores it.
				s.log.Debug("activity settlement waits for the read back", "activity_id", id, "catchup_state", a.Catchup.State)
				return s.payAll(ctx, a)
			}
			fence := a.freezeFence()
			if s.now().UnixMilli() < fence {
				return s.payAll(ctx, a)
			}
			passed, err := s.progress.Passed(ctx, a.AppCode, fence)
			if err != nil {
				return fmt.Errorf("activity %d: scoring progress: %w", id, err)
			}
			if !passed {
				s.log.Debug("activity settlement waits for the scoring durable", "activity_id", id, "ends_at_ms", a.EndsAtMs)
				return s.payAll(ctx, a)
			}
			if err := s.endMicSessions(ctx, a); err != nil {
				return err
			}
			if err := s.freeze(ctx, a); err != nil {
				return err
			}
		case StateFrozen:
			if err := s.moveState(ctx, id, StateFrozen, StatePaying); err != nil {
				return err
			}
		case StatePaying:
			if err := s.payAll(ctx, a); err != nil {
				return err
			}
			done, err := s.finish(ctx, a)
			if err != nil || done {
				return err
			}
			return nil
		default:
			return fmt.Errorf("activity %d: unknown settle_state %q", id, a.state)
		}
	}
}

// endMicSessions ends the mic sessions of a mic_seconds activity still
// open at its end, counting them up to the end, before its board is
// frozen (safe to repeat: each session ends once).
func (s *Settler) endMicSessions(ctx context.Context, a settleRow) error {
	if a.Metric != MicSeconds {
		return nil
	}
	full, err := NewStore(s.db, s.now).Get(ctx, a.AppCode, a.ID)
	if err != nil {
		return fmt.Errorf("activity %d: read: %w", a.ID, err)
	}
	n, err := CloseMicSessions(ctx, s.db, s.rdb, s.cfg.Score, full)
	if err != nil {
		return err
	}
	if n > 0 {
		s.log.Info("activity mic sessions ended at the window's end", "activity_id", a.ID, "sessions", n)
	}
	return nil
}

// freezeFence is the time the scoring durable must have passed before a
// freezes. The scorers check an activity's state and end in their cached
// list (score.go), without a lock of its row, and count an event only
// when it occurred before the end: once the durable has acked every
// event committed up to the end, nothing more can count, and nothing
// counted is lost. A list read before a settle now (which moves the end
// earlier, and updated_at_ms with it) may still count an event committed
// while that change committed: SettleNowMargin keeps such an event before
// the new end, and RetroactiveMargin past updated_at_ms covers the
// processes' clocks differing, so it too is scored before the freeze,
// never after it.
func (a settleRow) freezeFence() int64 {
	return max(a.EndsAtMs, a.UpdatedAtMs+RetroactiveMargin.Milliseconds())
}

// ended reports whether a's window plus the grace is over.
func (s *Settler) ended(a settleRow) bool {
	return s.now().UnixMilli() >= a.EndsAtMs+s.cfg.Grace.Milliseconds()
}

// load reads activity id; lock takes its row FOR UPDATE (q a transaction).
func (s *Settler) load(ctx context.Context, q mysqldb.Querier, id int64, lock bool) (settleRow, error) {
	query := `SELECT app_code, activity_id, name, kind, metric, starts_at_ms, ends_at_ms, COALESCE(rewards, 'null'),
		status, settle_state, settle_owner, settle_lease_until_ms, catchup_state, updated_at_ms FROM activities WHERE activity_id = ?`
	if lock {
		query += " FOR UPDATE"
	}
	rows, err := q.QueryContext(ctx, query, id)
	if err != nil {
		return settleRow{}, fmt.Errorf("activity %d: read: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return settleRow{}, fmt.Errorf("activity %d: read: %w", id, err)
		}
		return settleRow{}, apperr.New(apperr.NotFound, "activity %d not found", id)
	}
	var a settleRow
	var rewards []byte
	var status, state string
	if err := rows.Scan(&a.AppCode, &a.ID, &a.Name, &a.Kind, &a.Metric, &a.StartsAtMs, &a.EndsAtMs, &rewards,
		&status, &state, &a.owner, &a.leaseMs, &a.Catchup.State, &a.UpdatedAtMs); err != nil {
		return settleRow{}, fmt.Errorf("activity %d: read: %w", id, err)
	}
	a.Status, a.state = Status(status), SettleState(state)
	a.SettleState = a.state
	a.cancelled = a.Status == Cancelled || a.state == StateCancelled
	if err := decodeBands(rewards, &a.Rewards); err != nil {
		return settleRow{}, fmt.Errorf("activity %d: rewards: %w", id, err)
	}
	return a, rows.Err()
}

// lockHeld locks activity id's row in tx and checks that this process
// still holds its settlement and that it is in one of states: the fence
// that keeps a process whose lease lapsed from paying.
func (s *Settler) lockHeld(ctx context.Context, tx mysqldb.Querier, id int64, states ...SettleState) (settleRow, error) {
	a, err := s.load(ctx, tx, id, true)
	if err != nil {
		return a, err
	}
	if !s.lease.Holds(a.owner, a.leaseMs) {
		return a, errLost
	}
	if a.cancelled {
		return a, errCancelled
	}
	for _, st := range states {
		if a.state == st {
			return a, nil
		}
	}
	return a, errMoved
}

var (
	errCancelled = errors.New("activity settlement: cancelled")
	errMoved     = errors.New("activity settlement: state moved on")
)

// moveState moves id from one state to the next, under its lease.
func (s *Settler) moveState(ctx context.Context, id int64, from, to SettleState) error {
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := s.lockHeld(ctx, tx, id, from); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE activities SET settle_state = ?, updated_at_ms = ? WHERE activity_id = ?`,
			string(to), s.now().UnixMilli(), id)
		return err
	})
	if err != nil {
		return settleErr(id, "move to "+string(to), err)
	}
	s.log.Info("activity settlement", "activity_id", id, "state", string(to))
	return nil
}

// settleErr wraps err of step; losing the lease or the state moving on
// (another process got there) is no failure.
func settleErr(id int64, step string, err error) error {
	if errors.Is(err, errLost) || errors.Is(err, errMoved) || errors.Is(err, errCancelled) {
		return nil
	}
	return fmt.Errorf("activity %d: %s: %w", id, step, err)
}

// freeze writes the ranks a's leaderboard owes to activity_payouts (a
// task owes nothing more: its rewards were written as they were reached)
// and moves a to frozen, in one transaction.
func (s *Settler) freeze(ctx context.Context, a settleRow) error {
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		if _, err := s.lockHeld(ctx, tx, a.ID, StateOpen); err != nil {
			return err
		}
		now := s.now().UnixMilli()
		if a.Kind == Leaderboard {
			owed, err := s.ranksOwed(ctx, tx, a.Activity)
			if err != nil {
				return err
			}
			var rows mysqldb.Rows
			for _, p := range owed {
				rows.Add("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID, a.AppCode,
					p.Subject, p.Rank, p.Score, p.Coins, EntryKey(p.ActivityID, p.Reason, p.PeriodStartMs, p.UserID), now)
			}
			var b mysqldb.Batch
			b.AddRows(`INSERT IGNORE INTO activity_payouts (activity_id, reason, period_start_ms, user_id, app_code, subject,
				rank_no, score, coins, entry_key, created_at_ms) VALUES `, &rows, "")
			if rows.Len() > 0 {
				if _, err := b.Exec(ctx, tx); err != nil {
					return fmt.Errorf("write ranks: %w", err)
				}
			}
		}
		_, err := tx.ExecContext(ctx, `UPDATE activities SET settle_state = 'frozen', updated_at_ms = ? WHERE activity_id = ?`, now, a.ID)
		return err
	})
	if err != nil {
		return settleErr(a.ID, "freeze", err)
	}
	s.metrics.moved(StateFrozen)
	s.log.Info("activity settlement", "activity_id", a.ID, "state", string(StateFrozen))
	return nil
}

// ranksOwed reads a's final board (ties: whoever reached the score first,
// then the subject) and returns the payouts its bands owe. A room's
// reward goes to the room's owner (rooms.owner_user_id); a room that is
// not found, or a subject that is not a user id, is skipped with a log
// line and its rank paid to nobody (the ranks below keep theirs).
func (s *Settler) ranksOwed(ctx context.Context, tx *sql.Tx, a Activity) ([]Payout, error) {
	last := 0
	for _, b := range a.Rewards {
		last = max(last, b.ToRank)
	}
	if last == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT subject, score FROM activity_scores
		WHERE activity_id = ? AND period_start_ms = ? AND score > 0
		ORDER BY score DESC, reached_at_ms ASC, subject ASC LIMIT ?`, a.ID, a.StartsAtMs, last)
	if err != nil {
		return nil, fmt.Errorf("read board: %w", err)
	}
	type entry struct {
		subject string
		score   int64
	}
	var board []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.subject, &e.score); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read board: %w", err)
		}
		board = append(board, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read board: %w", err)
	}
	var owed []Payout
	paidTo := map[int64]int{} // a user paid twice (two rooms they own): one row per user, ranks added
	for i, e := range board {
		rank := i + 1
		coins := bandCoins(a.Rewards, rank)
		if coins <= 0 {
			continue
		}
		var user int64
		if a.ByRoom() {
			err := tx.QueryRowContext(ctx, `SELECT owner_user_id FROM rooms WHERE app_code = ? AND room_id = ?`, a.AppCode, e.subject).Scan(&user)
			if errors.Is(err, sql.ErrNoRows) || (err == nil && user <= 0) {
				s.log.Warn("activity rank not paid: the room has no owner", "activity_id", a.ID, "room_id", e.subject, "rank", rank)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("room %s owner: %w", e.subject, err)
			}
		} else {
			user, err = strconv.ParseInt(e.subject, 10, 64)
			if err != nil || user <= 0 {
				s.log.Warn("activity rank not paid: the subject is not a user id", "activity_id", a.ID, "subject", e.subject, "rank", rank)
				continue
			}
		}
		if j, dup := paidTo[user]; dup {
			owed[j].Coins += coins
			continue
		}
		paidTo[user] = len(owed)
		owed = append(owed, Payout{ActivityID: a.ID, Reason: ReasonRank, PeriodStartMs: a.StartsAtMs, UserID: user,
			AppCode: a.AppCode, Subject: e.subject, Rank: rank, Score: e.score, Coins: coins})
	}
	return owed, nil
}

// bandCoins is the coins bands give rank (0: none).
func bandCoins(bands []Band, rank int) int64 {
	for _, b := range bands {
		if rank >= b.FromRank && rank <= b.ToRank {
			return b.Coins
		}
	}
	return 0
}
