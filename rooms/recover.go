package rooms

import (
	"context"
	"database/sql"
	"fmt"
	"voiceroom/roomevent"
)

// LoadCard recovers app's room from MySQL alone, the way a cell loads it
// (its latest snapshot, then the command log after it, replayed without
// side effects), and returns its list card. It only reads: no cell is
// loaded, nothing is written, so it is safe while the rooms role runs. A
// room that does not exist is an *apperr.Error of kind NotFound; a log
// that does not replay is an error naming the room.
func LoadCard(ctx context.Context, db *sql.DB, appCode, roomID string) (roomevent.Card, error) {
	sr, err := (&store{db: db}).load(ctx, appCode, roomID)
	if err != nil {
		return roomevent.Card{}, err
	}
	st, err := replay(sr)
	if err != nil {
		return roomevent.Card{}, fmt.Errorf("recover room %s of %s: %w", roomID, appCode, err)
	}
	return st.Card(), nil
}
