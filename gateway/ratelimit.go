package gateway

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"

	"voiceroom/apperr"
)

// rateLimiter gives each principal (app_code, user, admin or not) a token
// bucket. A request costs O(1): the buckets are spread over shards, each
// with its own lock, and idle buckets are dropped by generations instead of
// by a sweep: every idleBucket a shard's current map becomes its previous
// one and the old previous one is dropped whole. A bucket used again is
// moved back into the current map, so a bucket lives while it is used at
// least once every idleBucket, and is dropped at the first use of its shard
// more than 2×idleBucket after its own last use (a shard nobody uses keeps
// what it holds, and does not grow).
type rateLimiter struct {
	perSec float64
	burst  int
	now    func() time.Time
	seed   maphash.Seed
	shards [rateShards]rateShard
}

// rateShards spreads the buckets so that concurrent requests of different
// users rarely share a lock.
const rateShards = 64

// idleBucket is how long an unused bucket is kept at least.
const idleBucket = 5 * time.Minute

type principalKey struct {
	app      string
	user     int64
	admin    bool
	platform bool
}

type rateShard struct {
	mu       sync.Mutex
	cur      map[principalKey]bucket
	prev     map[principalKey]bucket
	rotateAt time.Time
}

// bucket is one principal's token bucket, held in the shard's map by
// value: there is one per user online, so it is the 16 bytes of its state
// rather than a *rate.Limiter (80 bytes, a pointer and an allocation of
// its own). It behaves as rate.Limiter's AllowN(now, 1): a new bucket is
// full, it refills at perSec up to burst, and a refused take changes
// nothing.
type bucket struct {
	tokens float64
	last   int64 // unix ns of the last take; 0: new
}

// take takes a token at now if one is there.
func (b *bucket) take(now time.Time, perSec float64, burst int) bool {
	ns := now.UnixNano()
	tokens := float64(burst)
	if b.last != 0 {
		tokens = b.tokens
		if ns > b.last { // a clock gone back refills nothing
			tokens = min(tokens+float64(ns-b.last)/1e9*perSec, float64(burst))
		}
	}
	if tokens < 1 {
		return false
	}
	b.tokens, b.last = tokens-1, ns
	return true
}

func newRateLimiter(perSec float64, burst int, now func() time.Time) *rateLimiter {
	r := &rateLimiter{perSec: perSec, burst: burst, now: now, seed: maphash.MakeSeed()}
	start := now()
	for i := range r.shards {
		r.shards[i].cur = map[principalKey]bucket{}
		r.shards[i].rotateAt = start.Add(idleBucket)
	}
	return r
}

// shard returns the shard of k's bucket.
func (r *rateLimiter) shard(k principalKey) *rateShard {
	var h maphash.Hash
	h.SetSeed(r.seed)
	h.WriteString(k.app)
	return &r.shards[(h.Sum64()^uint64(k.user))%rateShards]
}

func (r *rateLimiter) allow(k principalKey) bool {
	sh := r.shard(k)
	now := r.now()

	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !now.Before(sh.rotateAt) {
		sh.prev, sh.cur = sh.cur, make(map[principalKey]bucket, len(sh.cur))
		sh.rotateAt = now.Add(idleBucket)
	}
	b, ok := sh.cur[k]
	if !ok {
		if b, ok = sh.prev[k]; ok {
			delete(sh.prev, k)
		}
	}
	allowed := b.take(now, r.perSec, r.burst)
	sh.cur[k] = b
	return allowed
}

func (r *rateLimiter) middleware(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	if !r.allow(principalKey{app: p.AppCode, user: p.UserID, admin: p.Admin, platform: p.Platform}) {
		return apperr.New(apperr.RateLimited, "too many requests")
	}
	return c.Next()
}
