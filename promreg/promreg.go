// Package promreg is the one way components name and register their
// Prometheus metrics: a component's metrics constructor registers on the
// prometheus.Registerer it is given and returns an error, never panics.
//
// Components built twice on one registry (two consumers, a relay and a
// fast path) share their collectors: registering a collector whose
// descriptors are already registered by a collector of the same type
// returns the existing one. A collector of another type or shape under the
// same name is an error.
//
// A constructor states each metric once, through its subsystem's [Sub]:
//
//	r := promreg.On(reg)
//	s := r.Sub("http")
//	m := &Metrics{
//		requests: s.CounterVec("requests_total", "HTTP requests by route and code.", "route", "code"),
//		duration: s.HistogramVec("request_duration_seconds", "HTTP latency by route.", nil, "route"),
//	}
//	if err := r.Err(); err != nil {
//		return nil, fmt.Errorf("gateway metrics: %w", err)
//	}
//
// Collectors made elsewhere (the Go runtime's, an [Up]) go in with [Add].
package promreg

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace starts the name of every series voiceroom exports:
// voiceroom_<subsystem>_<name>[_<unit>], with base units (seconds, bytes)
// and _total on counters only. Each component names its own subsystem
// (bus, rooms, outbox, imbridge, list, regions, http) in Registry.Sub.
// TestSeriesNames (cmd/voiceroom) checks a running server's series
// against the rule.
const Namespace = "voiceroom"

// Register registers c on reg and returns it, or the collector of the same
// type already registered under c's descriptors. A nil reg registers
// nothing and returns c. Any other conflict is an error.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if reg == nil {
		return c, nil
	}
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register metrics: %w", err)
}

// Registry registers the collectors of one component and keeps the first
// error, so that a constructor adds its collectors one a line and checks
// once.
type Registry struct {
	reg prometheus.Registerer
	err error
}

// On returns a Registry on reg; a nil reg registers nothing.
func On(reg prometheus.Registerer) *Registry { return &Registry{reg: reg} }

// Add registers *c (see Register) and sets *c to the collector the
// registry holds. After a failure it does nothing.
func Add[C prometheus.Collector](r *Registry, c *C) {
	if r.err != nil {
		return
	}
	*c, r.err = Register(r.reg, *c)
}

// Err returns the first registration error, or nil.
func (r *Registry) Err() error { return r.err }
