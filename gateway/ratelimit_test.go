package gateway

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestRateLimiterKeepsBusyBucketsAndDropsIdleOnes(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newRateLimiter(1, 2, func() time.Time { return now })
	busy, idle := principalKey{app: "a", user: 1}, principalKey{app: "a", user: 2}
	for r.shard(idle) != r.shard(busy) { // one shard: expiry is per shard
		idle.user++
	}
	for _, k := range []principalKey{busy, idle} {
		if !r.allow(k) || !r.allow(k) || r.allow(k) {
			t.Fatalf("%v: want a burst of 2, then a refusal", k)
		}
	}
	kept := func(k principalKey) bool {
		sh := r.shard(k)
		_, cur := sh.cur[k]
		_, prev := sh.prev[k]
		return cur || prev
	}
	// The busy bucket is used once per idle period; the idle one never.
	for range 3 {
		now = now.Add(idleBucket)
		r.allow(busy)
	}
	if !kept(busy) {
		t.Fatal("a bucket used every idle period was dropped")
	}
	if kept(idle) {
		t.Fatal("a bucket idle for three periods is still kept")
	}
}

func BenchmarkRateLimiter(b *testing.B) {
	r := newRateLimiter(1e9, 1e9, time.Now)
	b.RunParallel(func(pb *testing.PB) {
		var user int64
		for pb.Next() {
			user++
			r.allow(principalKey{app: "app1", user: user % 100000})
		}
	})
}

// TestBucketTakesAsRateLimiter steps a bucket and a rate.Limiter of the
// same rate and burst through one sequence of takes, the clock going back
// once: each take has the same answer.
func TestBucketTakesAsRateLimiter(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	const perSec, burst = 2.5, 3
	lim := rate.NewLimiter(perSec, burst)
	var b bucket
	for i, step := range []time.Duration{0, 0, 0, 0, 100 * time.Millisecond, 300 * time.Millisecond, 0, time.Second,
		0, 0, 0, -time.Second, 0, 2 * time.Second, 0, 0, 0, 0, 399 * time.Millisecond, time.Millisecond, 0, time.Hour, 0, 0, 0, 0} {
		now = now.Add(step)
		if got, want := b.take(now, perSec, burst), lim.AllowN(now, 1); got != want {
			t.Fatalf("take %d (after %v): %v, rate.Limiter %v", i, step, got, want)
		}
	}
}
