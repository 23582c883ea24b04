package roomlist

import (
	"time"

	"voiceroom/apperr"
)

// Config tunes the list query. Zero fields take the defaults given;
// Validate never changes c. Where Redis keys live and how long cards stay
// there is the read model's (listprojector.Config, through the Mirror the
// Lister is given).
type Config struct {
	// RedisTimeout bounds one Redis round trip of the list query; a slower
	// Redis counts as an error and the query falls back to MySQL. Default 50ms.
	RedisTimeout time.Duration
	// WriteTimeout bounds each piece of the list query's background work
	// (a repair of Redis, the rebuild of a frozen order). Default 10s.
	WriteTimeout time.Duration

	// CursorSecret signs list cursors (HMAC-SHA256): at least 16 bytes,
	// required by NewLister; every api process of a deployment must share
	// it. Default none.
	CursorSecret []byte
	// FreezeEvery is how often the list of a region and tab is frozen
	// anew: a first page is served from a frozen order at most this old.
	// Default 1s.
	FreezeEvery time.Duration
	// ChainTTL is how long a frozen order stays available to the cursors
	// walking it, in the process that froze it and, with Redis, in Redis
	// for every api process. Default 2m.
	ChainTTL time.Duration
	// ChainDepth is how many rooms of a list a frozen order holds: the
	// first ChainDepth rooms of a chain are never repeated or skipped.
	// Default 1000.
	ChainDepth int
	// MaxFrozenRooms bounds the rooms held by all frozen orders of the
	// process together, its own and those it read from Redis; the oldest
	// orders are dropped first. Default 2,000,000.
	MaxFrozenRooms int
	// NearCacheCards bounds the cards the list query keeps in process
	// memory, tracked by Redis (see nearCache); -1 turns the near cache
	// off. Default 100,000.
	NearCacheCards int
	// NearCacheMaxAge is the longest a card or hide set is served from the
	// near cache after it was read from Redis, even without an
	// invalidation (a backstop). Default 30s.
	NearCacheMaxAge time.Duration
	// SearchMaxResults bounds the rooms one search returns over all its
	// pages. Default 200.
	SearchMaxResults int

	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Limits of the list query a client controls.
const (
	DefaultLimit   = 20
	MaxLimit       = 50
	MaxQueryLen    = 32 // runes of a search query
	maxCursorBytes = 512
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.RedisTimeout, 50*time.Millisecond)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.FreezeEvery, time.Second)
	def(&c.ChainTTL, 2*time.Minute)
	if c.ChainDepth == 0 {
		c.ChainDepth = 1000
	}
	if c.MaxFrozenRooms == 0 {
		c.MaxFrozenRooms = 2_000_000
	}
	if c.NearCacheCards == 0 {
		c.NearCacheCards = 100_000
	}
	def(&c.NearCacheMaxAge, 30*time.Second)
	if c.SearchMaxResults == 0 {
		c.SearchMaxResults = 200
	}
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
	checks.Check(c.RedisTimeout >= time.Millisecond && c.RedisTimeout <= 10*time.Second, "RedisTimeout", "want 1ms..10s, got %v", c.RedisTimeout)
	checks.Check(c.WriteTimeout > 0, "WriteTimeout", "must be positive")
	checks.Check(len(c.CursorSecret) == 0 || len(c.CursorSecret) >= 16, "CursorSecret", "want at least 16 bytes")
	checks.Check(c.ChainTTL >= time.Second && c.ChainTTL <= time.Hour, "ChainTTL", "want 1s..1h, got %v", c.ChainTTL)
	checks.Check(c.FreezeEvery > 0 && c.FreezeEvery <= c.ChainTTL, "FreezeEvery", "want more than 0 and at most ChainTTL, got %v", c.FreezeEvery)
	checks.Check(c.ChainDepth >= MaxLimit && c.ChainDepth <= 100_000, "ChainDepth", "want %d..100000, got %d", MaxLimit, c.ChainDepth)
	checks.Check(c.MaxFrozenRooms >= c.ChainDepth && c.MaxFrozenRooms <= 100_000_000, "MaxFrozenRooms", "want ChainDepth (%d)..100000000, got %d", c.ChainDepth, c.MaxFrozenRooms)
	checks.Check(c.NearCacheCards == -1 || (c.NearCacheCards >= 1 && c.NearCacheCards <= 10_000_000), "NearCacheCards",
		"want -1 (off) or 1..10000000, got %d", c.NearCacheCards)
	checks.Check(c.NearCacheMaxAge >= time.Second && c.NearCacheMaxAge <= time.Hour, "NearCacheMaxAge", "want 1s..1h, got %v", c.NearCacheMaxAge)
	checks.Check(c.SearchMaxResults >= 1 && c.SearchMaxResults <= c.ChainDepth, "SearchMaxResults", "want 1..ChainDepth, got %d", c.SearchMaxResults)
	return checks.Err()
}

// nowMs is the clock in Unix milliseconds.
func (c Config) nowMs() int64 { return c.Now().UnixMilli() }
