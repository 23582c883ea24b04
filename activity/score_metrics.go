package activity

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Results of the scoring of one event for one activity
// (voiceroom_activity_events_total).
const (
	resultScored    = "scored"    // counted: a score moved, or a mic session opened or closed
	resultDuplicate = "duplicate" // counted already (its activity_seen row is there)
	resultClosed    = "closed"    // the activity is no longer open (cancelled, frozen, settled)
)

// Why an event scored for no activity (voiceroom_activity_events_skipped_total).
const (
	skipNoActivity = "no_activity" // its app has no open activity
	skipNoMatch    = "no_match"    // no activity counts it (metric, gifts, regions, window)
)

// Results of a delivery batch (voiceroom_activity_batches_total).
const (
	batchCommitted = "committed" // scored in one transaction
	batchSplit     = "split"     // failed whole, then scored one event per transaction
	batchFailed    = "failed"    // not committed (or its board writes failed): its events come again
)

// Sources of a board read.
const (
	sourceRedis = "redis"
	sourceMySQL = "mysql"
)

// Redis operations, as labelled in the failures.
const (
	opRead  = "read"  // a board read, rebuild or probe
	opWrite = "write" // the consumer's board write after a commit
)

// ScoreMetrics are the scoring and the boards' series. A nil
// *ScoreMetrics records nothing.
type ScoreMetrics struct {
	events    *prometheus.CounterVec
	skipped   *prometheus.CounterVec
	lag       prometheus.Histogram
	reads     *prometheus.CounterVec
	rebuilds  prometheus.Counter
	redisErrs *prometheus.CounterVec
	batches   *prometheus.CounterVec
	retries   prometheus.Counter
}

// NewScoreMetrics creates the series and registers them on reg (none
// when reg is nil). Series already registered on reg are shared. Every
// labelled series exists from the start at 0.
func NewScoreMetrics(reg prometheus.Registerer) (*ScoreMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("activity")
	m := &ScoreMetrics{
		events: s.CounterVec("events_total",
			"Room events the activity consumer scored, once per activity that counts them, by result: scored (counted now), duplicate (counted already: a redelivery, a replay, a read back), closed (the activity was cancelled, frozen or settled meanwhile).", "result"),
		skipped: s.CounterVec("events_skipped_total",
			"Room events no activity counts, by reason: no_activity (the app has no open activity), no_match (no activity's metric, gifts, regions or window takes it).", "reason"),
		lag: s.Histogram("score_lag_seconds",
			"Time from an event's occurred_at_ms to its score's commit, for the events that scored.",
			[]float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600}),
		reads: s.CounterVec("board_reads_total",
			"Board and progress reads answered, by source: redis, mysql (the board not in Redis, or Redis down).", "source"),
		rebuilds: s.Counter("board_rebuilds_total",
			"Boards written into Redis from MySQL because a read found them missing."),
		redisErrs: s.CounterVec("redis_failures_total",
			"Failed Redis calls of the boards, by op: read (a read, rebuild or probe), write (the consumer's write after a commit; the event is retried).", "op"),
		batches: s.CounterVec("batches_total",
			"Delivery batches the activity consumer scored in one transaction, by result: committed, split (the batch failed and its events were scored one per transaction), failed (its events are retried).", "result"),
		retries: s.Counter("tx_retries_total",
			"Scoring transactions run again after a deadlock (1213) or a lock wait timeout (1205). Row locks are taken in one order, so this stays 0 under N scorers."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("activity metrics: %w", err)
	}
	for _, l := range []string{resultScored, resultDuplicate, resultClosed} {
		m.events.WithLabelValues(l)
	}
	for _, l := range []string{batchCommitted, batchSplit, batchFailed} {
		m.batches.WithLabelValues(l)
	}
	for _, l := range []string{skipNoActivity, skipNoMatch} {
		m.skipped.WithLabelValues(l)
	}
	for _, l := range []string{sourceRedis, sourceMySQL} {
		m.reads.WithLabelValues(l)
	}
	for _, l := range []string{opRead, opWrite} {
		m.redisErrs.WithLabelValues(l)
	}
	return m, nil
}

func (m *ScoreMetrics) event(result string) {
	if m != nil {
		m.events.WithLabelValues(result).Inc()
	}
}

func (m *ScoreMetrics) skip(reason string) {
	if m != nil {
		m.skipped.WithLabelValues(reason).Inc()
	}
}

func (m *ScoreMetrics) scoredAfter(seconds float64) {
	if m != nil {
		m.lag.Observe(max(seconds, 0))
	}
}

func (m *ScoreMetrics) read(source string) {
	if m != nil {
		m.reads.WithLabelValues(source).Inc()
	}
}

func (m *ScoreMetrics) rebuilt() {
	if m != nil {
		m.rebuilds.Inc()
	}
}

func (m *ScoreMetrics) redisFailed(op string) {
	if m != nil {
		m.redisErrs.WithLabelValues(op).Inc()
	}
}

func (m *ScoreMetrics) batch(result string) {
	if m != nil {
		m.batches.WithLabelValues(result).Inc()
	}
}

func (m *ScoreMetrics) retried() {
	if m != nil {
		m.retries.Inc()
	}
}
