package listprojector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/mysqldb"
)

// The Redis mirror of the applying hides (table room_region_hides, written
// by the operators' hide store in package roomlist), one per app and
// region:
//
//	room:hides:{app:<region>}      ZSET room_id -> expires_at_ms (+inf: no
//	                               expiry), plus the member HideReady
//	                               (+inf): the set was filled from MySQL
//	                               and may be read
//	room:hides:{app:<region>}:gen  a counter every hide and unhide bumps
//
// A reader takes a room as hidden at t while its score is above t, so an
// expiry applies without any write; a set without its HideReady member
// (never filled, deleted, evicted, Redis restarted) says nothing, and the
// reader reads MySQL instead (package roomlist, hideCache).
//
// # Why a fill never leaves a state MySQL no longer has
//
// MySQL is the truth. Writers never edit the set: after its MySQL commit, a
// hide or unhide bumps gen and deletes the set, in one MULTI
// (Mirror.InvalidateHides), before the admin call returns; so the next
// reader, in any process, finds no set and reads MySQL, which holds the
// change. Deleting is idempotent and commutes, so two writers racing in any
// order leave no stale member.
//
// A fill (a reader's repair, Mirror.FillHides, or the reconcile job) reads
// gen, then reads the region's applying hides from MySQL, then writes the
// set with a script that does nothing unless gen is unchanged. A writer
// bumps gen after its commit; if the fill's MySQL read missed that commit,
// the read began before the commit, hence after the fill read gen, and the
// bump comes after the commit: either it lands before the script (gen
// differs, the fill is dropped) or after it (the writer's delete removes
// the set the fill wrote). So a fill never leaves an older MySQL state
// behind a write. A failed fill only leaves the set missing.
//
// An invalidation is tried twice; if either attempt ran (a timed-out one
// may have), the set is gone and gen moved, as above. When both fail, the
// set may hold the state before the write until the next successful fill:
// the writer's process must not read it meanwhile (roomlist's stale marks
// say how), and the reconcile job replaces it within ReconcileEvery.
//
// The keys carry no TTL: the Redis must not evict keys without one
// (noeviction or a volatile-* policy), as for the list sets' ready keys.

// HideReady is the member that marks a filled hide set; no room id is empty.
const HideReady = ""

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
	key, gen := c.keys().Hides(app, region), c.keys().hidesGen(app, region)
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
	key, genKey := c.keys().Hides(app, region), c.keys().hidesGen(app, region)
	gen, err := c.rdb.Get(ctx, genKey).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("read hides gen of region %d of %s: %w", region, app, err)
	}
	hides, err := ApplyingHides(ctx, db, app, region, nil, nowMs)
	if err != nil {
		return false, err
	}
	args := make([]any, 0, 3+2*len(hides))
	args = append(args, gen, "+inf", HideReady)
	for id, exp := range hides {
		args = append(args, strconv.FormatFloat(hideScore(exp), 'f', -1, 64), id)
	}
	n, err := fillHidesScript.Run(ctx, c.rdb, []string{key, genKey}, args...).Int()
	if err != nil {
		return false, fmt.Errorf("fill hides of region %d of %s in redis: %w", region, app, err)
	}
	return n == 1, nil
}

// ApplyingHides returns app's hides of the region that apply at nowMs, by
// room id, with their expiry (0 none), for the rooms ids only unless ids
// is nil. A room hidden twice gets the latest expiry.
func ApplyingHides(ctx context.Context, db *sql.DB, app string, region int64, ids []string, nowMs int64) (map[string]int64, error) {
	q := `SELECT h.room_id, h.expires_at_ms FROM room_region_hides h WHERE h.app_code = ? AND h.visible_region_id = ?
	AND h.status = 'active' AND (h.expires_at_ms = 0 OR h.expires_at_ms > ?)`
	args := []any{app, region, nowMs}
	if ids != nil {
		if len(ids) == 0 {
			return map[string]int64{}, nil
		}
		q += ` AND h.room_id IN (` + mysqldb.Placeholders(len(ids)) + `)`
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
