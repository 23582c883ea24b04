package bus

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics counts what consumers did with their messages. A nil *Metrics
// records nothing, so it is optional everywhere.
type Metrics struct {
	acked           *prometheus.CounterVec
	nakked          *prometheus.CounterVec
	deadLettered    *prometheus.CounterVec
	otherReplays    *prometheus.CounterVec
	readBack        *prometheus.CounterVec
	handlerDuration *prometheus.HistogramVec
}

// NewMetrics creates the bus metrics and registers them with reg (none if
// reg is nil). Metrics already registered by an earlier NewMetrics on the
// same registry are reused, so several consumers can share one registry.
// It fails if reg holds different collectors under the same names.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{"consumer"}
	m := &Metrics{
		acked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "messages_acked_total",
			Help: "Messages a consumer handled and acked.",
		}, labels),
		nakked: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "messages_nakked_total",
			Help: "Messages a consumer nakked for redelivery (retryable failure, failed dead-lettering, shutdown).",
		}, labels),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "messages_dead_lettered_total",
			Help: "Messages a consumer copied to the dead-letter stream.",
		}, labels),
		otherReplays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "other_sinks_replays_total",
			Help: "Replays of another sink's dead letters a consumer acked without handling them.",
		}, labels),
		readBack: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "messages_read_back_total",
			Help: "Messages a consumer read back from the stream after a broken pull had lost them on their way (handled before the rooms' later events).",
		}, labels),
		handlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: "bus", Name: "handler_duration_seconds",
			Help:    "Time a consumer's handler took per message.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms .. ~131s
		}, labels),
	}
	r := promreg.On(reg)
	promreg.Add(r, &m.acked)
	promreg.Add(r, &m.nakked)
	promreg.Add(r, &m.deadLettered)
	promreg.Add(r, &m.otherReplays)
	promreg.Add(r, &m.readBack)
	promreg.Add(r, &m.handlerDuration)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("bus metrics: %w", err)
	}
	return m, nil
}

// consumerMetrics are the series of one consumer, bound once.
type consumerMetrics struct {
	acked, nakked, deadLettered, otherReplays, readBack prometheus.Counter
	handlerDuration                                     prometheus.Observer
}

func (m *Metrics) forConsumer(name string) *consumerMetrics {
	if m == nil {
		return nil
	}
	return &consumerMetrics{
		acked:           m.acked.WithLabelValues(name),
		nakked:          m.nakked.WithLabelValues(name),
		deadLettered:    m.deadLettered.WithLabelValues(name),
		otherReplays:    m.otherReplays.WithLabelValues(name),
		readBack:        m.readBack.WithLabelValues(name),
		handlerDuration: m.handlerDuration.WithLabelValues(name),
	}
}

func (m *consumerMetrics) ack() {
	if m != nil {
		m.acked.Inc()
	}
}

func (m *consumerMetrics) nak() {
	if m != nil {
		m.nakked.Inc()
	}
}

func (m *consumerMetrics) otherReplay() {
	if m != nil {
		m.otherReplays.Inc()
	}
}

func (m *consumerMetrics) readBackN(n int) {
	if m != nil && n > 0 {
		m.readBack.Add(float64(n))
	}
}

func (m *consumerMetrics) deadLetter() {
	if m != nil {
		m.deadLettered.Inc()
	}
}

func (m *consumerMetrics) observe(d time.Duration) {
	if m != nil {
		m.handlerDuration.Observe(d.Seconds())
	}
}
