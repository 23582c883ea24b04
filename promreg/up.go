package promreg

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UpTimeout bounds the ping of an Up collector: a dependency that does not
// answer within it reads as down.
const UpTimeout = time.Second

// Up is a collector of one gauge, voiceroom_<subsystem>_up: 1 when ping
// answered within UpTimeout at the scrape, 0 when it failed or did not
// answer in time. It pings at each collection (as a Prometheus exporter's
// up does), so the value is as fresh as the scrape and needs no worker.
// A second Up of one subsystem on a registry shares the first (Register).
type Up struct {
	desc *prometheus.Desc
	ping func(context.Context) error
}

// NewUp returns an Up for the dependency the subsystem names ("mysql",
// "redis", "nats"); help says what its ping checks. ping must return
// once its ctx ends.
func NewUp(subsystem, help string, ping func(context.Context) error) *Up {
	return &Up{
		desc: prometheus.NewDesc(prometheus.BuildFQName(Namespace, subsystem, "up"), help, nil, nil),
		ping: ping,
	}
}

// Describe implements prometheus.Collector.
func (u *Up) Describe(ch chan<- *prometheus.Desc) { ch <- u.desc }

// Collect implements prometheus.Collector: it pings, then reports.
func (u *Up) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), UpTimeout)
	defer cancel()
	v := 1.0
	if err := u.ping(ctx); err != nil {
		v = 0
	}
	if m, err := prometheus.NewConstMetric(u.desc, prometheus.GaugeValue, v); err == nil {
		ch <- m
	}
}
