package gateway

import (
	"testing"
	"time"
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
		return sh.cur[k] != nil || sh.prev[k] != nil
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
