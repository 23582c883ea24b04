package promreg

import "github.com/prometheus/client_golang/prometheus"

// Sub makes and registers the metrics of one subsystem on a Registry,
// one call a metric (the package's example). Each method returns the
// collector registered under the name: a new one, or the one of the same
// type an earlier constructor registered (see Register). After the
// Registry's first error it registers nothing more and returns new,
// unregistered collectors, so the constructor still builds a whole value
// before it checks Err.
type Sub struct {
	r    *Registry
	name string
}

// Sub returns the subsystem's maker: its metrics are named
// voiceroom_<subsystem>_<name>.
func (r *Registry) Sub(subsystem string) Sub { return Sub{r: r, name: subsystem} }

// Counter is voiceroom_<subsystem>_<name>, a counter.
func (s Sub) Counter(name, help string) prometheus.Counter {
	return add(s, prometheus.NewCounter(prometheus.CounterOpts(s.opts(name, help))))
}

// CounterVec is voiceroom_<subsystem>_<name>, a counter by labels.
func (s Sub) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return add(s, prometheus.NewCounterVec(prometheus.CounterOpts(s.opts(name, help)), labels))
}

// CounterFunc is voiceroom_<subsystem>_<name>, a counter whose value f
// gives at each scrape.
func (s Sub) CounterFunc(name, help string, f func() float64) prometheus.CounterFunc {
	return add(s, prometheus.NewCounterFunc(prometheus.CounterOpts(s.opts(name, help)), f))
}

// Gauge is voiceroom_<subsystem>_<name>, a gauge.
func (s Sub) Gauge(name, help string) prometheus.Gauge {
	return add(s, prometheus.NewGauge(s.opts(name, help)))
}

// GaugeVec is voiceroom_<subsystem>_<name>, a gauge by labels.
func (s Sub) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return add(s, prometheus.NewGaugeVec(s.opts(name, help), labels))
}

// GaugeFunc is voiceroom_<subsystem>_<name>, a gauge whose value f gives
// at each scrape.
func (s Sub) GaugeFunc(name, help string, f func() float64) prometheus.GaugeFunc {
	return add(s, prometheus.NewGaugeFunc(s.opts(name, help), f))
}

// Histogram is voiceroom_<subsystem>_<name>, a histogram over buckets
// (nil: prometheus.DefBuckets).
func (s Sub) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return add(s, prometheus.NewHistogram(s.histogramOpts(name, help, buckets)))
}

// HistogramVec is voiceroom_<subsystem>_<name>, a histogram over buckets
// (nil: prometheus.DefBuckets) by labels.
func (s Sub) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return add(s, prometheus.NewHistogramVec(s.histogramOpts(name, help, buckets), labels))
}

// opts are the options of the subsystem's metric name (the counters'
// CounterOpts are the same type under another name).
func (s Sub) opts(name, help string) prometheus.GaugeOpts {
	return prometheus.GaugeOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help}
}

func (s Sub) histogramOpts(name, help string, buckets []float64) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{Namespace: Namespace, Subsystem: s.name, Name: name, Help: help, Buckets: buckets}
}

// add registers c on s's Registry (see Add) and returns the collector
// it holds.
func add[C prometheus.Collector](s Sub, c C) C {
	Add(s.r, &c)
	return c
}
