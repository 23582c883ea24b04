package roomlist

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// Hide is an operator's hide of a room from one region's lists and search
// (docs/openapi.yaml, schema Hide).
type Hide struct {
	HideID          int64  `json:"hide_id"`
	RoomID          string `json:"room_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	Reason          string `json:"reason"`
	Status          string `json:"status"` // active | removed
	// ExpiresAtMs is when the hide stops applying; 0 never.
	ExpiresAtMs int64  `json:"expires_at_ms"`
	CreatedBy   string `json:"created_by"`
	CreatedAtMs int64  `json:"created_at_ms"`
}

// NewHide is what an operator asks for.
type NewHide struct {
	RoomID          string
	VisibleRegionID int64
	// Reason is required, 1..MaxReasonLen characters.
	Reason string
	// ExpiresAtMs is optional: 0 hides until unhidden.
	ExpiresAtMs int64
}

// Limits of hides.
const (
	MaxHideDuration      = 366 * 24 * time.Hour
	MaxActiveHidesRegion = 1000
)

// Hides stores operators' hides.
//
// A hide applies to its app and region only: while it is active and
// unexpired, the room is left out of that region's hot and new lists and
// its search, and its pin there shows nothing. It stays joinable by id and
// every other region and app lists it as before. A hide, an unhide or an
// expiry is seen by the next list request (one begun after Create or
// Delete returned), in any api process, the next page of a chain included
// (see Lister.List): after its MySQL commit, each change invalidates the
// region's Redis hide set before it returns, and list requests read hides
// from Redis only while that set was filled from MySQL after the last
// change; hideCache gives the argument for every failure order.
//
// Every hide and unhide is recorded in the room's audit trail in the
// transaction that makes it, and counted in
// voiceroom_rooms_moderation_actions_total once committed.
type Hides struct {
	db         *sql.DB
	reads      *sql.DB // List's: db unless SetReads gave replicas
	lister     *Lister
	moderation *rooms.ModerationCounter
	now        func() time.Time
}

// NewHides returns the hide store. lister is this process's list query:
// every change invalidates the Redis hide set through it (its Redis
// client and key prefix) and, when that fails, makes it read the region's
// hides from MySQL until the set is repaired. lister may be nil only in a
// deployment whose list query has no Redis. moderation may be nil (not
// counted).
func NewHides(db *sql.DB, lister *Lister, moderation *rooms.ModerationCounter, cfg Config) (*Hides, error) {
	cfg = cfg.WithDefaults()
	if db == nil {
		return nil, fmt.Errorf("%w: hides need a database", ErrInvalidConfig)
	}
	return &Hides{db: db, reads: db, lister: lister, moderation: moderation, now: cfg.Now}, nil
}

// SetReads makes List read from reads, a pool of replicas that may lag
// (package readdb). Call it before the Hides serve.
func (h *Hides) SetReads(reads *sql.DB) { h.reads = reads }

// hideAudit is what a hide's audit row shows before and after.
type hideAudit struct {
	HideID          int64  `json:"hide_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	Status          string `json:"status"`
	ExpiresAtMs     int64  `json:"expires_at_ms"`
}

// Create hides a room of app in a region, by operator. The room must be a
// room of app that is not closed (NOT_FOUND, FAILED_PRECONDITION); it need
// not be visible in that region now (a hide waits for it). The reason is
// 1..256 characters; expires_at_ms is 0 or in the future within
// MaxHideDuration (INVALID_ARGUMENT). A room hidden there already is
// ALREADY_EXISTS, and a region holds at most MaxActiveHidesRegion applying
// hides (FAILED_PRECONDITION).
func (h *Hides) Create(ctx context.Context, app, operator string, in NewHide) (Hide, error) {
	nowMs := h.now().UnixMilli()
	switch {
	case in.RoomID == "" || len(in.RoomID) > voiceroom.RoomIDMax:
		return Hide{}, apperr.Invalid("room_id", "must be 1..%d characters", voiceroom.RoomIDMax)
	case in.VisibleRegionID < 0:
		return Hide{}, apperr.Invalid("visible_region_id", "must not be negative")
	case in.ExpiresAtMs != 0 && (in.ExpiresAtMs <= nowMs || in.ExpiresAtMs > nowMs+MaxHideDuration.Milliseconds()):
		return Hide{}, apperr.Invalid("expires_at_ms", "must be 0 (never) or in the future, at most %d days ahead",
			int(MaxHideDuration.Hours()/24))
	}
	if err := checkReason(in.Reason); err != nil {
		return Hide{}, err
	}
	hide := Hide{RoomID: in.RoomID, VisibleRegionID: in.VisibleRegionID, Reason: in.Reason, Status: "active",
		ExpiresAtMs: in.ExpiresAtMs, CreatedBy: voiceroom.Clip(operator, 64), CreatedAtMs: nowMs}
	err := mysqldb.Update(ctx, h.db, func(tx *sql.Tx) error {
		// The room row's lock serialises two hides of one room.
		status, _, err := rooms.LockStatus(ctx, tx, app, in.RoomID)
		if err != nil {
			return err
		}
		if status == roomevent.StatusClosed {
			return apperr.New(apperr.FailedPrecondition, "room is closed")
		}
		var existing int64
		err = tx.QueryRowContext(ctx, `SELECT hide_id FROM room_region_hides WHERE app_code = ? AND visible_region_id = ?
			AND room_id = ? AND status = 'active' AND (expires_at_ms = 0 OR expires_at_ms > ?) LIMIT 1`,
			app, in.VisibleRegionID, in.RoomID, nowMs).Scan(&existing)
		switch {
		case err == nil:
			return apperr.New(apperr.AlreadyExists, "room is hidden in region %d already (hide %d)", in.VisibleRegionID, existing)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		var active int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM room_region_hides WHERE app_code = ? AND visible_region_id = ?
			AND status = 'active' AND (expires_at_ms = 0 OR expires_at_ms > ?)`, app, in.VisibleRegionID, nowMs).Scan(&active); err != nil {
			return err
		}
		if active >= MaxActiveHidesRegion {
			return apperr.New(apperr.FailedPrecondition, "region already has %d active hides", active)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO room_region_hides (app_code, visible_region_id, room_id, reason, status,
			expires_at_ms, created_by, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, 'active', ?, ?, ?, ?)`,
			app, in.VisibleRegionID, in.RoomID, in.Reason, in.ExpiresAtMs, hide.CreatedBy, nowMs, nowMs)
		if err != nil {
			return err
		}
		if hide.HideID, err = res.LastInsertId(); err != nil {
			return err
		}
		return insertAudit(ctx, tx, app, in.RoomID, operator, rooms.AuditHide, in.Reason, nowMs, nil, hideAudit{
			HideID: hide.HideID, VisibleRegionID: hide.VisibleRegionID, Status: hide.Status, ExpiresAtMs: hide.ExpiresAtMs})
	})
	if err != nil {
		return Hide{}, storage(err)
	}
	h.lister.hideChanged(ctx, app, in.VisibleRegionID)
	h.moderation.Count(rooms.AuditHide)
	return hide, nil
}

// Delete unhides: app's hide gets status removed, by operator, with an
// optional reason (1..256 characters when given, INVALID_ARGUMENT). An
// unknown hide, or one of another app, is NOT_FOUND; removing a removed
// hide again is no error and records nothing. An expired hide can still be
// removed (it is recorded).
func (h *Hides) Delete(ctx context.Context, app, operator string, hideID int64, reason string) (Hide, error) {
	if reason != "" {
		if err := checkReason(reason); err != nil {
			return Hide{}, err
		}
	}
	nowMs := h.now().UnixMilli()
	var hide Hide
	removed := false
	err := mysqldb.Update(ctx, h.db, func(tx *sql.Tx) error {
		removed = false
		err := tx.QueryRowContext(ctx, `SELECT `+hideCols+` FROM room_region_hides WHERE app_code = ? AND hide_id = ? FOR UPDATE`,
			app, hideID).Scan(hide.fields()...)
		if errors.Is(err, sql.ErrNoRows) {
			return errHideNotFound
		}
		if err != nil {
			return err
		}
		if hide.Status == "removed" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE room_region_hides SET status = 'removed', updated_at_ms = ?
			WHERE app_code = ? AND hide_id = ?`, nowMs, app, hideID); err != nil {
			return err
		}
		was := hideAudit{HideID: hide.HideID, VisibleRegionID: hide.VisibleRegionID, Status: hide.Status, ExpiresAtMs: hide.ExpiresAtMs}
		now := was
		now.Status = "removed"
		hide.Status, removed = "removed", true
		return insertAudit(ctx, tx, app, hide.RoomID, operator, rooms.AuditUnhide, reason, nowMs, was, now)
	})
	if err != nil {
		return Hide{}, storage(err)
	}
	if removed {
		h.lister.hideChanged(ctx, app, hide.VisibleRegionID)
		h.moderation.Count(rooms.AuditUnhide)
	}
	return hide, nil
}

// maxListedHides bounds GET /admin/v1/hides: the newest hides of the region.
const maxListedHides = 500

const hideCols = `hide_id, room_id, visible_region_id, reason, status, expires_at_ms, created_by, created_at_ms`

func (x *Hide) fields() []any {
	return []any{&x.HideID, &x.RoomID, &x.VisibleRegionID, &x.Reason, &x.Status, &x.ExpiresAtMs, &x.CreatedBy, &x.CreatedAtMs}
}

// List returns app's hides of a region, active, expired and removed,
// newest first, at most 500.
func (h *Hides) List(ctx context.Context, app string, region int64) ([]Hide, error) {
	rows, err := h.reads.QueryContext(ctx, `SELECT `+hideCols+` FROM room_region_hides WHERE app_code = ? AND visible_region_id = ?
		ORDER BY hide_id DESC LIMIT ?`, app, region, maxListedHides)
	if err != nil {
		return nil, storage(err)
	}
	defer rows.Close()
	out := []Hide{}
	for rows.Next() {
		var x Hide
		if err := rows.Scan(x.fields()...); err != nil {
			return nil, storage(err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, storage(err)
	}
	return out, nil
}
