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
	r := promreg.On(reg)
	s := r.Sub("bus")
	m := &Metrics{
		acked: s.CounterVec("messages_acked_total",
			"Messages a consumer handled and acked.", "consumer"),
		nakked: s.CounterVec("messages_nakked_total",
			"Messages a consumer nakked for redelivery (retryable failure, failed dead-lettering, shutdown).", "consumer"),
		deadLettered: s.CounterVec("messages_dead_lettered_total",
			"Messages a consumer copied to the dead-letter stream.", "consumer"),
		otherReplays: s.CounterVec("other_sinks_replays_total",
			"Replays of another sink's dead letters a consumer acked without handling them.", "consumer"),
		readBack: s.CounterVec("messages_read_back_total",
			"Messages a consumer read back from the stream after a broken pull had lost them on their way (handled before the rooms' later events).", "consumer"),
		handlerDuration: s.HistogramVec("handler_duration_seconds",
			"Time a consumer's handler took per message.",
			prometheus.ExponentialBuckets(0.0005, 4, 10), // 0.5ms .. ~131s
			"consumer"),
	}
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
