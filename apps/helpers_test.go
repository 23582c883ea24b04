package apps_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/apps"
	"voiceroom/authtoken"
	"voiceroom/internal/seal"
	"voiceroom/internal/testenv"
)

var testSealKey = bytes.Repeat([]byte{0x5a}, seal.KeySize)

var testPlatform = []apps.StaticKey{{Key: authtoken.Key{ID: "ops1", Secret: []byte("platform-secret-0123456789")}}}

// newTestStore is a Store on db with the test's clock.
func newTestStore(tb testing.TB, db *sql.DB, clk *testenv.Clock, cfg apps.StoreConfig) *apps.Store {
	tb.Helper()
	s, err := seal.New(testSealKey)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Now = clk.Now
	st, err := apps.NewStore(db, s, cfg, testenv.Logger(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// newTestRegistry is a Registry on store, closed when the test ends.
func newTestRegistry(tb testing.TB, store *apps.Store, clk *testenv.Clock, cfg apps.RegistryConfig) *apps.Registry {
	tb.Helper()
	if cfg.Platform == nil {
		cfg.Platform = testPlatform
	}
	cfg.Now = clk.Now
	r, err := apps.NewRegistry(context.Background(), store, cfg, testenv.Logger(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(r.Close)
	return r
}

// verifier verifies with r at clk's time.
func verifier(r authtoken.Keys, clk *testenv.Clock) *authtoken.Verifier {
	return authtoken.NewVerifier(r, clk.Now)
}

// mustIssue signs a token of app with k at clk's time, valid for an hour.
func mustIssue(tb testing.TB, k authtoken.Key, app string, user int64, role string, clk *testenv.Clock) string {
	tb.Helper()
	tok, err := k.Issue(app, user, role, time.Hour, clk.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// keyOf is the key a store made, as an app's backend holds it.
func keyOf(k apps.NewKey) authtoken.Key { return authtoken.Key{ID: k.KeyID, Secret: []byte(k.Secret)} }

// mustVerify fails unless v accepts tok.
func mustVerify(tb testing.TB, v *authtoken.Verifier, tok string) authtoken.Token {
	tb.Helper()
	t, err := v.Verify(context.Background(), tok)
	if err != nil {
		tb.Fatalf("refused: %v", err)
	}
	return t
}

// mustRefuse fails unless v refuses tok as invalid.
func mustRefuse(tb testing.TB, v *authtoken.Verifier, tok, why string) {
	tb.Helper()
	if t, err := v.Verify(context.Background(), tok); !errors.Is(err, authtoken.ErrInvalid) {
		tb.Fatalf("%s: Verify = %+v, %v; want ErrInvalid", why, t, err)
	}
}

// mustCode fails unless err is of kind code.
func mustCode(tb testing.TB, err error, code apperr.Code) {
	tb.Helper()
	if !apperr.Is(err, code) {
		tb.Fatalf("err %v, want %s", err, code)
	}
}
