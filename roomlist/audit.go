package roomlist

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"voiceroom/apperr"
	"voiceroom/rooms"
)

// MaxReasonLen bounds an operator's reason for a pin or a hide, in
// characters (the room audit trail's bound).
const MaxReasonLen = 256

// checkReason accepts 1..MaxReasonLen characters of valid text.
func checkReason(reason string) error {
	if !utf8.ValidString(reason) {
		return apperr.Invalid("reason", "must be valid UTF-8")
	}
	if n := utf8.RuneCountInString(reason); n < 1 || n > MaxReasonLen {
		return apperr.Invalid("reason", "must be 1..%d characters", MaxReasonLen)
	}
	return nil
}

// insertAudit records a pin's or a hide's action in the room's audit trail
// inside tx, so that the change and its row commit together. before and
// after are marshalled to JSON; nil is null.
func insertAudit(ctx context.Context, tx *sql.Tx, app, room, operator string, action rooms.AuditAction, reason string,
	nowMs int64, before, after any) error {
	e := rooms.AuditEntry{AppCode: app, RoomID: room, Operator: operator, Action: action, Reason: reason, CreatedAtMs: nowMs}
	var err error
	if e.Before, err = auditJSON(before); err != nil {
		return err
	}
	if e.After, err = auditJSON(after); err != nil {
		return err
	}
	if _, err := rooms.InsertAudit(ctx, tx, e); err != nil {
		return fmt.Errorf("audit %s of room %s: %w", action, room, err)
	}
	return nil
}

func auditJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}
