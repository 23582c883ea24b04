// Package rowlease keeps a lease in a MySQL row: a column naming the
// process that holds it and a column with the lease's end (Unix ms). The
// workers that any number of processes run beside each other (activity
// settlement and read backs, the PK clock) each take a row's lease before
// they work on the row, renew it as they go, and fence their writes with
// it: one process at a time advances a row, and one that stalls past its
// lease loses it to the next.
//
// Taking is one UPDATE: the row is taken when it is free (no holder), its
// lease lapsed, or it is already the taker's (a renewal). The end only
// ever grows (GREATEST with end+1): two takers whose clocks differ never
// move it back, and a renewal always changes the row, so MySQL reports it
// as affected.
package rowlease

import (
	"context"
	"fmt"
	"time"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
)

// Columns names a lease's table and columns. They are the caller's
// constants, never input: they are written into the statement.
type Columns struct {
	Table string // the table, "activities"
	Key   string // its key column, "activity_id"
	Owner string // the holder's name ('' when free), "settle_owner"
	Until string // the lease's end in Unix ms, "settle_lease_until_ms"
	// Where limits the rows whose lease may be taken: an SQL condition on
	// the row, its arguments given to Take ("" for none).
	Where string
}

// Holder takes and renews leases of one kind for one process.
type Holder struct {
	name string
	ttl  time.Duration
	now  func() time.Time
	take string // the UPDATE
}

// NewHolder returns the holder named name (the process, as Owner stores
// it) of leases in cols that last ttl from each take, by the clock now.
func NewHolder(cols Columns, name string, ttl time.Duration, now func() time.Time) *Holder {
	take := fmt.Sprintf("UPDATE %s SET %s = ?, %s = GREATEST(?, %s + 1) WHERE %s = ? AND (%s = ? OR %s = '' OR %s < ?)",
		cols.Table, cols.Owner, cols.Until, cols.Until, cols.Key, cols.Owner, cols.Owner, cols.Until)
	if cols.Where != "" {
		take += " AND (" + cols.Where + ")"
	}
	return &Holder{name: name, ttl: ttl, now: now, take: take}
}

// Take takes (or renews) the lease of the row whose key is key, when it
// is free, lapsed or this holder's and the row matches Columns.Where
// (with args). It reports whether this holder holds it now.
func (h *Holder) Take(ctx context.Context, db mysqldb.Execer, key any, args ...any) (bool, error) {
	now := h.now().UnixMilli()
	res, err := db.ExecContext(ctx, h.take, append([]any{h.name, now + h.ttl.Milliseconds(), key, h.name, now}, args...)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// Holds reports whether a row whose Owner and Until columns read owner
// and untilMs is this holder's now: the fence a transaction checks on
// the row it locked before it writes under the lease.
func (h *Holder) Holds(owner string, untilMs int64) bool {
	return owner == h.name && untilMs >= h.now().UnixMilli()
}

// CheckConfig checks the settings every worker that keeps row leases
// has: its owner name (1..64 characters, as the Owner columns hold), the
// lease (1s..1h) and the tick it works and renews on (positive, at most
// half the lease, so that a holder renews at least twice a lease). what
// names the worker in the error, an *apperr.ConfigError naming the
// field (Owner, Lease or Tick).
func CheckConfig(what, owner string, lease, tick time.Duration) error {
	switch {
	case owner == "" || len(owner) > 64:
		return apperr.BadConfig("Owner", "%s: owner %q: must be 1..64 characters", what, owner)
	case lease < time.Second || lease > time.Hour:
		return apperr.BadConfig("Lease", "%s: lease %s: must be 1s..1h", what, lease)
	case tick <= 0 || tick > lease/2:
		return apperr.BadConfig("Tick", "%s: tick %s: must be positive and at most half the lease (%s)", what, tick, lease)
	}
	return nil
}
