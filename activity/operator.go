package activity

import (
	"cmp"
	"context"
	"slices"
	"strconv"

	"voiceroom/apperr"
)

// OperatorBoard answers one page of app's activity id's board for an
// operator of the app: the board the users see, whatever regions the
// activity names, without a place of the caller's own (Me is nil). The
// period is the current one when periodStartMs is 0, else the period
// starting then: a task's past day or week, kept for audit (Completions
// lists them). limit is 1..MaxBoardLimit; cursor continues from a page's
// NextCursor or PrevCursor. Errors: INVALID_ARGUMENT naming limit, cursor
// or period_start_ms (not the start of one of the activity's periods);
// NOT_FOUND for an activity of another app or none; UNAVAILABLE when
// MySQL fails while Redis cannot answer.
func (b *Boards) OperatorBoard(ctx context.Context, app string, id int64, periodStartMs int64, limit int, cursor string) (Board, error) {
	q := BoardQuery{AppCode: app, ActivityID: id, Limit: limit, Cursor: cursor}
	mode, boundary, err := boardMode(q)
	if err != nil {
		return Board{}, err
	}
	a, err := b.store.Get(ctx, app, id)
	if err != nil {
		return Board{}, err
	}
	ps, pe := b.currentPeriod(a)
	if periodStartMs != 0 {
		notPeriod := apperr.Invalid("period_start_ms", "%d is not the start of a period of activity %d", periodStartMs, a.ID)
		if periodStartMs >= a.EndsAtMs || (periodStartMs < a.StartsAtMs && (a.Kind != Task || a.Period == Window)) {
			return Board{}, notPeriod
		}
		if ps, pe = periodOf(b.cal, a, max(periodStartMs, a.StartsAtMs)); ps != periodStartMs {
			return Board{}, notPeriod
		}
	}
	return b.boardOf(ctx, a, q, ps, pe, mode, boundary)
}

// MaxCompletionPeriods bounds the periods a Completions answer lists, the
// latest first: a 90-day window has at most 91 days (14 weeks).
const MaxCompletionPeriods = 100

// TaskPeriod is how one period of a task went: who scored, who reached the
// target, and the rewards paid.
type TaskPeriod struct {
	PeriodStartMs int64 `json:"period_start_ms"`
	PeriodEndMs   int64 `json:"period_end_ms"`
	// Participants scored in the period; Reached reached the target (a
	// reward is owed each); Paid of those are paid, CoinsPaid in all.
	Participants int64 `json:"participants"`
	Reached      int64 `json:"reached"`
	Paid         int64 `json:"paid"`
	CoinsPaid    int64 `json:"coins_paid"`
}

// Completions is a task's completion counts per period (docs/openapi.yaml,
// ActivityCompletions).
type Completions struct {
	ActivityID  int64        `json:"activity_id"`
	Metric      Metric       `json:"metric"`
	Period      Period       `json:"period"`
	Target      int64        `json:"target"`
	RewardCoins int64        `json:"reward_coins"`
	Periods     []TaskPeriod `json:"periods"`
}

// Completions answers app's task id's completion counts, period by
// period, the latest first (at most MaxCompletionPeriods): every period
// anyone scored in. Read from MySQL: the scores and the payouts rows.
// Errors: INVALID_ARGUMENT naming activity_id for a leaderboard;
// NOT_FOUND for an activity of another app or none; UNAVAILABLE when
// MySQL fails.
func (b *Boards) Completions(ctx context.Context, app string, id int64) (Completions, error) {
	a, err := b.store.Get(ctx, app, id)
	if err != nil {
		return Completions{}, err
	}
	if a.Kind != Task {
		return Completions{}, apperr.Invalid("activity_id", "activity %d is a leaderboard: read its board", a.ID)
	}
	unavailable := func(err error) error {
		return apperr.Wrap(apperr.Unavailable, "activities unavailable, try again", err)
	}
	byStart := map[int64]*TaskPeriod{}
	periodAt := func(ps int64) *TaskPeriod {
		p, ok := byStart[ps]
		if !ok {
			p = &TaskPeriod{PeriodStartMs: ps}
			_, p.PeriodEndMs = periodOf(b.cal, a, ps)
			byStart[ps] = p
		}
		return p
	}
	limit := " LIMIT " + strconv.Itoa(MaxCompletionPeriods)
	rows, err := b.db.QueryContext(ctx, `SELECT period_start_ms, COUNT(*) FROM activity_scores WHERE activity_id = ?
		GROUP BY period_start_ms ORDER BY period_start_ms DESC`+limit, a.ID)
	if err != nil {
		return Completions{}, unavailable(err)
	}
	for rows.Next() {
		var ps, n int64
		if err := rows.Scan(&ps, &n); err != nil {
			rows.Close()
			return Completions{}, unavailable(err)
		}
		periodAt(ps).Participants = n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Completions{}, unavailable(err)
	}
	rows, err = b.db.QueryContext(ctx, `SELECT period_start_ms, COUNT(*), COALESCE(SUM(paid_at_ms > 0), 0),
		COALESCE(SUM(IF(paid_at_ms > 0, coins, 0)), 0) FROM activity_payouts WHERE activity_id = ? AND reason = ?
		GROUP BY period_start_ms ORDER BY period_start_ms DESC`+limit, a.ID, ReasonTask)
	if err != nil {
		return Completions{}, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ps int64
		var t TaskPeriod
		if err := rows.Scan(&ps, &t.Reached, &t.Paid, &t.CoinsPaid); err != nil {
			return Completions{}, unavailable(err)
		}
		p := periodAt(ps)
		p.Reached, p.Paid, p.CoinsPaid = t.Reached, t.Paid, t.CoinsPaid
	}
	if err := rows.Err(); err != nil {
		return Completions{}, unavailable(err)
	}
	out := Completions{ActivityID: a.ID, Metric: a.Metric, Period: a.Period, Target: a.Target, RewardCoins: a.RewardCoins,
		Periods: make([]TaskPeriod, 0, len(byStart))}
	for _, p := range byStart {
		out.Periods = append(out.Periods, *p)
	}
	slices.SortFunc(out.Periods, func(x, y TaskPeriod) int { return cmp.Compare(y.PeriodStartMs, x.PeriodStartMs) })
	if len(out.Periods) > MaxCompletionPeriods {
		out.Periods = out.Periods[:MaxCompletionPeriods]
	}
	return out, nil
}
