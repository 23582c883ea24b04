package roomlist

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/every"
)

const (
	invalidateChannel = "__redis__:invalidate"
	// trackingPing is how often a tracking connection is pinged (and a
	// cluster's masters read again), and trackingTimeout how long a
	// connection may stay silent before it counts as failed.
	trackingPing    = time.Second
	trackingTimeout = 3 * time.Second
)

// trackLink is one tracking connection of the near cache, to one server
// that takes writes, with its share of the barrier (see nearCache).
type trackLink struct {
	n      *nearCache
	addr   string
	opts   redis.Options
	up     atomic.Bool
	connID atomic.Int64 // Redis client id of the connection

	// The barrier: the readers waiting for the next PING, the PING in
	// flight, and a nudge for the pinger.
	bmu  sync.Mutex
	next *syncPoint
	sent *syncPoint
	kick chan struct{}
}

// syncPoint is one PING of the barrier: done closes when its PONG came
// (ok) or the connection failed (not ok).
type syncPoint struct {
	done chan struct{}
	ok   bool
}

// trackOptions are those of a client of the server base reaches, with its
// credentials and TLS, for one tracking connection. (base is not copied
// whole: a client updates some of its options while it runs.) The dialer
// is base's: behind Sentinel it dials the master of the moment.
func trackOptions(base *redis.Options) redis.Options {
	return redis.Options{
		Network: base.Network, Addr: base.Addr, Dialer: base.Dialer, Username: base.Username, Password: base.Password,
		CredentialsProvider: base.CredentialsProvider, CredentialsProviderContext: base.CredentialsProviderContext,
		DB: base.DB, TLSConfig: base.TLSConfig, DialTimeout: base.DialTimeout,
		Protocol: 2, // invalidations as plain pub/sub messages
		PoolSize: 1, ClientName: "voiceroom-list-near",
	}
}

// run keeps the near cache's tracking connections until ctx ends: to the
// one server (or Sentinel's master), or to every master of a cluster.
func (n *nearCache) run(ctx context.Context) {
	defer n.stopLinks()
	if n.cluster != nil {
		n.followMasters(ctx)
		return
	}
	opts := n.base.Options()
	l := n.addLink(opts.Addr, trackOptions(opts))
	l.run(ctx)
}

// followMasters keeps a tracking connection to every master of the
// cluster until ctx ends, reading the masters again every trackingPing
// and when a connection fails.
func (n *nearCache) followMasters(ctx context.Context) {
	type running struct {
		stop context.CancelFunc
		done chan struct{}
	}
	runs := map[string]running{}
	defer func() {
		for _, r := range runs {
			r.stop()
			<-r.done
		}
	}()
	t := time.NewTicker(trackingPing)
	defer t.Stop()
	for {
		masters, err := n.masters(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			n.log.Debug("near cache: read the cluster's masters", "error", err)
		case err == nil:
			for addr, r := range runs {
				if _, ok := masters[addr]; !ok {
					r.stop()
					<-r.done
					delete(runs, addr)
					n.removeLink(addr)
					n.log.Info("near cache: a master left the cluster; its tracking connection is closed", "server", addr)
				}
			}
			for addr, o := range masters {
				if _, ok := runs[addr]; ok {
					continue
				}
				l := n.addLink(addr, trackOptions(o))
				lctx, stop := context.WithCancel(ctx)
				r := running{stop: stop, done: make(chan struct{})}
				runs[addr] = r
				go func() {
					defer close(r.done)
					l.run(lctx)
				}()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.reload:
		}
	}
}

// masters reads the cluster's masters (CLUSTER SLOTS): their addresses
// and client options.
func (n *nearCache) masters(ctx context.Context) (map[string]*redis.Options, error) {
	ctx, cancel := context.WithTimeout(ctx, trackingTimeout)
	defer cancel()
	var mu sync.Mutex
	out := map[string]*redis.Options{}
	err := n.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		o := c.Options()
		mu.Lock()
		out[o.Addr] = o
		mu.Unlock()
		return nil
	})
	return out, err
}

// addLink adds a tracking connection to the server at addr, down until it
// runs: nothing is used until it is up, as the server's writes were not
// tracked before, so every entry is dropped.
func (n *nearCache) addLink(addr string, opts redis.Options) *trackLink {
	l := &trackLink{n: n, addr: addr, opts: opts, kick: make(chan struct{}, 1)}
	n.lmu.Lock()
	defer n.lmu.Unlock()
	n.links[addr] = l
	n.setLinks()
	return l
}

// removeLink forgets the tracking connection to addr (its run has ended):
// the slots of its server moved, so every entry is dropped.
func (n *nearCache) removeLink(addr string) {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	delete(n.links, addr)
	n.setLinks()
}

// stopLinks forgets every tracking connection (Run ended).
func (n *nearCache) stopLinks() {
	n.lmu.Lock()
	defer n.lmu.Unlock()
	clear(n.links)
	n.setLinks()
}

// setLinks sets up after a change of the links, dropping every entry:
// the near cache is up once every link is. Call it with lmu held.
func (n *nearCache) setLinks() {
	n.up.Store(false)
	n.flush()
	n.linkUpLocked()
}

// linkUpLocked sets up to whether there are links and every one is up,
// and logs and counts a change. Call it with lmu held.
func (n *nearCache) linkUpLocked() {
	all := len(n.links) > 0
	for _, l := range n.links {
		all = all && l.up.Load()
	}
	if n.up.Swap(all) != all {
		if all {
			n.log.Info("near cache on: Redis tracks the list's cards and hide sets for this process", "servers", len(n.links))
		}
		n.metrics.setNearUp(all)
	}
}

// linkUp marks l up: its subscription was confirmed or a ping answered.
func (l *trackLink) linkUp() {
	if l.up.Load() {
		return
	}
	n := l.n
	n.lmu.Lock()
	defer n.lmu.Unlock()
	l.up.Store(true)
	n.linkUpLocked()
}

// linkDown marks l down: the invalidations its server would have sent are
// lost, so every entry is dropped, the readers waiting for l's barrier are
// released, unsynced, and (on a cluster) the masters are read again.
func (l *trackLink) linkDown(err error) {
	n := l.n
	n.lmu.Lock()
	was := l.up.Swap(false)
	n.up.Store(false)
	n.flush()
	n.lmu.Unlock()
	l.failSyncs()
	if was && err != nil {
		n.log.Warn("near cache off: its Redis tracking connection failed; the list reads Redis", "server", l.addr, "error", err)
	}
	n.metrics.setNearUp(false)
	if n.cluster != nil {
		select {
		case n.reload <- struct{}{}:
		default:
		}
	}
}

// syncWithin is sync bounded by timeout.
func (n *nearCache) syncWithin(ctx context.Context, timeout time.Duration) bool {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return n.sync(sctx)
}

// sync waits for the barrier: the PONG of a PING sent on every tracking
// connection after sync was called. It returns false when a connection
// failed first or ctx ended.
func (n *nearCache) sync(ctx context.Context) bool {
	var buf [8]*syncPoint
	sps := buf[:0]
	n.lmu.Lock()
	for _, l := range n.links {
		sps = append(sps, l.request())
	}
	n.lmu.Unlock()
	if len(sps) == 0 {
		return false
	}
	for _, sp := range sps {
		select {
		case <-sp.done:
			if !sp.ok {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// request returns the PING of l's barrier a reader arriving now waits for,
// and nudges the pinger.
func (l *trackLink) request() *syncPoint {
	l.bmu.Lock()
	if l.next == nil {
		l.next = &syncPoint{done: make(chan struct{})}
	}
	sp := l.next
	l.bmu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return sp
}

// syncPayload tells the barrier's PONGs from the health pings'.
const syncPayload = "sync"

// pingSyncs sends the barrier's PINGs, one in flight at a time, until ctx
// ends.
func (l *trackLink) pingSyncs(ctx context.Context, ps *redis.PubSub) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		}
		l.bmu.Lock()
		if l.sent != nil || l.next == nil {
			l.bmu.Unlock()
			continue
		}
		l.sent, l.next = l.next, nil
		l.bmu.Unlock()
		if err := ps.Ping(ctx, syncPayload); err != nil {
			l.synced(false)
		}
	}
}

// synced ends the PING in flight (ok: its PONG came), and nudges the
// pinger when readers wait for the next.
func (l *trackLink) synced(ok bool) {
	l.bmu.Lock()
	sp := l.sent
	l.sent = nil
	pending := l.next != nil
	l.bmu.Unlock()
	if sp != nil {
		sp.ok = ok
		close(sp.done)
	}
	if pending {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

// failSyncs releases every reader waiting for l's barrier, unsynced.
func (l *trackLink) failSyncs() {
	l.bmu.Lock()
	sps := []*syncPoint{l.sent, l.next}
	l.sent, l.next = nil, nil
	l.bmu.Unlock()
	for _, sp := range sps {
		if sp != nil {
			close(sp.done)
		}
	}
}

// run keeps the tracking connection until ctx ends.
func (l *trackLink) run(ctx context.Context) {
	n := l.n
	opts := l.opts
	opts.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		id, err := cn.ClientID(ctx).Result()
		if err != nil {
			return fmt.Errorf("near cache: client id: %w", err)
		}
		err = cn.Do(ctx, "CLIENT", "TRACKING", "ON", "REDIRECT", id, "BCAST",
			"PREFIX", n.c.keys.CardPrefix(), "PREFIX", n.c.keys.HidesPrefix()).Err()
		if err != nil {
			return fmt.Errorf("near cache: client tracking: %w", err)
		}
		l.connID.Store(id)
		return nil
	}
	client := redis.NewClient(&opts)
	defer client.Close()
	ps := client.Subscribe(ctx, invalidateChannel)
	defer ps.Close()
	defer l.linkDown(nil)

	go l.pingSyncs(ctx, ps)
	go every.Tick(ctx, trackingPing, func() { _ = ps.Ping(ctx) }) // a failure shows in Receive
	backoff := 100 * time.Millisecond
	for {
		msg, err := ps.ReceiveTimeout(ctx, trackingTimeout)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Also Redis's "everything changed" invalidation (a nil key
			// list, after FLUSHDB or FLUSHALL), which go-redis reports as
			// an unsupported payload: a flush is the answer to it too.
			l.linkDown(err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			l.linkUp()
		case *redis.Pong:
			l.linkUp()
			if m.Payload == syncPayload {
				l.synced(true)
			}
		case *redis.Message:
			if m.Channel != invalidateChannel {
				continue
			}
			for _, k := range m.PayloadSlice {
				n.invalidate(k)
			}
			if m.PayloadSlice == nil {
				n.invalidate(m.Payload)
			}
		}
	}
}
