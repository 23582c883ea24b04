package readdb

import (
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// primaryLabel is the primary's server label of the connections' counter.
const primaryLabel = "primary"

// Metrics are the router's series. A nil *Metrics records nothing.
type Metrics struct {
	lag   *prometheus.GaugeVec
	fit   *prometheus.GaugeVec
	conns *prometheus.CounterVec
}

// NewMetrics creates the series and registers them on reg (none when reg
// is nil); series already registered on reg are shared.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := promreg.On(reg)
	s := r.Sub("mysql")
	m := &Metrics{
		lag: s.GaugeVec("replica_lag_seconds",
			"Each read replica's lag at its last check (Seconds_Behind_Master), by replica address; -1 when unknown (unreachable, or not replicating).", "replica"),
		fit: s.GaugeVec("replica_fit",
			"1 while the replica takes reads (it answered its last check, replicates, and lags at most VOICEROOM_MYSQL_REPLICA_MAX_LAG), else 0.", "replica"),
		conns: s.CounterVec("read_connections_total",
			"Connections opened for the reads that tolerate lag, by server: a replica's address, or primary (no replica fit).", "server"),
	}
	return m, r.Err()
}

func (m *Metrics) setLag(replica string, fit bool, lagSecs float64) {
	if m == nil {
		return
	}
	m.lag.WithLabelValues(replica).Set(lagSecs)
	v := 0.0
	if fit {
		v = 1
	}
	m.fit.WithLabelValues(replica).Set(v)
}

func (m *Metrics) opened(server string) {
	if m != nil {
		m.conns.WithLabelValues(server).Inc()
	}
}
