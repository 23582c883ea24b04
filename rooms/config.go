package rooms

import (
	"time"

	"golang.org/x/crypto/bcrypt"

	"voiceroom/apperr"
)

// Config tunes the service. Zero fields take the defaults given.
type Config struct {
	// PresenceTTL is how long a present user may go without a heartbeat
	// before the sweeper removes them (RoomUserLeft, reason stale). 1s..1h,
	// default 30s.
	PresenceTTL time.Duration
	// SweepInterval is how often the sweeper looks; at most PresenceTTL.
	// Default PresenceTTL/3.
	SweepInterval time.Duration
	// IdleEvict drops a cell with nobody present after this long without a
	// command. At least 1s, default 10m.
	IdleEvict time.Duration
	// SnapshotEvery writes a room's snapshot every this many versions (and
	// at creation, closing, region changes and eviction); recovery replays
	// at most this many commands. 1..10000, default 64.
	SnapshotEvery int
	// MaxOnline is the most users one room holds. 1..100000, default 1000.
	MaxOnline int
	// CommitWorkers is the number of transactions in flight at once (1..64,
	// default 4), and CommitBatch the most commands one of them carries
	// (1..1000, default 128).
	CommitWorkers, CommitBatch int
	// CommandTimeout bounds a command from start to answer: the wait for its
	// room, loading it, the commit queue and the transaction with its
	// retries. A command answers UNAVAILABLE when it passes. At least
	// 100ms, default 5s.
	CommandTimeout time.Duration
	// PasswordAttempts wrong room passwords per user and room are allowed
	// per minute. 1..1000, default 5.
	PasswordAttempts int
	// BcryptCost is the cost of password hashes. Default bcrypt.DefaultCost.
	BcryptCost int
	// DefaultCoverURL is a room's cover when the creator gives none: an
	// http(s) URL. Default a placeholder image.
	DefaultCoverURL string
	// RecoverLimit bounds how many rooms with users are loaded at start.
	// Default 100000.
	RecoverLimit int
	// MicRequestTTL is how long a request to speak waits for the host
	// before it lapses. 10s..24h, default 5m.
	MicRequestTTL time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	setDefault(&c.PresenceTTL, 30*time.Second)
	setDefault(&c.SweepInterval, c.PresenceTTL/3)
	setDefault(&c.IdleEvict, 10*time.Minute)
	setDefault(&c.SnapshotEvery, 64)
	setDefault(&c.MaxOnline, 1000)
	setDefault(&c.CommitWorkers, 4)
	setDefault(&c.CommitBatch, 128)
	setDefault(&c.CommandTimeout, 5*time.Second)
	setDefault(&c.PasswordAttempts, 5)
	setDefault(&c.BcryptCost, bcrypt.DefaultCost)
	setDefault(&c.DefaultCoverURL, "https://cdn.voiceroom.example/default-room-cover.png")
	setDefault(&c.RecoverLimit, 100000)
	setDefault(&c.MicRequestTTL, 5*time.Minute)
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	between := func(v, lo, hi int) bool { return v >= lo && v <= hi }
	switch {
	case c.PresenceTTL < time.Second || c.PresenceTTL > time.Hour:
		return apperr.BadConfig("PresenceTTL", "presence ttl %v: want 1s..1h", c.PresenceTTL)
	case c.SweepInterval <= 0 || c.SweepInterval > c.PresenceTTL:
		return apperr.BadConfig("SweepInterval", "sweep interval %v: want more than 0 and at most the presence ttl %v", c.SweepInterval, c.PresenceTTL)
	case c.IdleEvict < time.Second:
		return apperr.BadConfig("IdleEvict", "idle evict %v: want at least 1s", c.IdleEvict)
	case !between(c.SnapshotEvery, 1, 10000):
		return apperr.BadConfig("SnapshotEvery", "snapshot every %d: want 1..10000", c.SnapshotEvery)
	case !between(c.MaxOnline, 1, 100000):
		return apperr.BadConfig("MaxOnline", "max online %d: want 1..100000", c.MaxOnline)
	case !between(c.CommitWorkers, 1, 64):
		return apperr.BadConfig("CommitWorkers", "commit workers %d: want 1..64", c.CommitWorkers)
	case !between(c.CommitBatch, 1, 1000):
		return apperr.BadConfig("CommitBatch", "commit batch %d: want 1..1000", c.CommitBatch)
	case c.CommandTimeout < 100*time.Millisecond:
		return apperr.BadConfig("CommandTimeout", "command timeout %v: want at least 100ms", c.CommandTimeout)
	case !between(c.PasswordAttempts, 1, 1000):
		return apperr.BadConfig("PasswordAttempts", "password attempts %d: want 1..1000", c.PasswordAttempts)
	case c.BcryptCost < bcrypt.MinCost || c.BcryptCost > bcrypt.MaxCost:
		return apperr.BadConfig("BcryptCost", "bcrypt cost %d: want %d..%d", c.BcryptCost, bcrypt.MinCost, bcrypt.MaxCost)
	case checkURL("default_cover_url", c.DefaultCoverURL) != nil: // the rule of a client's cover_url
		return apperr.BadConfig("DefaultCoverURL", "default cover url %q: want an http(s) URL of at most %d bytes", c.DefaultCoverURL, maxURL)
	case c.MicRequestTTL < 10*time.Second || c.MicRequestTTL > 24*time.Hour:
		return apperr.BadConfig("MicRequestTTL", "mic request ttl %v: want 10s..24h", c.MicRequestTTL)
	case c.RecoverLimit < 0:
		return apperr.BadConfig("RecoverLimit", "recover limit %d: must be positive", c.RecoverLimit)
	}
	return nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
