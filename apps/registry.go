package apps

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/every"
)

// RegistryConfig configures a Registry. Zero fields take the defaults
// given.
type RegistryConfig struct {
	// Platform are the platform operators' keys (VOICEROOM_PLATFORM_KEYS):
	// at least one.
	Platform []StaticKey
	// Secret is the single secret (VOICEROOM_JWT_SECRET) that verifies
	// tokens without a kid where SecretForAll or SecretUntil allow it;
	// nil: none.
	Secret []byte
	// SecretForAll accepts Secret for every app that is not disabled,
	// registered or not: development's single-secret mode
	// (VOICEROOM_DEV_SINGLE_SECRET). Default false.
	SecretForAll bool
	// SecretUntil accepts Secret for the registered, active apps until
	// then: the upgrade window (VOICEROOM_JWT_SECRET_UNTIL). Zero: never.
	SecretUntil time.Time
	// RefreshInterval is how often the registry checks MySQL for changes
	// made by other processes (one aggregate query; a reload only when
	// something changed): a change is seen by every process within it.
	// Default 2s.
	RefreshInterval time.Duration
	// UnknownKeyReload is the shortest time between two reloads made
	// because a token named a key this process does not know (a key made
	// on another process a moment ago). Default 1s.
	UnknownKeyReload time.Duration
	// JWKS is how identity providers' key sets are fetched.
	JWKS JWKSConfig
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// JWKSConfig is how a Registry fetches identity providers' key sets.
type JWKSConfig struct {
	// Refresh is how often a key set is fetched again. Default 1h.
	Refresh time.Duration
	// UnknownKID is the shortest time between two fetches made because a
	// token named a kid the key set does not hold (the provider rotated).
	// Default 30s.
	UnknownKID time.Duration
	// Timeout bounds one fetch. Default 5s.
	Timeout time.Duration
	// MaxBytes bounds a key set's size. Default 1 MiB.
	MaxBytes int64
	// AllowHTTP lets a key set be fetched over http:// (development).
	// Default false.
	AllowHTTP bool
	// Client fetches key sets. Default: an http.Client of its own.
	Client *http.Client
}

// WithDefaults returns c with zero fields set to their defaults.
func (c RegistryConfig) WithDefaults() RegistryConfig {
	if c.RefreshInterval == 0 {
		c.RefreshInterval = 2 * time.Second
	}
	if c.UnknownKeyReload == 0 {
		c.UnknownKeyReload = time.Second
	}
	if c.JWKS.Refresh == 0 {
		c.JWKS.Refresh = time.Hour
	}
	if c.JWKS.UnknownKID == 0 {
		c.JWKS.UnknownKID = 30 * time.Second
	}
	if c.JWKS.Timeout == 0 {
		c.JWKS.Timeout = 5 * time.Second
	}
	if c.JWKS.MaxBytes == 0 {
		c.JWKS.MaxBytes = 1 << 20
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c RegistryConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case len(c.Platform) == 0:
		return apperr.BadConfig("Platform", "platform operators need a key")
	case c.Secret != nil && len(c.Secret) < authtoken.MinSecret:
		return apperr.BadConfig("Secret", "the single secret must be at least %d bytes", authtoken.MinSecret)
	case c.Secret == nil && (c.SecretForAll || !c.SecretUntil.IsZero()):
		return apperr.BadConfig("Secret", "no single secret to accept")
	case c.RefreshInterval < 10*time.Millisecond:
		return apperr.BadConfig("RefreshInterval", "refresh interval %v: want at least 10ms", c.RefreshInterval)
	case c.UnknownKeyReload < 0:
		return apperr.BadConfig("UnknownKeyReload", "must not be negative")
	case c.JWKS.Refresh < time.Second || c.JWKS.UnknownKID < 0 || c.JWKS.Timeout <= 0 || c.JWKS.MaxBytes <= 0:
		return apperr.BadConfig("JWKS", "key set refresh at least 1s, timeout and size positive")
	}
	for _, k := range c.Platform {
		if !authtoken.ValidKeyID(k.Key.ID) || len(k.Key.Secret) < authtoken.MinSecret {
			return apperr.BadConfig("Platform", "platform key %q: id %s, secret at least %d bytes", k.Key.ID, authtoken.KeyIDRule, authtoken.MinSecret)
		}
	}
	return nil
}

// Registry is what a process verifies tokens with (authtoken.Keys): every
// app's keys and status, the platform operators' keys, the apps'
// identity providers, and the single secret where it is still accepted.
//
// It serves from a snapshot in memory: verifying a token reads no MySQL.
// The snapshot is reloaded when MySQL says something changed, checked
// every RefreshInterval (one aggregate query over the apps table), so a
// key rotated or revoked, or an app disabled, on any process or by the
// CLI, is seen by every process within RefreshInterval; on the process
// that made the change through its Store, at once. A token naming a key
// this process does not know yet makes it check at once too (at most
// once per UnknownKeyReload), so a new key verifies from its first use
// everywhere. When MySQL cannot be read, the last snapshot goes on
// serving.
type Registry struct {
	store   *Store
	cfg     RegistryConfig
	log     *slog.Logger
	metrics *Metrics

	snap atomic.Pointer[snapshot]
	gen  atomic.Uint64
	// lastUnknown is when the last reload for an unknown key started
	// (Unix ns).
	lastUnknown atomic.Int64
	loads       singleflight.Group

	mu        sync.Mutex // held by a load: stamp and providers
	stamp     stamp
	providers map[providerID]*provider
	base      context.Context // ends the providers' refreshes
	stop      context.CancelFunc
}

var _ authtoken.Keys = (*Registry)(nil)

// snapshot is one load of the keys.
type snapshot struct {
	apps      map[string]*appKeys
	providers map[string][]*authtoken.Provider // by issuer, of active apps
	platform  map[string][]byte
}

type appKeys struct {
	// registered: a row, or VOICEROOM_APP_KEYS.
	registered bool
	active     bool
	keys       map[string]key
}

type key struct {
	secret []byte
	until  time.Time // zero: no end
}

// stamp says whether the apps table changed since the last load.
type stamp struct {
	n, sum int64
	loaded bool
}

// NewRegistry loads the keys from store (an error when MySQL cannot be
// read) and returns the Registry. From then on store's changes reload it
// at once. reg may be nil. Run keeps it fresh; Close stops the identity
// providers' refreshes.
func NewRegistry(ctx context.Context, store *Store, cfg RegistryConfig, log *slog.Logger, reg prometheus.Registerer) (*Registry, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	base, stop := context.WithCancel(context.Background())
	r := &Registry{store: store, cfg: cfg, log: log, metrics: m, providers: map[providerID]*provider{}, base: base, stop: stop}
	if err := r.load(ctx, true); err != nil {
		stop()
		return nil, fmt.Errorf("apps: load keys: %w", err)
	}
	store.changed = func(ctx context.Context) {
		if err := r.load(ctx, false); err != nil {
			log.Warn("apps: keys not reloaded after a change; the next refresh will", "error", err)
		}
	}
	return r, nil
}

// Run checks MySQL for changes every RefreshInterval until ctx ends, then
// stops the identity providers' refreshes.
func (r *Registry) Run(ctx context.Context) error {
	defer r.Close()
	every.Tick(ctx, r.cfg.RefreshInterval, func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := r.load(lctx, false)
		cancel()
		if err != nil && ctx.Err() == nil {
			r.log.Warn("apps: keys not reloaded; serving the last ones", "error", err)
		}
	})
	return nil
}

// Close stops the identity providers' refreshes.
func (r *Registry) Close() { r.stop() }

// Reload checks MySQL for changes now and reloads when there are.
func (r *Registry) Reload(ctx context.Context) error { return r.load(ctx, false) }

// load reloads the snapshot when the apps table changed (or always, with
// force); one load at a time, and callers arriving meanwhile share its
// result.
func (r *Registry) load(ctx context.Context, force bool) error {
	_, err, _ := r.loads.Do("load", func() (any, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		err := r.loadLocked(ctx, force)
		r.metrics.loaded(err, r.cfg.Now())
		return nil, err
	})
	return err
}

func (r *Registry) loadLocked(ctx context.Context, force bool) error {
	var st stamp
	if err := r.store.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(SUM(updated_at_ms), 0) FROM apps`).Scan(&st.n, &st.sum); err != nil {
		return fmt.Errorf("check apps: %w", err)
	}
	st.loaded = true
	if !force && st == r.stamp {
		return nil
	}
	now := r.cfg.Now()
	s := &snapshot{apps: map[string]*appKeys{}, providers: map[string][]*authtoken.Provider{}, platform: map[string][]byte{}}
	for _, k := range r.cfg.Platform {
		s.platform[k.Key.ID] = k.Key.Secret
	}
	for _, k := range r.store.cfg.Static {
		a := s.app(k.AppCode)
		a.keys[k.Key.ID] = key{secret: k.Key.Secret}
	}
	jwks, err := r.readApps(ctx, s)
	if err != nil {
		return err
	}
	if err := r.readKeys(ctx, s, now); err != nil {
		return err
	}
	r.setProviders(s, jwks)
	r.snap.Store(s)
	r.gen.Add(1) // after the snapshot: a verdict cached under the new generation used it
	r.stamp = st
	r.log.Debug("apps: keys loaded", "apps", len(s.apps), "providers", len(jwks))
	return nil
}

func (s *snapshot) app(code string) *appKeys {
	a := s.apps[code]
	if a == nil {
		a = &appKeys{registered: true, active: true, keys: map[string]key{}}
		s.apps[code] = a
	}
	return a
}

// readApps reads the apps' statuses, and the identity providers of the
// active ones.
func (r *Registry) readApps(ctx context.Context, s *snapshot) ([]providerID, error) {
	rows, err := r.store.db.QueryContext(ctx, `SELECT app_code, status, jwks_url, jwks_issuer, jwks_audience, jwks_app_claim FROM apps`)
	if err != nil {
		return nil, fmt.Errorf("read apps: %w", err)
	}
	defer rows.Close()
	var jwks []providerID
	for rows.Next() {
		var code, status string
		var j JWKS
		if err := rows.Scan(&code, &status, &j.URL, &j.Issuer, &j.Audience, &j.AppClaim); err != nil {
			return nil, fmt.Errorf("read apps: %w", err)
		}
		a := s.app(code)
		a.active = status == StatusActive
		if a.active && j.URL != "" {
			jwks = append(jwks, providerID{app: code, JWKS: j})
		}
	}
	return jwks, rows.Err()
}

// readKeys reads the stored keys that still verify at now and opens
// their secrets; a secret that does not open is left out, loudly.
func (r *Registry) readKeys(ctx context.Context, s *snapshot, now time.Time) error {
	rows, err := r.store.db.QueryContext(ctx, `SELECT app_code, key_id, secret, retire_at_ms FROM app_keys
		WHERE retire_at_ms = 0 OR retire_at_ms > ?`, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var app, kid string
		var sealed []byte
		var retire int64
		if err := rows.Scan(&app, &kid, &sealed, &retire); err != nil {
			return fmt.Errorf("read keys: %w", err)
		}
		secret, err := r.store.sealer.Open(ad(app, kid), sealed)
		if err != nil {
			r.log.Error("apps: a key's secret does not open: check VOICEROOM_APPS_SECRET_KEY; its tokens are refused", "app_code", app, "key_id", kid, "error", err)
			continue
		}
		k := key{secret: secret}
		if retire > 0 {
			k.until = time.UnixMilli(retire)
		}
		if a := s.apps[app]; a != nil {
			a.keys[kid] = k
		}
	}
	return rows.Err()
}

// AppKey implements authtoken.Keys.
func (r *Registry) AppKey(ctx context.Context, app, kid string, now time.Time) ([]byte, time.Time, bool) {
	s := r.snap.Load()
	a := s.apps[app]
	if kid == "" {
		return r.secretFor(a, now)
	}
	if a == nil || a.keys[kid].secret == nil {
		if !authtoken.ValidKeyID(kid) || !voiceroom.ValidAppCode(app) || !r.reloadForUnknown(ctx) {
			return nil, time.Time{}, false
		}
		a = r.snap.Load().apps[app]
	}
	if a == nil || !a.active {
		return nil, time.Time{}, false
	}
	k, ok := a.keys[kid]
	if !ok || (!k.until.IsZero() && !now.Before(k.until)) {
		return nil, time.Time{}, false
	}
	return k.secret, k.until, true
}

// secretFor is the single secret, where it is accepted for app: every
// app not disabled in development, the registered active ones during
// the upgrade window.
func (r *Registry) secretFor(a *appKeys, now time.Time) ([]byte, time.Time, bool) {
	switch {
	case r.cfg.Secret == nil, a != nil && !a.active:
		return nil, time.Time{}, false
	case r.cfg.SecretForAll:
		return r.cfg.Secret, time.Time{}, true
	case a == nil || !now.Before(r.cfg.SecretUntil):
		return nil, time.Time{}, false
	}
	return r.cfg.Secret, r.cfg.SecretUntil, true
}

// unknownKeyWait bounds how long a request waits for the keys to reload
// when its token names a key this process does not know yet.
const unknownKeyWait = 2 * time.Second

// reloadForUnknown reloads for a key this process does not know, at most
// once per UnknownKeyReload; it reports whether it did.
func (r *Registry) reloadForUnknown(ctx context.Context) bool {
	now := time.Now().UnixNano()
	last := r.lastUnknown.Load()
	if now-last < int64(r.cfg.UnknownKeyReload) || !r.lastUnknown.CompareAndSwap(last, now) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, unknownKeyWait)
	defer cancel()
	if err := r.load(ctx, false); err != nil {
		r.log.Warn("apps: keys not reloaded for an unknown key", "error", err)
		return false
	}
	return true
}

// PlatformKey implements authtoken.Keys.
func (r *Registry) PlatformKey(kid string) ([]byte, bool) {
	s, ok := r.snap.Load().platform[kid]
	return s, ok
}

// Providers implements authtoken.Keys.
func (r *Registry) Providers(iss string) []*authtoken.Provider {
	return r.snap.Load().providers[iss]
}

// Generation implements authtoken.Keys.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

// Store returns the store the registry loads from.
func (r *Registry) Store() *Store { return r.store }

// HasAppKeys reports whether any app has a key that verifies now: stored,
// configured or an identity provider. serve refuses to run on the single
// secret alone (see docs/auth.md).
func (r *Registry) HasAppKeys() bool {
	s := r.snap.Load()
	if len(s.providers) > 0 {
		return true
	}
	for _, a := range s.apps {
		if a.active && len(a.keys) > 0 {
			return true
		}
	}
	return false
}
