package regions

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

func TestCacheTTL(t *testing.T) {
	c := newCache(1000, time.Second)
	now := time.Unix(1000, 0)
	k := cacheKey{"app1", 42}
	c.put(k, Profile{DisplayUserID: "ana", RegionID: 7}, now, c.generation(k))
	if e, ok := c.get(k, now.Add(999*time.Millisecond)); !ok || e.profile.RegionID != 7 || e.profile.DisplayUserID != "ana" {
		t.Fatalf("live entry: %v %v", e, ok)
	}
	if _, ok := c.get(k, now.Add(time.Second)); ok {
		t.Fatal("entry served at its TTL")
	}
	if _, ok := c.get(cacheKey{"app2", 42}, now); ok {
		t.Fatal("another app's user shares the entry")
	}
}

func TestCacheIsBounded(t *testing.T) {
	for _, size := range []int{1, 10, 100, 1000, 5000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			c := newCache(size, time.Minute)
			now := time.Unix(1000, 0)
			for i := range int64(size * 5) {
				k := cacheKey{"app1", i + 1}
				c.put(k, Profile{DisplayUserID: "u", RegionID: 1}, now, c.generation(k))
			}
			// Shards round their share up, so allow one per shard above size.
			if n := c.len(); n > size+len(c.shards) || n < size/2 {
				t.Fatalf("%d entries for size %d (%d shards)", n, size, len(c.shards))
			}
			if c.sum(func(s *cacheShard) *atomic.Uint64 { return &s.evictions }) == 0 {
				t.Fatal("no eviction counted")
			}
		})
	}
}

func TestCacheEvictsExpiredFirst(t *testing.T) {
	c := newCache(8, time.Second) // one shard of 8
	if len(c.shards) != 1 {
		t.Fatalf("%d shards", len(c.shards))
	}
	old := time.Unix(1000, 0)
	c.put(cacheKey{"a", 1}, Profile{DisplayUserID: "old", RegionID: 1}, old, c.generation(cacheKey{"a", 1}))
	now := old.Add(10 * time.Second)
	for i := int64(2); i <= 8; i++ {
		c.put(cacheKey{"a", i}, Profile{DisplayUserID: "new", RegionID: 1}, now, c.generation(cacheKey{"a", i}))
	}
	c.put(cacheKey{"a", 9}, Profile{DisplayUserID: "new", RegionID: 1}, now, c.generation(cacheKey{"a", 9}))
	for i := int64(2); i <= 9; i++ {
		if _, ok := c.get(cacheKey{"a", i}, now); !ok {
			t.Fatalf("live entry %d evicted while an expired one was there", i)
		}
	}
}

// TestCacheFillRace: a lookup that read the store before a change committed
// must not store its value after the change invalidated the key.
func TestCacheFillRace(t *testing.T) {
	c := newCache(100, time.Minute)
	now := time.Unix(1000, 0)
	k := cacheKey{"app1", 42}
	gen := c.generation(k) // the lookup starts, reads region 1 from MySQL...
	c.invalidate(k)        // ...a change to region 2 commits and invalidates...
	c.put(k, Profile{DisplayUserID: "ana", RegionID: 1}, now, gen)
	if e, ok := c.get(k, now); ok {
		t.Fatalf("stale fill stored: %+v", e)
	}
	gen = c.generation(k)
	c.put(k, Profile{DisplayUserID: "ana", RegionID: 2}, now, gen)
	if e, ok := c.get(k, now); !ok || e.profile.RegionID != 2 {
		t.Fatalf("fresh fill not stored: %+v %v", e, ok)
	}
}
