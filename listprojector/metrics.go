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
	r := promreg.On(reg)
	s := r.Sub("list")
	m := &Metrics{
		lag: s.Histogram("projection_lag_seconds",
			"Time from an event's commit (occurred_at_ms) to its card being written to the read model.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}),
		events: s.CounterVec("projector_events_total",
			"Events the projector handled, by result: applied (its card was written), stale (an equal or newer card was there), unchanged (the stored card, of an older version, already shows the same listing: not written), coalesced (a newer event of the room, in the same batch or held with it, carried the card), unknown (an event type the projector does not know; its card is still applied).", "result"),
		redisErrs: s.CounterVec("redis_write_failures_total",
			"Failed Redis writes, by writer (projector, reconcile, repair, hides: a hide set's fill or invalidation); the reconcile job repairs them.", "writer"),
		held: s.Gauge("projector_held_rooms",
			"Rooms whose card the projector holds because only counts changed (heat, online_count, occupied_seat_count); each is written within VOICEROOM_LIST_COUNTS_DELAY."),
	}
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
