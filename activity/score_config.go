package activity

import (
	"errors"
	"time"

	"voiceroom/apperr"
	"voiceroom/roomranks"
)

// ErrInvalidScoreConfig is wrapped by ScoreConfig's errors.
var ErrInvalidScoreConfig = errors.New("invalid activity scoring configuration")

// ScoreConfig tunes the scoring consumer and the boards' reads. Zero
// fields take the defaults given; Validate never changes c.
type ScoreConfig struct {
	// TimeZones maps an app_code to the IANA name of the time zone its
	// days and weeks follow (VOICEROOM_APP_TIMEZONES, as for the ranks);
	// an app not named follows UTC.
	TimeZones map[string]string
	// KeyPrefix is put before every Redis key (tests isolate themselves
	// with it). Default empty.
	KeyPrefix string
	// Refresh is the longest the consumer reuses its list of open
	// activities; it also reads the list again whenever an event is newer
	// than the list. Default 5s.
	Refresh time.Duration
	// ExpireAfter is how long a board stays in Redis after its period
	// ended (it is rebuilt from MySQL when read again). Default 7 days.
	ExpireAfter time.Duration
	// RedisTimeout bounds one Redis round trip of a board read; slower
	// counts as a failure and the read goes to MySQL. Default 100ms.
	RedisTimeout time.Duration
	// WriteTimeout bounds the consumer's work on one event (its MySQL
	// transaction and its board writes) and one rebuild of a board.
	// Default 10s.
	WriteTimeout time.Duration
	// Now is the clock of the reads (which period is current) and of the
	// rows' updated_at_ms. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ScoreConfig) WithDefaults() ScoreConfig {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Refresh, 5*time.Second)
	def(&c.ExpireAfter, 7*24*time.Hour)
	def(&c.RedisTimeout, 100*time.Millisecond)
	def(&c.WriteTimeout, 10*time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c. Each error is an
// *apperr.ConfigError naming the field and wrapping
// ErrInvalidScoreConfig; the errors of several fields are joined.
func (c ScoreConfig) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidScoreConfig)
	roomranks.CheckTimeZones(checks, c.TimeZones)
	checks.Check(c.Refresh >= 10*time.Millisecond && c.Refresh <= time.Hour, "Refresh", "want 10ms..1h, got %v", c.Refresh)
	checks.Check(c.ExpireAfter >= time.Minute, "ExpireAfter", "want at least 1m, got %v", c.ExpireAfter)
	checks.Check(c.RedisTimeout > 0, "RedisTimeout", "must be positive")
	checks.Check(c.WriteTimeout > 0, "WriteTimeout", "must be positive")
	return checks.Err()
}
