package webhooks

import (
	"time"

	"voiceroom/apperr"
	"voiceroom/bus"
)

// Config configures a Sink. Zero fields take their defaults (see
// WithDefaults); Validate never changes c.
type Config struct {
	// Consumer is the consume loop over the durable. Durable defaults to
	// "webhooks", FetchBatch (the events held at most, over every
	// endpoint) to 4096, Concurrency to 4. Keep the durable's
	// MaxAckPending at least FetchBatch and its MaxDeliver -1.
	Consumer bus.ConsumerRunConfig
	// Policy is what a URL may be: checked again on every connection.
	Policy Policy
	// Timeout bounds one attempt: connecting, sending and the answer's
	// status and first bytes. Default 10s. VOICEROOM_WEBHOOKS_TIMEOUT.
	Timeout time.Duration
	// Concurrency is how many deliveries to one endpoint may be in flight
	// at once, each for another room. Default 16.
	// VOICEROOM_WEBHOOKS_CONCURRENCY.
	Concurrency int
	// MaxBatchEvents caps the events of one delivery (consecutive events
	// of one room). Default 100. VOICEROOM_WEBHOOKS_MAX_BATCH_EVENTS.
	MaxBatchEvents int
	// MaxBatchBytes caps the body of a delivery of several events; a
	// single larger event goes alone. Default 256 KiB.
	MaxBatchBytes int
	// RetryDelays is the wait before attempt n+1 after attempt n failed
	// (5xx, 408, 429, a redirect, a timeout, no connection):
	// RetryDelays[n-1], the last value repeating, forever. Default 1s:
	// the outbox spec's fixed interval. A 429's Retry-After waits longer,
	// up to MaxRetryAfter. VOICEROOM_WEBHOOKS_BACKOFF (each value at most
	// MaxRetryDelay).
	RetryDelays []time.Duration
	// MaxRetryAfter caps the wait a 429's Retry-After asks for. Default 5m.
	MaxRetryAfter time.Duration
	// PauseAfter is how long an endpoint may fail (no 2xx since its first
	// failed attempt) before it is paused automatically, the reason
	// recorded; an admin resumes it. Default 15m.
	// VOICEROOM_WEBHOOKS_PAUSE_AFTER.
	PauseAfter time.Duration
	// MaxHeld is how many events of the durable one endpoint may hold
	// undelivered. Above it (or when every endpoint together holds three
	// quarters of FetchBatch, for the one holding most) the endpoint
	// reads its backlog back from the stream instead, so one slow or
	// failing endpoint never stalls the others. Default 1000.
	MaxHeld int
	// ResponseBytes is the most of an answer's body read (the start of an
	// error's). Default 1024.
	ResponseBytes int
	// RefreshInterval is how often the endpoints are read from MySQL (an
	// admin's change takes effect within it) and the backlog cursors
	// stored. Default 1s.
	RefreshInterval time.Duration
	// HistoryInterval thins the delivery history of an endpoint that
	// delivers fast: a delivered attempt is recorded only when the
	// endpoint's last recorded one is at least this old; failed and
	// rejected attempts always are. Each record is a write into a
	// JetStream stream, which, one per delivery, cost the fast path's
	// publishes a fourfold latency at full load. Default 100ms (at most
	// ten successes a second per endpoint); negative records every one.
	HistoryInterval time.Duration
	// LeaseTTL is the life of the delivery lease (see Sink.Run): a
	// standby takes over this long after the holder stopped renewing.
	// Default 15s.
	LeaseTTL time.Duration
	// Replicas is the replica count of the lease bucket and of the
	// delivery log stream: the streams'. Default 1.
	Replicas int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Bounds of Config.
const (
	// MaxRetryDelay bounds each of RetryDelays.
	MaxRetryDelay = 10 * time.Minute
	// MaxConcurrency bounds Concurrency.
	MaxConcurrency = 256
	// MaxFetchBatch bounds Consumer.FetchBatch.
	MaxFetchBatch = 100_000
)

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Consumer.Durable == "" {
		c.Consumer.Durable = bus.DurableWebhooks
	}
	if c.Consumer.FetchBatch == 0 {
		c.Consumer.FetchBatch = 4096
	}
	c.Consumer = c.Consumer.WithDefaults()
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	defInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Timeout, 10*time.Second)
	defInt(&c.Concurrency, 16)
	defInt(&c.MaxBatchEvents, 100)
	defInt(&c.MaxBatchBytes, 256<<10)
	if len(c.RetryDelays) == 0 {
		c.RetryDelays = []time.Duration{time.Second}
	}
	def(&c.MaxRetryAfter, 5*time.Minute)
	def(&c.PauseAfter, 15*time.Minute)
	defInt(&c.MaxHeld, 1000)
	defInt(&c.ResponseBytes, 1024)
	def(&c.RefreshInterval, time.Second)
	def(&c.HistoryInterval, 100*time.Millisecond)
	def(&c.LeaseTTL, 15*time.Second)
	defInt(&c.Replicas, 1)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c. Each error is an
// *apperr.ConfigError naming the field (the consumer's by its own names)
// and wrapping ErrInvalidConfig; the errors of several fields are joined.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if err := c.Consumer.Validate(); err != nil {
		return apperr.BadConfig(apperr.ConfigFieldOf(err), "%w: consumer: %w", ErrInvalidConfig, err)
	}
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	checks.Check(c.Consumer.FetchBatch <= MaxFetchBatch, "FetchBatch", "want 1..%d, got %d", MaxFetchBatch, c.Consumer.FetchBatch)
	checks.Check(c.Timeout >= 100*time.Millisecond && c.Timeout <= 2*time.Minute, "Timeout", "want 100ms..2m, got %v", c.Timeout)
	checks.Check(c.Concurrency >= 1 && c.Concurrency <= MaxConcurrency, "Concurrency", "want 1..%d, got %d", MaxConcurrency, c.Concurrency)
	checks.Check(c.MaxBatchEvents >= 1 && c.MaxBatchEvents <= 1000, "MaxBatchEvents", "want 1..1000, got %d", c.MaxBatchEvents)
	checks.Check(c.MaxBatchBytes >= 1024, "MaxBatchBytes", "want at least 1024, got %d", c.MaxBatchBytes)
	for i, d := range c.RetryDelays {
		checks.Check(d > 0 && d <= MaxRetryDelay, "RetryDelays", "[%d] %v: want more than 0, at most %v", i, d, MaxRetryDelay)
	}
	checks.Check(c.MaxRetryAfter > 0, "MaxRetryAfter", "must be positive")
	checks.Check(c.PauseAfter > 0, "PauseAfter", "must be positive")
	checks.Check(c.MaxHeld >= 1 && c.MaxHeld <= c.Consumer.FetchBatch, "MaxHeld", "want 1..FetchBatch (%d), got %d", c.Consumer.FetchBatch, c.MaxHeld)
	checks.Check(c.ResponseBytes >= 0 && c.ResponseBytes <= 1<<20, "ResponseBytes", "want 0..1048576, got %d", c.ResponseBytes)
	checks.Check(c.HistoryInterval <= time.Minute, "HistoryInterval", "want at most 1m (negative: every attempt), got %v", c.HistoryInterval)
	checks.Check(c.RefreshInterval > 0 && c.RefreshInterval <= time.Minute, "RefreshInterval", "want more than 0, at most 1m, got %v", c.RefreshInterval)
	checks.Check(c.LeaseTTL >= 300*time.Millisecond, "LeaseTTL", "want at least 300ms, got %v", c.LeaseTTL)
	checks.Check(c.Replicas == 1 || c.Replicas == 3 || c.Replicas == 5, "Replicas", "want 1, 3 or 5, got %d", c.Replicas)
	return checks.Err()
}

// retryDelay is the wait after failed attempt n (1-based).
func (c Config) retryDelay(n int) time.Duration {
	return c.RetryDelays[min(max(n, 1), len(c.RetryDelays))-1]
}
