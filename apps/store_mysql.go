package apps

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/seal"
	"voiceroom/mysqldb"
)

// StoreConfig configures a Store. Zero fields take the defaults given.
type StoreConfig struct {
	// Static are the apps' keys of VOICEROOM_APP_KEYS: their apps are
	// registered (active unless a row disables them) and listed with
	// them, and they are never stored.
	Static []StaticKey
	// Grace is a rotated-out key's grace period when a rotation names
	// none: 0..MaxGrace, default 24h.
	Grace time.Duration
	// AllowHTTP lets an identity provider's key set be at an http:// URL
	// (development). Default false.
	AllowHTTP bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// WithDefaults returns c with zero fields set to their defaults.
func (c StoreConfig) WithDefaults() StoreConfig {
	if c.Grace == 0 {
		c.Grace = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c StoreConfig) Validate() error {
	c = c.WithDefaults()
	if c.Grace < 0 || c.Grace > MaxGrace {
		return apperr.BadConfig("Grace", "grace %v: want 0..%v", c.Grace, MaxGrace)
	}
	return nil
}

// Store is the apps and their keys in MySQL, the source of truth: what
// platform operators change (`voiceroom apps`, the /platform routes) and
// what a Registry loads. Secrets are sealed at rest (package seal). Every
// change is logged with the operator who made it.
type Store struct {
	db     *sql.DB
	sealer *seal.Sealer
	cfg    StoreConfig
	log    *slog.Logger
	// changed is called after every change is committed: a Registry on
	// this Store reloads at once (see NewRegistry).
	changed func(ctx context.Context)
}

// NewStore returns the Store over db, sealing secrets with sealer.
func NewStore(db *sql.DB, sealer *seal.Sealer, cfg StoreConfig, log *slog.Logger) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || sealer == nil {
		return nil, errors.New("apps: a store needs a database and a sealer")
	}
	return &Store{db: db, sealer: sealer, cfg: cfg, log: log, changed: func(context.Context) {}}, nil
}

// ad is the additional data a key's secret is sealed with: a sealed
// secret opens only in its own row.
func ad(app, kid string) []byte { return []byte("voiceroom app key/" + app + "/" + kid) }

// Create registers app, active, with a first key, answered once. Errors:
// INVALID_ARGUMENT for a bad app code, ALREADY_EXISTS when the app is
// stored already.
func (s *Store) Create(ctx context.Context, app, operator string) (WithNewKey, error) {
	if err := checkApp(app); err != nil {
		return WithNewKey{}, err
	}
	var k NewKey
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		now := s.cfg.Now().UnixMilli()
		_, err := tx.ExecContext(ctx, `INSERT INTO apps (app_code, status, created_by, updated_by, created_at_ms, updated_at_ms)
			VALUES (?, 'active', ?, ?, ?, ?)`, app, operator, operator, now, now)
		if isDuplicate(err) {
			return apperr.New(apperr.AlreadyExists, "app %s is registered already", app)
		}
		if err != nil {
			return fmt.Errorf("insert app %s: %w", app, err)
		}
		k, err = s.insertKey(ctx, tx, app, operator, now)
		return err
	})
	if err != nil {
		return WithNewKey{}, err
	}
	s.log.Info("app registered", "app_code", app, "key_id", k.KeyID, "operator", operator)
	return s.afterKey(ctx, app, k)
}

// Rotate gives app a new key, answered once; its other keys keep
// verifying for grace (nil: the configured default; 0: they stop at
// once, for a key that leaked). At most two keys verify at once: while
// a rotated-out key is still in its grace period, another rotation is
// FAILED_PRECONDITION (revoke that key first). NOT_FOUND for an app that
// is not registered.
func (s *Store) Rotate(ctx context.Context, app string, grace *time.Duration, operator string) (WithNewKey, error) {
	if err := checkApp(app); err != nil {
		return WithNewKey{}, err
	}
	g := s.cfg.Grace
	if grace != nil {
		g = *grace
	}
	if g < 0 || g > MaxGrace {
		return WithNewKey{}, apperr.Invalid("grace_seconds", "want 0..%d", int64(MaxGrace/time.Second))
	}
	var k NewKey
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		now := s.cfg.Now().UnixMilli()
		if err := s.lockApp(ctx, tx, app, operator, now); err != nil {
			return err
		}
		var grace sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT MIN(key_id) FROM app_keys WHERE app_code = ? AND retire_at_ms > ?`, app, now).Scan(&grace)
		if err != nil {
			return fmt.Errorf("read keys of %s: %w", app, err)
		}
		if grace.Valid {
			return apperr.New(apperr.FailedPrecondition,
				"app %s: key %s is still in its grace period; revoke it first (at most two keys verify at once)", app, grace.String)
		}
		if n := s.staticCount(app); n > 0 {
			return apperr.New(apperr.FailedPrecondition,
				"app %s has %d key(s) in VOICEROOM_APP_KEYS: rotate it there (list the new key, then drop the old one)", app, n)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE app_keys SET retire_at_ms = ? WHERE app_code = ? AND retire_at_ms = 0`,
			now+g.Milliseconds(), app); err != nil {
			return fmt.Errorf("retire keys of %s: %w", app, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM app_keys WHERE app_code = ? AND retire_at_ms > 0 AND retire_at_ms < ?`,
			app, now-retiredKept.Milliseconds()); err != nil {
			return fmt.Errorf("forget old keys of %s: %w", app, err)
		}
		k, err = s.insertKey(ctx, tx, app, operator, now)
		return err
	})
	if err != nil {
		return WithNewKey{}, err
	}
	s.log.Info("app key rotated", "app_code", app, "key_id", k.KeyID, "grace", g, "operator", operator)
	return s.afterKey(ctx, app, k)
}

// Revoke ends app's stored key kid now: tokens it signed are refused from
// the next reload on (at once on this process). NOT_FOUND for an unknown
// app or key; FAILED_PRECONDITION for a key of VOICEROOM_APP_KEYS.
func (s *Store) Revoke(ctx context.Context, app, kid, operator string) (App, error) {
	if err := checkApp(app); err != nil {
		return App{}, err
	}
	if s.isStatic(app, kid) {
		return App{}, apperr.New(apperr.FailedPrecondition, "key %s is in VOICEROOM_APP_KEYS: remove it there", kid)
	}
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		now := s.cfg.Now().UnixMilli()
		if err := s.lockApp(ctx, tx, app, operator, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE app_keys SET retire_at_ms = ?
			WHERE app_code = ? AND key_id = ? AND (retire_at_ms = 0 OR retire_at_ms > ?)`, now, app, kid, now)
		if err != nil {
			return fmt.Errorf("revoke key %s of %s: %w", kid, app, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM app_keys WHERE app_code = ? AND key_id = ?`, app, kid).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return apperr.New(apperr.NotFound, "key not found")
			}
			return err // retired already: nothing to do
		}
		return nil
	})
	if err != nil {
		return App{}, err
	}
	s.log.Info("app key revoked", "app_code", app, "key_id", kid, "operator", operator)
	s.changed(ctx)
	return s.Get(ctx, app)
}

// SetStatus enables (active) or disables an app: a disabled app's tokens
// are refused, whatever signed them. An app known only from
// VOICEROOM_APP_KEYS gets a row. NOT_FOUND for an app that is not
// registered.
func (s *Store) SetStatus(ctx context.Context, app, status, operator string) (App, error) {
	if err := checkApp(app); err != nil {
		return App{}, err
	}
	if status != StatusActive && status != StatusDisabled {
		return App{}, apperr.Invalid("status", "want active or disabled")
	}
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		now := s.cfg.Now().UnixMilli()
		if err := s.lockApp(ctx, tx, app, operator, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE apps SET status = ? WHERE app_code = ?`, status, app)
		return err
	})
	if err != nil {
		return App{}, err
	}
	s.log.Info("app status set", "app_code", app, "status", status, "operator", operator)
	s.changed(ctx)
	return s.Get(ctx, app)
}

// SetJWKS gives app an identity provider (replacing any): RS256/ES256
// user tokens verified with the key set at j.URL. INVALID_ARGUMENT for a
// bad value, NOT_FOUND for an app that is not registered.
func (s *Store) SetJWKS(ctx context.Context, app string, j JWKS, operator string) (App, error) {
	if err := checkApp(app); err != nil {
		return App{}, err
	}
	if err := checkJWKS(j, s.cfg.AllowHTTP); err != nil {
		return App{}, err
	}
	return s.setJWKS(ctx, app, j, operator)
}

// RemoveJWKS removes app's identity provider: its tokens are refused from
// then on. NOT_FOUND for an app that is not registered.
func (s *Store) RemoveJWKS(ctx context.Context, app, operator string) (App, error) {
	if err := checkApp(app); err != nil {
		return App{}, err
	}
	return s.setJWKS(ctx, app, JWKS{}, operator)
}

func (s *Store) setJWKS(ctx context.Context, app string, j JWKS, operator string) (App, error) {
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		now := s.cfg.Now().UnixMilli()
		if err := s.lockApp(ctx, tx, app, operator, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE apps SET jwks_url = ?, jwks_issuer = ?, jwks_audience = ?, jwks_app_claim = ?
			WHERE app_code = ?`, j.URL, j.Issuer, j.Audience, j.AppClaim, app)
		return err
	})
	if err != nil {
		return App{}, err
	}
	s.log.Info("app identity provider set", "app_code", app, "jwks_url", j.URL, "issuer", j.Issuer, "audience", j.Audience, "operator", operator)
	s.changed(ctx)
	return s.Get(ctx, app)
}

// lockApp locks app's row for a change, moving its updated_at_ms forward
// (so every Registry sees the change); an app known only from
// VOICEROOM_APP_KEYS gets its row. NOT_FOUND for an app that is not
// registered.
func (s *Store) lockApp(ctx context.Context, tx *sql.Tx, app, operator string, now int64) error {
	res, err := tx.ExecContext(ctx, `UPDATE apps SET updated_at_ms = GREATEST(updated_at_ms + 1, ?), updated_by = ? WHERE app_code = ?`,
		now, operator, app)
	if err != nil {
		return fmt.Errorf("lock app %s: %w", app, err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		return nil
	}
	if s.staticCount(app) == 0 {
		return apperr.New(apperr.NotFound, "app not found")
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO apps (app_code, status, created_by, updated_by, created_at_ms, updated_at_ms)
		VALUES (?, 'active', ?, ?, ?, ?)`, app, operator, operator, now, now)
	if err != nil {
		return fmt.Errorf("register app %s of VOICEROOM_APP_KEYS: %w", app, err)
	}
	return nil
}

// insertKey stores a new key of app, retrying on the rare id collision.
func (s *Store) insertKey(ctx context.Context, tx *sql.Tx, app, operator string, now int64) (NewKey, error) {
	for range 3 {
		k := newKey(app)
		_, err := tx.ExecContext(ctx, `INSERT INTO app_keys (app_code, key_id, secret, created_by, created_at_ms) VALUES (?, ?, ?, ?, ?)`,
			app, k.KeyID, s.sealer.Seal(ad(app, k.KeyID), []byte(k.Secret)), operator, now)
		if isDuplicate(err) {
			continue
		}
		if err != nil {
			return NewKey{}, fmt.Errorf("insert key of %s: %w", app, err)
		}
		return k, nil
	}
	return NewKey{}, fmt.Errorf("insert key of %s: ids collided three times", app)
}

func (s *Store) afterKey(ctx context.Context, app string, k NewKey) (WithNewKey, error) {
	s.changed(ctx)
	a, err := s.Get(ctx, app)
	if err != nil {
		return WithNewKey{}, err
	}
	return WithNewKey{App: a, NewKey: k}, nil
}

func (s *Store) staticCount(app string) int {
	n := 0
	for _, k := range s.cfg.Static {
		if k.AppCode == app {
			n++
		}
	}
	return n
}

func (s *Store) isStatic(app, kid string) bool {
	return slices.ContainsFunc(s.cfg.Static, func(k StaticKey) bool { return k.AppCode == app && k.Key.ID == kid })
}

// Get returns one app. NOT_FOUND for an app that is not registered.
func (s *Store) Get(ctx context.Context, app string) (App, error) {
	if err := checkApp(app); err != nil {
		return App{}, err
	}
	list, err := s.list(ctx, app)
	if err != nil {
		return App{}, err
	}
	if len(list) == 0 {
		return App{}, apperr.New(apperr.NotFound, "app not found")
	}
	return list[0], nil
}

// List returns every registered app, by app code.
func (s *Store) List(ctx context.Context) ([]App, error) { return s.list(ctx, "") }

// list reads the apps (only one when app is set), with their keys.
func (s *Store) list(ctx context.Context, only string) ([]App, error) {
	q := `SELECT app_code, status, jwks_url, jwks_issuer, jwks_audience, jwks_app_claim, created_by, created_at_ms, updated_by, updated_at_ms FROM apps`
	kq := `SELECT app_code, key_id, created_by, created_at_ms, retire_at_ms FROM app_keys`
	var args []any
	if only != "" {
		q += ` WHERE app_code = ?`
		kq += ` WHERE app_code = ?`
		args = append(args, only)
	}
	byApp := map[string]*App{}
	var order []string
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		a := App{Registered: SourceStored, Keys: []KeyInfo{}}
		var j JWKS
		if err := rows.Scan(&a.AppCode, &a.Status, &j.URL, &j.Issuer, &j.Audience, &j.AppClaim, &a.CreatedBy, &a.CreatedAtMs, &a.UpdatedBy, &a.UpdatedAtMs); err != nil {
			return nil, fmt.Errorf("list apps: %w", err)
		}
		if j.URL != "" {
			a.JWKS = &j
		}
		byApp[a.AppCode] = &a
		order = append(order, a.AppCode)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list apps: %w", err)
	}
	now := s.cfg.Now().UnixMilli()
	krows, err := s.db.QueryContext(ctx, kq+` ORDER BY retire_at_ms = 0 DESC, created_at_ms DESC, retire_at_ms DESC, key_id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	defer krows.Close()
	for krows.Next() {
		var app string
		k := KeyInfo{Source: SourceStored}
		if err := krows.Scan(&app, &k.KeyID, &k.CreatedBy, &k.CreatedAtMs, &k.RetireAtMs); err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		switch {
		case k.RetireAtMs == 0:
			k.Status = KeyActive
		case k.RetireAtMs > now:
			k.Status = KeyRetiring
		default:
			k.Status = KeyRetired
		}
		if a := byApp[app]; a != nil {
			a.Keys = append(a.Keys, k)
		}
	}
	if err := krows.Err(); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	for _, sk := range s.cfg.Static {
		if only != "" && sk.AppCode != only {
			continue
		}
		a := byApp[sk.AppCode]
		if a == nil {
			a = &App{AppCode: sk.AppCode, Status: StatusActive, Registered: SourceConfig, Keys: []KeyInfo{}}
			byApp[sk.AppCode] = a
			order = append(order, sk.AppCode)
		}
		a.Keys = append([]KeyInfo{{KeyID: sk.Key.ID, Status: KeyActive, Source: SourceConfig, CreatedBy: "VOICEROOM_APP_KEYS"}}, a.Keys...)
	}
	slices.Sort(order)
	out := make([]App, 0, len(order))
	for _, app := range order {
		out = append(out, *byApp[app])
	}
	return out, nil
}

// SigningKey returns the key `voiceroom token` and the demo sign app's
// tokens with: its newest key of VOICEROOM_APP_KEYS, else its current
// stored key. NOT_FOUND for an app with neither, FAILED_PRECONDITION for
// a disabled app.
func (s *Store) SigningKey(ctx context.Context, app string) (authtoken.Key, error) {
	var status string
	err := s.db.QueryRowContext(ctx, `SELECT status FROM apps WHERE app_code = ?`, app).Scan(&status)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return authtoken.Key{}, fmt.Errorf("read app %s: %w", app, err)
	}
	if status == StatusDisabled {
		return authtoken.Key{}, apperr.New(apperr.FailedPrecondition, "app %s is disabled", app)
	}
	for i := len(s.cfg.Static) - 1; i >= 0; i-- {
		if s.cfg.Static[i].AppCode == app {
			return s.cfg.Static[i].Key, nil
		}
	}
	var kid string
	var sealed []byte
	err = s.db.QueryRowContext(ctx, `SELECT key_id, secret FROM app_keys WHERE app_code = ? AND retire_at_ms = 0
		ORDER BY created_at_ms DESC, key_id LIMIT 1`, app).Scan(&kid, &sealed)
	if errors.Is(err, sql.ErrNoRows) {
		return authtoken.Key{}, apperr.New(apperr.NotFound, "app %s has no key", app)
	}
	if err != nil {
		return authtoken.Key{}, fmt.Errorf("read key of %s: %w", app, err)
	}
	secret, err := s.sealer.Open(ad(app, kid), sealed)
	if err != nil {
		return authtoken.Key{}, fmt.Errorf("key %s of %s does not open (another VOICEROOM_APPS_SECRET_KEY?): %w", kid, app, err)
	}
	return authtoken.Key{ID: kid, Secret: secret}, nil
}

// EnsureKey returns app's signing key (SigningKey), first registering app
// or giving it a key when it has none: development's seed and the bench,
// never an operator's way. made says whether it made a key. A disabled
// app is FAILED_PRECONDITION.
func (s *Store) EnsureKey(ctx context.Context, app, operator string) (key authtoken.Key, made bool, err error) {
	key, err = s.SigningKey(ctx, app)
	if !apperr.Is(err, apperr.NotFound) {
		return key, false, err
	}
	_, err = s.Create(ctx, app, operator)
	if apperr.Is(err, apperr.AlreadyExists) { // registered (by the migration, say) without a key
		_, err = s.Rotate(ctx, app, nil, operator)
	}
	if err != nil {
		return authtoken.Key{}, false, err
	}
	key, err = s.SigningKey(ctx, app)
	return key, err == nil, err
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}
