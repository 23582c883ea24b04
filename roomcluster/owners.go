package roomcluster

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// owners is the lease bucket as a watcher sees it: each partition's
// holder ("" when free) and since when it has been free. Nodes read it to
// take free partitions; routers to find a room's node.
type owners struct {
	mu     sync.RWMutex
	holder []string
	free   []time.Time // since when holder has been ""
	loaded chan struct{}
	change func() // called after each change, may be nil
}

func newOwners(n int, change func()) *owners {
	o := &owners{holder: make([]string, n), free: make([]time.Time, n), loaded: make(chan struct{}), change: change}
	now := time.Now()
	for p := range o.free {
		o.free[p] = now
	}
	return o
}

// follow keeps o in step with the lease bucket until ctx ends.
func (o *owners) follow(ctx context.Context, b *buckets) {
	var seen []bool // during a watch's initial values
	var once sync.Once
	follow(ctx, b.lease, 2*b.cfg.LeaseTTL,
		func() { seen = make([]bool, len(o.holder)) },
		func(e jetstream.KeyValueEntry) {
			if p, ok := partitionOfKey(e.Key()); ok && seen != nil && p < len(seen) {
				seen[p] = true
			}
			o.apply(e.Key(), e.Operation(), e.Value())
		},
		func() {
			if seen != nil {
				// A lease that vanished while no watch ran is free.
				for p, s := range seen {
					if !s {
						o.set(p, "")
					}
				}
				seen = nil
			}
			once.Do(func() { close(o.loaded) })
		})
}

// apply records one lease entry.
func (o *owners) apply(key string, op jetstream.KeyValueOp, value []byte) {
	p, ok := partitionOfKey(key)
	if !ok || p >= len(o.holder) {
		return
	}
	holder := ""
	if op == jetstream.KeyValuePut {
		var l Lease
		if json.Unmarshal(value, &l) == nil {
			holder = l.Node
		}
	}
	o.set(p, holder)
}

// set records p's holder; the change callback runs when p becomes free.
func (o *owners) set(p int, holder string) {
	o.mu.Lock()
	freed := holder == "" && o.holder[p] != ""
	if freed {
		o.free[p] = time.Now()
	}
	o.holder[p] = holder
	o.mu.Unlock()
	if freed && o.change != nil {
		o.change()
	}
}

// get returns p's holder and, when it has none, since when.
func (o *owners) get(p int) (string, time.Time) {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.holder[p], o.free[p]
}

// counts returns how many partitions each holder has.
func (o *owners) counts() map[string]int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	c := map[string]int{}
	for _, h := range o.holder {
		c[h]++
	}
	return c
}
