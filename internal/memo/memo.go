// Package memo holds Map: a bounded, concurrency-safe map for results that
// cost something to compute and never change for their key (a token's
// verdict, a decoded value), so they are computed once and not per request.
package memo

import "sync"

// DefaultBound is the bound of a Map whose Bound is 0.
const DefaultBound = 100_000

// Map remembers values by key. It holds at most Bound entries (0:
// DefaultBound) and, when full, starts over empty: no bookkeeping per
// entry, and the entries still in use come back at their next Put. The
// zero Map is ready to use. A Map must not be copied after first use.
type Map[K comparable, V any] struct {
	Bound int

	mu sync.Mutex
	m  map[K]V
}

// Get returns the value remembered for k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	m.mu.Lock()
	v, ok := m.m[k]
	m.mu.Unlock()
	return v, ok
}

// Put remembers v for k.
func (m *Map[K, V]) Put(k K, v V) {
	bound := m.Bound
	if bound <= 0 {
		bound = DefaultBound
	}
	m.mu.Lock()
	if m.m == nil || len(m.m) >= bound {
		m.m = make(map[K]V, min(bound, 1024))
	}
	m.m[k] = v
	m.mu.Unlock()
}
