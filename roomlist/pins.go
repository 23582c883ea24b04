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

// Pin is an operator's pin of a room in one region's list (docs/openapi.yaml,
// schema Pin).
type Pin struct {
	PinID           int64  `json:"pin_id"`
	RoomID          string `json:"room_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	Weight          int64  `json:"weight"`
	Status          string `json:"status"` // active | removed
	ExpiresAtMs     int64  `json:"expires_at_ms"`
	CreatedBy       string `json:"created_by"`
	CreatedAtMs     int64  `json:"created_at_ms"`
}

// NewPin is what an operator asks for.
type NewPin struct {
	RoomID          string
	VisibleRegionID int64
	Weight          int64
	ExpiresAtMs     int64
	// Reason is optional (docs/openapi.yaml, operation createPin); when given, 1..256
	// characters, recorded in the room's audit trail.
	Reason string
}

// Limits of pins.
const (
	MaxPinWeight        = 1_000_000
	MaxPinDuration      = 366 * 24 * time.Hour
	MaxActivePinsRegion = 100
)

// Pins stores operators' pins. They reach the lists with the next frozen
// order (within Config.FreezeEvery). Every pin and unpin is recorded in the
// room's audit trail (rooms.InsertAudit) in the transaction that makes it,
// and counted in voiceroom_rooms_moderation_actions_total once committed.
type Pins struct {
	db         *sql.DB
	reads      *sql.DB // List's: db unless SetReads gave replicas
	moderation *rooms.ModerationCounter
	now        func() time.Time
}

// NewPins returns the pin store. moderation may be nil (not counted).
func NewPins(db *sql.DB, moderation *rooms.ModerationCounter, cfg Config) (*Pins, error) {
	cfg = cfg.WithDefaults()
	if db == nil {
		return nil, fmt.Errorf("%w: pins need a database", ErrInvalidConfig)
	}
	return &Pins{db: db, reads: db, moderation: moderation, now: cfg.Now}, nil
}

// SetReads makes List read from reads, a pool of replicas that may lag
// (package readdb). Call it before the Pins serve.
func (p *Pins) SetReads(reads *sql.DB) { p.reads = reads }

// Create pins a room of app in a region, by operator. The room must be an
// active room of app visible in that region (NOT_FOUND, FAILED_PRECONDITION);
// weight is 0..MaxPinWeight, expires_at_ms in the future and within
// MaxPinDuration, and a region holds at most MaxActivePinsRegion active,
// unexpired pins (INVALID_ARGUMENT, FAILED_PRECONDITION).
func (p *Pins) Create(ctx context.Context, app, operator string, in NewPin) (Pin, error) {
	nowMs := p.now().UnixMilli()
	switch {
	case in.RoomID == "" || len(in.RoomID) > voiceroom.RoomIDMax:
		return Pin{}, apperr.Invalid("room_id", "must be 1..%d characters", voiceroom.RoomIDMax)
	case in.VisibleRegionID < 0:
		return Pin{}, apperr.Invalid("visible_region_id", "must not be negative")
	case in.Weight < 0 || in.Weight > MaxPinWeight:
		return Pin{}, apperr.Invalid("weight", "must be 0..%d", MaxPinWeight)
	case in.ExpiresAtMs <= nowMs || in.ExpiresAtMs > nowMs+MaxPinDuration.Milliseconds():
		return Pin{}, apperr.Invalid("expires_at_ms", "must be in the future, at most %d days ahead", int(MaxPinDuration.Hours()/24))
	}
	if in.Reason != "" {
		if err := checkReason(in.Reason); err != nil {
			return Pin{}, err
		}
	}
	pin := Pin{RoomID: in.RoomID, VisibleRegionID: in.VisibleRegionID, Weight: in.Weight, Status: "active",
		ExpiresAtMs: in.ExpiresAtMs, CreatedBy: voiceroom.Clip(operator, 64), CreatedAtMs: nowMs}
	err := mysqldb.Update(ctx, p.db, func(tx *sql.Tx) error {
		status, region, err := rooms.LockStatus(ctx, tx, app, in.RoomID)
		if err != nil {
			return err
		}
		if status != roomevent.StatusActive {
			return apperr.New(apperr.FailedPrecondition, "room is %s", status)
		}
		if region != in.VisibleRegionID {
			return apperr.New(apperr.FailedPrecondition, "room is visible in region %d, not %d", region, in.VisibleRegionID)
		}
		var active int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM room_region_pins WHERE app_code = ? AND visible_region_id = ?
			AND status = 'active' AND expires_at_ms > ?`, app, in.VisibleRegionID, nowMs).Scan(&active); err != nil {
			return err
		}
		if active >= MaxActivePinsRegion {
			return apperr.New(apperr.FailedPrecondition, "region already has %d active pins", active)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO room_region_pins (app_code, visible_region_id, room_id, weight, status,
			expires_at_ms, created_by, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, 'active', ?, ?, ?, ?)`,
			app, in.VisibleRegionID, in.RoomID, in.Weight, in.ExpiresAtMs, pin.CreatedBy, nowMs, nowMs)
		if err != nil {
			return err
		}
		if pin.PinID, err = res.LastInsertId(); err != nil {
			return err
		}
		return insertAudit(ctx, tx, app, in.RoomID, operator, rooms.AuditPin, in.Reason, nowMs, nil, pinAudit{
			PinID: pin.PinID, VisibleRegionID: pin.VisibleRegionID, Weight: pin.Weight, Status: pin.Status, ExpiresAtMs: pin.ExpiresAtMs})
	})
	if err != nil {
		return Pin{}, storage(err)
	}
	p.moderation.Count(rooms.AuditPin)
	return pin, nil
}

// pinAudit is what a pin's audit row shows before and after.
type pinAudit struct {
	PinID           int64  `json:"pin_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	Weight          int64  `json:"weight"`
	Status          string `json:"status"`
	ExpiresAtMs     int64  `json:"expires_at_ms"`
}

// Delete removes app's pin (status removed) by operator, with an optional
// reason (1..256 characters when given, INVALID_ARGUMENT). An unknown pin,
// or one of another app, is NOT_FOUND; removing a removed pin again is no
// error and records nothing.
func (p *Pins) Delete(ctx context.Context, app, operator string, pinID int64, reason string) error {
	if reason != "" {
		if err := checkReason(reason); err != nil {
			return err
		}
	}
	nowMs := p.now().UnixMilli()
	removed := false
	err := mysqldb.Update(ctx, p.db, func(tx *sql.Tx) error {
		removed = false
		var was pinAudit
		var room string
		err := tx.QueryRowContext(ctx, `SELECT pin_id, room_id, visible_region_id, weight, status, expires_at_ms
			FROM room_region_pins WHERE app_code = ? AND pin_id = ? FOR UPDATE`, app, pinID).
			Scan(&was.PinID, &room, &was.VisibleRegionID, &was.Weight, &was.Status, &was.ExpiresAtMs)
		if errors.Is(err, sql.ErrNoRows) {
			return errPinNotFound
		}
		if err != nil {
			return err
		}
		if was.Status == "removed" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, `UPDATE room_region_pins SET status = 'removed', updated_at_ms = ?
			WHERE app_code = ? AND pin_id = ?`, nowMs, app, pinID); err != nil {
			return err
		}
		now := was
		now.Status = "removed"
		removed = true
		return insertAudit(ctx, tx, app, room, operator, rooms.AuditUnpin, reason, nowMs, was, now)
	})
	if err != nil {
		return storage(err)
	}
	if removed {
		p.moderation.Count(rooms.AuditUnpin)
	}
	return nil
}

// maxListedPins bounds GET /admin/v1/pins: the newest pins of the region.
const maxListedPins = 500

// List returns app's pins of a region, active and expired and removed,
// newest first, at most 500.
func (p *Pins) List(ctx context.Context, app string, region int64) ([]Pin, error) {
	rows, err := p.reads.QueryContext(ctx, `SELECT pin_id, room_id, visible_region_id, weight, status, expires_at_ms, created_by,
		created_at_ms FROM room_region_pins WHERE app_code = ? AND visible_region_id = ? ORDER BY pin_id DESC LIMIT ?`,
		app, region, maxListedPins)
	if err != nil {
		return nil, storage(err)
	}
	defer rows.Close()
	out := []Pin{}
	for rows.Next() {
		var pin Pin
		if err := rows.Scan(&pin.PinID, &pin.RoomID, &pin.VisibleRegionID, &pin.Weight, &pin.Status, &pin.ExpiresAtMs,
			&pin.CreatedBy, &pin.CreatedAtMs); err != nil {
			return nil, storage(err)
		}
		out = append(out, pin)
	}
	if err := rows.Err(); err != nil {
		return nil, storage(err)
	}
	return out, nil
}
