package webhooks

import (
	"context"
	"database/sql"
	"fmt"
)

// RestoreReport is what PrepareRestored found and did in the endpoints of
// a database restored from a dump.
type RestoreReport struct {
	// Endpoints are the endpoints restored, of every app.
	Endpoints int `json:"endpoints"`
	// CursorsReset are the endpoints whose stream positions (a backlog
	// cursor, a start to read back from) named the old stream, now naming
	// the start of the new one.
	CursorsReset int64 `json:"cursors_reset"`
}

// PrepareRestored readies the endpoints of a database restored from a dump
// for a deployment whose ROOM_EVENTS starts empty, before any webhooks
// process runs on it. It checks that sealer (the deployment's
// VOICEROOM_WEBHOOKS_SECRET_KEY) opens every signing secret, and returns an
// error wrapping ErrSealedSecret naming the first endpoint it does not
// open, changing nothing: the secrets were sealed with the key of the
// deployment the dump came from, and only that key signs for them. Then it
// moves every stream position an endpoint holds (cursor_seq, the backlog of
// a paused or catching-up endpoint; start_seq, where a new or widened one
// must read from: sequences of the old ROOM_EVENTS, meaningless in the new
// one) to the new stream's first event, so that the endpoint reads
// everything the relay publishes there. It is safe to repeat.
func PrepareRestored(ctx context.Context, db *sql.DB, sealer *Sealer) (RestoreReport, error) {
	var rep RestoreReport
	recs, err := loadRecords(ctx, db)
	if err != nil {
		return rep, err
	}
	rep.Endpoints = len(recs)
	for _, r := range recs {
		if _, err := sealer.open(r.appCode, r.secret); err != nil {
			return rep, fmt.Errorf("webhook endpoint %d of app %s: the configured key does not open its secret (set VOICEROOM_WEBHOOKS_SECRET_KEY to the key of the deployment the dump came from): %w",
				r.ID, r.appCode, err)
		}
		if r.oldSecret != nil {
			if _, err := sealer.open(r.appCode, r.oldSecret); err != nil {
				return rep, fmt.Errorf("webhook endpoint %d of app %s: the configured key does not open its previous secret: %w", r.ID, r.appCode, err)
			}
		}
	}
	res, err := db.ExecContext(ctx, `UPDATE webhook_endpoints SET cursor_seq = IF(cursor_seq IS NULL, NULL, 1),
		start_seq = IF(start_seq IS NULL, NULL, 1) WHERE cursor_seq IS NOT NULL OR start_seq IS NOT NULL`)
	if err != nil {
		return rep, fmt.Errorf("reset webhook cursors: %w", err)
	}
	if rep.CursorsReset, err = res.RowsAffected(); err != nil {
		return rep, err
	}
	return rep, nil
}
