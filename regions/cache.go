package regions

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"voiceroom/promreg"
)

// cacheKey identifies a user: user ids are only unique within an app.
type cacheKey struct {
	app  string
	user int64
}

type cacheEntry struct {
	profile Profile
	expires int64 // Unix nanoseconds
}

// cacheShard is one lock's worth of the cache. gen counts invalidations; a
// fill that started before one is dropped (see cache.put).
type cacheShard struct {
	mu      sync.RWMutex
	entries map[cacheKey]cacheEntry
	gen     uint64

	hits, misses, evictions atomic.Uint64
	// Keep neighbouring shards' locks and counters off this cache line.
	_ [64]byte
}

// cache is the in-process user → profile cache: bounded,
// sharded by user id so that parallel lookups rarely share a lock, and with a
// TTL that bounds how stale an entry can be when another process changed the
// user (see the package documentation).
type cache struct {
	shards   []cacheShard
	shift    uint // 64 - log2(len(shards)), for Fibonacci hashing
	perShard int
	ttl      time.Duration
}

// cacheShards is the shard count for caches large enough to use them all.
const cacheShards = 64

// evictSample is how many entries an insert into a full shard looks at to
// choose a victim: the first expired one, else the one filled longest ago.
const evictSample = 8

func newCache(size int, ttl time.Duration) *cache {
	n := cacheShards
	for n > 1 && size/n < evictSample {
		n /= 2
	}
	c := &cache{
		shards:   make([]cacheShard, n),
		shift:    uint(64 - bits.TrailingZeros(uint(n))),
		perShard: (size + n - 1) / n,
		ttl:      ttl,
	}
	for i := range c.shards {
		c.shards[i].entries = make(map[cacheKey]cacheEntry)
	}
	return c
}

func (c *cache) shard(k cacheKey) *cacheShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	// Fibonacci hashing spreads sequential user ids over the shards.
	return &c.shards[(uint64(k.user)*0x9E3779B97F4A7C15)>>c.shift]
}

// get returns a live entry.
func (c *cache) get(k cacheKey, now time.Time) (cacheEntry, bool) {
	s := c.shard(k)
	s.mu.RLock()
	e, ok := s.entries[k]
	s.mu.RUnlock()
	if !ok || now.UnixNano() >= e.expires {
		s.misses.Add(1)
		return cacheEntry{}, false
	}
	s.hits.Add(1)
	return e, true
}

// generation returns the token a fill passes to put: read it before reading
// the store.
func (c *cache) generation(k cacheKey) uint64 {
	s := c.shard(k)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gen
}

// put stores what a fill read from the store at time readAt. It is dropped
// when the shard saw an invalidation since gen was taken: the value may
// predate the change that invalidated it, and storing it would bring the old
// region back for a whole TTL.
func (c *cache) put(k cacheKey, p Profile, readAt time.Time, gen uint64) {
	s := c.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gen != gen {
		return
	}
	if _, ok := s.entries[k]; !ok && len(s.entries) >= c.perShard {
		s.evictOne(readAt.UnixNano())
	}
	s.entries[k] = cacheEntry{profile: p, expires: readAt.Add(c.ttl).UnixNano()}
}

// evictOne drops one entry of a full shard. Sampling a few entries (map
// iteration order is random) instead of keeping an LRU list keeps hits
// lock-free of writes: a hit only takes the read lock.
func (s *cacheShard) evictOne(now int64) {
	var victim cacheKey
	oldest := int64(1<<63 - 1)
	seen := 0
	for k, e := range s.entries {
		if e.expires <= now {
			victim = k
			break
		}
		if e.expires < oldest {
			victim, oldest = k, e.expires
		}
		if seen++; seen == evictSample {
			break
		}
	}
	delete(s.entries, victim)
	s.evictions.Add(1)
}

// invalidate drops a user's entry and fences off fills in flight.
func (c *cache) invalidate(k cacheKey) {
	s := c.shard(k)
	s.mu.Lock()
	delete(s.entries, k)
	s.gen++
	s.mu.Unlock()
}

// len returns the number of entries, live or expired.
func (c *cache) len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.RLock()
		n += len(s.entries)
		s.mu.RUnlock()
	}
	return n
}

func (c *cache) sum(counter func(*cacheShard) *atomic.Uint64) float64 {
	var n uint64
	for i := range c.shards {
		n += counter(&c.shards[i]).Load()
	}
	return float64(n)
}

// register makes and registers the cache's series on r. They are summed
// from the shards at scrape time, so a lookup never touches a shared
// counter.
func (c *cache) register(r *promreg.Registry) {
	sub := r.Sub("regions")
	sub.CounterFunc("cache_hits_total",
		"User profile and region lookups answered from the in-process cache.",
		func() float64 { return c.sum(func(s *cacheShard) *atomic.Uint64 { return &s.hits }) })
	sub.CounterFunc("cache_misses_total",
		"User profile and region lookups that read MySQL (absent or expired entry).",
		func() float64 { return c.sum(func(s *cacheShard) *atomic.Uint64 { return &s.misses }) })
	sub.CounterFunc("cache_evictions_total",
		"Entries dropped to keep the cache within VOICEROOM_REGIONS_CACHE_SIZE.",
		func() float64 { return c.sum(func(s *cacheShard) *atomic.Uint64 { return &s.evictions }) })
	sub.GaugeFunc("cache_entries",
		"Entries in the user profile cache, live or expired.",
		func() float64 { return float64(c.len()) })
}
