package outboxrelay

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"voiceroom/mysqldb"
)

// RestoreReport is what PrepareRestored did to the outbox of a database
// restored from a dump.
type RestoreReport struct {
	// InFlightRows are the rows of in-flight groups set back to pending:
	// the fast path that wrote them is gone with the deployment the dump
	// came from.
	InFlightRows int64 `json:"in_flight_rows"`
	// Republished are the published rows within the window before the
	// dump's newest row, set back to pending.
	Republished int64 `json:"republished_rows"`
	// Pending are the rows pending now, InFlightRows and Republished
	// included: a relay publishes them to the new ROOM_EVENTS once it runs.
	Pending int64 `json:"pending_rows"`
}

// restoreBatch bounds the rows one statement of PrepareRestored sets back
// to pending, so that a large window is many small transactions.
const restoreBatch = 5000

// PrepareRestored readies the outbox of a database restored from a dump
// for a deployment whose ROOM_EVENTS starts empty, before any relay runs
// on it. Pending rows stay pending (the relay publishes them). Rows of
// in-flight groups go back to pending now, as a relay would do once they
// are older than InFlightGrace. And the rows committed within window
// before the dump's newest row go back to pending too: they were in the
// old stream, but a sink may not have delivered them yet when the dump was
// taken; published again, each sink drops those it had (every sink
// de-duplicates by event_id), and delivers the others. window 0 republishes
// nothing. It is safe to repeat.
func PrepareRestored(ctx context.Context, db *sql.DB, window time.Duration) (RestoreReport, error) {
	var rep RestoreReport
	if window < 0 {
		return rep, fmt.Errorf("restore outbox: window %v: want >= 0", window)
	}
	err := mysqldb.Update(ctx, db, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE room_outbox o JOIN room_outbox_inflight f ON o.id BETWEEN f.first_id AND f.last_id
SET o.status = 'pending' WHERE o.status = 'published' AND o.published_at_ms IS NULL`)
		if err != nil {
			return err
		}
		if rep.InFlightRows, err = res.RowsAffected(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM room_outbox_inflight`)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("restore outbox: in-flight groups: %w", err)
	}
	if window > 0 {
		var newest sql.NullInt64
		if err := db.QueryRowContext(ctx, `SELECT MAX(created_at_ms) FROM room_outbox`).Scan(&newest); err != nil {
			return rep, fmt.Errorf("restore outbox: newest row: %w", err)
		}
		cutoff := newest.Int64 - window.Milliseconds()
		for newest.Valid {
			res, err := db.ExecContext(ctx, `UPDATE room_outbox SET status = 'pending', published_at_ms = NULL
WHERE status = 'published' AND created_at_ms >= ? ORDER BY id LIMIT ?`, cutoff, restoreBatch)
			if err != nil {
				return rep, fmt.Errorf("restore outbox: republish: %w", err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return rep, err
			}
			rep.Republished += n
			if n < restoreBatch {
				break
			}
		}
	}
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM room_outbox WHERE status = 'pending'`).Scan(&rep.Pending); err != nil {
		return rep, fmt.Errorf("restore outbox: count pending: %w", err)
	}
	return rep, nil
}
