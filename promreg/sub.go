package promreg

import "github.com/prometheus/client_golang/prometheus"

// Sub makes and registers the metrics of one subsystem on a Registry, so
// that a metrics constructor states each metric once, by its name, help
// and labels:
//
//	r := promreg.On(reg)
//	s := r.Sub("outbox")
//	m := &Metrics{
//		pending: s.Gauge("pending_rows", "Outbox rows waiting to be stored."),
//		failure: s.CounterVec("publish_failure_total", "Publishes that failed, by path.", "path"),
//	}
//	if err := r.Err(); err != nil {
//		return nil, err
//	}
//
// Each method returns the collector registered under the name: a new
// one, or the one of the same type an earlier constructor registered
// (see Register). After the Registry's first error it registers nothing
// more and returns new, unregistered collectors, so the constructor
// still builds a whole value before it checks Err.
type Sub struct {
	r    *Registry
	name string
}

// Sub returns the subsystem's maker: its metrics are named
// voiceroom_<subsystem>_<name>.
func (r *Registry) Sub(subsystem string) Sub { return Sub{r: r, name: subsystem} }

// Counter is voiceroom_<subsystem>_<name>, a counter.
func (s Sub) Counter(name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help})
	Add(s.r, &c)
	return c
}

// CounterVec is voiceroom_<subsystem>_<name>, a counter by labels.
func (s Sub) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help}, labels)
	Add(s.r, &c)
	return c
}

// Gauge is voiceroom_<subsystem>_<name>, a gauge.
func (s Sub) Gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help})
	Add(s.r, &g)
	return g
}

// GaugeVec is voiceroom_<subsystem>_<name>, a gauge by labels.
func (s Sub) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help}, labels)
	Add(s.r, &g)
	return g
}

// GaugeFunc is voiceroom_<subsystem>_<name>, a gauge whose value f gives
// at each scrape.
func (s Sub) GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help}, f)
	Add(s.r, &g)
	return g
}

// CounterFunc is voiceroom_<subsystem>_<name>, a counter whose value f
// gives at each scrape.
func (s Sub) CounterFunc(name, help string, f func() float64) prometheus.CounterFunc {
	c := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help}, f)
	Add(s.r, &c)
	return c
}

// Histogram is voiceroom_<subsystem>_<name>, a histogram over buckets
// (nil: prometheus.DefBuckets).
func (s Sub) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help, Buckets: buckets})
	Add(s.r, &h)
	return h
}

// HistogramVec is voiceroom_<subsystem>_<name>, a histogram over buckets
// (nil: prometheus.DefBuckets) by labels.
func (s Sub) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help, Buckets: buckets}, labels)
	Add(s.r, &h)
	return h
}
