package activity

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"voiceroom"
	"voiceroom/apperr"
)

// Reward statuses of a task's period (ProgressPeriod.Status).
const (
	RewardNone    = "none"    // the target is not reached (yet)
	RewardPending = "pending" // reached: the payout is written, not yet paid
	RewardPaid    = "paid"    // paid into the wallet
)

// ProgressQuery asks for the caller's progress in a task.
type ProgressQuery struct {
	AppCode    string
	UserID     int64
	ActivityID int64
	// RoomID is the room whose progress is read, for a task by room.
	RoomID string
}

// ProgressPeriod is one period of a task for one subject.
type ProgressPeriod struct {
	PeriodStartMs int64  `json:"period_start_ms"`
	PeriodEndMs   int64  `json:"period_end_ms"`
	Score         int64  `json:"score"`
	Status        string `json:"status"`
	RewardCoins   int64  `json:"reward_coins"`
}

// Progress is a subject's progress in a task (docs/openapi.yaml,
// ActivityProgress): the current period, and every period it reached the
// target in, with its reward's status.
type Progress struct {
	ActivityID  int64            `json:"activity_id"`
	Metric      Metric           `json:"metric"`
	Period      Period           `json:"period"`
	Target      int64            `json:"target"`
	RewardCoins int64            `json:"reward_coins"`
	Current     ProgressPeriod   `json:"current"`
	Reached     []ProgressPeriod `json:"reached"`
}

// Progress answers q from MySQL. Errors: INVALID_ARGUMENT naming
// activity_id (a leaderboard has no progress) or room_id; NOT_FOUND for
// an activity the caller may not see; UNAVAILABLE when MySQL fails.
func (b *Boards) Progress(ctx context.Context, q ProgressQuery) (Progress, error) {
	a, err := b.visible(ctx, q.AppCode, q.UserID, q.ActivityID)
	if err != nil {
		return Progress{}, err
	}
	if a.Kind != Task {
		return Progress{}, apperr.Invalid("activity_id", "activity %d is a leaderboard: read its board", a.ID)
	}
	subject := strconv.FormatInt(q.UserID, 10)
	if a.ByRoom() {
		if q.RoomID == "" || len(q.RoomID) > voiceroom.RoomIDMax || !strings.HasPrefix(q.RoomID, q.AppCode+"_") {
			return Progress{}, apperr.Invalid("room_id", "required for a task by room: a room of this app")
		}
		subject = q.RoomID
	}
	unavailable := func(err error) error {
		return apperr.Wrap(apperr.Unavailable, "activities unavailable, try again", err)
	}
	ps, pe := b.currentPeriod(a)
	out := Progress{ActivityID: a.ID, Metric: a.Metric, Period: a.Period, Target: a.Target, RewardCoins: a.RewardCoins,
		Current: ProgressPeriod{PeriodStartMs: ps, PeriodEndMs: pe, Status: RewardNone, RewardCoins: a.RewardCoins}, Reached: []ProgressPeriod{}}
	err = b.db.QueryRowContext(ctx, `SELECT score FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
		a.ID, ps, subject).Scan(&out.Current.Score)
	if err != nil && err != sql.ErrNoRows {
		return Progress{}, unavailable(err)
	}
	rows, err := b.db.QueryContext(ctx, `SELECT period_start_ms, score, coins, paid_at_ms FROM activity_payouts
		WHERE activity_id = ? AND reason = ? AND subject = ? ORDER BY period_start_ms`, a.ID, ReasonTask, subject)
	if err != nil {
		return Progress{}, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p ProgressPeriod
		var paidAt int64
		if err := rows.Scan(&p.PeriodStartMs, &p.Score, &p.RewardCoins, &paidAt); err != nil {
			return Progress{}, unavailable(err)
		}
		_, p.PeriodEndMs = periodOf(b.cal, a, p.PeriodStartMs)
		p.Status = RewardPending
		if paidAt > 0 {
			p.Status = RewardPaid
		}
		if p.PeriodStartMs == ps {
			out.Current.Status = p.Status
		}
		out.Reached = append(out.Reached, p)
	}
	if err := rows.Err(); err != nil {
		return Progress{}, unavailable(err)
	}
	b.metrics.read(sourceMySQL)
	return out, nil
}
