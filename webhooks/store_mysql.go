package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
)

// endpointColumns are read by scanRecord, in its order.
const endpointColumns = `endpoint_id, app_code, url, event_types, enabled, paused_reason, paused_at_ms,
	secret, old_secret, old_secret_until_ms, cursor_seq, start_seq, created_by, created_at_ms, updated_at_ms`

// record is an endpoint as stored: what admins see, its app, its sealed
// secrets, the sink's cursor and the admin's start (see doc.go).
type record struct {
	Endpoint
	appCode   string
	secret    []byte // sealed
	oldSecret []byte // sealed; nil when none
	cursor    sql.NullInt64
	// start is the stream sequence from which the endpoint must get every
	// event it wants, set at its creation or when a PATCH widened its
	// event types, until the sink has made sure of it; 0 when none.
	start uint64
}

type scanner interface{ Scan(dest ...any) error }

func scanRecord(s scanner) (record, error) {
	var r record
	var types string
	var start sql.NullInt64
	err := s.Scan(&r.ID, &r.appCode, &r.URL, &types, &r.Enabled, &r.PausedReason, &r.PausedAtMs,
		&r.secret, &r.oldSecret, &r.PreviousSecretUntilMs, &r.cursor, &start, &r.CreatedBy, &r.CreatedAtMs, &r.UpdatedAtMs)
	r.EventTypes = splitTypes(types)
	if start.Valid && start.Int64 > 0 {
		r.start = uint64(start.Int64)
	}
	return r, err
}

// public is what admins see: the rotation window only while it runs.
func (r record) public(nowMs int64) Endpoint {
	e := r.Endpoint
	if r.oldSecret == nil || e.PreviousSecretUntilMs <= nowMs {
		e.PreviousSecretUntilMs = 0
	}
	return e
}

// errNotFound is an unknown endpoint, or one of another app.
var errNotFound = apperr.New(apperr.NotFound, "webhook not found")

// storage passes nil and the kinds of errors through and makes anything
// else (MySQL failing) UNAVAILABLE.
func storage(err error) error {
	var ae *apperr.Error
	if err == nil || errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, "webhooks unavailable, try again", err)
}

// lockRecord reads app's endpoint id for update.
func lockRecord(ctx context.Context, tx *sql.Tx, appCode string, id int64) (record, error) {
	r, err := scanRecord(tx.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE endpoint_id = ? AND app_code = ? FOR UPDATE`, id, appCode))
	if errors.Is(err, sql.ErrNoRows) {
		return r, errNotFound
	}
	return r, err
}

// loadRecords reads every endpoint of every app (the sink's view).
func loadRecords(ctx context.Context, db *sql.DB) ([]record, error) {
	rows, err := db.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints ORDER BY endpoint_id`)
	if err != nil {
		return nil, fmt.Errorf("load webhook endpoints: %w", err)
	}
	defer rows.Close()
	var out []record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("load webhook endpoints: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load webhook endpoints: %w", err)
	}
	return out, nil
}

// storeCursor records the sequence an endpoint's backlog starts at, or
// NULL (cursor 0) when the durable holds all of it.
func storeCursor(ctx context.Context, db *sql.DB, id int64, cursor uint64) error {
	v := sql.NullInt64{Int64: int64(cursor), Valid: cursor > 0}
	return mysqldb.Retry(ctx, func() error {
		_, err := db.ExecContext(ctx, `UPDATE webhook_endpoints SET cursor_seq = ? WHERE endpoint_id = ?`, v, id)
		return err
	})
}

// storeCursorStarted records an endpoint's cursor (0: NULL) and, in the
// same statement, clears its start once the sink has made sure of it:
// only if the row still has that start and those event types, so that an
// admin's widening meanwhile (which may keep the start, see
// Endpoints.Update) is made sure of in turn.
func storeCursorStarted(ctx context.Context, db *sql.DB, id int64, cursor, start uint64, types []string) error {
	v := sql.NullInt64{Int64: int64(cursor), Valid: cursor > 0}
	return mysqldb.Retry(ctx, func() error {
		_, err := db.ExecContext(ctx, `UPDATE webhook_endpoints SET cursor_seq = ?,
			start_seq = IF(start_seq = ? AND event_types = ?, NULL, start_seq) WHERE endpoint_id = ?`,
			v, start, joinTypes(types), id)
		return err
	})
}

// storePause pauses an enabled endpoint with reason and records its
// cursor in one statement. paused is false when an admin paused (or
// deleted) it first; the cursor is then stored alone.
func storePause(ctx context.Context, db *sql.DB, id int64, reason string, nowMs int64, cursor uint64) (paused bool, err error) {
	v := sql.NullInt64{Int64: int64(cursor), Valid: cursor > 0}
	err = mysqldb.Retry(ctx, func() error {
		res, err := db.ExecContext(ctx, `UPDATE webhook_endpoints SET enabled = 0, paused_reason = ?, paused_at_ms = ?,
			cursor_seq = ?, updated_at_ms = ? WHERE endpoint_id = ? AND enabled = 1`, clip(reason, 512), nowMs, v, nowMs, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		paused = n == 1
		return err
	})
	if err == nil && !paused {
		err = storeCursor(ctx, db, id, cursor)
	}
	return paused, err
}

// clip cuts s to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// msOf is t in Unix milliseconds.
func msOf(t time.Time) int64 { return t.UnixMilli() }

// countLocked counts appCode's endpoints, locking them and the gap after
// them: a concurrent create waits.
func countLocked(ctx context.Context, tx *sql.Tx, appCode string) (int, error) {
	rows, err := tx.QueryContext(ctx, `SELECT endpoint_id FROM webhook_endpoints WHERE app_code = ? FOR UPDATE`, appCode)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}
