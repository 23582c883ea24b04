package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/mysqldb"
)

// EndpointsConfig configures Endpoints. Zero fields take their defaults.
type EndpointsConfig struct {
	// Policy is what a URL may be.
	Policy Policy
	// RotationWindow is how long the previous secret keeps signing after
	// a rotation, unless the admin asks for another window. Default 24h.
	// VOICEROOM_WEBHOOKS_ROTATION_WINDOW.
	RotationWindow time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// MaxRotationWindow bounds a rotation window.
const MaxRotationWindow = 30 * 24 * time.Hour

// WithDefaults returns c with zero fields set to their defaults.
func (c EndpointsConfig) WithDefaults() EndpointsConfig {
	if c.RotationWindow == 0 {
		c.RotationWindow = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults; it never changes c.
func (c EndpointsConfig) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	checks.Check(c.RotationWindow > 0 && c.RotationWindow <= MaxRotationWindow, "RotationWindow", "want more than 0, at most %v, got %v", MaxRotationWindow, c.RotationWindow)
	return checks.Err()
}

// Endpoints is the admins' side of webhooks: each app's endpoints in
// MySQL (create, list, change, delete, rotate the secret) and their last
// deliveries. Every method acts within one app; another app's endpoint is
// NOT_FOUND. MySQL failing is UNAVAILABLE.
type Endpoints struct {
	db         *sql.DB
	js         jetstream.JetStream
	sealer     *Sealer
	deliveries *DeliveryLog
	cfg        EndpointsConfig
}

// NewEndpoints returns the admins' side over db, sealing secrets with
// sealer; js is where it reads the ROOM_EVENTS position a new endpoint
// starts from. deliveries may be nil: Deliveries then answers UNAVAILABLE.
func NewEndpoints(db *sql.DB, js jetstream.JetStream, sealer *Sealer, deliveries *DeliveryLog, cfg EndpointsConfig) (*Endpoints, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || js == nil || sealer == nil {
		return nil, fmt.Errorf("%w: endpoints need a database, jetstream and a sealer", ErrInvalidConfig)
	}
	return &Endpoints{db: db, js: js, sealer: sealer, deliveries: deliveries, cfg: cfg}, nil
}

// streamReadTimeout bounds startSeq's read, so that JetStream down fails
// an admin's change instead of holding it to the request's deadline.
const streamReadTimeout = 5 * time.Second

// startSeq is the ROOM_EVENTS sequence the next event stored will have at
// least: every event committed after the caller answers is at or above
// it. JetStream unreachable is UNAVAILABLE.
func (s *Endpoints) startSeq(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, streamReadTimeout)
	defer cancel()
	st, err := s.js.Stream(ctx, bus.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return 1, nil // not provisioned yet: its first event will be 1
	}
	if err != nil {
		return 0, apperr.Wrap(apperr.Unavailable, "webhooks unavailable, try again", fmt.Errorf("read stream %s: %w", bus.StreamName, err))
	}
	return st.CachedInfo().State.LastSeq + 1, nil
}

// Create adds an endpoint to appCode and returns it with its secret, which
// is never shown again. The URL must pass the Policy and the event types
// be known (INVALID_ARGUMENT); an app holds at most MaxEndpointsPerApp
// (FAILED_PRECONDITION). The endpoint gets every event it wants that is
// committed after Create returns (it starts from the stream's position
// read here, whichever process delivers and whenever that process reads
// the new row), not older ones.
func (s *Endpoints) Create(ctx context.Context, appCode, operator string, n NewEndpoint) (WithSecret, error) {
	n, err := n.check(ctx, s.cfg.Policy)
	if err != nil {
		return WithSecret{}, err
	}
	start, err := s.startSeq(ctx)
	if err != nil {
		return WithSecret{}, err
	}
	key := newSecret()
	sealed := s.sealer.seal(appCode, key)
	nowMs := msOf(s.cfg.Now())
	e := Endpoint{URL: n.URL, EventTypes: n.EventTypes, Enabled: true, CreatedBy: clip(operator, 64), CreatedAtMs: nowMs, UpdatedAtMs: nowMs}
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		// Locks the app's range of the index, so two creates take turns.
		count, err := countLocked(ctx, tx, appCode)
		if err != nil {
			return err
		}
		if count >= MaxEndpointsPerApp {
			return apperr.New(apperr.FailedPrecondition, "an app has at most %d webhooks; delete one first", MaxEndpointsPerApp)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (app_code, url, event_types, enabled, secret,
			start_seq, created_by, created_at_ms, updated_at_ms) VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?)`,
			appCode, e.URL, joinTypes(e.EventTypes), sealed, start, e.CreatedBy, nowMs, nowMs)
		if err != nil {
			return err
		}
		e.ID, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return WithSecret{}, storage(err)
	}
	return WithSecret{Endpoint: e, Secret: formatSecret(key)}, nil
}

// List returns appCode's endpoints, oldest first.
func (s *Endpoints) List(ctx context.Context, appCode string) ([]Endpoint, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE app_code = ?
		ORDER BY endpoint_id`, appCode)
	if err != nil {
		return nil, storage(err)
	}
	defer rows.Close()
	nowMs := msOf(s.cfg.Now())
	out := []Endpoint{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return nil, storage(err)
		}
		out = append(out, r.public(nowMs))
	}
	if err := rows.Err(); err != nil {
		return nil, storage(err)
	}
	return out, nil
}

// Get returns appCode's endpoint id.
func (s *Endpoints) Get(ctx context.Context, appCode string, id int64) (Endpoint, error) {
	r, err := scanRecord(s.db.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE endpoint_id = ? AND app_code = ?`, id, appCode))
	if err == sql.ErrNoRows {
		return Endpoint{}, errNotFound
	}
	if err != nil {
		return Endpoint{}, storage(err)
	}
	return r.public(msOf(s.cfg.Now())), nil
}

// Update changes what p sets of appCode's endpoint id and returns it. A
// URL and event types are checked as at creation. Enabled false pauses it
// (the paused reason names operator), true resumes it: its backlog since
// the pause comes first, in order, then new events. Event types that add
// a type it did not want take effect for every event committed after
// Update returns, as at creation.
func (s *Endpoints) Update(ctx context.Context, appCode, operator string, id int64, p Patch) (Endpoint, error) {
	if p.URL != nil {
		u, err := s.cfg.Policy.CheckURL(ctx, *p.URL)
		if err != nil {
			return Endpoint{}, err
		}
		p.URL = &u
	}
	var start uint64
	if p.EventTypes != nil {
		types, err := checkEventTypes(*p.EventTypes)
		if err != nil {
			return Endpoint{}, err
		}
		p.EventTypes = &types
		if start, err = s.startSeq(ctx); err != nil {
			return Endpoint{}, err
		}
	}
	now := s.cfg.Now()
	out, err := s.change(ctx, appCode, id, now, func(r *record) {
		if p.URL != nil {
			r.URL = *p.URL
		}
		if p.EventTypes != nil {
			if !typesWithin(*p.EventTypes, r.EventTypes) {
				// A start the sink has not made sure of yet stays: it
				// reads back from the lower one with the new types.
				if r.start == 0 || start < r.start {
					r.start = start
				}
			}
			r.EventTypes = *p.EventTypes
		}
		if p.Enabled != nil && *p.Enabled != r.Enabled {
			r.Enabled = *p.Enabled
			r.PausedReason, r.PausedAtMs = "", 0
			if !r.Enabled {
				r.PausedReason, r.PausedAtMs = "paused by "+clip(operator, 64), msOf(now)
			}
		}
	})
	if err != nil {
		return Endpoint{}, err
	}
	return out.public(msOf(now)), nil
}

// Delete removes appCode's endpoint id and its delivery history, and
// returns what it was. Events it had not had are not delivered.
func (s *Endpoints) Delete(ctx context.Context, appCode string, id int64) (Endpoint, error) {
	var out record
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		r, err := lockRecord(ctx, tx, appCode, id)
		if err != nil {
			return err
		}
		out = r
		_, err = tx.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE endpoint_id = ?`, id)
		return err
	})
	if err != nil {
		return Endpoint{}, storage(err)
	}
	if s.deliveries != nil {
		s.deliveries.forget(ctx, id)
	}
	return out.public(msOf(s.cfg.Now())), nil
}

// RotateSecret gives appCode's endpoint id a new secret, returned once.
// The previous one keeps signing for window (nil: the configured
// RotationWindow; 0: not at all, for a secret that leaked), so receivers
// can switch over: meanwhile every delivery carries both signatures. A
// secret older than the previous one stops signing at once. window is 0
// to MaxRotationWindow (INVALID_ARGUMENT).
func (s *Endpoints) RotateSecret(ctx context.Context, appCode string, id int64, window *time.Duration) (WithSecret, error) {
	keep := s.cfg.RotationWindow
	if window != nil {
		keep = *window
	}
	if keep < 0 || keep > MaxRotationWindow {
		return WithSecret{}, apperr.Invalid("previous_secret_ttl_seconds", "must be 0 to %d", int64(MaxRotationWindow/time.Second))
	}
	key := newSecret()
	sealed := s.sealer.seal(appCode, key)
	now := s.cfg.Now()
	out, err := s.change(ctx, appCode, id, now, func(r *record) {
		old, until := r.secret, msOf(now.Add(keep))
		if keep == 0 {
			old, until = nil, 0
		}
		r.secret, r.oldSecret, r.PreviousSecretUntilMs = sealed, old, until
	})
	if err != nil {
		return WithSecret{}, err
	}
	return WithSecret{Endpoint: out.public(msOf(now)), Secret: formatSecret(key)}, nil
}

// change applies fn to appCode's endpoint id, locked, and stores what an
// admin may change (URL, types, pause, secrets) with updated_at_ms now.
func (s *Endpoints) change(ctx context.Context, appCode string, id int64, now time.Time, fn func(r *record)) (record, error) {
	var out record
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		r, err := lockRecord(ctx, tx, appCode, id)
		if err != nil {
			return err
		}
		fn(&r)
		r.UpdatedAtMs = msOf(now)
		start := sql.NullInt64{Int64: int64(r.start), Valid: r.start > 0}
		_, err = tx.ExecContext(ctx, `UPDATE webhook_endpoints SET url = ?, event_types = ?, enabled = ?, paused_reason = ?,
			paused_at_ms = ?, secret = ?, old_secret = ?, old_secret_until_ms = ?, start_seq = ?, updated_at_ms = ?
			WHERE endpoint_id = ?`,
			r.URL, joinTypes(r.EventTypes), r.Enabled, r.PausedReason, r.PausedAtMs, r.secret, r.oldSecret,
			r.PreviousSecretUntilMs, start, r.UpdatedAtMs, id)
		out = r
		return err
	})
	return out, storage(err)
}

// Deliveries returns the last deliveries to appCode's endpoint id, newest
// first, at most limit (1..MaxDeliveriesKept).
func (s *Endpoints) Deliveries(ctx context.Context, appCode string, id int64, limit int) ([]Delivery, error) {
	if _, err := s.Get(ctx, appCode, id); err != nil {
		return nil, err
	}
	if s.deliveries == nil {
		return nil, apperr.New(apperr.Unavailable, "delivery history unavailable")
	}
	return s.deliveries.last(ctx, id, limit)
}
