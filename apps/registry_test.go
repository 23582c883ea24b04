package apps_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/apps"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
)

// TestKeysRotateWithAGracePeriod: an app's first key verifies its tokens
// and no other app's; after a rotation both keys verify until the old
// one's grace ends, and only the new one after; a third key while one is
// in its grace period is refused; a revoked key stops at once.
func TestKeysRotateWithAGracePeriod(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	store := newTestStore(t, db, clk, apps.StoreConfig{})
	reg := newTestRegistry(t, store, clk, apps.RegistryConfig{})
	v := verifier(reg, clk)
	ctx := context.Background()

	a, err := store.Create(ctx, "appa", "platform:7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(ctx, "appa", "platform:7"); !apperr.Is(err, apperr.AlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	b, err := store.Create(ctx, "appb", "platform:7")
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Keys) != 1 || a.Keys[0].KeyID != a.NewKey.KeyID || a.Keys[0].Status != apps.KeyActive || a.Status != apps.StatusActive {
		t.Fatalf("created %+v", a)
	}
	k1 := keyOf(a.NewKey)
	mustVerify(t, v, mustIssue(t, k1, "appa", 42, "", clk))
	mustVerify(t, v, mustIssue(t, keyOf(b.NewKey), "appb", 42, authtoken.RoleAdmin, clk))
	mustRefuse(t, v, mustIssue(t, k1, "appb", 42, "", clk), "appb's user token signed with appa's key")
	mustRefuse(t, v, mustIssue(t, k1, "appb", 0, authtoken.RoleAdmin, clk), "appb's admin token signed with appa's key")

	grace := time.Hour
	r, err := store.Rotate(ctx, "appa", &grace, "platform:7")
	if err != nil {
		t.Fatal(err)
	}
	k2 := keyOf(r.NewKey)
	if k2.ID == k1.ID || len(r.Keys) != 2 || r.Keys[0].KeyID != k2.ID || r.Keys[1].Status != apps.KeyRetiring {
		t.Fatalf("rotated %+v", r)
	}
	old := mustIssue(t, k1, "appa", 42, "", clk)
	tok := mustVerify(t, v, old)
	if !tok.Until.Equal(clk.Now().Add(time.Hour)) {
		t.Fatalf("a rotated-out key's token verifies until %v, want the end of its grace %v", tok.Until, clk.Now().Add(time.Hour))
	}
	mustVerify(t, v, mustIssue(t, k2, "appa", 42, "", clk))
	if _, err := store.Rotate(ctx, "appa", nil, "platform:7"); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("a third key during the grace period: %v", err)
	}
	if got, err := store.SigningKey(ctx, "appa"); err != nil || got.ID != k2.ID || string(got.Secret) != string(k2.Secret) {
		t.Fatalf("signing key %+v %v, want the new key", got, err)
	}

	clk.Advance(time.Hour - time.Millisecond)
	mustVerify(t, v, mustIssue(t, k1, "appa", 42, "", clk))
	clk.Advance(time.Millisecond)
	mustRefuse(t, v, mustIssue(t, k1, "appa", 42, "", clk), "a rotated-out key after its grace period")
	mustVerify(t, v, mustIssue(t, k2, "appa", 42, "", clk))

	// The grace is over: rotating again is allowed, with no grace.
	zero := time.Duration(0)
	r3, err := store.Rotate(ctx, "appa", &zero, "platform:7")
	if err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, mustIssue(t, k2, "appa", 42, "", clk), "a key rotated out with no grace")
	k3 := keyOf(r3.NewKey)
	mustVerify(t, v, mustIssue(t, k3, "appa", 42, "", clk))
	if _, err := store.Revoke(ctx, "appa", k3.ID, "platform:7"); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, mustIssue(t, k3, "appa", 42, "", clk), "a revoked key")
	mustCode(t, func() error { _, err := store.Revoke(ctx, "appa", "appa-00000000", "x"); return err }(), apperr.NotFound)
	mustCode(t, func() error { _, err := store.Rotate(ctx, "nobody", nil, "x"); return err }(), apperr.NotFound)
	mustCode(t, func() error { _, err := store.Create(ctx, "bad.app", "x"); return err }(), apperr.InvalidArgument)
	big := apps.MaxGrace + time.Second
	mustCode(t, func() error { _, err := store.Rotate(ctx, "appb", &big, "x"); return err }(), apperr.InvalidArgument)
}

// TestDisabledAppIsRefused: every token of a disabled app is refused,
// whatever signed it, until it is enabled again.
func TestDisabledAppIsRefused(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	store := newTestStore(t, db, clk, apps.StoreConfig{})
	reg := newTestRegistry(t, store, clk, apps.RegistryConfig{Secret: []byte("the-single-secret-0123"), SecretForAll: true})
	v := verifier(reg, clk)
	ctx := context.Background()
	a, err := store.Create(ctx, "appa", "platform:7")
	if err != nil {
		t.Fatal(err)
	}
	user, admin := mustIssue(t, keyOf(a.NewKey), "appa", 42, "", clk), mustIssue(t, keyOf(a.NewKey), "appa", 0, authtoken.RoleAdmin, clk)
	single := mustIssue(t, authtoken.Key{Secret: []byte("the-single-secret-0123")}, "appa", 42, "", clk)
	mustVerify(t, v, user)
	mustVerify(t, v, single)
	if _, err := store.SetStatus(ctx, "appa", apps.StatusDisabled, "platform:7"); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"user": user, "admin": admin, "single secret": single} {
		mustRefuse(t, v, tok, "a disabled app's "+name+" token")
	}
	if _, err := store.SigningKey(ctx, "appa"); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("signing key of a disabled app: %v", err)
	}
	if _, err := store.SetStatus(ctx, "appa", apps.StatusActive, "platform:7"); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, v, user)
	mustCode(t, func() error { _, err := store.SetStatus(ctx, "appa", "paused", "x"); return err }(), apperr.InvalidArgument)
}

// TestAnotherProcessSeesChanges: a second registry on the same database
// (another api process) accepts a key made elsewhere from its first use
// and sees a revocation at its next check, not before; the check reads
// no key while nothing changed.
func TestAnotherProcessSeesChanges(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	here := newTestStore(t, db, clk, apps.StoreConfig{})
	newTestRegistry(t, here, clk, apps.RegistryConfig{})
	there := newTestRegistry(t, newTestStore(t, db, clk, apps.StoreConfig{}), clk, apps.RegistryConfig{UnknownKeyReload: time.Hour})
	v := verifier(there, clk)
	ctx := context.Background()

	a, err := here.Create(ctx, "appa", "cli")
	if err != nil {
		t.Fatal(err)
	}
	tok := mustIssue(t, keyOf(a.NewKey), "appa", 42, "", clk)
	mustVerify(t, v, tok) // an unknown key: checked at once
	b, err := here.Create(ctx, "appb", "cli")
	if err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, mustIssue(t, keyOf(b.NewKey), "appb", 42, "", clk), "a second unknown key within UnknownKeyReload")
	gen := there.Generation()
	if err := there.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if there.Generation() == gen {
		t.Fatal("a reload after a change kept the generation")
	}
	mustVerify(t, v, mustIssue(t, keyOf(b.NewKey), "appb", 42, "", clk))

	if _, err := here.Revoke(ctx, "appa", a.NewKey.KeyID, "cli"); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, v, tok) // not checked yet
	gen = there.Generation()
	if err := there.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, tok, "a key revoked on another process, after a check")
	gen = there.Generation()
	if err := there.Reload(ctx); err != nil || there.Generation() != gen {
		t.Fatalf("a check with nothing changed reloaded: generation %d -> %d (%v)", gen, there.Generation(), err)
	}
}

// TestRunPicksUpChanges: Run checks MySQL every RefreshInterval.
func TestRunPicksUpChanges(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	here := newTestStore(t, db, clk, apps.StoreConfig{})
	there := newTestRegistry(t, newTestStore(t, db, clk, apps.StoreConfig{}), clk,
		apps.RegistryConfig{RefreshInterval: 20 * time.Millisecond, UnknownKeyReload: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- there.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	gen := there.Generation()
	if _, err := here.Create(context.Background(), "appa", "cli"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if there.Generation() == gen {
			return errNotYet
		}
		return nil
	})
}

var errNotYet = apperr.New(apperr.Unavailable, "not yet")

// TestStaticKeysAndPlatform: keys of VOICEROOM_APP_KEYS verify their
// app's tokens and are listed without their secret; such an app can be
// disabled; platform keys verify only platform tokens.
func TestStaticKeysAndPlatform(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	static, err := apps.ParseAppKeys("cfg:cfg-1:config-secret-0123456789, cfg:cfg-2:config-secret-abcdefghij")
	if err != nil {
		t.Fatal(err)
	}
	store := newTestStore(t, db, clk, apps.StoreConfig{Static: static})
	reg := newTestRegistry(t, store, clk, apps.RegistryConfig{})
	v := verifier(reg, clk)
	ctx := context.Background()
	for _, k := range static {
		mustVerify(t, v, mustIssue(t, k.Key, "cfg", 42, "", clk))
	}
	if got, err := store.SigningKey(ctx, "cfg"); err != nil || got.ID != "cfg-2" {
		t.Fatalf("signing key %+v %v, want the last listed", got, err)
	}
	list, err := store.List(ctx)
	if err != nil || len(list) != 1 || list[0].Registered != apps.SourceConfig || len(list[0].Keys) != 2 || list[0].Keys[0].Source != apps.SourceConfig {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, err := store.Rotate(ctx, "cfg", nil, "x"); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("rotate a configured app's key: %v", err)
	}
	if _, err := store.Revoke(ctx, "cfg", "cfg-1", "x"); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("revoke a configured key: %v", err)
	}
	if _, err := store.SetStatus(ctx, "cfg", apps.StatusDisabled, "platform:1"); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, mustIssue(t, static[1].Key, "cfg", 42, "", clk), "a disabled configured app")

	p := testPlatform[0].Key
	tok, err := p.IssuePlatform(7, time.Hour, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := mustVerify(t, v, tok); !got.Platform() || got.UserID != 7 {
		t.Fatalf("platform token %+v", got)
	}
	mustRefuse(t, v, mustIssue(t, p, "cfg", 42, authtoken.RoleAdmin, clk), "an app token signed with the platform key")

	for _, bad := range []string{"cfg:k1", "cfg:k/1:config-secret-0123456789", "c.fg:k1:config-secret-0123456789", "cfg:k1:short",
		"a:k1:config-secret-0123456789,a:k1:config-secret-0123456789",
		"a:k1:config-secret-0123456789,a:k2:config-secret-0123456789,a:k3:config-secret-0123456789"} {
		if _, err := apps.ParseAppKeys(bad); err == nil {
			t.Errorf("ParseAppKeys(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"k1", "k1:short", "k1:platform-secret-0123,k1:platform-secret-0123", "a:platform-secret-0123,b:platform-secret-0123,c:platform-secret-0123"} {
		if _, err := apps.ParsePlatformKeys(bad); err == nil {
			t.Errorf("ParsePlatformKeys(%q) accepted", bad)
		}
	}
}

// TestSingleSecret: the single secret verifies tokens without a kid for
// every app not disabled in development, and for registered active apps
// only until the window's end otherwise; never at all without either.
func TestSingleSecret(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	store := newTestStore(t, db, clk, apps.StoreConfig{})
	ctx := context.Background()
	if _, err := store.Create(ctx, "old", "migration"); err != nil {
		t.Fatal(err)
	}
	secret := authtoken.Key{Secret: []byte("the-single-secret-0123")}
	until := clk.Now().Add(time.Hour)
	window := verifier(newTestRegistry(t, store, clk, apps.RegistryConfig{Secret: secret.Secret, SecretUntil: until}), clk)
	dev := verifier(newTestRegistry(t, store, clk, apps.RegistryConfig{Secret: secret.Secret, SecretForAll: true}), clk)
	none := verifier(newTestRegistry(t, store, clk, apps.RegistryConfig{}), clk)

	if got := mustVerify(t, window, mustIssue(t, secret, "old", 42, "", clk)); got.Source != authtoken.SourceSecret || !got.Until.Equal(until) {
		t.Fatalf("window: %+v", got)
	}
	mustRefuse(t, window, mustIssue(t, secret, "unregistered", 42, "", clk), "the window, for an app not registered")
	mustVerify(t, dev, mustIssue(t, secret, "unregistered", 42, "", clk))
	mustRefuse(t, none, mustIssue(t, secret, "old", 42, "", clk), "no window, no development")
	clk.Advance(time.Hour)
	mustRefuse(t, window, mustIssue(t, secret, "old", 42, "", clk), "after the window")
}

// TestMySQLDownKeepsServing: when MySQL cannot be read, the last keys
// keep verifying.
func TestMySQLDownKeepsServing(t *testing.T) {
	_, dsn := testenv.NewDBWithDSN(t)
	clk := testenv.NewClock(time.Time{})
	own, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	store := newTestStore(t, own, clk, apps.StoreConfig{})
	a, err := store.Create(context.Background(), "appa", "cli")
	if err != nil {
		t.Fatal(err)
	}
	reg := newTestRegistry(t, store, clk, apps.RegistryConfig{})
	own.Close()
	if err := reg.Reload(context.Background()); err == nil {
		t.Fatal("a reload on a closed pool succeeded")
	}
	mustVerify(t, verifier(reg, clk), mustIssue(t, keyOf(a.NewKey), "appa", 42, "", clk))
}

// TestMigrationRegistersExistingApps: migration 00014 registers, active
// and without keys, every app that has data, so that the upgrade window
// accepts the single secret for them.
func TestMigrationRegistersExistingApps(t *testing.T) {
	db := testenv.NewDB(t)
	testenv.Exec(t, db,
		"DROP TABLE app_keys", "DROP TABLE apps", "DELETE FROM goose_db_version WHERE version_id = 14",
		"INSERT INTO users (app_code, user_id, display_user_id, created_at_ms, updated_at_ms) VALUES ('legacy1', 1, 'u1', 1, 1)",
		"INSERT INTO regions (app_code, region_code, name, created_at_ms, updated_at_ms) VALUES ('legacy2', 'R', 'R', 1, 1)")
	if err := mysqldb.Migrate(context.Background(), db, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	clk := testenv.NewClock(time.Time{})
	list, err := newTestStore(t, db, clk, apps.StoreConfig{}).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].AppCode != "legacy1" || list[1].AppCode != "legacy2" || list[0].Status != apps.StatusActive || len(list[0].Keys) != 0 {
		t.Fatalf("registered %+v", list)
	}
}
