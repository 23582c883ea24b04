package roomcluster

import (
	"time"

	"voiceroom/apperr"
)

// Config tunes a node and a router. Zero fields take the defaults given.
type Config struct {
	// Partitions is P, the number of partitions rooms are hashed into. It
	// is fixed per deployment: a node that finds another P recorded in
	// the deployment's config bucket refuses to start. 1..4096, default
	// 256.
	Partitions int
	// LeaseTTL is how long a partition's lease lives without renewal: a
	// dead node's partitions are taken over this long after its last
	// renewal. 1s..1m, default 5s.
	LeaseTTL time.Duration
	// RenewEvery is how often a node renews its leases and membership.
	// Default LeaseTTL*3/10.
	RenewEvery time.Duration
	// Margin is how long before its lease can expire a node stops serving
	// a partition it could not renew, on its own clock. Default LeaseTTL/5.
	Margin time.Duration
	// Replicas of the lease, member and config buckets (1 on one
	// JetStream server, 3 on a cluster). Default 1.
	Replicas int
	// AttemptTimeout bounds one routed request; past it the router asks
	// again (with the command's id, so the owner answers a command that
	// committed meanwhile from its log, or waits for the room while the
	// first attempt runs). It bounds the gap a request lost in a
	// hand-over leaves. Default 500ms.
	AttemptTimeout time.Duration
	// MaxInFlight bounds the routed requests a node runs at once; past it
	// it answers UNAVAILABLE. Default 4096.
	MaxInFlight int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.Partitions == 0 {
		c.Partitions = 256
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 5 * time.Second
	}
	if c.RenewEvery == 0 {
		c.RenewEvery = c.LeaseTTL * 3 / 10
	}
	if c.Margin == 0 {
		c.Margin = c.LeaseTTL / 5
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 500 * time.Millisecond
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 4096
	}
	return c
}

// Validate checks c after defaults; errors are *apperr.ConfigError.
func (c Config) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	checks.Check(c.Partitions >= 1 && c.Partitions <= 4096, "Partitions", "want 1..4096, got %d", c.Partitions)
	checks.Check(c.LeaseTTL >= time.Second && c.LeaseTTL <= time.Minute, "LeaseTTL", "want 1s..1m, got %v", c.LeaseTTL)
	checks.Check(c.Margin > 0 && c.Margin < c.LeaseTTL/2, "Margin", "want more than 0 and under half the lease ttl (%v), got %v", c.LeaseTTL, c.Margin)
	checks.Check(c.RenewEvery > 0 && c.RenewEvery+c.Margin < c.LeaseTTL, "RenewEvery",
		"want more than 0, and with the margin (%v) under the lease ttl (%v) so that one renewal may fail, got %v", c.Margin, c.LeaseTTL, c.RenewEvery)
	checks.Check(c.Replicas == 1 || c.Replicas == 3 || c.Replicas == 5, "Replicas", "want 1, 3 or 5, got %d", c.Replicas)
	checks.Check(c.AttemptTimeout >= 10*time.Millisecond, "AttemptTimeout", "want at least 10ms, got %v", c.AttemptTimeout)
	checks.Check(c.MaxInFlight >= 1, "MaxInFlight", "want at least 1, got %d", c.MaxInFlight)
	return checks.Err()
}
