package activity

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// BenchmarkCompletions reads the completion counts of a daily task of 7
// days with VOICEROOM_BENCH_PARTICIPANTS (default 100,000) score rows
// spread over its days, a tenth of them having reached the target (their
// payouts rows, half paid): what the console's page of a task asks once
// per view. It reports p50 and p99 beside its ceiling, measured in the
// same run: a MySQL primary-key read of one score.
//
//	go test -run '^$' -bench BenchmarkCompletions -benchtime 100x ./activity/
func BenchmarkCompletions(b *testing.B) {
	n := testenv.EnvInt("VOICEROOM_BENCH_PARTICIPANTS", 100_000)
	e := newScoreEnv(b, nil)
	id := e.activity(Activity{Kind: Task, Metric: GiftCount, Period: Day, Target: 10, RewardCoins: 5})
	insert := func(q string, row func(j int) []any) {
		for i := 0; i < n; i += 1000 {
			var sql strings.Builder
			sql.WriteString(q)
			var args []any
			for j := i; j < min(i+1000, n); j++ {
				r := row(j)
				if r == nil {
					continue
				}
				if len(args) > 0 {
					sql.WriteString(",")
				}
				sql.WriteString("(" + strings.TrimSuffix(strings.Repeat("?, ", len(r)), ", ") + ")")
				args = append(args, r...)
			}
			if len(args) == 0 {
				continue
			}
			if _, err := e.db.Exec(sql.String(), args...); err != nil {
				b.Fatal(err)
			}
		}
	}
	insert(`INSERT INTO activity_scores (activity_id, period_start_ms, subject, score, reached_at_ms, updated_at_ms) VALUES `,
		func(j int) []any { return []any{id, t0 + int64(j%7)*day, fmt.Sprint(j + 1), int64(j%20 + 1), t0, 0} })
	insert(`INSERT INTO activity_payouts (activity_id, reason, period_start_ms, user_id, app_code, subject, coins, entry_key, created_at_ms, paid_at_ms) VALUES `,
		func(j int) []any {
			if j%10 != 0 {
				return nil
			}
			ps := t0 + int64(j%7)*day
			return []any{id, ReasonTask, ps, j + 1, "a1", fmt.Sprint(j + 1), 5, EntryKey(id, ReasonTask, ps, int64(j+1)), t0, int64(j%20/10) * t0}
		})
	ctx := context.Background()
	boards := e.boards(e.rdb)
	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		c, err := boards.Completions(ctx, "a1", id)
		took = append(took, time.Since(start))
		if err != nil || len(c.Periods) != 7 {
			b.Fatalf("completions: %v, %d periods", err, len(c.Periods))
		}
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.50)), "p50_ms")
	b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.99)), "p99_ms")
	took = took[:0]
	var v int64
	for j := range 1000 {
		start := time.Now()
		if err := e.db.QueryRow(`SELECT score FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
			id, t0+int64(j%7)*day, fmt.Sprint(j+1)).Scan(&v); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.50)), "ceiling_p50_ms")
	b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.99)), "ceiling_p99_ms")
}
