package outboxrelay

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"voiceroom/mysqldb"
)

// The relay's and the fast path's SQL. Every statement that locks rows runs
// in a READ COMMITTED transaction: under REPEATABLE READ a locking scan of
// idx_room_outbox_pending would also lock the gap after the last pending
// row, and every command inserting its outbox row there would wait for the
// relay's batch.
var txOptions = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// claimSQL takes the oldest pending rows after a cursor. FORCE INDEX keeps
// the plan on idx_room_outbox_pending even when most of the table is
// published and the optimizer would rather walk the primary key in id
// order. SKIP LOCKED passes over rows another relay (or the fast path's
// mark) holds, so no two relays publish a row at the same moment.
const claimSQL = `SELECT id, app_code, event_id, room_id, room_version, event_type, envelope, retry_count, created_at_ms
FROM room_outbox FORCE INDEX (idx_room_outbox_pending)
WHERE status = 'pending' AND id > ?
ORDER BY id
LIMIT ?
FOR UPDATE SKIP LOCKED`

// statements prepares each statement once per pool (and, inside
// database/sql, once per connection) instead of once per call: the driver
// otherwise prepares, executes and closes every statement that has
// arguments, a round trip more per statement. Statements with IN lists
// have a fixed number of placeholders, and shorter lists are padded by
// repeating their last value, so one statement serves every batch.
//
// Statements are prepared on the pool only outside transactions (warm,
// prepared): preparing on the pool needs a second connection, and
// transactions holding every connection while each waits for one more
// would wait for ever. Inside a transaction, get binds a pool statement to
// the transaction's connection, or prepares one there alone.
type statements struct {
	db *sql.DB
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func newStatements(db *sql.DB) *statements {
	return &statements{db: db, m: make(map[string]*sql.Stmt)}
}

// get returns query prepared on tx's connection, never taking another
// connection from the pool. The statement ends with tx.
func (s *statements) get(ctx context.Context, tx *sql.Tx, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	st, ok := s.m[query]
	s.mu.Unlock()
	if ok {
		return tx.StmtContext(ctx, st), nil
	}
	// Not warmed yet (MySQL was unreachable then): this transaction only.
	st, err := tx.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	return st, nil
}

// warm prepares queries on the pool that are not yet, so that get finds
// them. Call it outside any transaction. A failure is left for the next
// call; get copes meanwhile.
func (s *statements) warm(ctx context.Context, queries ...string) {
	for _, q := range queries {
		if _, err := s.prepared(ctx, q); err != nil {
			return
		}
	}
}

// prepared returns query prepared on the pool. Call it outside any
// transaction.
func (s *statements) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	st, ok := s.m[query]
	s.mu.Unlock()
	if !ok {
		var err error
		if st, err = s.db.PrepareContext(ctx, query); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		s.mu.Lock()
		if prev, ok := s.m[query]; ok {
			st.Close()
			st = prev
		} else {
			s.m[query] = st
		}
		s.mu.Unlock()
	}
	return st, nil
}

// close releases the prepared statements.
func (s *statements) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for q, st := range s.m {
		st.Close()
		delete(s.m, q)
	}
}

// sized returns how many placeholders a statement for n values is
// prepared with: the next power of four, at most limit. A few statements
// (six for 500) then serve every size, and a short list is not padded to
// the batch size: each placeholder is a parameter MySQL receives and
// evaluates, and releasing one in-flight group had sent 500.
func sized(n, limit int) int {
	k := 1
	for k < n {
		k *= sizeStep
	}
	return min(k, limit)
}

// sizeStep is the ratio between two statement sizes sized returns.
const sizeStep = 4

// ofEverySize returns stmt for each size sized can return up to limit,
// for warm.
func ofEverySize(limit int, stmt func(n int) string) []string {
	var queries []string
	for n := 1; ; n *= sizeStep {
		queries = append(queries, stmt(min(n, limit)))
		if n >= limit {
			return queries
		}
	}
}

// sizedArgs returns the placeholder count of a statement for vals
// (sized) and its arguments: lead, then vals extended to n by repeating
// the last value. vals must hold 1..limit values. Build the statement
// from n: the two always agree.
func sizedArgs[T any](vals []T, limit int, lead ...any) (n int, args []any) {
	n = sized(len(vals), limit)
	args = make([]any, len(lead), len(lead)+n)
	copy(args, lead)
	for i := range n {
		args = append(args, vals[min(i, len(vals)-1)])
	}
	return n, args
}

// chunks calls fn with consecutive slices of vals of at most n values.
func chunks[T any](vals []T, n int, fn func([]T) error) error {
	for lo := 0; lo < len(vals); lo += n {
		if err := fn(vals[lo:min(lo+n, len(vals))]); err != nil {
			return err
		}
	}
	return nil
}

// markPublishedSQL marks up to n claimed rows published.
func markPublishedSQL(n int) string {
	return `UPDATE room_outbox SET status = 'published', published_at_ms = ?, last_error = NULL
WHERE status = 'pending' AND id IN (` + mysqldb.Placeholders(n) + `)`
}

// markPublishedRangeSQL marks a contiguous run of claimed ids published:
// under a backlog a batch's ids usually are contiguous (AUTO_INCREMENT, and
// nothing else can hold an id inside the run), and one range is less work
// for the server than a list of single ids.
const markPublishedRangeSQL = `UPDATE room_outbox SET status = 'published', published_at_ms = ?, last_error = NULL
WHERE status = 'pending' AND id BETWEEN ? AND ?`

// contiguous reports whether ids are ascending consecutive integers.
func contiguous(ids []int64) bool {
	return len(ids) > 0 && ids[len(ids)-1]-ids[0] == int64(len(ids)-1) && slices.IsSorted(ids)
}

// markFailedSQL records one failed attempt on up to n claimed rows.
func markFailedSQL(n int) string {
	return `UPDATE room_outbox SET retry_count = retry_count + 1, last_error = ?
WHERE status = 'pending' AND id IN (` + mysqldb.Placeholders(n) + `)`
}

// lockPendingByEventSQL locks the still-pending rows of up to n event_ids,
// skipping rows a relay holds: that relay publishes and marks them itself.
func lockPendingByEventSQL(n int) string {
	return `SELECT id FROM room_outbox WHERE event_id IN (` + mysqldb.Placeholders(n) + `) AND status = 'pending' FOR UPDATE SKIP LOCKED`
}

// pendingEventsSQL returns which of up to n event_ids are still pending
// (marked so, or in an in-flight group).
func pendingEventsSQL(n int) string {
	return `SELECT o.event_id FROM room_outbox o WHERE o.event_id IN (` + mysqldb.Placeholders(n) + `) AND ` + PendingCond
}

// releaseInFlightSQL deletes the in-flight rows of up to n groups (by
// first_id): their outbox rows are published.
func releaseInFlightSQL(n int) string {
	return `DELETE FROM room_outbox_inflight WHERE first_id IN (` + mysqldb.Placeholders(n) + `)`
}

// rependRowsSQL sets up to n rows of in-flight groups back to pending,
// by id, unless a relay has published them since.
func rependRowsSQL(n int) string {
	return `UPDATE room_outbox SET status = 'pending'
WHERE id IN (` + mysqldb.Placeholders(n) + `) AND status = 'published' AND published_at_ms IS NULL`
}

// rependInFlightSQL sets the rows of one in-flight group (first_id,
// last_id) that no relay has published since back to pending: a relay's
// mark sets published_at_ms, the in-flight write leaves it NULL.
const rependInFlightSQL = `UPDATE room_outbox SET status = 'pending'
WHERE id BETWEEN ? AND ? AND status = 'published' AND published_at_ms IS NULL`

// publishedWindowSQL reads the next window of published rows in id order
// through idx_room_outbox_pending (status, id). Retention walks published
// rows this way instead of through an index on published_at_ms: that index
// would cost every command's insert and every mark about a fifth more MySQL
// time (measured), while rows are published in nearly id order anyway.
const publishedWindowSQL = `SELECT id, COALESCE(published_at_ms, created_at_ms) FROM room_outbox FORCE INDEX (idx_room_outbox_pending)
WHERE status = 'published' AND id > ?
ORDER BY id
LIMIT ?`

// deletePublishedSQL deletes up to n of the rows publishedWindowSQL found;
// published is final (the status check only makes that explicit), except
// for a row of an in-flight group, which is pending and never deleted.
// A fast-path row has no published_at_ms: its age is its created_at_ms.
func deletePublishedSQL(n int) string {
	return `DELETE FROM room_outbox WHERE status = 'published' AND id IN (` + mysqldb.Placeholders(n) + `) AND NOT ` +
		InFlightCovers("room_outbox.id")
}

// pendingStatsSQL counts the pending rows of every app (marked pending,
// or in an in-flight group) and finds when the oldest was created: an
// index-only walk of idx_room_outbox_pending plus one row, and the small
// in-flight table.
const pendingStatsSQL = `SELECT
  (SELECT COUNT(*) FROM room_outbox FORCE INDEX (idx_room_outbox_pending) WHERE status = 'pending'),
  COALESCE((SELECT created_at_ms FROM room_outbox FORCE INDEX (idx_room_outbox_pending) WHERE status = 'pending' ORDER BY id LIMIT 1), 0),
  (SELECT COALESCE(SUM(last_id - first_id + 1), 0) FROM room_outbox_inflight),
  COALESCE((SELECT MIN(created_at_ms) FROM room_outbox_inflight), 0)`

// unsentRoomsChunk is how many rooms one unsentRowsSQL statement reads.
const unsentRoomsChunk = 100

// unsentRowsSQL lists the rows of up to n rooms, each within a range of
// room_versions, that are not in the stream yet: marked pending, or in an
// in-flight group. Its arguments are app_code, room_id and the lowest and
// highest room_version, per room: a short range of idx_room_outbox_room
// each.
func unsentRowsSQL(n int) string {
	const room = "(o.app_code = ? AND o.room_id = ? AND o.room_version BETWEEN ? AND ?)"
	return "SELECT o.app_code, o.room_id, o.id, o.status FROM room_outbox o FORCE INDEX (idx_room_outbox_room) WHERE (" +
		strings.TrimSuffix(strings.Repeat(room+" OR ", n), " OR ") + ") AND " + PendingCond
}

// staleInFlightSQL locks in-flight groups older than a cutoff: a fast
// path that did not settle them (its process stopped, or its release
// failed).
const staleInFlightSQL = `SELECT first_id, last_id FROM room_outbox_inflight WHERE created_at_ms < ?
ORDER BY first_id LIMIT 1000 FOR UPDATE SKIP LOCKED`

// rollback ends tx, ignoring the error: it only fails when the
// transaction is already over, or the connection is gone, which rolls
// back too.
func rollback(tx *sql.Tx) { _ = tx.Rollback() }
