package apps

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics are a Registry's: shared by every Registry on one registerer.
type Metrics struct {
	loads        *prometheus.CounterVec
	loadedAt     prometheus.Gauge
	jwksFailures *prometheus.CounterVec
}

// NewMetrics registers the metrics on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("auth")
	m := &Metrics{
		loads: s.CounterVec("key_checks_total",
			"Checks of the apps' keys in MySQL (each VOICEROOM_AUTH_REFRESH_INTERVAL, after a change, on an unknown key), by result: ok or error (the last keys go on serving).", "result"),
		loadedAt: s.Gauge("keys_checked_timestamp_seconds",
			"When the apps' keys were last checked in MySQL successfully (Unix time): far behind now, this process may still accept a revoked key."),
		jwksFailures: s.CounterVec("jwks_fetch_failures_total",
			"Failed fetches of an app's identity provider's key set, by app (the keys fetched before go on verifying).", "app_code"),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("apps metrics: %w", err)
	}
	m.loads.WithLabelValues("ok")
	m.loads.WithLabelValues("error")
	return m, nil
}

func (m *Metrics) loaded(err error, now time.Time) {
	if err != nil {
		m.loads.WithLabelValues("error").Inc()
		return
	}
	m.loads.WithLabelValues("ok").Inc()
	m.loadedAt.Set(float64(now.UnixNano()) / 1e9)
}
