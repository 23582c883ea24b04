package roomlist

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/listprojector"
)

// nearCache keeps in this process the cards and hide sets the list query
// read from Redis, and serves them again without a round trip for as long
// as Redis says they did not change. A first page is then read from memory
// alone: the frozen order is already here, and its cards and its region's
// hides are too.
//
// Redis tracks the keys for it (server-assisted client-side caching, in
// broadcasting mode): a dedicated connection to each server that takes
// writes (the one server, Sentinel's master, or every master of a Redis
// Cluster; see trackLink) sends
//
//	CLIENT TRACKING ON REDIRECT <its own id> BCAST PREFIX <p>room:card: PREFIX <p>room:hides:
//	SUBSCRIBE __redis__:invalidate
//
// and from then on that server sends it the name of every key under those
// prefixes that any client sets, deletes, or that expires or is evicted
// there, as part of the write (before it answers the writer). The entry of
// each such key is dropped here. Tracking is per server: a cluster's
// master reports the writes of its own slots only, hence a connection per
// master.
//
// # Why a page from the near cache is as fresh as a Redis read made when its request arrived
//
//   - Before it reads its entries, a request waits for a barrier: the
//     answer to a PING sent on every tracking connection after the request
//     arrived. A server sends a connection's messages in order, so every
//     invalidation of a write it finished before that PING (every write
//     finished before the request arrived, a hide's DEL in another
//     process included) has been applied when the PONG is read. Waiting
//     readers share one PING per connection: one is in flight at a time,
//     and the readers that arrive meanwhile wait for the next. A barrier
//     that does not complete within RedisTimeout sends the request to
//     Redis (with a RedisTimeout of its own).
//   - Entries are used only while every tracking connection is up: its
//     subscription confirmed, or a ping answered, since its last failure.
//     A failure (an error, or no message within trackingTimeout although a
//     ping goes out every trackingPing) drops every entry and bumps the
//     epoch, and nothing is used or kept until the connection is back with
//     tracking armed again (go-redis reconnects it and OnConnect re-arms).
//   - On a cluster the masters are read again every trackingPing, and at
//     once when a connection fails (a failover: the stopped master's
//     connection fails, its promoted replica is found). A master that
//     joins gets its connection, one that leaves loses it, and either
//     drops every entry: until the new master's connection is up, nothing
//     is used (its writes were not tracked before).
//   - A fill (a Redis read whose result is to be kept) registers its keys
//     before the read. An invalidation of a key under fill marks it, and a
//     marked key's value is not kept: it may predate the write. A fill that
//     began in an earlier epoch keeps nothing.
//   - An entry is used for at most maxAge after its read: a backstop, should
//     an invalidation ever be lost while the connection looked healthy.
//
// So a hide or unhide shows at the next list request of every process.
// A hide made in this process also drops its region's set here at once
// (Lister.hideChanged), as does a fill of the set by this process.
//
// One whose Run is not running serves nothing from memory: every read goes
// to Redis as before. A nil *nearCache (it is off) is one only for
// dropHides; Lister reads Redis itself then.
type nearCache struct {
	c       *cache
	base    *redis.Client        // one server, or Sentinel's master; nil on a cluster
	cluster *redis.ClusterClient // a cluster; nil otherwise
	maxAge  time.Duration
	log     *slog.Logger
	metrics *Metrics
	now     func() time.Time

	up    atomic.Bool   // every link up (see setLinks)
	epoch atomic.Uint64 // bumped by every flush

	mu    sync.RWMutex
	cards tracked[cardRef, *listprojector.Card]
	hides tracked[hideRegion, hideSet]

	// The tracking connections, by server address, and a nudge to read a
	// cluster's masters again.
	lmu    sync.Mutex
	links  map[string]*trackLink
	reload chan struct{}
}

// cardRef names a room's card.
type cardRef struct{ app, room string }

// hideSet is a region's filled hide set: room id -> expiry score (+inf:
// none). A room is hidden at t while its score is above t.
type hideSet map[string]float64

// hiddenAt returns which of ids the set hides at nowMs (nil for none).
func (h hideSet) hiddenAt(ids []string, nowMs int64) map[string]bool {
	var hidden map[string]bool
	now := float64(nowMs)
	for _, id := range ids {
		if h[id] > now {
			if hidden == nil {
				hidden = map[string]bool{}
			}
			hidden[id] = true
		}
	}
	return hidden
}

// newNearCache returns the near cache of c, or nil when it is off
// (NearCacheCards < 0) or there is no Redis.
func newNearCache(c *cache, cfg Config, log *slog.Logger, m *Metrics) *nearCache {
	if c == nil || cfg.NearCacheCards < 0 {
		return nil
	}
	n := &nearCache{c: c, maxAge: cfg.NearCacheMaxAge, log: log, metrics: m,
		now: time.Now, links: map[string]*trackLink{}, reload: make(chan struct{}, 1)}
	switch rdb := c.rdb.(type) {
	case *redis.Client:
		n.base = rdb
	case *redis.ClusterClient:
		n.cluster = rdb
	default:
		log.Info("near cache off: Redis is neither a server nor a cluster", "client", fmt.Sprintf("%T", c.rdb))
		return nil
	}
	n.cards.init(cfg.NearCacheCards)
	n.hides.init(maxNearHideSets)
	return n
}

// maxNearHideSets bounds the hide sets held (one per app and region read).
const maxNearHideSets = 10_000

// cardsAndHides is cache.cardsAndHides served from memory where it can:
// the cards and the region's hide set found here are not read again, the
// others are read from Redis in one round trip and kept. The barrier and
// the Redis read are each bounded by timeout: a barrier that does not
// complete in time (a busy process, a slow tracking connection) sends the
// request to Redis with a bound of its own, and is no Redis failure.
func (n *nearCache) cardsAndHides(ctx context.Context, timeout time.Duration, app string, region int64, ids []string, nowMs int64) (
	found map[string]*listprojector.Card, missing []string, hidden map[string]bool, hidesReady bool, err error) {
	if !n.up.Load() || !n.syncWithin(ctx, timeout) {
		return n.c.cardsAndHidesWithin(ctx, timeout, app, region, ids, nowMs)
	}
	now := n.now()
	found = make(map[string]*listprojector.Card, len(ids))
	var need []string
	var set hideSet
	haveSet := region < 0
	hr := hideRegion{app, region}
	n.mu.RLock()
	for _, id := range ids {
		if k, ok := n.cards.get(cardRef{app, id}, now, n.maxAge); ok {
			found[id] = k
		} else {
			need = append(need, id)
		}
	}
	if !haveSet {
		set, haveSet = n.hides.get(hr, now, n.maxAge)
	}
	n.mu.RUnlock()
	if len(need) == 0 && haveSet {
		n.metrics.nearHit()
		if region >= 0 {
			hidden, hidesReady = set.hiddenAt(ids, nowMs), true
		}
		return found, nil, hidden, hidesReady, nil
	}

	// Read the rest from Redis, and keep it unless an invalidation or a
	// flush came in between.
	wantSet := !haveSet
	n.mu.Lock()
	epoch := n.epoch.Load()
	for _, id := range need {
		n.cards.begin(cardRef{app, id})
	}
	if wantSet {
		n.hides.begin(hr)
	}
	n.mu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	got, gotMissing, readSet, ready, err := n.c.cardsAndHideSet(rctx, app, region, need, wantSet)
	cancel()
	n.mu.Lock()
	keep := err == nil && n.up.Load() && n.epoch.Load() == epoch
	for _, id := range need {
		k := got[id]
		n.cards.end(cardRef{app, id}, k, keep && k != nil, now)
	}
	if wantSet {
		n.hides.end(hr, readSet, keep && ready, now)
	}
	n.mu.Unlock()
	if err != nil {
		return map[string]*listprojector.Card{}, ids, nil, false, err
	}
	for id, k := range got {
		found[id] = k
	}
	if wantSet {
		set = readSet
		haveSet = ready
	}
	if region >= 0 && haveSet {
		hidden, hidesReady = set.hiddenAt(ids, nowMs), true
	}
	return found, gotMissing, hidden, hidesReady, nil
}

// dropHides forgets a region's hide set (a hide or unhide committed here).
func (n *nearCache) dropHides(app string, region int64) {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.hides.drop(hideRegion{app, region})
	n.mu.Unlock()
}

// invalidate drops the entry of a Redis key Redis reported changed.
func (n *nearCache) invalidate(key string) {
	if app, room, ok := n.c.keys.ParseCard(key); ok {
		n.mu.Lock()
		n.cards.drop(cardRef{app, room})
		n.mu.Unlock()
		return
	}
	if app, region, ok := n.c.keys.ParseHides(key); ok {
		n.dropHides(app, region)
	}
}

// flush drops every entry and starts a new epoch.
func (n *nearCache) flush() {
	n.mu.Lock()
	n.epoch.Add(1)
	n.cards.clear()
	n.hides.clear()
	n.mu.Unlock()
}

// tracked is a map of entries read from Redis, with the fills in flight
// and the keys invalidated during one. Its owner's lock guards it.
type tracked[K comparable, V any] struct {
	max      int
	m        map[K]nearEntry[V]
	inflight map[K]int
	dirty    map[K]struct{}
}

type nearEntry[V any] struct {
	v  V
	at time.Time
}

func (t *tracked[K, V]) init(max int) {
	t.max = max
	t.m = map[K]nearEntry[V]{}
	t.inflight = map[K]int{}
	t.dirty = map[K]struct{}{}
}

// get returns k's value if it is held and younger than maxAge at now.
func (t *tracked[K, V]) get(k K, now time.Time, maxAge time.Duration) (V, bool) {
	e, ok := t.m[k]
	if !ok || now.Sub(e.at) > maxAge {
		var zero V
		return zero, false
	}
	return e.v, true
}

// begin registers a fill of k.
func (t *tracked[K, V]) begin(k K) { t.inflight[k]++ }

// end ends a fill of k begun at begin, keeping v (read at at) when keep
// is true and k was not invalidated meanwhile. When the map is full an
// arbitrary entry makes room.
func (t *tracked[K, V]) end(k K, v V, keep bool, at time.Time) {
	if _, invalidated := t.dirty[k]; keep && !invalidated && t.max > 0 {
		if _, held := t.m[k]; !held && len(t.m) >= t.max {
			for old := range t.m {
				delete(t.m, old)
				break
			}
		}
		t.m[k] = nearEntry[V]{v: v, at: at}
	}
	if t.inflight[k]--; t.inflight[k] <= 0 {
		delete(t.inflight, k)
		delete(t.dirty, k)
	}
}

// drop forgets k, and marks the fills of k in flight.
func (t *tracked[K, V]) drop(k K) {
	delete(t.m, k)
	if t.inflight[k] > 0 {
		t.dirty[k] = struct{}{}
	}
}

// clear forgets every entry; fills in flight are voided by the epoch.
func (t *tracked[K, V]) clear() {
	clear(t.m)
}
