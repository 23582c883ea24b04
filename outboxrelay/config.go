package outboxrelay

import (
	"time"

	"voiceroom/apperr"
)

// RetryFixedInterval is the only retry strategy (docs/operating.md, "The outbox"): a
// failed row stays pending and is tried again on every pass, one poll
// interval apart, forever. A room event is never dropped for having failed
// too often.
const RetryFixedInterval = "fixed_interval"

// MaxBatchSize bounds BatchSize: one batch is one transaction holding its
// rows locked while they are published.
const MaxBatchSize = 10000

// Config configures a Relay. A zero or negative field takes its default
// (docs/operating.md, "The outbox": no busy loop, no full-table scan, no unbounded wait).
type Config struct {
	// PollInterval is the time between passes over the pending rows. A
	// pass drains the backlog in batches, so it is also how long a failed
	// row waits before it is tried again. Default 1s.
	PollInterval time.Duration
	// BatchSize is the number of rows one claim takes (one transaction).
	// Default 100, at most MaxBatchSize.
	BatchSize int
	// PublishTimeout bounds the publish of one batch, from the first send
	// to the last ack; a message unanswered by then counts as failed.
	// Default 3s.
	PublishTimeout time.Duration
	// RetryStrategy is "" or "fixed_interval" (the default); anything else
	// makes Validate fail with ErrUnknownRetryStrategy.
	RetryStrategy string
	// Retention is how long a published row is kept before retention
	// deletes it. Default 72h.
	Retention time.Duration
	// RetentionInterval is the time between retention runs. Default 1m.
	RetentionInterval time.Duration
	// RetentionBatch is the number of rows one retention DELETE removes,
	// small so that it never holds many locks. Default 500.
	RetentionBatch int
	// StatementTimeout bounds one claim, mark or retention statement with
	// its commit. Default 5s.
	StatementTimeout time.Duration
	// Pipeline is the number of batches in flight at once (claimed, being
	// published or being marked), so MySQL and JetStream work at the same
	// time. Each holds a MySQL connection. Default 8.
	Pipeline int
	// StatsInterval is the time between refreshes of the pending-count
	// and oldest-pending-age gauges. Default 5s.
	StatsInterval time.Duration
	// InFlightGrace is how old an in-flight group (rows a fast path took,
	// see voiceroom.OutboxGroup) must be before a pass sets its rows back
	// to pending and publishes them: a fast path settles its groups within
	// its publish timeout, so an older one was left by a process that
	// stopped. Default 5s: above the fast path's publish timeout (3s).
	InFlightGrace time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Defaults of Config, named for the docs and the example configuration.
const (
	DefaultPollInterval      = time.Second
	DefaultBatchSize         = 100
	DefaultPublishTimeout    = 3 * time.Second
	DefaultRetention         = 72 * time.Hour
	DefaultRetentionInterval = time.Minute
	DefaultRetentionBatch    = 500
	DefaultStatementTimeout  = 5 * time.Second
	DefaultPipeline          = 8
	DefaultStatsInterval     = 5 * time.Second
	DefaultInFlightGrace     = 5 * time.Second
)

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c Config) WithDefaults() Config {
	c.PollInterval = orDefault(c.PollInterval, DefaultPollInterval)
	c.BatchSize = orDefault(c.BatchSize, DefaultBatchSize)
	c.PublishTimeout = orDefault(c.PublishTimeout, DefaultPublishTimeout)
	if c.RetryStrategy == "" {
		c.RetryStrategy = RetryFixedInterval
	}
	c.Retention = orDefault(c.Retention, DefaultRetention)
	c.RetentionInterval = orDefault(c.RetentionInterval, DefaultRetentionInterval)
	c.RetentionBatch = orDefault(c.RetentionBatch, DefaultRetentionBatch)
	c.StatementTimeout = orDefault(c.StatementTimeout, DefaultStatementTimeout)
	c.Pipeline = orDefault(c.Pipeline, DefaultPipeline)
	c.StatsInterval = orDefault(c.StatsInterval, DefaultStatsInterval)
	c.InFlightGrace = orDefault(c.InFlightGrace, DefaultInFlightGrace)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// MaxPipeline bounds Pipeline: each batch in flight holds a MySQL
// connection.
const MaxPipeline = 64

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field: an unknown retry strategy wraps
// ErrUnknownRetryStrategy, any other bad value ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.RetryStrategy != RetryFixedInterval:
		return apperr.BadConfig("RetryStrategy", "%w %q: want %q", ErrUnknownRetryStrategy, c.RetryStrategy, RetryFixedInterval)
	case c.BatchSize > MaxBatchSize:
		return apperr.BadConfig("BatchSize", "%w: batch size %d: at most %d", ErrInvalidConfig, c.BatchSize, MaxBatchSize)
	case c.RetentionBatch > MaxBatchSize:
		return apperr.BadConfig("RetentionBatch", "%w: retention batch %d: at most %d", ErrInvalidConfig, c.RetentionBatch, MaxBatchSize)
	case c.Pipeline > MaxPipeline:
		return apperr.BadConfig("Pipeline", "%w: pipeline %d: at most %d", ErrInvalidConfig, c.Pipeline, MaxPipeline)
	}
	return nil
}

// DrainBound is the longest Run takes to return once its ctx ends: the
// batch being published finishes within PublishTimeout and its marks
// within StatementTimeout. cmd/voiceroom checks it against its shutdown
// timeout, because MySQL closes after the workers stop.
func (c Config) DrainBound() time.Duration {
	c = c.WithDefaults()
	return c.PublishTimeout + c.StatementTimeout
}

// FastPathConfig configures a FastPath. A zero or negative field takes its
// default.
type FastPathConfig struct {
	// PublishTimeout bounds one fast publish, send to ack. Default 3s.
	PublishTimeout time.Duration
	// Workers is the number of publishes in flight at once (each room has
	// at most one), at most MaxFastWorkers. Each waits a stream round trip,
	// which on a busy machine is milliseconds: 32 capped the fast path
	// near 2,000 events/s in the in-process bench and queued the rest for
	// a second and more. Default 128.
	Workers int
	// QueueSize bounds the events accepted and not yet published. An event
	// that finds the queue full is left to the relay (and its room with
	// it, see the package doc). Default 10000.
	QueueSize int
	// MarkQueueSize bounds the published event_ids waiting to be marked;
	// an id that finds it full stays pending and the relay publishes it
	// again (de-duplicated by the stream). Default 10000.
	MarkQueueSize int
	// MarkBatch is the most event_ids one mark transaction updates.
	// Default 500.
	MarkBatch int
	// MaxBlockedRooms bounds the rooms tracked as handed over to the
	// relay; past it every room is handed over until the relay has caught
	// up. Default 10000.
	MaxBlockedRooms int
	// CheckInterval is the time between checks whether the relay has
	// published what the fast path handed over, which frees those rooms.
	// Default 200ms.
	CheckInterval time.Duration
	// StatementTimeout bounds one mark or check statement. Default 5s.
	StatementTimeout time.Duration
	// Connected reports whether the NATS connection is up; while it is
	// down events go straight to the relay instead of waiting
	// PublishTimeout each. Default: always true.
	Connected func() bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// MaxFastWorkers bounds FastPathConfig.Workers.
const MaxFastWorkers = 4096

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c FastPathConfig) WithDefaults() FastPathConfig {
	c.PublishTimeout = orDefault(c.PublishTimeout, DefaultPublishTimeout)
	c.Workers = orDefault(c.Workers, 128)
	c.QueueSize = orDefault(c.QueueSize, 10000)
	c.MarkQueueSize = orDefault(c.MarkQueueSize, 10000)
	c.MarkBatch = orDefault(c.MarkBatch, 500)
	c.MaxBlockedRooms = orDefault(c.MaxBlockedRooms, 10000)
	c.CheckInterval = orDefault(c.CheckInterval, 200*time.Millisecond)
	c.StatementTimeout = orDefault(c.StatementTimeout, DefaultStatementTimeout)
	if c.Connected == nil {
		c.Connected = func() bool { return true }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c FastPathConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.MarkBatch > MaxBatchSize:
		// One placeholder per event_id in a mark statement.
		return apperr.BadConfig("MarkBatch", "%w: mark batch %d: at most %d", ErrInvalidConfig, c.MarkBatch, MaxBatchSize)
	case c.Workers > MaxFastWorkers:
		return apperr.BadConfig("Workers", "%w: workers %d: at most %d", ErrInvalidConfig, c.Workers, MaxFastWorkers)
	case c.MarkQueueSize < c.MarkBatch:
		return apperr.BadConfig("MarkQueueSize", "%w: mark queue size %d: below the mark batch %d", ErrInvalidConfig, c.MarkQueueSize, c.MarkBatch)
	}
	return nil
}

// DrainBound is the longest FastPath.Run takes to return once its ctx
// ends: in-flight publishes finish within PublishTimeout, then the last
// marks within StatementTimeout.
func (c FastPathConfig) DrainBound() time.Duration {
	c = c.WithDefaults()
	return c.PublishTimeout + c.StatementTimeout
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
