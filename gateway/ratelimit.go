package gateway

import (
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"golang.org/x/time/rate"

	"voiceroom/apperr"
)

// rateLimiter gives each principal (app_code and user) a token bucket. Idle
// buckets are dropped, so memory follows the number of active users.
type rateLimiter struct {
	perSec float64
	burst  int
	now    func() time.Time

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	lim      *rate.Limiter
	lastSeen time.Time
}

// idleBucket is how long an unused bucket is kept.
const idleBucket = 5 * time.Minute

func newRateLimiter(perSec float64, burst int, now func() time.Time) *rateLimiter {
	return &rateLimiter{perSec: perSec, burst: burst, now: now, buckets: map[string]*bucket{}, lastSweep: now()}
}

func (r *rateLimiter) allow(key string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.lastSweep) > time.Minute {
		for k, b := range r.buckets {
			if now.Sub(b.lastSeen) > idleBucket {
				delete(r.buckets, k)
			}
		}
		r.lastSweep = now
	}
	b, ok := r.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(r.perSec), r.burst)}
		r.buckets[key] = b
	}
	b.lastSeen = now
	return b.lim.AllowN(now, 1)
}

func (r *rateLimiter) middleware(c *fiber.Ctx) error {
	p := PrincipalOf(c)
	if !r.allow(p.AppCode + ":" + strconv.FormatInt(p.UserID, 10) + ":" + strconv.FormatBool(p.Admin)) {
		return apperr.New(apperr.RateLimited, "too many requests")
	}
	return c.Next()
}
