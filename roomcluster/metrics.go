package roomcluster

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

// Metrics of the rooms cluster: a node's leases and hand-overs, and the
// requests a router sends to the rooms' owners. One value serves a node
// and a router of the same process.
type Metrics struct {
	partitions    prometheus.Gauge
	held          prometheus.Gauge
	liveNodes     prometheus.Gauge
	taken         prometheus.Counter
	handovers     *prometheus.CounterVec
	fenced        prometheus.Counter
	renewFailures prometheus.Counter
	served        *prometheus.CounterVec
	routed        *prometheus.CounterVec
	routeSeconds  *prometheus.HistogramVec
	retries       *prometheus.CounterVec
}

// Route paths: in this process, or over NATS to another node.
const (
	pathLocal  = "local"
	pathRemote = "remote"
)

// Reasons a router asks again.
const (
	retryNoOwner    = "no_owner"     // no node holds the partition
	retryNotServing = "not_serving"  // the node asked does not serve it (any more)
	retryNoResponse = "no_responder" // the owner named by the lease is gone
	retryTimeout    = "timeout"      // the owner did not answer within AttemptTimeout
)

// Hand-over reasons.
var handoverReasons = []string{"rebalance", "shutdown", "expired", "fenced"}

// NewMetrics registers the cluster's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const sub = "cluster"
	m := &Metrics{
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "partitions",
			Help: "P, the partitions rooms are hashed into (VOICEROOM_ROOMS_PARTITIONS, checked against the deployment's), on every rooms and api process; 0 until its node or router has started.",
		}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "leases_held",
			Help: "Partitions this node serves under a live lease.",
		}),
		liveNodes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "live_nodes",
			Help: "Rooms nodes this node sees in the member bucket, itself included.",
		}),
		taken: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "partitions_taken_total",
			Help: "Partition leases this node created.",
		}),
		handovers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "handovers_total",
			Help: "Partitions this node stopped serving, by reason: rebalance and shutdown (graceful), expired (a renewal refused or too late) and fenced (a write lost to another writer and the lease gone).",
		}, []string{"reason"}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "fenced_writes_total",
			Help: "Room writes that failed on the command log's key (another writer took the version).",
		}),
		renewFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "lease_renew_failures_total",
			Help: "Lease renewals that failed without being refused (JetStream slow or unreachable).",
		}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "served_requests_total",
			Help: "Routed requests this node answered for other nodes, by outcome (ok, not_serving, overloaded, bad_request).",
		}, []string{"outcome"}),
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "routed_requests_total",
			Help: "Room commands and live reads this router sent to the room's owner, by path (local: in this process; remote: over NATS) and outcome (ok; error: the owner's answer was an error; no_owner, path \"\": no node answered for the room within the deadline: a hand-over, or an owner that did not answer in time, see route_retries_total).",
		}, []string{"path", "outcome"}),
		routeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "route_duration_seconds",
			Help:    "Routed request latency from the router's side, retries included, by the path of the answer.",
			Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"path"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: promreg.Namespace, Subsystem: sub, Name: "route_retries_total",
			Help: "Routed requests asked again, by reason: no_owner (hand-over in progress), not_serving, no_responder (the named owner is gone), timeout.",
		}, []string{"reason"}),
	}
	r := promreg.On(reg)
	promreg.Add(r, &m.partitions)
	promreg.Add(r, &m.held)
	promreg.Add(r, &m.liveNodes)
	promreg.Add(r, &m.taken)
	promreg.Add(r, &m.handovers)
	promreg.Add(r, &m.fenced)
	promreg.Add(r, &m.renewFailures)
	promreg.Add(r, &m.served)
	promreg.Add(r, &m.routed)
	promreg.Add(r, &m.routeSeconds)
	promreg.Add(r, &m.retries)
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("roomcluster metrics: %w", err)
	}
	for _, reason := range handoverReasons {
		m.handovers.WithLabelValues(reason)
	}
	for _, path := range []string{pathLocal, pathRemote} {
		for _, outcome := range []string{"ok", "error"} {
			m.routed.WithLabelValues(path, outcome)
		}
	}
	m.routed.WithLabelValues("", "no_owner")
	for _, path := range []string{pathLocal, pathRemote} {
		m.routeSeconds.WithLabelValues(path)
	}
	for _, outcome := range []string{"ok", "not_serving", "overloaded", "bad_request"} {
		m.served.WithLabelValues(outcome)
	}
	for _, reason := range []string{retryNoOwner, retryNotServing, retryNoResponse, retryTimeout} {
		m.retries.WithLabelValues(reason)
	}
	return m, nil
}

// setPartitions records P once the node or router has checked it against
// the deployment's: the alert on partitions no node serves compares the
// nodes' leases_held with it.
func (m *Metrics) setPartitions(p int) {
	if m != nil {
		m.partitions.Set(float64(p))
	}
}
