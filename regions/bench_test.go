package regions_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/regions"
)

// benchUsers is how many users the lookup benchmarks spread over.
const benchUsers = 10_000

// mustBenchUsers inserts users 1..n straight into MySQL (registration speed is
// not what these benchmarks measure), half in region, half in GLOBAL.
func mustBenchUsers(tb testing.TB, db *sql.DB, app string, n int, region int64) {
	tb.Helper()
	const chunk = 1000
	for start := 1; start <= n; start += chunk {
		var q strings.Builder
		q.WriteString("INSERT INTO users (app_code, user_id, display_user_id, country, region_id, created_at_ms, updated_at_ms) VALUES ")
		var args []any
		for id := start; id < start+chunk && id <= n; id++ {
			if id > start {
				q.WriteString(",")
			}
			q.WriteString("(?, ?, ?, ?, ?, 0, 0)")
			r, c := region, "SG"
			if id%2 == 0 {
				r, c = 0, "US"
			}
			args = append(args, app, id, "u"+strconv.Itoa(id), c, r)
		}
		if _, err := db.Exec(q.String(), args...); err != nil {
			tb.Fatal(err)
		}
	}
}

func benchmarkUserRegion(b *testing.B, cfg regions.Config) {
	db := testenv.NewDB(b)
	svc, err := regions.New(context.Background(), db, slog.New(slog.DiscardHandler), nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(svc.Close)
	f := mustFixture(b, svc, "bench")
	mustBenchUsers(b, db, "bench", benchUsers, f.sea)
	ctx := context.Background()
	for id := int64(1); id <= benchUsers; id++ { // warm the cache
		if _, _, err := svc.UserRegion(ctx, "bench", id); err != nil {
			b.Fatal(err)
		}
	}
	var seed atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := seed.Add(7919) // each goroutine walks the users from its own place
		for pb.Next() {
			id++
			if _, _, err := svc.UserRegion(ctx, "bench", 1+id%benchUsers); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "lookups/s")
}

// BenchmarkUserRegionCached measures the user → region lookup through the
// in-process cache, with the real clock, over 10,000 cached users.
func BenchmarkUserRegionCached(b *testing.B) {
	benchmarkUserRegion(b, regions.Config{CacheTTL: 10 * time.Minute})
}

// BenchmarkUserRegionUncached is the same lookup with the cache disabled:
// one MySQL primary-key read each, what a miss costs.
func BenchmarkUserRegionUncached(b *testing.B) {
	benchmarkUserRegion(b, regions.Config{DisableCache: true})
}
