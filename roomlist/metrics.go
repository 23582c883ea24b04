package roomlist

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics are the list query's series: its latency, where its reads
// were served from, and its frozen orders shared through Redis. The projection's series (and the failed writes of the
// Redis mirror, repairs included) are package listprojector's. A nil
// *Metrics records nothing.
type Metrics struct {
	cache  *prometheus.CounterVec
	query  *prometheus.HistogramVec
	nearUp prometheus.Gauge
	frozen *prometheus.CounterVec

	hit, miss, cacheErr, hideMiss, near prometheus.Counter
	frozenBy                            [frozenResults]prometheus.Counter
}

// Results of voiceroom_list_frozen_orders_total: frozen orders shared
// through Redis (see freezer).
const (
	frozenStored      = iota // written when frozen
	frozenStoreFailed        // not written: Redis failed or was down
	frozenLoaded             // a cursor's order read from Redis
	frozenLoadFailed         // a cursor's order not read: Redis failed, was down, or held it unreadable
	frozenGone               // a cursor's order in neither this process nor Redis
	frozenResults
)

var frozenResultNames = [frozenResults]string{"stored", "store_failed", "loaded", "load_failed", "gone"}

// NewMetrics creates the series and registers them on reg (none when reg
// is nil). Series already registered on reg by an earlier NewMetrics are
// shared. Every labelled series an alert may use exists from the start.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("list")
	m := &Metrics{
		cache: s.CounterVec("cache_requests_total",
			"Redis reads of the list query, by result: hit, miss (read from MySQL and repaired), error (Redis failed; read from MySQL), hides_miss (a page's hides read from MySQL: the region's hide set was not filled or is marked stale; refilled in the background), near (a page's cards and hides served from the process's Redis-tracked near cache, no round trip).", "result"),
		nearUp: s.Gauge("near_cache_up",
			"1 while this process's near cache of list cards and hide sets is in use (its Redis tracking connection is up), else 0."),
		frozen: s.CounterVec("frozen_orders_total",
			"Frozen list orders shared through Redis, by result: stored (written to Redis when frozen), store_failed (not written: Redis failed or was down; its cursors continue exactly only in this process), loaded (a cursor's order read from Redis: frozen by another api process), load_failed (not read: Redis failed, was down or held it unreadable) and gone (in neither this process nor Redis: expired, never written, or no Redis); the chains of the last two continue on the live order.", "result"),
		query: s.HistogramVec("query_duration_seconds",
			"Latency of GET /api/v1/rooms in the list service, by kind (list or search).",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}, "kind"),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("room list query metrics: %w", err)
	}
	m.hit = m.cache.WithLabelValues("hit")
	m.miss = m.cache.WithLabelValues("miss")
	m.cacheErr = m.cache.WithLabelValues("error")
	m.hideMiss = m.cache.WithLabelValues("hides_miss")
	m.near = m.cache.WithLabelValues("near")
	for i, name := range frozenResultNames {
		m.frozenBy[i] = m.frozen.WithLabelValues(name)
	}
	m.query.WithLabelValues("list")
	m.query.WithLabelValues("search")
	return m, nil
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

func (m *Metrics) observeQuery(kind string, seconds float64) {
	if m != nil {
		m.query.WithLabelValues(kind).Observe(seconds)
	}
}

func (m *Metrics) frozenRedis(result int) {
	if m != nil {
		m.frozenBy[result].Inc()
	}
}
