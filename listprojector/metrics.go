package listprojector

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics are the room list's series. A nil *Metrics records nothing.
type Metrics struct {
	lag       prometheus.Histogram
	events    *prometheus.CounterVec
	cache     *prometheus.CounterVec
	query     *prometheus.HistogramVec
	redisErrs *prometheus.CounterVec

	applied, stale, coalesced, unknown prometheus.Counter
	hit, miss, cacheErr, hideMiss      prometheus.Counter
	near                               prometheus.Counter
	nearUp                             prometheus.Gauge
}

// NewMetrics creates the series and registers them on reg (none when reg
// is nil). Series already registered on reg by an earlier NewMetrics are
// shared. Every labelled series an alert may use exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "room_list_projection_lag_seconds",
			Help:    "Time from an event's commit (occurred_at_ms) to its card being written to the read model.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "room_list_projector_events_total",
			Help: "Events the projector handled, by result: applied (its card was written), stale (an equal or newer card was there), coalesced (a newer event of the room in the same batch carried the card), unknown (an event type the projector does not know; its card is still applied).",
		}, []string{"result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "room_list_cache_requests_total",
			Help: "Redis reads of the list query, by result: hit, miss (read from MySQL and repaired), error (Redis failed; read from MySQL), hides_miss (a page's hides read from MySQL: the region's hide set was not filled or is marked stale; refilled in the background), near (a page's cards and hides served from the process's Redis-tracked near cache, no round trip).",
		}, []string{"result"}),
		nearUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "room_list_near_cache_up",
			Help: "1 while this process's near cache of list cards and hide sets is in use (its Redis tracking connection is up), else 0.",
		}),
		query: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "room_list_query_duration_seconds",
			Help:    "Latency of GET /api/v1/rooms in the list service, by kind (list or search).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"kind"}),
		redisErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "room_list_redis_write_failures_total",
			Help: "Failed Redis writes, by writer (projector, reconcile, repair, hides: a hide set's fill or invalidation); the reconcile job repairs them.",
		}, []string{"writer"}),
	}
	r := promreg.On(reg)
	promreg.Add(r, &m.lag)
	promreg.Add(r, &m.events)
	promreg.Add(r, &m.cache)
	promreg.Add(r, &m.query)
	promreg.Add(r, &m.nearUp)
	promreg.Add(r, &m.redisErrs)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("room list metrics: %w", err)
	}
	m.applied = m.events.WithLabelValues("applied")
	m.stale = m.events.WithLabelValues("stale")
	m.coalesced = m.events.WithLabelValues("coalesced")
	m.unknown = m.events.WithLabelValues("unknown")
	m.hit = m.cache.WithLabelValues("hit")
	m.miss = m.cache.WithLabelValues("miss")
	m.cacheErr = m.cache.WithLabelValues("error")
	m.hideMiss = m.cache.WithLabelValues("hides_miss")
	m.near = m.cache.WithLabelValues("near")
	for _, w := range []string{"projector", "reconcile", "repair", "hides"} {
		m.redisErrs.WithLabelValues(w)
	}
	m.query.WithLabelValues("list")
	m.query.WithLabelValues("search")
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

func (m *Metrics) nearHit() {
	if m != nil {
		m.near.Inc()
	}
}

func (m *Metrics) setNearUp(up bool) {
	if m != nil {
		m.nearUp.Set(map[bool]float64{false: 0, true: 1}[up])
	}
}

func (m *Metrics) redisFailed(writer string) {
	if m != nil {
		m.redisErrs.WithLabelValues(writer).Inc()
	}
}

func (m *Metrics) observeQuery(kind string, seconds float64) {
	if m != nil {
		m.query.WithLabelValues(kind).Observe(seconds)
	}
}
