package rooms

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/promreg"
)

// AuditAction names an operator action in a room's audit trail.
type AuditAction string

// The audited operator actions. The room commands (region change, ban,
// restore, close by an admin) record theirs in their own transaction; pins,
// hides and a PK battle's score set by an admin (package pk) record theirs
// with InsertAudit.
const (
	AuditRegionChange AuditAction = "region_change"
	AuditBan          AuditAction = "ban"
	AuditRestore      AuditAction = "restore"
	AuditClose        AuditAction = "close"
	AuditPin          AuditAction = "pin"
	AuditUnpin        AuditAction = "unpin"
	AuditHide         AuditAction = "hide"
	AuditUnhide       AuditAction = "unhide"
	AuditPKScore      AuditAction = "pk_score"
)

// AuditActions lists every AuditAction, in the order above.
var AuditActions = []AuditAction{AuditRegionChange, AuditBan, AuditRestore, AuditClose, AuditPin, AuditUnpin, AuditHide, AuditUnhide, AuditPKScore}

// AuditEntry is one operator action on a room (a room_audit row).
type AuditEntry struct {
	// AuditID is assigned when the row is written; it grows with each row.
	AuditID int64  `json:"audit_id"`
	AppCode string `json:"-"`
	RoomID  string `json:"room_id"`
	// RoomVersion is the version the room command made; 0 for actions
	// outside the room's commands (pins, hides).
	RoomVersion int64 `json:"room_version"`
	// Operator is who acted: "admin:<sub>" of the admin token.
	Operator string      `json:"operator"`
	Action   AuditAction `json:"action"`
	// Reason is the operator's, up to 256 characters ("" only where the
	// route makes it optional: close).
	Reason string `json:"reason"`
	// Before and After are the values the action changed, as JSON objects
	// (for room commands {status, visible_region_id, online_count}; pins and
	// hides choose their own). Either may be empty (null).
	Before      json.RawMessage `json:"before"`
	After       json.RawMessage `json:"after"`
	CreatedAtMs int64           `json:"created_at_ms"`
}

// AuditPage is one page of a room's audit trail, newest first. NextCursor
// is "" on the last page.
type AuditPage struct {
	Items      []AuditEntry `json:"items"`
	NextCursor string       `json:"next_cursor"`
}

// Bounds of an audit page.
const (
	DefaultAuditLimit = 20
	MaxAuditLimit     = 100
)

// Execer runs a statement: a *sql.Tx (inside the caller's transaction) or a
// *sql.DB.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const (
	auditInsertHead = `INSERT INTO room_audit (app_code, room_id, room_version, operator, action, reason,
		before_value, after_value, created_at_ms) VALUES `
	auditTuple = "(?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

// InsertAudit records e in the room's audit trail through q: pass the *sql.Tx
// of the change it describes, so that the change and its audit row commit
// together, or a *sql.DB. It returns the new row's AuditID. An entry without
// app, room, operator or a known action, with a reason over 256 characters,
// or with Before or After not JSON, is INVALID_ARGUMENT and nothing is
// written. Count the action afterwards with Service.CountModeration (or a
// ModerationCounter of the same registry, where no Service runs) once the
// transaction commits (Service.RecordAudit does both, outside a transaction).
func InsertAudit(ctx context.Context, q Execer, e AuditEntry) (int64, error) {
	if err := e.validate(); err != nil {
		return 0, err
	}
	res, err := q.ExecContext(ctx, auditInsertHead+auditTuple, e.values()...)
	if err != nil {
		return 0, fmt.Errorf("insert room audit %s of %s: %w", e.Action, e.RoomID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert room audit %s of %s: %w", e.Action, e.RoomID, err)
	}
	return id, nil
}

// RecordAudit records e outside any transaction (InsertAudit on the
// service's database) and counts the action.
func (s *Service) RecordAudit(ctx context.Context, e AuditEntry) (int64, error) {
	id, err := InsertAudit(ctx, s.store.db, e)
	if err != nil {
		return 0, err
	}
	s.CountModeration(e.Action)
	return id, nil
}

// CountModeration counts one committed operator action in
// voiceroom_rooms_moderation_actions_total. The room commands count their own; a
// caller of InsertAudit calls it after its transaction commits.
func (s *Service) CountModeration(action AuditAction) {
	s.moderation.Count(action)
}

func (e *AuditEntry) validate() error {
	switch {
	case e.AppCode == "" || e.RoomID == "":
		return apperr.New(apperr.InvalidArgument, "audit entry without app or room")
	case e.Operator == "":
		return apperr.Invalid("operator", "is required")
	case !knownAction(e.Action):
		return apperr.Invalid("action", "unknown audit action %q", e.Action)
	case len(e.Before) > 0 && !json.Valid(e.Before):
		return apperr.Invalid("before", "must be JSON")
	case len(e.After) > 0 && !json.Valid(e.After):
		return apperr.Invalid("after", "must be JSON")
	}
	return checkText("reason", e.Reason, 0, maxAuditReason)
}

func knownAction(a AuditAction) bool {
	for _, k := range AuditActions {
		if a == k {
			return true
		}
	}
	return false
}

// values are e's arguments for auditTuple.
func (e *AuditEntry) values() []any {
	return []any{e.AppCode, e.RoomID, e.RoomVersion, truncate(e.Operator, 64), string(e.Action), e.Reason,
		nullJSON(e.Before), nullJSON(e.After), e.CreatedAtMs}
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return []byte(b)
}

// auditedRoom is what before and after show of a room command.
type auditedRoom struct {
	Status          string `json:"status"`
	VisibleRegionID int64  `json:"visible_region_id"`
	OnlineCount     int    `json:"online_count"`
}

// roomAuditOf returns the audit row of an operator's room command (region
// change, ban, restore, an admin's close), or nil for other commands. prev
// is the state before it, next after.
func roomAuditOf(cmd *Command, prev, next *State) (*AuditEntry, error) {
	var action AuditAction
	switch {
	case cmd.Kind == KindChangeRoomVisibleRegion:
		action = AuditRegionChange
	case cmd.Kind == KindBanRoom:
		action = AuditBan
	case cmd.Kind == KindRestoreRoom:
		action = AuditRestore
	case cmd.Kind == KindCloseRoom && cmd.Actor.Admin:
		action = AuditClose
	default:
		return nil, nil
	}
	before, err := json.Marshal(auditedRoom{prev.Status, prev.VisibleRegionID, len(prev.Online)})
	if err != nil {
		return nil, err
	}
	after, err := json.Marshal(auditedRoom{next.Status, next.VisibleRegionID, len(next.Online)})
	if err != nil {
		return nil, err
	}
	return &AuditEntry{AppCode: cmd.AppCode, RoomID: cmd.RoomID, RoomVersion: next.Version, Operator: cmd.Actor.Operator,
		Action: action, Reason: cmd.Args.Reason, Before: before, After: after, CreatedAtMs: cmd.NowMs}, nil
}

// Audit returns a page of the room's audit trail, newest first. limit is
// 1..MaxAuditLimit (0 = DefaultAuditLimit); cursor is "" for the first page,
// else a page's NextCursor. A room unknown in appCode is NOT_FOUND.
func (s *Service) Audit(ctx context.Context, appCode, roomID string, limit int, cursor string) (AuditPage, error) {
	return s.records().Audit(ctx, appCode, roomID, limit, cursor)
}

// Audit is Service.Audit, for a process without the rooms role.
func (r *Records) Audit(ctx context.Context, appCode, roomID string, limit int, cursor string) (AuditPage, error) {
	if limit == 0 {
		limit = DefaultAuditLimit
	}
	if limit < 1 || limit > MaxAuditLimit {
		return AuditPage{}, apperr.Invalid("limit", "must be 1..%d", MaxAuditLimit)
	}
	before := int64(math.MaxInt64)
	if cursor != "" {
		id, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || id <= 0 {
			return AuditPage{}, apperr.Invalid("cursor", "is not a cursor this route returned")
		}
		before = id
	}
	var one int
	err := r.reads.QueryRowContext(ctx, `SELECT 1 FROM rooms WHERE app_code = ? AND room_id = ?`, appCode, roomID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return AuditPage{}, errRoomNotFound
	}
	if err != nil {
		return AuditPage{}, storageErr(fmt.Errorf("look up room %s: %w", roomID, err))
	}
	items, err := readAudit(ctx, r.reads, appCode, roomID, before, limit+1)
	if err != nil {
		return AuditPage{}, storageErr(err)
	}
	page := AuditPage{Items: items}
	if len(items) > limit {
		page.Items = items[:limit]
		page.NextCursor = strconv.FormatInt(page.Items[limit-1].AuditID, 10)
	}
	return page, nil
}

// readAudit reads up to limit rows of a room's trail with audit_id below
// before, newest first.
func readAudit(ctx context.Context, db *sql.DB, appCode, roomID string, before int64, limit int) ([]AuditEntry, error) {
	rows, err := db.QueryContext(ctx, `SELECT audit_id, room_version, operator, action, reason, before_value, after_value,
		created_at_ms FROM room_audit WHERE app_code = ? AND room_id = ? AND audit_id < ?
		ORDER BY audit_id DESC LIMIT ?`, appCode, roomID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("read audit of %s: %w", roomID, err)
	}
	defer rows.Close()
	items := []AuditEntry{}
	for rows.Next() {
		e := AuditEntry{AppCode: appCode, RoomID: roomID}
		var before, after []byte
		if err := rows.Scan(&e.AuditID, &e.RoomVersion, &e.Operator, &e.Action, &e.Reason, &before, &after, &e.CreatedAtMs); err != nil {
			return nil, fmt.Errorf("read audit of %s: %w", roomID, err)
		}
		e.Before, e.After = before, after
		items = append(items, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit of %s: %w", roomID, err)
	}
	return items, nil
}

// ModerationCounter counts committed operator actions in
// voiceroom_rooms_moderation_actions_total{action}. The rooms service holds one; a
// component that audits outside the room commands (pins and hides in
// roomlist) builds its own on the same registry, and both share the one
// collector (promreg).
type ModerationCounter struct {
	actions *prometheus.CounterVec
}

// NewModerationCounter registers voiceroom_rooms_moderation_actions_total on reg (nil:
// not registered), with every action's series at 0, or returns the one
// already registered there. It fails only when another collector holds the
// name.
func NewModerationCounter(reg prometheus.Registerer) (*ModerationCounter, error) {
	r := promreg.On(reg)
	m := &ModerationCounter{actions: r.Sub("rooms").CounterVec("moderation_actions_total",
		"Operator actions on rooms recorded in their audit trail, by action.", "action")}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("register rooms moderation metrics: %w", err)
	}
	for _, a := range AuditActions {
		m.actions.WithLabelValues(string(a))
	}
	return m, nil
}

// Count counts one committed action. A nil counter counts nothing.
func (m *ModerationCounter) Count(action AuditAction) {
	if m == nil {
		return
	}
	m.actions.WithLabelValues(string(action)).Inc()
}
