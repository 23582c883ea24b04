package roomlist

import (
	"sync"
	"sync/atomic"
)

// hideCache is what this process knows of the Redis hide sets beyond
// Redis itself: the regions whose set it must not read.
//
// # Why a reader never sees a hide MySQL no longer has, or misses one it has
//
// MySQL is the truth. A list request reads the hides of its page's rooms
// with ZMSCORE in the same pipeline as their cards (one round trip), and
// takes a room as hidden when its score is above the request's clock, so
// an expiry applies without any write. When the set lacks its ready member
// (listprojector.HideReady: never filled, deleted, evicted, Redis
// restarted), when Redis fails, or when this process knows the set may be
// stale (below), the request reads its rooms' hides from MySQL instead, and
// the set is refilled in the background (listprojector.Mirror.FillHides).
// The writers' and fills' side of the argument, why a fill never leaves an
// older state behind a hide or unhide, is with the set's layout in
// listprojector (hides_redis.go).
//
// Failure orders of a write (MySQL has committed; the admin call succeeds
// in all of them, since MySQL is what counts):
//   - the invalidation succeeds: the set is gone, the next request of
//     every process reads MySQL.
//   - it fails (Redis down, timeout, connection lost): it is tried once
//     more. If either attempt ran (a timed-out one may have), the set is
//     gone and gen moved: as above.
//   - both fail: the region is marked stale in this process. Its list
//     requests read hides from MySQL and start a fill; the first fill that
//     began after the mark and succeeds clears it (it replaced the set
//     with MySQL's state after the commit). Another api process could, in
//     the meantime, read the old set, but only if Redis kept it while this
//     process could not reach Redis twice: that window lasts until the
//     first such fill here or the next reconcile pass
//     (listprojector.Config.ReconcileEvery).
//     When Redis was down for everyone, every process reads MySQL anyway
//     (the list's Redis backoff), and a restarted Redis without the set
//     misses.
//
// A reader's fill and every read are bounded by RedisTimeout (reads) or
// WriteTimeout (fills); a failed fill only leaves the set missing.
type hideCache struct {
	// stale holds the regions whose invalidation failed twice in this
	// process: hideRegion -> the mark's sequence. staleCount > 0 makes
	// readers look it up (the common case does not touch the map).
	stale      sync.Map
	staleCount atomic.Int64
	staleSeq   atomic.Uint64
	filling    sync.Map // hideRegion -> struct{}: fills in flight
}

type hideRegion struct {
	app    string
	region int64
}

// markStale records that the region's set may be stale in Redis.
func (h *hideCache) markStale(r hideRegion) {
	if _, loaded := h.stale.Swap(r, h.staleSeq.Add(1)); !loaded {
		h.staleCount.Add(1)
	}
}

// isStale reports whether the region is marked, and the mark's sequence.
func (h *hideCache) isStale(r hideRegion) (uint64, bool) {
	if h.staleCount.Load() == 0 {
		return 0, false
	}
	v, ok := h.stale.Load(r)
	if !ok {
		return 0, false
	}
	return v.(uint64), true
}

// clearStale removes the mark seq (a newer mark stays).
func (h *hideCache) clearStale(r hideRegion, seq uint64) {
	if h.stale.CompareAndDelete(r, seq) {
		h.staleCount.Add(-1)
	}
}
