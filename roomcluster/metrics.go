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
	r := promreg.On(reg)
	s := r.Sub("cluster")
	m := &Metrics{
		partitions: s.Gauge("partitions",
			"P, the partitions rooms are hashed into (VOICEROOM_ROOMS_PARTITIONS, checked against the deployment's), on every rooms and api process; 0 until its node or router has started."),
		held: s.Gauge("leases_held",
			"Partitions this node serves under a live lease."),
		liveNodes: s.Gauge("live_nodes",
			"Rooms nodes this node sees in the member bucket, itself included."),
		taken: s.Counter("partitions_taken_total",
			"Partition leases this node created."),
		handovers: s.CounterVec("handovers_total",
			"Partitions this node stopped serving, by reason: rebalance and shutdown (graceful), expired (a renewal refused or too late) and fenced (a write lost to another writer and the lease gone).", "reason"),
		fenced: s.Counter("fenced_writes_total",
			"Room writes that failed on the command log's key (another writer took the version)."),
		renewFailures: s.Counter("lease_renew_failures_total",
			"Lease renewals that failed without being refused (JetStream slow or unreachable)."),
		served: s.CounterVec("served_requests_total",
			"Routed requests this node answered for other nodes, by outcome (ok, not_serving, overloaded, bad_request).", "outcome"),
		routed: s.CounterVec("routed_requests_total",
			"Room commands and live reads this router sent to the room's owner, by path (local: in this process; remote: over NATS) and outcome (ok; error: the owner's answer was an error; no_owner, path \"\": no node answered for the room within the deadline: a hand-over, or an owner that did not answer in time, see route_retries_total).", "path", "outcome"),
		routeSeconds: s.HistogramVec("route_duration_seconds",
			"Routed request latency from the router's side, retries included, by the path of the answer.",
			[]float64{.0002, .0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}, "path"),
		retries: s.CounterVec("route_retries_total",
			"Routed requests asked again, by reason: no_owner (hand-over in progress), not_serving, no_responder (the named owner is gone), timeout.", "reason"),
	}
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
