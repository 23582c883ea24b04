package voiceroom

import (
	"context"
	"fmt"
	"strconv"

	"voiceroom/mysqldb"
)

// OutboxRow is one row of room_outbox: one event of a committed room
// command. The rooms package writes it in the command's own transaction
// (pending, no retries); the outbox fast path and relay (package
// outboxrelay) publish its Envelope to ROOM_EVENTS with Nats-Msg-Id =
// EventID and mark it published. The row lives here because both sides,
// and the tests that stand in for either, must agree on it, and neither
// side may import the other.
type OutboxRow struct {
	// ID is assigned by MySQL on insert; relays claim rows in ID order.
	ID          int64
	AppCode     string
	EventID     string // the envelope's event_id, unique per row
	RoomID      string
	RoomVersion int64
	EventType   string
	// Envelope is the bus.Envelope JSON, published byte for byte. Its
	// event_id, app_code, room_id, event_type and room_version equal the
	// row's columns.
	Envelope []byte
	// Status is OutboxPending or OutboxPublished.
	Status string
	// RetryCount is the number of failed publishes so far.
	RetryCount int
	// CreatedAtMs is the commit time of the command.
	CreatedAtMs int64
}

// The values of room_outbox.status.
const (
	OutboxPending   = "pending"
	OutboxPublished = "published"
)

// OutboxInsertSQL begins the multi-row insert of new outbox rows: append
// OutboxInsertValues once per row (comma-separated) with the row's
// InsertArgs. New rows are pending with no retries.
const OutboxInsertSQL = `INSERT INTO room_outbox (app_code, event_id, room_id, room_version, event_type, envelope, status, retry_count, created_at_ms) VALUES `

// OutboxInsertValues is one row's tuple of OutboxInsertSQL.
const OutboxInsertValues = `(?, ?, ?, ?, ?, ?, 'pending', 0, ?)`

// InsertArgs returns the arguments of r's OutboxInsertValues tuple.
func (r OutboxRow) InsertArgs() []any {
	return []any{r.AppCode, r.EventID, r.RoomID, r.RoomVersion, r.EventType, r.Envelope, r.CreatedAtMs}
}

// OutboxInFlightValues is OutboxInsertValues for a group commit whose
// events the fast path takes: its rows are written 'published' (with no
// published_at_ms) together with one room_outbox_inflight row covering
// their ids (written right after them, see AddOutbox), and are pending
// for every reader while that row exists (OutboxInFlightCovers). See
// migration 00009.
const OutboxInFlightValues = `(?, ?, ?, ?, ?, ?, 'published', 0, ?)`

// OutboxMaxGroupRows bounds the rows of one in-flight group; a group
// commit with more writes them pending. It keeps OutboxInFlightCovers a
// short primary-key range read.
const OutboxMaxGroupRows = 10000

// OutboxInFlightCovers is an SQL condition true when the room_outbox row
// whose id is the expression idExpr lies in an in-flight group: a read of
// the in-flight groups that start at most OutboxMaxGroupRows before it.
// Use it on a few rows (an IN list, one room's newest); to count or list
// an app's in-flight rows join from the in-flight table
// (OutboxInFlightJoin).
func OutboxInFlightCovers(idExpr string) string {
	return `EXISTS (SELECT 1 FROM room_outbox_inflight f WHERE f.first_id BETWEEN ` + idExpr + ` - ` +
		strconv.Itoa(OutboxMaxGroupRows-1) + ` AND ` + idExpr + ` AND f.last_id >= ` + idExpr + `)`
}

// OutboxPendingCond is an SQL condition true for a pending room_outbox row
// (alias o): marked pending, or in an in-flight group. For a few rows:
// see OutboxInFlightCovers.
var OutboxPendingCond = `(o.status = 'pending' OR ` + OutboxInFlightCovers("o.id") + `)`

// OutboxInFlightJoin is the FROM clause of the rows of in-flight groups,
// room_outbox as o: it reads the small in-flight table and a primary-key
// range of room_outbox per group.
const OutboxInFlightJoin = `room_outbox_inflight f JOIN room_outbox o ON o.id BETWEEN f.first_id AND f.last_id`

// OutboxGroup is the id range of one group commit's outbox rows, written
// in flight (OutboxInFlightValues); the zero OutboxGroup means the rows
// were written pending, one by one.
type OutboxGroup struct {
	FirstID, LastID int64
}

// InFlight reports whether g names an in-flight group.
func (g OutboxGroup) InFlight() bool { return g.FirstID > 0 }

// Rows is the number of rows g covers.
func (g OutboxGroup) Rows() int { return int(g.LastID - g.FirstID + 1) }

// InsertOutbox writes rows into room_outbox with one multi-row INSERT in
// tx: pending, or with inFlight in flight, together with the
// room_outbox_inflight row covering them, which group returns (one
// INSERT takes consecutive ids from the first under
// innodb_autoinc_lock_mode 0 or 1; the outbox fast path checks the mode
// before it takes groups). More than OutboxMaxGroupRows rows, or none,
// are written pending and group is zero. Both statements go in one round
// trip (AddOutbox).
func InsertOutbox(ctx context.Context, tx mysqldb.Execer, rows []OutboxRow, inFlight bool, nowMs int64) (group OutboxGroup, err error) {
	var b mysqldb.Batch
	inFlight = AddOutbox(&b, rows, inFlight, nowMs)
	res, err := b.Exec(ctx, tx)
	if err != nil || !inFlight {
		return group, err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return group, err
	}
	return OutboxGroupOf(first, len(rows))
}

// AddOutbox appends to b the multi-row INSERT of rows into room_outbox:
// pending, or with inFlight in flight, followed by the
// room_outbox_inflight row covering them (InsertOutbox). It reports
// whether it wrote them in flight: then the in-flight row is b's last
// statement, and once b ran, OutboxGroupOf(the insert id that statement
// reported, len(rows)) names the group. None, or more than
// OutboxMaxGroupRows rows, are written pending (none adds nothing).
func AddOutbox(b *mysqldb.Batch, rows []OutboxRow, inFlight bool, nowMs int64) bool {
	if len(rows) == 0 {
		return false
	}
	inFlight = inFlight && len(rows) <= OutboxMaxGroupRows
	values := OutboxInsertValues
	if inFlight {
		values = OutboxInFlightValues
	}
	var tuples mysqldb.Rows
	for _, r := range rows {
		tuples.Add(values, r.InsertArgs()...)
	}
	b.AddRows(OutboxInsertSQL, &tuples, "")
	if inFlight {
		b.Add(outboxInFlightFollowSQL, len(rows)-1, nowMs)
	}
	return inFlight
}

// outboxInFlightFollowSQL records a group's rows as in flight (its
// room_outbox_inflight row) right after their INSERT, in the same
// session: LAST_INSERT_ID() is the first of their ids. Setting it to itself (LAST_INSERT_ID(expr)) makes
// the server report it as this statement's insert id, which is how the
// client learns the group. Arguments: the rows' count minus one,
// created_at_ms.
const outboxInFlightFollowSQL = `INSERT INTO room_outbox_inflight (first_id, last_id, created_at_ms)
	VALUES (LAST_INSERT_ID(LAST_INSERT_ID()), LAST_INSERT_ID() + ?, ?)`

// OutboxGroupOf is the in-flight group of n rows whose statements
// (AddOutbox) ended a batch, from the insert id its last statement
// reported.
func OutboxGroupOf(firstID int64, n int) (OutboxGroup, error) {
	if firstID <= 0 {
		return OutboxGroup{}, fmt.Errorf("outbox in-flight group: the server reported first id %d", firstID)
	}
	return OutboxGroup{FirstID: firstID, LastID: firstID + int64(n) - 1}, nil
}
