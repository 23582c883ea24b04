package outboxrelay

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Paths an event takes into the stream, the "path" label of the publish
// metrics.
const (
	pathRelay = "relay"
	pathFast  = "fast"
)

// Metrics are the outbox metrics docs/operating.md's "The outbox" tells operators
// to watch, plus a few that show why rows wait. A nil *Metrics records nothing.
type Metrics struct {
	pending       prometheus.Gauge
	oldestAge     prometheus.Gauge
	success       *prometheus.CounterVec
	failure       *prometheus.CounterVec
	duplicate     *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	undecodable   prometheus.Counter
	handedOver    *prometheus.CounterVec
	heldBack      prometheus.Counter
	dbFailures    *prometheus.CounterVec
	retentionRows prometheus.Counter
	draining      prometheus.Gauge

	// The per-path series, bound once: acks come tens of thousands a
	// second.
	paths map[string]pathSeries

	// onAck, when set (benchmarks), sees every acked event.
	onAck func(path, eventID string, at time.Time)
}

// NewMetrics creates the outbox metrics and registers them with reg (none
// if reg is nil). Metrics already registered by an earlier NewMetrics on
// the same registry are reused. It fails if reg holds different
// collectors under the same names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("outbox")
	m := &Metrics{
		pending: s.Gauge("pending_rows",
			"Outbox rows waiting to be stored in JetStream (status pending), all apps, as of the last refresh."),
		oldestAge: s.Gauge("oldest_pending_age_seconds",
			"Age in seconds of the oldest pending outbox row (0 when none), as of the last refresh."),
		success: s.CounterVec("publish_success_total",
			"Outbox events the stream acknowledged, by path (fast or relay); duplicates included.", "path"),
		failure: s.CounterVec("publish_failure_total",
			"Outbox event publishes that failed or timed out, by path; the row stays pending.", "path"),
		duplicate: s.CounterVec("publish_duplicate_total",
			"Acks for an event_id the stream already held (a re-publish it dropped), by path.", "path"),
		latency: s.HistogramVec("publish_latency_seconds",
			"Seconds from the command's commit to the stream's ack, by path.",
			[]float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}, "path"),
		undecodable: s.Counter("undecodable_total",
			"Times the relay found a pending row whose envelope cannot be decoded or does not match its row; such rows stay pending."),
		handedOver: s.CounterVec("fastpath_handed_over_total",
			"Events the fast path left to the relay without trying, by reason (queue_full, room_blocked, disconnected, stopped).", "reason"),
		heldBack: s.Counter("held_back_total",
			"Rows the relay did not publish in a pass because an earlier event of their room failed in it."),
		dbFailures: s.CounterVec("db_failure_total",
			"Failed outbox statements, by operation (drain_lock, claim, unsent, mark, fast_mark, fast_repend, fast_release, check, in_flight, retention, stats); retried later.", "op"),
		retentionRows: s.Counter("retention_deleted_total",
			"Published outbox rows deleted by retention."),
		draining: s.Gauge("relay_draining",
			"1 while this process's relay holds the drain lock and drains the outbox; 0 while it stands by (another relay drains) or is stopped."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("outbox metrics: %w", err)
	}
	return m.bind(), nil
}

// pathSeries are the series of one path.
type pathSeries struct {
	success, duplicate, failure prometheus.Counter
	latency                     prometheus.Observer
}

// The label values of handedOver and dbFailures, created at 0 so that an
// alert on their rate sees them before the first event.
var (
	handOverReasons = []string{"stopped", "room_blocked", "disconnected", "queue_full", "publish_failed", "mark_queue_full"}
	dbOps           = []string{"drain_lock", "claim", "unsent", "mark", "fast_mark", "fast_repend", "fast_release", "check", "in_flight", "retention", "stats"}
)

func (m *Metrics) bind() *Metrics {
	for _, r := range handOverReasons {
		m.handedOver.WithLabelValues(r)
	}
	for _, op := range dbOps {
		m.dbFailures.WithLabelValues(op)
	}
	m.paths = make(map[string]pathSeries)
	for _, p := range []string{pathRelay, pathFast} {
		m.paths[p] = pathSeries{
			success:   m.success.WithLabelValues(p),
			duplicate: m.duplicate.WithLabelValues(p),
			failure:   m.failure.WithLabelValues(p), // at 0 from the start, for alerts
			latency:   m.latency.WithLabelValues(p),
		}
	}
	return m
}

func (m *Metrics) acked(path, eventID string, committed, at time.Time, duplicate bool) {
	if m == nil {
		return
	}
	s := m.paths[path]
	s.success.Inc()
	if duplicate {
		s.duplicate.Inc()
	}
	s.latency.Observe(at.Sub(committed).Seconds())
	if m.onAck != nil {
		m.onAck(path, eventID, at)
	}
}

func (m *Metrics) failed(path string, n int) {
	if m != nil && n > 0 {
		m.paths[path].failure.Add(float64(n))
	}
}

func (m *Metrics) handOver(reason string, n int) {
	if m != nil && n > 0 {
		m.handedOver.WithLabelValues(reason).Add(float64(n))
	}
}

func (m *Metrics) dbFailed(op string) {
	if m != nil {
		m.dbFailures.WithLabelValues(op).Inc()
	}
}

func (m *Metrics) sawUndecodable(n int) {
	if m != nil && n > 0 {
		m.undecodable.Add(float64(n))
	}
}

func (m *Metrics) setDraining(on bool) {
	if m != nil {
		v := 0.0
		if on {
			v = 1
		}
		m.draining.Set(v)
	}
}

func (m *Metrics) heldBackRows(n int) {
	if m != nil && n > 0 {
		m.heldBack.Add(float64(n))
	}
}

func (m *Metrics) deleted(n int64) {
	if m != nil && n > 0 {
		m.retentionRows.Add(float64(n))
	}
}

func (m *Metrics) setPending(count int64, oldestAge time.Duration) {
	if m == nil {
		return
	}
	m.pending.Set(float64(count))
	m.oldestAge.Set(oldestAge.Seconds())
}
