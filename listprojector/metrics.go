package listprojector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics are the projection's series: what the projector applied, its
// lag, and the failed writes of the Redis mirror. The list query's own
// series are package roomlist's. A nil *Metrics records nothing.
type Metrics struct {
	lag       prometheus.Histogram
	events    *prometheus.CounterVec
	redisErrs *prometheus.CounterVec
	held      prometheus.Gauge

	applied, stale, unchanged, coalesced, unknown prometheus.Counter
}

// NewMetrics creates the series and registers them on reg (none when reg
// is nil). Series already registered on reg by an earlier NewMetrics are
// shared. Every labelled series an alert may use exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: "list", Name: "projection_lag_seconds",
			Help:    "Time from an event's commit (occurred_at_ms) to its card being written to the read model.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "list", Name: "projector_events_total",
			Help: "Events the projector handled, by result: applied (its card was written), stale (an equal or newer card was there), unchanged (the stored card, of an older version, already shows the same listing: not written), coalesced (a newer event of the room, in the same batch or held with it, carried the card), unknown (an event type the projector does not know; its card is still applied).",
		}, []string{"result"}),
		redisErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: "list", Name: "redis_write_failures_total",
			Help: "Failed Redis writes, by writer (projector, reconcile, repair, hides: a hide set's fill or invalidation); the reconcile job repairs them.",
		}, []string{"writer"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: promreg.Namespace, Subsystem: "list", Name: "projector_held_rooms",
			Help: "Rooms whose card the projector holds because only counts changed (heat, online_count, occupied_seat_count); each is written within VOICEROOM_LIST_COUNTS_DELAY.",
		}),
	}
	r := promreg.On(reg)
	promreg.Add(r, &m.lag)
	promreg.Add(r, &m.events)
	promreg.Add(r, &m.redisErrs)
	promreg.Add(r, &m.held)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("room list projection metrics: %w", err)
	}
	m.applied = m.events.WithLabelValues("applied")
	m.stale = m.events.WithLabelValues("stale")
	m.unchanged = m.events.WithLabelValues("unchanged")
	m.coalesced = m.events.WithLabelValues("coalesced")
	m.unknown = m.events.WithLabelValues("unknown")
	for _, w := range []string{"projector", "reconcile", "repair", "hides"} {
		m.redisErrs.WithLabelValues(w)
	}
	return m, nil
}

func (m *Metrics) observeLag(seconds float64) {
	if m != nil {
		m.lag.Observe(seconds)
	}
}

func (m *Metrics) add(c func(*Metrics) prometheus.Counter, n int) {
	if m != nil && n > 0 {
		c(m).Add(float64(n))
	}
}

func (m *Metrics) setHeld(rooms int) {
	if m != nil {
		m.held.Set(float64(rooms))
	}
}

func (m *Metrics) redisFailed(writer string) {
	if m != nil {
		m.redisErrs.WithLabelValues(writer).Inc()
	}
}
