package activity

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
)

// BenchmarkBoardRead reads the top 20 and the caller's place of a board
// of VOICEROOM_BENCH_PARTICIPANTS (default 100,000) users, for random
// callers: from Redis, and from MySQL (the board as read with Redis
// stopped). Each sub-benchmark reports its p50 and p99 beside its
// ceiling, measured in the same run after the reads: a Redis PING and a
// MySQL primary-key read of one score, the least one read costs.
//
//	go test -run '^$' -bench BenchmarkBoardRead -benchtime 300x ./activity/
func BenchmarkBoardRead(b *testing.B) {
	n := testenv.EnvInt("VOICEROOM_BENCH_PARTICIPANTS", 100_000)
	e := newScoreEnv(b, nil)
	id := e.activity(Activity{Metric: GiftValueSent})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; i += 1000 {
		var q strings.Builder
		q.WriteString(`INSERT INTO activity_scores (activity_id, period_start_ms, subject, score, reached_at_ms, updated_at_ms) VALUES `)
		args := []any{}
		for j := i; j < min(i+1000, n); j++ {
			if j > i {
				q.WriteString(",")
			}
			q.WriteString("(?, ?, ?, ?, ?, 0)")
			args = append(args, id, t0, fmt.Sprint(j+1), rng.Int64N(100_000)+1, t0+rng.Int64N(day))
		}
		if _, err := e.db.Exec(q.String(), args...); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	read := func(b *testing.B, boards *Boards, source string) {
		before := e.reads(source)
		var took []time.Duration
		b.ResetTimer()
		for range b.N {
			u := rng.Int64N(int64(n)) + 1
			start := time.Now()
			p, err := boards.Board(ctx, BoardQuery{AppCode: "a1", UserID: u, ActivityID: id, Limit: 20})
			took = append(took, time.Since(start))
			if err != nil || len(p.Items) != 20 || p.Me == nil {
				b.Fatalf("read: %v %d items, me %v", err, len(p.Items), p.Me)
			}
		}
		b.StopTimer()
		if got := e.reads(source) - before; got < float64(b.N) {
			b.Fatalf("%v of %d reads from %s", got, b.N, source)
		}
		slices.Sort(took)
		b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.50)), "p50_ms")
		b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.99)), "p99_ms")
	}
	ceiling := func(b *testing.B, op func() error) {
		var took []time.Duration
		for range 1000 {
			start := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.50)), "ceiling_p50_ms")
		b.ReportMetric(testenv.Millis(testenv.Percentile(took, 0.99)), "ceiling_p99_ms")
	}
	b.Run("redis", func(b *testing.B) {
		boards := e.boards(e.rdb)
		if _, err := boards.Board(ctx, BoardQuery{AppCode: "a1", UserID: 1, ActivityID: id, Limit: 20}); err != nil { // the rebuild
			b.Fatal(err)
		}
		read(b, boards, sourceRedis)
		ceiling(b, func() error { return e.rdb.Ping(ctx).Err() })
	})
	b.Run("mysql", func(b *testing.B) {
		// Redis stopped: a client of a closed address, as a dead Redis
		// answers (the gate leaves it alone after the first failure).
		dead := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(b), MaxRetries: -1})
		defer dead.Close()
		boards := e.boards(dead)
		boards.Board(ctx, BoardQuery{AppCode: "a1", UserID: 1, ActivityID: id, Limit: 20}) //nolint:errcheck // the first failure closes the gate
		read(b, boards, sourceMySQL)
		var v int64
		ceiling(b, func() error {
			return e.db.QueryRow(`SELECT score FROM activity_scores WHERE activity_id = ? AND period_start_ms = ? AND subject = ?`,
				id, t0, fmt.Sprint(rng.IntN(n)+1)).Scan(&v)
		})
	})
}
