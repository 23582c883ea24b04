package rooms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// LockStatus reads app's room's status (roomevent.Status*) and visible
// region inside tx, and locks the room's rooms row until tx ends (SELECT
// ... FOR UPDATE). It is how another package's operator action on a room
// (a list pin or hide) checks the room in its own transaction without
// reading the rooms table itself: two such actions on one room are
// serialised, and a room command commits before or after them, never
// between the check and the commit. A room that does not exist, or one of
// another app, is an *apperr.Error of kind NotFound.
func LockStatus(ctx context.Context, tx *sql.Tx, appCode, roomID string) (status string, regionID int64, err error) {
	err = tx.QueryRowContext(ctx, `SELECT status, visible_region_id FROM rooms WHERE app_code = ? AND room_id = ? FOR UPDATE`,
		appCode, roomID).Scan(&status, &regionID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, errRoomNotFound
	}
	if err != nil {
		return "", 0, fmt.Errorf("lock room %s of %s: %w", roomID, appCode, err)
	}
	return status, regionID, nil
}
