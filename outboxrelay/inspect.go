package outboxrelay

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// Inspector reads the outbox for operators (GET /admin/v1/outbox). Every
// figure is scoped to one app: the outbox is shared by all apps, but an
// admin token speaks for one. Relay-wide figures are the metrics.
type Inspector struct {
	db  *sql.DB
	now func() time.Time
}

// NewInspector returns an Inspector on db; now nil means time.Now.
func NewInspector(db *sql.DB, now func() time.Time) *Inspector {
	if now == nil {
		now = time.Now
	}
	return &Inspector{db: db, now: now}
}

// Limits of a Report, so that a large backlog never makes it slow: rows
// are looked for among the oldest scanLimit pending rows of the app, which
// is where rows that keep failing sit.
const (
	countLimit   = 100000
	scanLimit    = 100000
	topRetries   = 20
	badRowsLimit = 50
)

// Report is the outbox of one app as an operator sees it.
type Report struct {
	AppCode string `json:"app_code"`
	// PendingCount is the number of pending rows, at most 100000 (then
	// PendingCountCapped is true).
	PendingCount       int64 `json:"pending_count"`
	PendingCountCapped bool  `json:"pending_count_capped"`
	// OldestPendingAgeMs is the age of the oldest pending row, 0 if none.
	OldestPendingAgeMs   int64  `json:"oldest_pending_age_ms"`
	OldestPendingEventID string `json:"oldest_pending_event_id,omitempty"`
	// TopRetries are the pending rows that failed most often.
	TopRetries []RowInfo `json:"top_retries"`
	// Undecodable are the pending rows the relay cannot decode; they stay
	// pending until someone repairs the envelope (or deletes the row, once
	// its event is known to be lost).
	Undecodable []RowInfo `json:"undecodable"`
}

// RowInfo is one outbox row, without its envelope.
type RowInfo struct {
	ID          int64  `json:"id"`
	EventID     string `json:"event_id"`
	RoomID      string `json:"room_id"`
	RoomVersion int64  `json:"room_version"`
	EventType   string `json:"event_type"`
	RetryCount  int    `json:"retry_count"`
	LastError   string `json:"last_error"`
	CreatedAtMs int64  `json:"created_at_ms"`
	AgeMs       int64  `json:"age_ms"`
}

const (
	// Pending rows are those marked pending and those of in-flight groups
	// (a fast path's, for milliseconds unless it stopped: see
	// voiceroom.OutboxGroup).
	inFlightRowsSQL = `FROM ` + InFlightJoin + ` WHERE o.app_code = ?`
	countPendingSQL = `SELECT (SELECT COUNT(*) FROM (
  SELECT 1 FROM room_outbox FORCE INDEX (idx_room_outbox_pending)
  WHERE status = 'pending' AND app_code = ? LIMIT ?) t) + (SELECT COUNT(*) ` + inFlightRowsSQL + `)`
	oldestPendingSQL = `SELECT event_id, created_at_ms FROM (
  (SELECT id, event_id, created_at_ms FROM room_outbox FORCE INDEX (idx_room_outbox_pending)
    WHERE status = 'pending' AND app_code = ? ORDER BY id LIMIT 1)
  UNION ALL
  (SELECT o.id, o.event_id, o.created_at_ms ` + inFlightRowsSQL + ` ORDER BY o.id LIMIT 1)) t ORDER BY id LIMIT 1`
	rowColumns     = `id, event_id, room_id, room_version, event_type, retry_count, COALESCE(last_error, '') AS last_error, created_at_ms`
	oldestScanSQL  = `SELECT ` + rowColumns + ` FROM room_outbox FORCE INDEX (idx_room_outbox_pending) WHERE status = 'pending' AND app_code = ? ORDER BY id LIMIT ?`
	topRetriesSQL  = `SELECT * FROM (` + oldestScanSQL + `) t WHERE retry_count > 0 ORDER BY retry_count DESC, id LIMIT ?`
	undecodableSQL = `SELECT * FROM (` + oldestScanSQL + `) t WHERE last_error LIKE 'undecodable envelope%' ORDER BY id LIMIT ?`
)

// Report reads the outbox of appCode. Errors come from MySQL.
func (i *Inspector) Report(ctx context.Context, appCode string) (Report, error) {
	s := Report{AppCode: appCode, TopRetries: []RowInfo{}, Undecodable: []RowInfo{}}
	now := i.now()
	if err := i.db.QueryRowContext(ctx, countPendingSQL, appCode, countLimit+1, appCode).Scan(&s.PendingCount); err != nil {
		return s, fmt.Errorf("count pending outbox rows: %w", err)
	}
	if s.PendingCount > countLimit {
		s.PendingCount, s.PendingCountCapped = countLimit, true
	}
	var oldest int64
	err := i.db.QueryRowContext(ctx, oldestPendingSQL, appCode, appCode).Scan(&s.OldestPendingEventID, &oldest)
	switch {
	case err == sql.ErrNoRows:
	case err != nil:
		return s, fmt.Errorf("oldest pending outbox row: %w", err)
	default:
		s.OldestPendingAgeMs = max(0, now.UnixMilli()-oldest)
	}
	if s.TopRetries, err = i.rows(ctx, now, topRetriesSQL, appCode, scanLimit, topRetries); err != nil {
		return s, fmt.Errorf("outbox rows by retry count: %w", err)
	}
	if s.Undecodable, err = i.rows(ctx, now, undecodableSQL, appCode, scanLimit, badRowsLimit); err != nil {
		return s, fmt.Errorf("undecodable outbox rows: %w", err)
	}
	return s, nil
}

func (i *Inspector) rows(ctx context.Context, now time.Time, query string, args ...any) ([]RowInfo, error) {
	rs, err := i.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	out := []RowInfo{}
	for rs.Next() {
		var r RowInfo
		if err := rs.Scan(&r.ID, &r.EventID, &r.RoomID, &r.RoomVersion, &r.EventType, &r.RetryCount, &r.LastError, &r.CreatedAtMs); err != nil {
			return nil, err
		}
		r.AgeMs = max(0, now.UnixMilli()-r.CreatedAtMs)
		out = append(out, r)
	}
	return out, rs.Err()
}
