package outboxrelay

import (
	"context"
	"fmt"
	"strconv"

	"voiceroom"
	"voiceroom/mysqldb"
)

// The SQL of room_outbox: how a room command's rows are written (the rooms
// package calls AddRows in its own transaction; tests and the load
// generator call InsertRows) and which rows every reader counts as pending.
// The row itself is voiceroom.OutboxRow.

// insertSQL begins the multi-row insert of new outbox rows: insertValues
// (or inFlightValues) once per row, comma-separated, with insertArgs.
const insertSQL = `INSERT INTO room_outbox (app_code, event_id, room_id, room_version, event_type, envelope, status, retry_count, created_at_ms) VALUES `

// insertValues is one pending row's tuple of insertSQL: no retries yet.
const insertValues = `(?, ?, ?, ?, ?, ?, 'pending', 0, ?)`

// inFlightValues is insertValues for a group commit whose events the fast
// path takes: its rows are written 'published' (with no published_at_ms)
// together with one room_outbox_inflight row covering their ids (written
// right after them, see AddRows), and are pending for every reader while
// that row exists (InFlightCovers). See migration 00009.
const inFlightValues = `(?, ?, ?, ?, ?, ?, 'published', 0, ?)`

// insertArgs returns the arguments of r's insertValues tuple.
func insertArgs(r voiceroom.OutboxRow) []any {
	return []any{r.AppCode, r.EventID, r.RoomID, r.RoomVersion, r.EventType, r.Envelope, r.CreatedAtMs}
}

// MaxGroupRows bounds the rows of one in-flight group; a group commit with
// more writes them pending. It keeps InFlightCovers a short primary-key
// range read.
const MaxGroupRows = 10000

// InFlightCovers is an SQL condition true when the room_outbox row whose
// id is the expression idExpr lies in an in-flight group: a read of the
// in-flight groups that start at most MaxGroupRows before it. Use it on a
// few rows (an IN list, one room's newest); to count or list an app's
// in-flight rows join from the in-flight table (InFlightJoin).
func InFlightCovers(idExpr string) string {
	return `EXISTS (SELECT 1 FROM room_outbox_inflight f WHERE f.first_id BETWEEN ` + idExpr + ` - ` +
		strconv.Itoa(MaxGroupRows-1) + ` AND ` + idExpr + ` AND f.last_id >= ` + idExpr + `)`
}

// PendingCond is an SQL condition true for a pending room_outbox row
// (alias o): marked pending, or in an in-flight group. For a few rows:
// see InFlightCovers.
var PendingCond = `(o.status = 'pending' OR ` + InFlightCovers("o.id") + `)`

// InFlightJoin is the FROM clause of the rows of in-flight groups,
// room_outbox as o: it reads the small in-flight table and a primary-key
// range of room_outbox per group.
const InFlightJoin = `room_outbox_inflight f JOIN room_outbox o ON o.id BETWEEN f.first_id AND f.last_id`

// InsertRows writes rows into room_outbox with one multi-row INSERT in
// tx: pending, or with inFlight in flight, together with the
// room_outbox_inflight row covering them, which group returns (one
// INSERT takes consecutive ids from the first under
// innodb_autoinc_lock_mode 0 or 1; the fast path checks the mode before
// it takes groups). More than MaxGroupRows rows, or none, are written
// pending and group is zero. Both statements go in one round trip
// (AddRows).
func InsertRows(ctx context.Context, tx mysqldb.Execer, rows []voiceroom.OutboxRow, inFlight bool, nowMs int64) (group voiceroom.OutboxGroup, err error) {
	var b mysqldb.Batch
	inFlight = AddRows(&b, rows, inFlight, nowMs)
	res, err := b.Exec(ctx, tx)
	if err != nil || !inFlight {
		return group, err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return group, err
	}
	return GroupOf(first, len(rows))
}

// AddRows appends to b the multi-row INSERT of rows into room_outbox:
// pending, or with inFlight in flight, followed by the
// room_outbox_inflight row covering them (InsertRows). It reports whether
// it wrote them in flight: then the in-flight row is b's last statement,
// and once b ran, GroupOf(the insert id that statement reported,
// len(rows)) names the group. None, or more than MaxGroupRows rows, are
// written pending (none adds nothing).
func AddRows(b *mysqldb.Batch, rows []voiceroom.OutboxRow, inFlight bool, nowMs int64) bool {
	if len(rows) == 0 {
		return false
	}
	inFlight = inFlight && len(rows) <= MaxGroupRows
	values := insertValues
	if inFlight {
		values = inFlightValues
	}
	var tuples mysqldb.Rows
	for _, r := range rows {
		tuples.Add(values, insertArgs(r)...)
	}
	b.AddRows(insertSQL, &tuples, "")
	if inFlight {
		b.Add(inFlightFollowSQL, len(rows)-1, nowMs)
	}
	return inFlight
}

// inFlightFollowSQL records a group's rows as in flight (its
// room_outbox_inflight row) right after their INSERT, in the same
// session: LAST_INSERT_ID() is the first of their ids. Setting it to
// itself (LAST_INSERT_ID(expr)) makes the server report it as this
// statement's insert id, which is how the client learns the group.
// Arguments: the rows' count minus one, created_at_ms.
const inFlightFollowSQL = `INSERT INTO room_outbox_inflight (first_id, last_id, created_at_ms)
	VALUES (LAST_INSERT_ID(LAST_INSERT_ID()), LAST_INSERT_ID() + ?, ?)`

// GroupOf is the in-flight group of n rows whose statements (AddRows)
// ended a batch, from the insert id its last statement reported.
func GroupOf(firstID int64, n int) (voiceroom.OutboxGroup, error) {
	if firstID <= 0 {
		return voiceroom.OutboxGroup{}, fmt.Errorf("outbox in-flight group: the server reported first id %d", firstID)
	}
	return voiceroom.OutboxGroup{FirstID: firstID, LastID: firstID + int64(n) - 1}, nil
}
