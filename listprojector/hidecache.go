package listprojector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis mirror of the applying hides, one per app and region:
//
//	room:hides:{app}:<region>      ZSET room_id -> expires_at_ms (+inf: no
//	                               expiry), plus the member "" (+inf): the
//	                               set was filled from MySQL and may be read
//	room:hides:{app}:<region>:gen  a counter every hide and unhide bumps
//
// # Why a reader never sees a hide MySQL no longer has, or misses one it has
//
// MySQL is the truth. A list request reads the hides of its page's rooms
// with ZMSCORE in the same pipeline as their cards (one round trip), and
// takes a room as hidden when its score is above the request's clock, so
// an expiry applies without any write. When the set lacks its "" member
// (never filled, deleted, evicted, Redis restarted), when Redis fails, or
// when this process knows the set may be stale (below), the request reads
// its rooms' hides from MySQL instead, and the set is refilled in the
// background.
//
// Writers never edit the set: after its MySQL commit, a hide or unhide
// bumps gen and deletes the set, in one MULTI (invalidate), before the
// admin call returns; so the next list request, in any process, finds no
// set and reads MySQL, which holds the change. Deleting is idempotent and
// commutes, so two writers racing in any order leave no stale member.
//
// A fill (a reader's repair, or the reconcile job) reads gen, then reads
// the region's applying hides from MySQL, then writes the set with a
// script that does nothing unless gen is unchanged. A writer bumps gen
// after its commit; if the fill's MySQL read missed that commit, the read
// began before the commit, hence after the fill read gen, and the bump
// comes after the commit: either it lands before the script (gen differs,
// the fill is dropped) or after it (the writer's delete removes the set the
// fill wrote). So a fill never leaves an older MySQL state behind a write.
//
// Failure orders of a write (MySQL has committed; the admin call succeeds
// in all of them, since MySQL is what counts):
//   - invalidate succeeds: as above.
//   - invalidate fails (Redis down, timeout, connection lost): it is
//     tried once more. If either attempt ran (a timed-out one may have),
//     the set is gone and gen moved: as above.
//   - both fail: the region is marked stale in this process. Its list
//     requests read hides from MySQL and start a fill; the first fill that
//     began after the mark and succeeds clears it (it replaced the set
//     with MySQL's state after the commit). Another api process could, in
//     the meantime, read the old set, but only if Redis kept it while this
//     process could not reach Redis twice: that window lasts until the
//     first such fill here or the next reconcile pass (ReconcileEvery).
//     When Redis was down for everyone, every process reads MySQL anyway
//     (the list's Redis backoff), and a restarted Redis without the set
//     misses.
//
// A reader's fill and every read are bounded by RedisTimeout (reads) or
// WriteTimeout (fills); a failed fill only leaves the set missing. The
// keys carry no TTL: the Redis must not evict keys without one (noeviction
// or a volatile-* policy), as for the list sets' ready keys.
type hideCache struct {
	c *cache // nil: no Redis

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

// hideReady is the member that marks a filled set; no room id is empty.
const hideReady = ""

func (c *cache) hideKey(app string, region int64) string {
	return c.prefix + "room:hides:{" + app + "}:" + strconv.FormatInt(region, 10)
}

func (c *cache) hideGenKey(app string, region int64) string {
	return c.hideKey(app, region) + ":gen"
}

// hideScore is a hide's score: its expiry, or +inf for none.
func hideScore(expiresAtMs int64) float64 {
	if expiresAtMs == 0 {
		return math.Inf(1)
	}
	return float64(expiresAtMs)
}

// invalidateHides drops a region's set after a hide or unhide committed:
// gen bumped and the set deleted, atomically, in at most two attempts of
// timeout each. It returns the errors when both failed.
func (c *cache) invalidateHides(ctx context.Context, app string, region int64, timeout time.Duration) error {
	key, gen := c.hideKey(app, region), c.hideGenKey(app, region)
	var errs []error
	for range 2 {
		actx, cancel := context.WithTimeout(ctx, timeout)
		_, err := c.rdb.TxPipelined(actx, func(p redis.Pipeliner) error {
			p.Incr(actx, gen)
			p.Del(actx, key)
			return nil
		})
		cancel()
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("invalidate hides of region %d of %s in redis: %w", region, app, errors.Join(errs...))
}

// fillHidesScript writes a region's set (KEYS[1]) only while its gen
// (KEYS[2]) still is ARGV[1] ("" for none); ARGV[2..] are score, member
// pairs, the ready member included.
var fillHidesScript = redis.NewScript(`
if (redis.call('GET', KEYS[2]) or '') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
for i = 2, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i+1]) end
return 1`)

// fillHides replaces a region's set with MySQL's applying hides at nowMs,
// unless a hide or unhide bumped gen meanwhile. filled is false when it
// was dropped so.
func fillHides(ctx context.Context, db *sql.DB, c *cache, app string, region, nowMs int64) (filled bool, err error) {
	return fillHidesAround(ctx, db, c, app, region, nowMs, nil)
}

// fillHidesAround is fillHides, calling between (when not nil) after the
// MySQL read: tests put a write there.
func fillHidesAround(ctx context.Context, db *sql.DB, c *cache, app string, region, nowMs int64, between func()) (filled bool, err error) {
	gen, err := c.rdb.Get(ctx, c.hideGenKey(app, region)).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("read hides gen of region %d of %s: %w", region, app, err)
	}
	hides, err := applyingHides(ctx, db, app, region, nil, nowMs)
	if err != nil {
		return false, err
	}
	if between != nil {
		between()
	}
	args := make([]any, 0, 3+2*len(hides))
	args = append(args, gen, "+inf", hideReady)
	for id, exp := range hides {
		args = append(args, strconv.FormatFloat(hideScore(exp), 'f', -1, 64), id)
	}
	n, err := fillHidesScript.Run(ctx, c.rdb, []string{c.hideKey(app, region), c.hideGenKey(app, region)}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("fill hides of region %d of %s in redis: %w", region, app, err)
	}
	return n == 1, nil
}

// applyingHides returns app's hides of the region that apply at nowMs, by
// room id, with their expiry (0 none), for the rooms ids only unless ids
// is nil. A room hidden twice gets the latest expiry.
func applyingHides(ctx context.Context, db *sql.DB, app string, region int64, ids []string, nowMs int64) (map[string]int64, error) {
	q := `SELECT h.room_id, h.expires_at_ms FROM room_region_hides h WHERE h.app_code = ? AND h.visible_region_id = ?
	AND h.status = 'active' AND (h.expires_at_ms = 0 OR h.expires_at_ms > ?)`
	args := []any{app, region, nowMs}
	if ids != nil {
		if len(ids) == 0 {
			return map[string]int64{}, nil
		}
		q += ` AND h.room_id IN (` + placeholders(len(ids)) + `)`
		for _, id := range ids {
			args = append(args, id)
		}
	}
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read hides: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var exp int64
		if err := rows.Scan(&id, &exp); err != nil {
			return nil, fmt.Errorf("read hides: %w", err)
		}
		if old, ok := out[id]; !ok || (old != 0 && (exp == 0 || exp > old)) {
			out[id] = exp
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read hides: %w", err)
	}
	return out, nil
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
