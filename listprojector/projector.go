package listprojector

import (
	"container/list"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/bus"
	"voiceroom/roomevent"
)

// Projector is the sink that keeps room_list_entries (and its Redis
// mirror) up to date from the durable consumer listprojector. Its
// consumer's Concurrency workers write batches of different rooms at
// once; a room's batches are written one after the other, in order.
type Projector struct {
	db       *sql.DB
	cache    *cache
	consumer *bus.Consumer
	cfg      Config
	log      *slog.Logger
	metrics  *Metrics

	// mirror carries each batch's written cards to the Redis writer, so
	// a batch's Redis write overlaps the next batch's MySQL write. The
	// one writer keeps a room's writes in the order its worker sent them.
	mirror chan mirrored

	// wmu is held shared by every batch from reading the stored cards to
	// handing its own to the mirror, and exclusively by the writes of held
	// cards (writeHeld).
	wmu sync.RWMutex
	// mu guards the held cards (hold.go).
	mu       sync.Mutex
	held     map[roomKey]*heldRoom
	queue    *list.List // of *heldRoom, by due time
	stopping bool       // holds no more: Run's ctx ended

	// onApplied, when set (benchmarks), sees the id of every event of a
	// batch once the batch is in MySQL and Redis.
	onApplied func(eventID string, at time.Time)
}

// DefaultWorkers is the projector's consume-loop Concurrency when the
// caller leaves it 0: batches written at once. One keeps batches as large
// as the load makes them, so the fewest statements per event; on a
// backlog 2 drain faster (BenchmarkBacklogDrain, 2 cores with MySQL beside:
// 6-27% faster than 1, 4 no faster than 2) at about 8% more statements per
// command under a steady load (voiceroom bench), since every batch is
// smaller.
const DefaultWorkers = 1

// mirrored is one batch on its way to Redis.
type mirrored struct {
	cards  []applied
	events []string // the events' ids, for onApplied
}

// New returns a Projector reading the durable run.Durable (normally
// bus.DurableListProjector) of js with run.Concurrency workers (0:
// DefaultWorkers). rdb may be nil (no cache); busMetrics and m may be
// nil. run.FetchBatch is taken from cfg.FetchBatch.
func New(db *sql.DB, rdb redis.UniversalClient, js jetstream.JetStream, run bus.ConsumerRunConfig, busMetrics *bus.Metrics,
	cfg Config, log *slog.Logger, m *Metrics) (*Projector, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || js == nil {
		return nil, fmt.Errorf("%w: projector needs a database and jetstream", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if run.Concurrency == 0 {
		run.Concurrency = DefaultWorkers
	}
	p := newProjector(db, cfg, log.With("component", "listprojector"), m, run.Concurrency+1)
	p.cache = newCache(rdb, cfg)
	run.FetchBatch = cfg.FetchBatch
	if cfg.CountsDelay > 0 {
		run.Held = cfg.MaxHeld
	}
	c, err := bus.NewHoldingBatchConsumer(js, run, p.handle, log, busMetrics)
	if err != nil {
		return nil, err
	}
	p.consumer = c
	return p, nil
}

// newProjector returns a Projector without its consumer and cache, its
// mirror channel buffering mirrorBuf batches.
func newProjector(db *sql.DB, cfg Config, log *slog.Logger, m *Metrics, mirrorBuf int) *Projector {
	return &Projector{db: db, cfg: cfg, log: log, metrics: m, mirror: make(chan mirrored, mirrorBuf),
		held: map[roomKey]*heldRoom{}, queue: list.New()}
}

// newCache returns the cache over rdb, or nil without Redis.
func newCache(rdb redis.UniversalClient, cfg Config) *cache {
	if rdb == nil {
		return nil
	}
	return &cache{rdb: rdb, prefix: cfg.KeyPrefix, ttl: cfg.CardTTL}
}

// Running is closed once the projector consumes.
func (p *Projector) Running() <-chan struct{} { return p.consumer.Running() }

// Run consumes until ctx ends, then writes every held card and lets the
// batches in flight finish within the consumer's ShutdownTimeout. It
// returns an error only when it cannot start.
func (p *Projector) Run(ctx context.Context) error {
	mirrorDone := make(chan struct{})
	go func() {
		defer close(mirrorDone)
		p.writeMirror(context.WithoutCancel(ctx))
	}()
	flushCtx, stopFlush := context.WithCancel(ctx) // also ends if the consumer cannot start
	flushDone := make(chan struct{})
	go func() {
		defer close(flushDone)
		if p.cfg.CountsDelay > 0 {
			p.flushHeld(flushCtx)
		}
	}()
	err := p.consumer.Run(ctx)
	stopFlush()
	<-flushDone
	close(p.mirror) // no batch runs any more
	<-mirrorDone
	return err
}

// writeMirror writes each batch's cards to Redis, in batch order, until
// the projector stops; each write is bounded by WriteTimeout.
func (p *Projector) writeMirror(ctx context.Context) {
	for m := range p.mirror {
		wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
		if err := p.cache.writeApplied(wctx, m.cards); err != nil {
			p.metrics.redisFailed("projector")
			p.log.Warn("redis write failed; the reconcile job repairs it", "cards", len(m.cards), "error", err)
		}
		cancel()
		if p.onApplied != nil {
			at := time.Now()
			for _, id := range m.events {
				p.onApplied(id, at)
			}
		}
	}
}

// handle applies one batch: the newest card of each room, written over
// older cards only, and only when its listing differs from the stored
// one's (one UPDATE for the rooms that have a row, one upsert for the
// others: writeCards), then handed to the Redis writer (which runs while
// the next batch is written to MySQL). A card that changes only counts is
// held instead (hold.go), its deliveries settled when it is written. A
// MySQL failure fails every delivery it would have settled (retried); a
// Redis failure fails none (the reconcile job repairs Redis). A known
// event without a decodable card is permanent (dead-lettered); an unknown
// one without a card is acked.
//
// The consumer's workers call handle at once for batches of different
// rooms: they share the database, the metrics, the mirror channel and
// the held rooms (mu), and hold wmu shared from reading the stored cards
// to handing theirs to the mirror, so the flusher's writes of held rooms
// (wmu exclusive) never cross them.
func (p *Projector) handle(ctx context.Context, ds []bus.Delivery, settle func(int, error)) {
	rooms := p.coalesce(ds, settle)
	if len(rooms) == 0 {
		return
	}
	p.wmu.RLock()
	defer p.wmu.RUnlock()
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	keys := make([]roomKey, len(rooms))
	for i, r := range rooms {
		keys[i] = r.key
	}
	priors, err := readPriors(wctx, p.db, keys)
	if err != nil {
		p.fail(rooms, err)
		return
	}
	w := p.decide(rooms, priors)
	p.write(wctx, w)
}

// batchRoom is one room's newest card in a batch and the batch's
// deliveries of the room.
type batchRoom struct {
	key     roomKey
	card    *Card
	waiters []waiter
	mixed   bool // the cards of the batch's events do not all show one listing
}

// coalesce decodes the batch's cards and keeps each room's newest, in
// order of the rooms' first events. It settles at once what has no card:
// permanent for a known room event, acked for an unknown one and for an
// event that is not a room's (roomevent.Spec.NoRoom).
func (p *Projector) coalesce(ds []bus.Delivery, settle func(int, error)) []*batchRoom {
	byKey := make(map[roomKey]*batchRoom, len(ds))
	var rooms []*batchRoom
	unknown := 0
	for i, d := range ds {
		env := d.Envelope
		spec, known := roomevent.Lookup(env.EventType)
		if !known {
			unknown++
		}
		if spec.NoRoom { // an activity's result: no room, no card
			settle(i, nil)
			continue
		}
		c, err := decodeCard(env.AppCode, env.RoomID, env.RoomVersion, env.Payload)
		if err != nil {
			if known {
				err = bus.Permanent(fmt.Errorf("event %s (%s): %w", env.EventID, env.EventType, err))
			} else {
				err = nil
			}
			settle(i, err)
			continue
		}
		k := roomKey{c.AppCode, c.RoomID}
		r := byKey[k]
		if r == nil {
			r = &batchRoom{key: k, card: c}
			byKey[k] = r
			rooms = append(rooms, r)
		} else {
			r.mixed = r.mixed || c.Listing != r.card.Listing
			if c.RoomVersion > r.card.RoomVersion {
				r.card = c
			}
		}
		r.waiters = append(r.waiters, waiter{settle: func(err error) { settle(i, err) }, version: c.RoomVersion,
			eventID: env.EventID, occurredMs: env.OccurredAtMs})
	}
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.unknown }, unknown)
	return rooms
}

// decide sorts each room of a batch, against its stored card (priors)
// and its held one: stale (an equal or newer card is stored), unchanged
// (the stored card shows the same listing, and so did every event of the
// room seen since: the row keeps its older version, which still guards
// it, as a redelivery of any of those events carries that same listing),
// held (only counts changed), or written. A newest card back at the
// stored listing after events that showed another (a join, then a leave)
// is written: an acked event in between, redelivered after a lost ack,
// would otherwise pass the older version's guard and show its counts.
// What is not written nor held is settled here.
func (p *Projector) decide(rooms []*batchRoom, priors map[roomKey]*Card) *write {
	w := &write{}
	var settled, covered []waiter // covered: reported when their held card is written
	stale, unchanged := 0, 0
	p.mu.Lock()
	for _, r := range rooms {
		c, ws := r.card, r.waiters
		pr, had := priors[r.key]
		h := p.held[r.key]
		if h != nil && had && pr.RoomVersion >= h.card.RoomVersion {
			// Written since by another instance: what it held is covered.
			settled, stale, h = append(settled, p.unhold(h)...), stale+1, nil
		}
		oldRegion := int64(-1)
		if had {
			oldRegion = pr.VisibleRegionID
		}
		switch {
		case h != nil && h.card.RoomVersion >= c.RoomVersion:
			covered = append(covered, p.hold(h, r.key, c, oldRegion, ws)...) // a redelivery the held card covers
		case had && pr.RoomVersion >= c.RoomVersion:
			settled, stale = append(settled, ws...), stale+len(ws)
		case had && pr.Listing == c.Listing && !r.mixed && h == nil:
			settled, unchanged = append(settled, ws...), unchanged+len(ws)
		case had && p.holds() && countsOnly(pr.Listing, c.Listing):
			covered = append(covered, p.hold(h, r.key, c, oldRegion, ws)...)
		default:
			if h != nil {
				ws = append(p.unhold(h), ws...)
			}
			w.add(c, oldRegion, ws)
		}
	}
	p.mu.Unlock()
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.stale }, stale)
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.unchanged }, unchanged)
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.coalesced }, len(covered))
	for _, s := range append(settled, covered...) {
		s.done(nil)
	}
	w.done = settled
	return w
}

// fail fails every delivery of rooms with err (retried).
func (p *Projector) fail(rooms []*batchRoom, err error) {
	n := 0
	for _, r := range rooms {
		for _, s := range r.waiters {
			s.done(err)
			n++
		}
	}
	p.log.Warn("list projection failed, retrying", "events", n, "error", err)
}

// write writes w's cards to MySQL, hands them to the Redis writer and
// settles their deliveries: a MySQL failure fails them (retried). Batches
// of several workers hold disjoint rooms, but their locks on the
// secondary indexes may still cross: each statement (autocommit, so no
// BEGIN and COMMIT round trips) runs again after a deadlock; it writes
// over older versions only, so it is safe to repeat.
func (p *Projector) write(ctx context.Context, w *write) {
	nowMs := p.cfg.nowMs()
	cards := make([]*Card, len(w.as))
	stored := make(map[roomKey]bool, len(w.as))
	events := 0
	for i, a := range w.as {
		c := a.card
		c.SortScore, c.UpdatedAtMs = sortScore(c, nowMs), nowMs
		cards[i] = c
		if a.oldRegion >= 0 {
			stored[roomKey{c.AppCode, c.RoomID}] = true
		}
		for _, s := range w.waiters[i] {
			if s.settle != nil {
				events++ // the covered ones were counted coalesced when acked
			}
		}
	}
	if len(cards) > 0 {
		if err := writeCards(ctx, p.db, cards, func(k roomKey) bool { return stored[k] }); err != nil {
			p.log.Warn("list projection failed, retrying", "events", events, "error", err)
			for _, ws := range w.waiters {
				for _, s := range ws {
					s.done(err)
				}
			}
			return
		}
	}
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.applied }, len(cards))
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.coalesced }, events-len(cards))
	now := p.cfg.Now()
	m := mirrored{cards: w.as}
	report := func(s waiter) {
		p.metrics.observeLag(now.Sub(time.UnixMilli(s.occurredMs)).Seconds())
		if p.onApplied != nil {
			m.events = append(m.events, s.eventID)
		}
	}
	for _, s := range w.done {
		report(s)
	}
	for _, ws := range w.waiters {
		for _, s := range ws {
			report(s)
		}
	}
	if len(cards) > 0 || len(w.done) > 0 {
		p.mirror <- m
	}
	for _, ws := range w.waiters {
		for _, s := range ws {
			s.done(nil)
		}
	}
}
