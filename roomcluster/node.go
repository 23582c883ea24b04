package roomcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"voiceroom/rooms"
)

// Buckets of the cluster in JetStream KV.
const (
	// LeaseBucket holds one key per owned partition ("p.<n>"), valued
	// with its owner; the bucket's TTL is the lease's life, and each
	// renewal is an Update at the last revision.
	LeaseBucket = "VOICEROOM_ROOM_LEASES"
	// MemberBucket holds one key per live rooms node, renewed like a
	// lease, valued with the node's load (Member).
	MemberBucket = "VOICEROOM_ROOM_NODES"
	// ConfigBucket records the deployment's P (key "partitions").
	ConfigBucket = "VOICEROOM_ROOMS"
)

// Host is what a node drives on the rooms service: dropping the cells of
// partitions it stops serving and recovering those it takes.
type Host interface {
	Release(ctx context.Context, match func(rooms.RoomKey) bool) int
	Recover(ctx context.Context, n int, ps []int, match func(rooms.RoomKey) bool)
}

// Lease is a partition's lease as stored: its owner, when it took the
// partition, and the epoch it serves it under (0 in the value that takes
// it: the epoch is that value's revision).
type Lease struct {
	Node    string `json:"node"`
	TakenAt int64  `json:"taken_at_ms"`
	Epoch   uint64 `json:"epoch,omitempty"`
}

// Member is a live node's record, renewed every RenewEvery.
type Member struct {
	Node       string `json:"node"`
	Host       string `json:"host"`
	StartedAt  int64  `json:"started_at_ms"`
	Partitions int    `json:"partitions"`
	Cells      int    `json:"cells"`
	Routed     uint64 `json:"routed_requests"`
}

// slot is what a node knows of one partition it holds: the lease's
// current revision, its epoch (the revision it was taken at), and until
// when (on this node's monotonic clock) it may serve.
type slot struct {
	rev, epoch uint64
	takenAt    int64         // unix ms
	validUntil time.Duration // on the node's clock (now)
	draining   bool
}

// Node holds partition leases for one rooms process and tells its rooms
// service which rooms it serves (rooms.Ownership). It registers itself as
// a member, takes the partitions rendezvous hashing gives it over the live
// members, renews them, and hands over those another node should own.
type Node struct {
	cfg     Config
	id      string
	host    string
	log     *slog.Logger
	metrics *Metrics
	svc     Host
	cells   func() int

	buckets *buckets

	start      time.Time
	clock      *nodeClock             // bootClock, read cheaply
	startClock time.Duration          // clock at start
	slots      []atomic.Pointer[slot] // by partition

	owners *owners // the lease bucket as watched

	mu   sync.Mutex
	live []string // member ids, sorted, self included

	nudge  chan struct{}
	routed atomic.Uint64
	ready  chan struct{}
	// step is held by each round of Run's loop (renewal, balance), so a
	// test can stop the node's lease work as a paused process would.
	step sync.Mutex
}

// NewNode opens (creating when missing) the cluster's buckets and checks
// the deployment's P. hostName names the machine in the member record; the
// node's id is hostName and a random suffix, new at every start, so a
// restarted node never mistakes its predecessor's leases for its own.
func NewNode(ctx context.Context, js jetstream.JetStream, cfg Config, hostName string, svc Host, cells func() int, log *slog.Logger, m *Metrics) (*Node, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	id := subjectToken(hostName) + "-" + hex.EncodeToString(suffix)
	b, err := openBuckets(ctx, js, cfg)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, id: id, host: hostName, log: log.With("component", "roomcluster", "node", id), metrics: m,
		svc: svc, cells: cells, buckets: b, start: time.Now(), clock: newNodeClock(),
		slots: make([]atomic.Pointer[slot], cfg.Partitions), live: []string{id},
		nudge: make(chan struct{}, 1), ready: make(chan struct{}),
	}
	n.startClock = n.clock.now()
	n.owners = newOwners(cfg.Partitions, n.poke)
	m.setPartitions(cfg.Partitions)
	return n, nil
}

// ID is the node's id: its subject token and its name in leases.
func (n *Node) ID() string { return n.id }

// Partitions is P.
func (n *Node) Partitions() int { return n.cfg.Partitions }

// Ready is closed once the node has taken its first partitions.
func (n *Node) Ready() <-chan struct{} { return n.ready }

func leaseKey(p int) string { return "p." + strconv.Itoa(p) }

func partitionOfKey(key string) (int, bool) {
	if len(key) < 3 || key[:2] != "p." {
		return 0, false
	}
	p, err := strconv.Atoi(key[2:])
	return p, err == nil
}

// now is the node's clock: time since start that also runs while the
// machine is suspended (bootClock), so a node resumed after a suspended
// VM finds its leases past due like one resumed after SIGSTOP.
func (n *Node) now() time.Duration { return n.clock.now() - n.startClock }

// Serving implements rooms.Ownership: the node serves key's partition
// while it holds its lease, is not handing it over, and its own clock is
// short of the lease's renewal plus TTL minus the margin.
func (n *Node) Serving(key rooms.RoomKey) (uint64, bool) {
	return n.servingPartition(Partition(key.AppCode, key.RoomID, n.cfg.Partitions))
}

func (n *Node) servingPartition(p int) (uint64, bool) {
	s := n.slots[p].Load()
	if s == nil || s.draining || n.now() >= s.validUntil {
		return 0, false
	}
	return s.epoch, true
}

// Fenced implements rooms.Ownership: a write of key's room lost to
// another writer. The node reads the lease: if it is no longer this
// node's at the revision it renewed, it stops serving the partition at
// once.
func (n *Node) Fenced(key rooms.RoomKey) {
	p := Partition(key.AppCode, key.RoomID, n.cfg.Partitions)
	n.metrics.fenced.Inc()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.LeaseTTL)
		defer cancel()
		s := n.slots[p].Load()
		if s == nil {
			return
		}
		e, err := n.buckets.lease().Get(ctx, leaseKey(p))
		switch {
		case err == nil && e.Revision() == s.rev:
			return // still ours: the fence was this node's own late commit
		case err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
			// Unknown: the renewals decide (and the node's clock).
			n.log.Warn("fenced: lease not read; the next renewal decides", "partition", p, "error", err)
			return
		case err == nil && s.rev > e.Revision():
			// Our renewal landed after this read was served: still ours.
			return
		}
		n.log.Warn("fenced: partition lost to another writer; no longer serving it", "partition", p, "epoch", s.epoch, "error", err)
		n.lose(p, s, "fenced")
	}()
}

// Run takes, renews and hands over partitions until ctx ends, then hands
// every partition over (graceful shutdown) and leaves.
func (n *Node) Run(ctx context.Context) error {
	var watchers sync.WaitGroup
	watchers.Go(func() { n.clock.run(ctx) })
	watchers.Go(func() { n.owners.follow(ctx, n.buckets) })
	watchers.Go(func() { n.followMembers(ctx) })
	select {
	case <-n.owners.loaded:
	case <-ctx.Done():
		watchers.Wait()
		return nil
	}
	n.putMember(ctx)
	n.log.Info("rooms node running", "partitions", n.cfg.Partitions, "lease_ttl", n.cfg.LeaseTTL, "renew_every", n.cfg.RenewEvery)
	ticker := time.NewTicker(n.cfg.RenewEvery)
	defer ticker.Stop()
	n.balance(ctx)
	close(n.ready)
	for {
		select {
		case <-ctx.Done():
			watchers.Wait()
			n.leave()
			return nil
		case <-ticker.C:
			n.step.Lock()
			n.renew(ctx)
			n.putMember(ctx)
			n.balance(ctx)
			n.step.Unlock()
		case <-n.nudge:
			n.step.Lock()
			n.balance(ctx)
			n.step.Unlock()
		}
	}
}

func (n *Node) poke() {
	select {
	case n.nudge <- struct{}{}:
	default:
	}
}

// followMembers keeps n.live in step with the member bucket.
func (n *Node) followMembers(ctx context.Context) {
	var loading map[string]bool // a watch's initial values
	follow(ctx, n.buckets.member, 2*n.cfg.LeaseTTL,
		func() { loading = map[string]bool{n.id: true} },
		func(e jetstream.KeyValueEntry) {
			put := e.Operation() == jetstream.KeyValuePut
			if loading != nil {
				if put {
					loading[e.Key()] = true
				}
				return
			}
			n.setLive(func(live map[string]bool) {
				if put {
					live[e.Key()] = true
				} else if e.Key() != n.id {
					delete(live, e.Key())
				}
			})
		},
		func() {
			if loading != nil {
				all := loading
				loading = nil
				n.setLive(func(live map[string]bool) {
					clear(live)
					maps.Copy(live, all)
				})
			}
		})
}

// setLive changes the live set through change and pokes the balancer if
// it changed.
func (n *Node) setLive(change func(map[string]bool)) {
	n.mu.Lock()
	live := make(map[string]bool, len(n.live))
	for _, id := range n.live {
		live[id] = true
	}
	change(live)
	next := slices.Sorted(maps.Keys(live))
	changed := !slices.Equal(next, n.live)
	n.live = next
	n.mu.Unlock()
	n.metrics.liveNodes.Set(float64(len(next)))
	if changed {
		n.log.Info("rooms nodes changed", "live_nodes", len(next), "nodes", next)
		n.poke()
	}
}

// putMember renews the node's member record with its load.
func (n *Node) putMember(ctx context.Context) {
	held := 0
	for p := range n.slots {
		if _, ok := n.servingPartition(p); ok {
			held++
		}
	}
	n.metrics.held.Set(float64(held))
	m := Member{Node: n.id, Host: n.host, StartedAt: n.start.UnixMilli(), Partitions: held, Routed: n.routed.Load()}
	if n.cells != nil {
		m.Cells = n.cells()
	}
	b, _ := json.Marshal(m) // a plain struct: never fails
	pctx, cancel := context.WithTimeout(ctx, n.cfg.RenewEvery)
	defer cancel()
	if _, err := n.buckets.member().Put(pctx, n.id, b); err != nil && ctx.Err() == nil {
		n.log.Warn("member record not renewed", "error", err)
		n.buckets.heal(ctx, err)
	}
}

// renew updates every held lease at its revision, a few at a time. A
// renewal refused (the revision moved: the lease expired, or another node
// holds it) loses the partition at once; one that fails otherwise keeps it
// until the node's own clock says the lease may lapse.
func (n *Node) renew(ctx context.Context) {
	var work errgroup.Group
	work.SetLimit(16)
	for p := range n.slots {
		s := n.slots[p].Load()
		if s == nil || s.draining {
			continue
		}
		if n.now() >= s.validUntil {
			n.log.Warn("lease not renewed in time; no longer serving the partition", "partition", p, "epoch", s.epoch)
			n.lose(p, s, "expired")
			continue
		}
		work.Go(func() error {
			sent := n.now()
			rctx, cancel := context.WithTimeout(ctx, n.cfg.RenewEvery)
			defer cancel()
			rev, err := n.buckets.lease().Update(rctx, leaseKey(p), n.leaseValue(s.takenAt, s.epoch), s.rev)
			switch {
			case err == nil:
				next := &slot{rev: rev, epoch: s.epoch, takenAt: s.takenAt, validUntil: sent + n.cfg.LeaseTTL - n.cfg.Margin}
				n.slots[p].CompareAndSwap(s, next) // not if lost or draining meanwhile
			case errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound):
				n.log.Warn("lease renewal refused; no longer serving the partition", "partition", p, "epoch", s.epoch, "error", err)
				n.lose(p, s, "expired")
			case ctx.Err() == nil:
				n.metrics.renewFailures.Inc()
				n.buckets.heal(ctx, err)
				if left := s.validUntil - n.now(); left > 0 {
					n.log.Warn("lease renewal failed; serving until the lease may lapse", "partition", p, "error", err, "serving_for", left)
				} else {
					// Sent before a pause, failed after it: past due already.
					n.log.Warn("lease not renewed in time; no longer serving the partition", "partition", p, "epoch", s.epoch, "error", err)
					n.lose(p, s, "expired")
				}
			}
			return nil
		})
	}
	_ = work.Wait()
}

func (n *Node) leaseValue(takenAt int64, epoch uint64) []byte {
	b, _ := json.Marshal(Lease{Node: n.id, TakenAt: takenAt, Epoch: epoch}) // a plain struct: never fails
	return b
}

// lose forgets partition p (whose slot was s) and drops its cells.
func (n *Node) lose(p int, s *slot, reason string) {
	if !n.slots[p].CompareAndSwap(s, nil) {
		return
	}
	n.metrics.handovers.WithLabelValues(reason).Inc()
	go n.release(context.Background(), p)
}

// release drops partition p's cells from the rooms service.
func (n *Node) release(ctx context.Context, p int) int {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.LeaseTTL)
	defer cancel()
	return n.svc.Release(ctx, n.matcher([]int{p}))
}

// matcher matches the rooms of the given partitions.
func (n *Node) matcher(ps []int) func(rooms.RoomKey) bool {
	set := make(map[int]bool, len(ps))
	for _, p := range ps {
		set[p] = true
	}
	return func(k rooms.RoomKey) bool { return set[Partition(k.AppCode, k.RoomID, n.cfg.Partitions)] }
}

// balance takes the free partitions rendezvous hashing gives this node
// (and any left free for longer than a lease's life, whoever they are
// meant for: their owner-to-be is not taking them), and hands over those
// another live node should own.
func (n *Node) balance(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	n.mu.Lock()
	live := slices.Clone(n.live)
	n.mu.Unlock()
	now := time.Now()
	var take, give []int
	for p := range n.slots {
		want := desiredOwner(live, p) == n.id
		if n.slots[p].Load() != nil {
			if !want {
				give = append(give, p)
			}
			continue
		}
		holder, freeSince := n.owners.get(p)
		if holder == "" && (want || now.Sub(freeSince) > n.cfg.LeaseTTL) {
			take = append(take, p)
		}
	}
	gained := n.take(ctx, take)
	if len(gained) > 0 {
		n.log.Info("partitions taken", "count", len(gained), "live_nodes", len(live))
		go n.svc.Recover(context.WithoutCancel(ctx), n.cfg.Partitions, gained, n.matcher(gained))
	}
	if len(give) > 0 {
		n.handOver(ctx, give, "rebalance")
	}
}

// take creates the leases of ps where none exists; it returns those it
// got. Create succeeds only on a free key (never held, deleted at a
// hand-over, or expired), so a partition is taken only once its previous
// lease is gone.
func (n *Node) take(ctx context.Context, ps []int) []int {
	var mu sync.Mutex
	var got []int
	var work errgroup.Group
	work.SetLimit(16)
	for _, p := range ps {
		work.Go(func() error {
			sent := n.now()
			cctx, cancel := context.WithTimeout(ctx, n.cfg.RenewEvery)
			defer cancel()
			takenAt := time.Now().UnixMilli()
			rev, err := n.buckets.lease().Create(cctx, leaseKey(p), n.leaseValue(takenAt, 0))
			if err != nil {
				if !errors.Is(err, jetstream.ErrKeyExists) && ctx.Err() == nil {
					n.log.Warn("lease not taken", "partition", p, "error", err)
					n.buckets.heal(ctx, err)
				}
				return nil
			}
			n.slots[p].Store(&slot{rev: rev, epoch: rev, takenAt: takenAt, validUntil: sent + n.cfg.LeaseTTL - n.cfg.Margin})
			n.owners.set(p, n.id) // before the watch says so, so balance does not try again
			n.metrics.taken.Inc()
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
			return nil
		})
	}
	_ = work.Wait()
	return got
}

// handOver stops serving ps, waits for their commands in flight, drops
// their cells and deletes their leases, so the next owner takes each at
// once (it waits for the delete, never for a clock).
func (n *Node) handOver(ctx context.Context, ps []int, reason string) {
	var work errgroup.Group
	work.SetLimit(8)
	for _, p := range ps {
		s := n.slots[p].Load()
		if s == nil || s.draining {
			continue
		}
		d := *s
		d.draining = true
		if !n.slots[p].CompareAndSwap(s, &d) {
			continue
		}
		work.Go(func() error {
			cells := n.release(context.WithoutCancel(ctx), p)
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.cfg.RenewEvery)
			defer cancel()
			err := n.buckets.lease().Delete(dctx, leaseKey(p), jetstream.LastRevision(d.rev))
			n.slots[p].CompareAndSwap(&d, nil)
			n.metrics.handovers.WithLabelValues(reason).Inc()
			if err != nil {
				n.log.Warn("lease not deleted at hand-over; the next owner takes it when it expires", "partition", p, "error", err)
				return nil
			}
			n.log.Debug("partition handed over", "partition", p, "epoch", d.epoch, "cells", cells)
			return nil
		})
	}
	_ = work.Wait()
}

// leave removes the member record and, when other rooms nodes live, hands
// every partition over to them. The last node keeps its partitions (and
// serves the commands still arriving while HTTP drains, for as long as its
// leases last unrenewed); Close deletes them.
func (n *Node) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*n.cfg.LeaseTTL)
	defer cancel()
	if err := n.buckets.member().Delete(ctx, n.id); err != nil {
		n.log.Warn("member record not deleted; it expires", "error", err)
	}
	n.mu.Lock()
	others := len(n.live) - 1
	n.mu.Unlock()
	all := n.Held()
	if others == 0 {
		n.log.Info("rooms node leaving: the last one, it keeps its partitions until it closes", "partitions", len(all))
		return
	}
	start := time.Now()
	n.handOver(ctx, all, "shutdown")
	n.metrics.held.Set(0)
	n.log.Info("rooms node left: partitions handed over", "partitions", len(all), "live_nodes", others,
		"took", time.Since(start).Round(time.Millisecond))
}

// Close stops serving and deletes the leases the node still holds (the
// last node's, at shutdown), so that a node started next takes them at
// once. Call it after Run has returned and no command is in flight.
func (n *Node) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.RenewEvery)
	defer cancel()
	var work errgroup.Group
	work.SetLimit(16)
	for p := range n.slots {
		s := n.slots[p].Swap(nil)
		if s == nil {
			continue
		}
		work.Go(func() error {
			_ = n.buckets.lease().Delete(ctx, leaseKey(p), jetstream.LastRevision(s.rev))
			return nil
		})
	}
	_ = work.Wait()
	n.metrics.held.Set(0)
}

// subjectToken makes s usable as one NATS subject token and KV key part.
func subjectToken(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "node"
	}
	if len(b) > 48 {
		b = b[:48]
	}
	return string(b)
}

// Held returns the partitions this node serves now.
func (n *Node) Held() []int {
	var ps []int
	for p := range n.slots {
		if _, ok := n.servingPartition(p); ok {
			ps = append(ps, p)
		}
	}
	return ps
}
