package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/apperr"
	"voiceroom/apps"
	"voiceroom/authtoken"
	"voiceroom/gateway"
	"voiceroom/internal/seal"
)

// AuthConfig is the tokens' configuration, a part of config (docs/auth.md).
type AuthConfig struct {
	// AppKeys are apps' keys kept in the deployment's own secret store:
	// app_code:key_id:secret,...
	AppKeys string `env:"VOICEROOM_APP_KEYS"`
	// PlatformKeys are the platform operators' keys: key_id:secret,...;
	// empty: a development key generated into the data dir.
	PlatformKeys string `env:"VOICEROOM_PLATFORM_KEYS"`
	// AppsSecretKey seals the stored apps' keys; empty: a development key
	// generated into the data dir.
	AppsSecretKey string `env:"VOICEROOM_APPS_SECRET_KEY"`
	// DevSingleSecret accepts VOICEROOM_JWT_SECRET (or, when empty, a key
	// generated into the data dir) for every app: development only.
	DevSingleSecret bool `env:"VOICEROOM_DEV_SINGLE_SECRET" envDefault:"false"`
	// JWTSecretUntil ends the upgrade window (RFC 3339): until then
	// VOICEROOM_JWT_SECRET keeps verifying the registered apps' tokens.
	JWTSecretUntil   string        `env:"VOICEROOM_JWT_SECRET_UNTIL"`
	AuthRefresh      time.Duration `env:"VOICEROOM_AUTH_REFRESH_INTERVAL" envDefault:"2s"`
	AuthKeyGrace     time.Duration `env:"VOICEROOM_AUTH_KEY_GRACE" envDefault:"24h"`
	AuthJWKSAllowHTP bool          `env:"VOICEROOM_AUTH_JWKS_ALLOW_HTTP" envDefault:"false"`
}

// validate checks the variables the packages' Configs do not see; errors
// go to errs.
func (c config) validateAuth(errs *varErrors) {
	add := func(name, format string, args ...any) {
		errs.add(&configError{Var: name, Msg: fmt.Sprintf(format, args...)})
	}
	if _, err := apps.ParseAppKeys(c.AppKeys); err != nil {
		add("VOICEROOM_APP_KEYS", "%v (want app_code:key_id:secret,...)", err)
	}
	if _, err := apps.ParsePlatformKeys(c.PlatformKeys); err != nil {
		add("VOICEROOM_PLATFORM_KEYS", "%v (want key_id:secret,...)", err)
	}
	if c.AppsSecretKey != "" {
		if _, err := seal.ParseKey(c.AppsSecretKey); err != nil {
			add("VOICEROOM_APPS_SECRET_KEY", "want 32 bytes as 64 hex digits or base64 (openssl rand -hex 32)")
		}
	}
	if _, err := c.secretUntil(); err != nil {
		add("VOICEROOM_JWT_SECRET_UNTIL", "%v", err)
	} else if c.JWTSecretUntil != "" && c.JWTSecret == "" {
		add("VOICEROOM_JWT_SECRET_UNTIL", "ends the window of VOICEROOM_JWT_SECRET, which is empty")
	} else if c.JWTSecretUntil != "" && c.DevSingleSecret {
		add("VOICEROOM_JWT_SECRET_UNTIL", "VOICEROOM_DEV_SINGLE_SECRET accepts the secret for every app already: set one of the two")
	}
	if c.AuthRefresh < 100*time.Millisecond {
		add("VOICEROOM_AUTH_REFRESH_INTERVAL", "want at least 100ms, got %v", c.AuthRefresh)
	}
	if c.AuthKeyGrace > apps.MaxGrace {
		add("VOICEROOM_AUTH_KEY_GRACE", "want at most %v, got %v", apps.MaxGrace, c.AuthKeyGrace)
	}
}

// secretUntil is the end of the upgrade window; zero when none is set.
func (c AuthConfig) secretUntil() (time.Time, error) {
	if c.JWTSecretUntil == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, c.JWTSecretUntil)
	if err != nil {
		return time.Time{}, fmt.Errorf("want an RFC 3339 time such as 2030-01-31T00:00:00Z, got %q", c.JWTSecretUntil)
	}
	return t, nil
}

// appsVars are the variables that set apps.StoreConfig's and
// apps.RegistryConfig's fields.
var appsVars = map[string]string{
	"Static": "VOICEROOM_APP_KEYS", "Grace": "VOICEROOM_AUTH_KEY_GRACE", "AllowHTTP": "VOICEROOM_AUTH_JWKS_ALLOW_HTTP",
	"Platform": "VOICEROOM_PLATFORM_KEYS", "Secret": "VOICEROOM_JWT_SECRET", "SecretUntil": "VOICEROOM_JWT_SECRET_UNTIL",
	"SecretForAll": "VOICEROOM_DEV_SINGLE_SECRET", "RefreshInterval": "VOICEROOM_AUTH_REFRESH_INTERVAL",
}

// appsStore is the configuration of the apps' store (the variables are
// valid: validate checked them).
func (c *config) appsStore() apps.StoreConfig {
	static, _ := apps.ParseAppKeys(c.AppKeys)
	return apps.StoreConfig{Static: static, Grace: c.AuthKeyGrace, AllowHTTP: c.AuthJWKSAllowHTP}
}

// registry is the configuration of the keys' registry.
func (c *config) registry(platform []apps.StaticKey, secret []byte) apps.RegistryConfig {
	until, _ := c.secretUntil()
	return apps.RegistryConfig{
		Platform:        platform,
		Secret:          secret,
		SecretForAll:    c.DevSingleSecret && secret != nil,
		SecretUntil:     until,
		RefreshInterval: c.AuthRefresh,
		JWKS:            apps.JWKSConfig{AllowHTTP: c.AuthJWKSAllowHTP},
	}
}

// devKey returns value, or when it is empty the development key kept in
// $VOICEROOM_DATA_DIR/file: made there (by make, logged as a warning to
// set name in production) when create is set and it is missing.
func (c *config) devKey(log *slog.Logger, name, value, file string, create bool, make func() string) (string, error) {
	if value != "" {
		return value, nil
	}
	path := filepath.Join(c.DataDir, file)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		return strings.TrimSpace(string(b)), nil
	case !errors.Is(err, os.ErrNotExist):
		return "", badVar(name, "empty, and %s cannot be read: %v", path, err)
	case !create:
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		return "", badVar(name, "empty, and there is no development key at %s: run voiceroom serve once with the same VOICEROOM_DATA_DIR "+
			"(it creates the key there), run this command from serve's directory, or set %s to serve's value", path, name)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return "", badVar("VOICEROOM_DATA_DIR", "%v", err)
	}
	v := make()
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		return "", badVar("VOICEROOM_DATA_DIR", "write %s: %v", path, err)
	}
	log.Warn(name+" is empty: generated a development key; set the variable in production", "file", path)
	return v, nil
}

// appsSealer returns the sealer of the apps' stored keys
// (VOICEROOM_APPS_SECRET_KEY, or the development key; see devKey) and the
// sealing key itself.
func (c *config) appsSealer(log *slog.Logger, create bool) (*seal.Sealer, []byte, error) {
	raw, err := c.devKey(log, "VOICEROOM_APPS_SECRET_KEY", c.AppsSecretKey, "apps-secret-key", create,
		func() string { return hex.EncodeToString(randomBytes(seal.KeySize)) })
	if err != nil {
		return nil, nil, err
	}
	key, err := seal.ParseKey(raw)
	if err != nil {
		return nil, nil, badVar("VOICEROOM_APPS_SECRET_KEY", "%v", err)
	}
	s, err := seal.New(key)
	return s, key, err
}

// platformKeys returns the platform operators' keys (VOICEROOM_PLATFORM_KEYS,
// or the development key "dev"; see devKey).
func (c *config) platformKeys(log *slog.Logger, create bool) ([]apps.StaticKey, error) {
	raw, err := c.devKey(log, "VOICEROOM_PLATFORM_KEYS", c.PlatformKeys, "platform-key", create,
		func() string { return "dev:" + hex.EncodeToString(randomBytes(32)) })
	if err != nil {
		return nil, err
	}
	keys, err := apps.ParsePlatformKeys(raw)
	if err != nil || len(keys) == 0 {
		return nil, badVar("VOICEROOM_PLATFORM_KEYS", "want key_id:secret,...: %v", err)
	}
	return keys, nil
}

// singleSecret is the single secret serve accepts where allowed:
// VOICEROOM_JWT_SECRET, or in development (VOICEROOM_DEV_SINGLE_SECRET)
// the key generated into the data dir when it is empty; nil otherwise.
func (c *config) singleSecret(log *slog.Logger) ([]byte, error) {
	if c.JWTSecret == "" && !c.DevSingleSecret {
		return nil, nil
	}
	return c.jwtSecret(log)
}

// serverKey keys what every api process must agree on besides tokens:
// the room list's cursors and the console's forms. It is
// VOICEROOM_JWT_SECRET's key while there is one (so an upgrade changes
// neither), else derived from the apps' sealing key, which every api
// process shares.
func serverKey(secret, sealKey []byte) []byte {
	if secret != nil {
		return secret
	}
	mac := hmac.New(sha256.New, sealKey)
	mac.Write([]byte("voiceroom server key"))
	return mac.Sum(nil)
}

// wireAuth builds what verifies tokens: for the api role, the registry of
// the apps' keys (its refresh loop a worker, the platform routes a
// mount); for the other roles, which serve no token route, keys that
// verify nothing. serve refuses to run on the single secret alone.
func wireAuth(ctx context.Context, d *deps) error {
	if !d.cfg.hasRole(roleAPI) {
		d.keys = authtoken.SingleSecret(nil)
		return nil
	}
	secret, err := d.cfg.singleSecret(d.log)
	if err != nil {
		return err
	}
	sealer, sealKey, err := d.cfg.appsSealer(d.log, true)
	if err != nil {
		return err
	}
	d.serverKey = serverKey(secret, sealKey)
	platform, err := d.cfg.platformKeys(d.log, true)
	if err != nil {
		return err
	}
	store, err := apps.NewStore(d.db, sealer, d.cfg.appsStore(), d.log.With("component", "apps"))
	if err != nil {
		return configErr(err, "apps", appsVars)
	}
	reg, err := apps.NewRegistry(ctx, store, d.cfg.registry(platform, secret), d.log.With("component", "apps"), d.reg)
	if err != nil {
		return configErr(err, "apps", appsVars)
	}
	if err := d.cfg.checkSingleSecret(secret, reg.HasAppKeys(), d.log); err != nil {
		reg.Close()
		return err
	}
	d.keys = reg
	d.workers = append(d.workers, worker{name: "apps-keys", run: reg.Run})
	d.closers = append(d.closers, reg.Close)
	d.mounts = append(d.mounts, gateway.PlatformRoutes(store))
	return nil
}

// checkSingleSecret refuses VOICEROOM_JWT_SECRET as the only key outside
// development and an upgrade window, and says when it is set but no
// longer accepted.
func (c *config) checkSingleSecret(secret []byte, appKeys bool, log *slog.Logger) error {
	until, _ := c.secretUntil()
	open := time.Now().Before(until)
	switch {
	case secret == nil || c.DevSingleSecret:
		if c.DevSingleSecret {
			log.Warn("VOICEROOM_DEV_SINGLE_SECRET: one secret verifies every app's tokens; development only")
		}
		return nil
	case !appKeys && !open:
		return badVar("VOICEROOM_JWT_SECRET", "is the only token key and no app has a key of its own, so any app's backend could act for any other: "+
			"give each app its own key (voiceroom apps create APP, or VOICEROOM_APP_KEYS; docs/auth.md), "+
			"set VOICEROOM_JWT_SECRET_UNTIL to keep accepting the secret for the registered apps during an upgrade window, "+
			"or set VOICEROOM_DEV_SINGLE_SECRET=true in development")
	case open:
		log.Warn("VOICEROOM_JWT_SECRET verifies the registered apps' tokens until the upgrade window ends; move their backends to their own keys "+
			"(voiceroom_auth_secret_requests_total counts what still uses it)", "until", until)
	default:
		log.Warn("VOICEROOM_JWT_SECRET is set but verifies no token (no upgrade window, not development); it still keys the list's cursors and the console's forms")
	}
	return nil
}

// configErr reports a package's *apperr.ConfigError under its variable.
func configErr(err error, component string, vars map[string]string) error {
	if apperr.ConfigFieldOf(err) == "" {
		return err
	}
	var errs varErrors
	errs.of(err, component, vars)
	return errs.join()
}

// signingKey returns the key tokens of app are signed with here
// (`voiceroom token`, the demo, the bench): its key in VOICEROOM_APP_KEYS,
// else its stored key (MySQL, opened with VOICEROOM_APPS_SECRET_KEY or the
// development key), else the single secret (VOICEROOM_JWT_SECRET or the
// development key), which serve accepts only in development or during an
// upgrade window. It never makes a key. note is what the caller should
// tell its user, when not empty.
func (c *config) signingKey(ctx context.Context, log *slog.Logger, app string) (key authtoken.Key, note string, err error) {
	static, _ := apps.ParseAppKeys(c.AppKeys)
	for i := len(static) - 1; i >= 0; i-- {
		if static[i].AppCode == app {
			return static[i].Key, "", nil
		}
	}
	key, dbErr := c.storedKey(ctx, log, app)
	switch {
	case dbErr == nil:
		return key, "", nil
	case apperr.Is(dbErr, apperr.FailedPrecondition):
		return authtoken.Key{}, "", dbErr
	}
	secret, err := c.existingJWTSecret()
	if err == nil {
		return authtoken.Key{Secret: secret}, fmt.Sprintf("app %s has no key of its own (%v): signed with the single secret, "+
			"which serve accepts only in development (VOICEROOM_DEV_SINGLE_SECRET) or during an upgrade window", app, dbErr), nil
	}
	return authtoken.Key{}, "", badVar("VOICEROOM_APP_KEYS", "no key for app %s (%v): register it (voiceroom apps create %s, or "+
		"voiceroom seed --app %s in development) and run this where serve's VOICEROOM_MYSQL_DSN and VOICEROOM_APPS_SECRET_KEY "+
		"(or data dir) are, or list its key in VOICEROOM_APP_KEYS; in development with VOICEROOM_DEV_SINGLE_SECRET, "+
		"set VOICEROOM_JWT_SECRET or VOICEROOM_DATA_DIR to serve's", app, dbErr, app, app)
}

// storedKey reads app's current stored key, without creating or
// migrating anything: NOT_FOUND when there is none (or no apps table),
// FAILED_PRECONDITION for a disabled app.
func (c *config) storedKey(ctx context.Context, log *slog.Logger, app string) (authtoken.Key, error) {
	db, err := c.openPlain(ctx)
	if err != nil {
		return authtoken.Key{}, err
	}
	defer db.Close()
	sealer, _, err := c.appsSealer(log, false)
	if err != nil {
		return authtoken.Key{}, err
	}
	store, err := apps.NewStore(db, sealer, c.appsStore(), log)
	if err != nil {
		return authtoken.Key{}, err
	}
	key, err := store.SigningKey(ctx, app)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 { // no apps table: not migrated yet
		return authtoken.Key{}, apperr.New(apperr.NotFound, "no apps table")
	}
	return key, err
}

// openPlain opens serve's database as it is: no database created, no
// migration, a short wait.
func (c *config) openPlain(ctx context.Context) (*sql.DB, error) {
	db, err := sql.Open("mysql", c.MySQLDSN)
	if err != nil {
		return nil, badVar("VOICEROOM_MYSQL_DSN", "%v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql %s: %w", redactDSN(c.MySQLDSN), err)
	}
	return db, nil
}

// redactDSN is a DSN without its password, for messages.
func redactDSN(dsn string) string {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	cfg.Passwd = ""
	return cfg.Addr + "/" + cfg.DBName
}
