package webhooks

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Endpoint states, the "state" label of voiceroom_webhooks_endpoints.
const (
	stateLive    = "live"    // fed by the durable
	stateBacklog = "backlog" // reading its backlog back from the stream
	statePaused  = "paused"
)

// Metrics are the sink's. A nil *Metrics records nothing.
type Metrics struct {
	deliveries    *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	events        *prometheus.CounterVec
	commitToReply prometheus.Histogram
	pending       *prometheus.GaugeVec
	endpoints     *prometheus.GaugeVec
	leaseHeld     prometheus.Gauge
}

// NewMetrics creates the metrics and registers them on reg (none when reg
// is nil); collectors an earlier NewMetrics registered are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("webhooks")
	m := &Metrics{
		deliveries: s.CounterVec("deliveries_total",
			"Delivery attempts by outcome: delivered (2xx), failed (5xx, 408, 429, redirect, timeout, no connection: tried again), rejected (other 4xx: dead-lettered).", "outcome"),
		latency: s.HistogramVec("delivery_duration_seconds",
			"From sending a delivery to its answer (or error), by outcome.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}, "outcome"),
		events: s.CounterVec("events_total",
			"Events by outcome, once per endpoint: delivered, dead_lettered.", "outcome"),
		commitToReply: s.Histogram("commit_to_delivery_seconds",
			"From the command's commit (occurred_at_ms) to the endpoint's 2xx.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}),
		pending: s.GaugeVec("pending_events",
			"Events an endpoint has not had yet, as the delivering process knows them: held, plus the backlog still in the stream while it reads it back (of a paused endpoint, as of its pause).", "webhook_id"),
		endpoints: s.GaugeVec("endpoints",
			"Endpoints by state: live (fed by the durable), backlog (reading its backlog back from the stream), paused.", "state"),
		leaseHeld: s.Gauge("lease_held",
			"1 while this process holds the delivery lease and delivers, 0 on a standby."),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("webhooks metrics: %w", err)
	}
	for _, o := range []string{OutcomeDelivered, OutcomeFailed, OutcomeRejected} {
		m.deliveries.WithLabelValues(o)
		m.latency.WithLabelValues(o)
	}
	for _, o := range []string{OutcomeDelivered, outcomeDeadLettered} {
		m.events.WithLabelValues(o)
	}
	for _, s := range []string{stateLive, stateBacklog, statePaused} {
		m.endpoints.WithLabelValues(s)
	}
	return m, nil
}

// outcomeDeadLettered is an event an endpoint rejected.
const outcomeDeadLettered = "dead_lettered"

func (m *Metrics) attempt(r result) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(r.outcome).Inc()
	m.latency.WithLabelValues(r.outcome).Observe(r.latency.Seconds())
}

func (m *Metrics) event(outcome string, n int) {
	if m != nil {
		m.events.WithLabelValues(outcome).Add(float64(n))
	}
}

func (m *Metrics) delivered(seconds float64) {
	if m != nil {
		m.commitToReply.Observe(seconds)
	}
}

func (m *Metrics) setPending(id int64, n float64) {
	if m != nil {
		m.pending.WithLabelValues(strconv.FormatInt(id, 10)).Set(n)
	}
}

func (m *Metrics) forget(id int64) {
	if m != nil {
		m.pending.DeleteLabelValues(strconv.FormatInt(id, 10))
	}
}

func (m *Metrics) setStates(counts map[string]int) {
	if m == nil {
		return
	}
	for _, s := range []string{stateLive, stateBacklog, statePaused} {
		m.endpoints.WithLabelValues(s).Set(float64(counts[s]))
	}
}

func (m *Metrics) setLease(held bool) {
	if m == nil {
		return
	}
	v := 0.0
	if held {
		v = 1
	}
	m.leaseHeld.Set(v)
}
