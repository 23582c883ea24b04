package roomranks

import (
	"time"

	"voiceroom/apperr"
)

// Config tunes the ranks: the apps' calendars, the Redis sets' life and
// the bounds of Redis and MySQL work. Zero fields take the defaults given;
// Validate never changes c.
type Config struct {
	// TimeZones maps an app_code to the IANA name of the time zone its
	// days and weeks follow ("Asia/Shanghai"); an app not named follows
	// UTC. A day starts at local midnight, a week on Monday at 00:00.
	TimeZones map[string]string

	// KeyPrefix is put before every Redis key (tests isolate themselves
	// with it). Default empty.
	KeyPrefix string
	// ExpireAfter is how long a period's sets stay in Redis after the
	// period ended (late events still land in them). Default 24h.
	ExpireAfter time.Duration
	// JournalSize is how many of a room's latest gift events Redis keeps
	// to recognise a repeat (see doc.go). Default 512.
	JournalSize int
	// RedisTimeout bounds one Redis round trip of a read; slower counts
	// as a failure and the read goes to MySQL. Default 100ms.
	RedisTimeout time.Duration
	// WriteTimeout bounds the consumer's Redis write of one event and one
	// refill of a set (its MySQL read and Redis write). Default 5s.
	WriteTimeout time.Duration

	// Now is the clock: which day and week a read is about. Default
	// time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.ExpireAfter, 24*time.Hour)
	def(&c.RedisTimeout, 100*time.Millisecond)
	def(&c.WriteTimeout, 5*time.Second)
	if c.JournalSize == 0 {
		c.JournalSize = 512
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c. Each error is an
// *apperr.ConfigError naming the field and wrapping ErrInvalidConfig; the
// errors of several fields are joined. A time zone must be a valid app
// code mapped to a zone the Go time package knows.
func (c Config) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	CheckTimeZones(checks, c.TimeZones)
	checks.Check(c.ExpireAfter >= time.Minute, "ExpireAfter", "want at least 1m, got %v", c.ExpireAfter)
	checks.Check(c.JournalSize >= 16 && c.JournalSize <= 100_000, "JournalSize", "want 16..100000, got %d", c.JournalSize)
	checks.Check(c.RedisTimeout > 0, "RedisTimeout", "must be positive")
	checks.Check(c.WriteTimeout > 0, "WriteTimeout", "must be positive")
	return checks.Err()
}
