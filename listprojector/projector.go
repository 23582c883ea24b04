package listprojector

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
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
	p := &Projector{db: db, cache: newCache(rdb, cfg), cfg: cfg,
		log: log.With("component", "listprojector"), metrics: m, mirror: make(chan mirrored, run.Concurrency+1)}
	run.FetchBatch = cfg.FetchBatch
	c, err := bus.NewBatchConsumer(js, run, p.handle, log, busMetrics)
	if err != nil {
		return nil, err
	}
	p.consumer = c
	return p, nil
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

// Run consumes until ctx ends, then lets the batches in flight finish
// within the consumer's ShutdownTimeout. It returns an error only when it cannot
// start.
func (p *Projector) Run(ctx context.Context) error {
	mirrorDone := make(chan struct{})
	go func() {
		defer close(mirrorDone)
		p.writeMirror(context.WithoutCancel(ctx))
	}()
	err := p.consumer.Run(ctx)
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
// one's (one UPDATE for the rooms that have a row, one upsert
// for the others: writeCards), then handed to the Redis writer (which
// runs while the next batch is written to MySQL). A MySQL failure
// fails every delivery (retried); a Redis failure fails none (the
// reconcile job repairs Redis). A known event without a decodable card is
// permanent (dead-lettered); an unknown one without a card is acked.
//
// The consumer's workers call handle at once for batches of different
// rooms: it shares only the database, the metrics and the mirror channel.
func (p *Projector) handle(ctx context.Context, ds []bus.Delivery) []error {
	errs := make([]error, len(ds))
	newest := make(map[roomKey]*Card, len(ds))
	var order []roomKey
	var handled []int
	var unknown, coalesced int
	for i, d := range ds {
		env := d.Envelope
		_, known := roomevent.Lookup(env.EventType)
		if !known {
			unknown++
		}
		c, err := decodeCard(env.AppCode, env.RoomID, env.RoomVersion, env.Payload)
		if err != nil {
			if known {
				errs[i] = bus.Permanent(fmt.Errorf("event %s (%s): %w", env.EventID, env.EventType, err))
			}
			continue
		}
		handled = append(handled, i)
		k := roomKey{c.AppCode, c.RoomID}
		cur, ok := newest[k]
		switch {
		case !ok:
			newest[k] = c
			order = append(order, k)
		case c.RoomVersion > cur.RoomVersion:
			newest[k] = c
			coalesced++
		default:
			coalesced++
		}
	}
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.unknown }, unknown)
	if len(order) == 0 {
		return errs
	}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	fail := func(err error) []error {
		p.log.Warn("list projection failed, retrying", "events", len(handled), "error", err)
		for _, i := range handled {
			errs[i] = err
		}
		return errs
	}
	priors, err := readPriors(wctx, p.db, order)
	if err != nil {
		return fail(err)
	}
	nowMs := p.cfg.nowMs()
	var write []*Card
	var as []applied
	stale, unchanged := 0, 0
	for _, k := range order {
		c := newest[k]
		pr, had := priors[k]
		switch {
		case had && pr.RoomVersion >= c.RoomVersion:
			stale++
			continue
		case had && pr.Listing == c.Listing:
			// Nothing a list shows changed (a seat mute, a rank, a mic
			// request): the stored card stays, with its older version,
			// which still guards it, as any event between the two
			// versions carried this same listing.
			unchanged++
			continue
		}
		c.SortScore, c.UpdatedAtMs = sortScore(c, nowMs), nowMs
		old := int64(-1)
		if had {
			old = pr.VisibleRegionID
		}
		write = append(write, c)
		as = append(as, applied{card: c, oldRegion: old})
	}
	// Batches of several workers hold disjoint rooms, but their locks on
	// the secondary indexes may still cross: each statement (autocommit,
	// so no BEGIN and COMMIT round trips) runs again after a deadlock; it
	// writes over older versions only, so it is safe to repeat.
	stored := func(k roomKey) bool { _, ok := priors[k]; return ok }
	if err := writeCards(wctx, p.db, write, stored); err != nil {
		return fail(err)
	}
	now := p.cfg.Now()
	for _, i := range handled {
		p.metrics.observeLag(now.Sub(time.UnixMilli(ds[i].Envelope.OccurredAtMs)).Seconds())
	}
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.applied }, len(write))
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.stale }, stale)
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.unchanged }, unchanged)
	p.metrics.add(func(m *Metrics) prometheus.Counter { return m.coalesced }, coalesced)
	m := mirrored{cards: as}
	if p.onApplied != nil {
		for _, i := range handled {
			m.events = append(m.events, ds[i].Envelope.EventID)
		}
	}
	p.mirror <- m
	return errs
}
