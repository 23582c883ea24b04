package listprojector

import (
	"time"

	"voiceroom/apperr"
)

// Config tunes the projector, the reconcile job and the Redis mirror. Zero
// fields take the defaults given; Validate never changes c.
type Config struct {
	// FetchBatch is the most events one projector batch handles: the events
	// of one pull, coalesced by room and written in at most two multi-row
	// statements (see writeCards).
	// Default 500.
	FetchBatch int
	// WriteTimeout bounds one batch's MySQL and Redis writes. Default 10s.
	WriteTimeout time.Duration

	// CountsDelay is how long a room's card may wait when its listing
	// differs from the stored card only in its counts (heat, online_count,
	// occupied_seat_count): it is written at most this long after the
	// room's first such change, at the room's newest card by then, or at
	// once with any other change (see hold.go). The region list's
	// consistency model lets counts lag briefly and heat and order by
	// seconds. Default 1s, at most 10s; negative: write every change at
	// once.
	CountsDelay time.Duration
	// MaxHeld bounds the rooms whose cards are held, each with one unacked
	// message: past it the rooms held longest are written early. Default
	// 3000.
	MaxHeld int

	// KeyPrefix is put before every Redis key (tests isolate themselves
	// with it). Default empty.
	KeyPrefix string
	// CardTTL is how long a room card stays in Redis without being written
	// again; the reconcile job rewrites the cards of active rooms, so the
	// cards of closed rooms expire. Default 10m.
	CardTTL time.Duration
	// ReconcileEvery is the period of the reconcile job (Redis repaired
	// from MySQL, freshness boosts recomputed). Default 30s.
	ReconcileEvery time.Duration

	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 500
	}
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.CountsDelay, time.Second)
	if c.MaxHeld == 0 {
		c.MaxHeld = 3000
	}
	def(&c.CardTTL, 10*time.Minute)
	def(&c.ReconcileEvery, 30*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c. Each error is an
// *apperr.ConfigError naming the field and wrapping ErrInvalidConfig; the
// errors of several fields are joined.
func (c Config) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	checks.Check(c.FetchBatch >= 1 && c.FetchBatch <= 5000, "FetchBatch", "want 1..5000, got %d", c.FetchBatch)
	checks.Check(c.WriteTimeout > 0, "WriteTimeout", "must be positive")
	checks.Check(c.CountsDelay <= 10*time.Second, "CountsDelay", "want at most 10s, got %v", c.CountsDelay)
	checks.Check(c.MaxHeld >= 1 && c.MaxHeld <= 100000, "MaxHeld", "want 1..100000, got %d", c.MaxHeld)
	checks.Check(c.ReconcileEvery >= time.Second, "ReconcileEvery", "want at least 1s, got %v", c.ReconcileEvery)
	checks.Check(c.CardTTL >= 2*c.ReconcileEvery, "CardTTL", "want at least twice ReconcileEvery (%v), got %v", c.ReconcileEvery, c.CardTTL)
	return checks.Err()
}

// nowMs is the clock in Unix milliseconds.
func (c Config) nowMs() int64 { return c.Now().UnixMilli() }
