package apps_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/apps"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

// idp is the test's identity provider, with the claims of app idpapp's
// tokens by default.
type idp struct {
	*testenv.IdentityProvider
}

func newTestIDP(t testing.TB) *idp { return &idp{testenv.NewIdentityProvider(t)} }

// token signs the default claims (iss, aud, the app claim, sub, exp), as
// edit changes them (nil removes one), with kid's key.
func (p *idp) token(kid string, now time.Time, edit map[string]any) string {
	claims := map[string]any{"iss": "https://idp.test", "aud": "voiceroom", "tenant": "idpapp", "sub": "42",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
	for k, v := range edit {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	return p.Token(kid, claims)
}

// newIDPApp registers app idpapp with p as its identity provider and
// returns a verifier over a registry that fetches unknown kids at most
// every unknownKID.
func newIDPApp(t *testing.T, p *idp, unknownKID time.Duration) (*authtoken.Verifier, *apps.Store, *testenv.Clock) {
	t.Helper()
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Now())
	store := newTestStore(t, db, clk, apps.StoreConfig{AllowHTTP: true})
	ctx := context.Background()
	if _, err := store.Create(ctx, "idpapp", "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := store.SetJWKS(ctx, "idpapp", apps.JWKS{URL: p.URL(), Issuer: "https://idp.test", Audience: "voiceroom", AppClaim: "tenant"}, "cli"); err != nil {
		t.Fatal(err)
	}
	reg := newTestRegistry(t, store, clk, apps.RegistryConfig{JWKS: apps.JWKSConfig{AllowHTTP: true, UnknownKID: unknownKID, Timeout: 2 * time.Second}})
	return verifier(reg, clk), store, clk
}

// TestIdentityProviderTokens: RS256 and ES256 tokens of an app's provider
// verify against its JWKS with the app's iss, aud and app claim; a wrong
// issuer or audience, another app in the claim, an expired token or an
// unknown key is refused, never an error of another kind.
func TestIdentityProviderTokens(t *testing.T) {
	p := newTestIDP(t)
	p.AddKey("r1", false)
	p.AddKey("e1", true)
	v, _, clk := newIDPApp(t, p, time.Hour)
	now := clk.Now()
	for _, kid := range []string{"r1", "e1"} {
		got := mustVerify(t, v, p.token(kid, now, map[string]any{"role": "admin"}))
		if got.AppCode != "idpapp" || got.UserID != 42 || got.Admin() || got.Source != authtoken.SourceJWKS {
			t.Fatalf("%s: %+v", kid, got)
		}
	}
	for name, tok := range map[string]string{
		"wrong issuer":     p.token("r1", now, map[string]any{"iss": "https://evil.test"}),
		"wrong audience":   p.token("r1", now, map[string]any{"aud": "someone-else"}),
		"another app":      p.token("r1", now, map[string]any{"tenant": "other"}),
		"no app claim":     p.token("r1", now, map[string]any{"tenant": nil}),
		"app_code instead": p.token("r1", now, map[string]any{"tenant": nil, "app_code": "idpapp"}),
	} {
		mustRefuse(t, v, tok, name)
	}
	if _, err := v.Verify(context.Background(), p.token("r1", now.Add(-2*time.Hour), nil)); !errors.Is(err, authtoken.ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	p.AddKey("r9", false)
	p.Publish("r1", "e1") // r9 exists but is not published
	mustRefuse(t, v, p.token("r9", now, nil), "an unknown key")
}

// TestIdentityProviderRotates: a token signed with a key the provider
// published after the last fetch verifies (the unknown kid makes the
// registry fetch again); a key the provider dropped stops verifying once
// fetched again.
func TestIdentityProviderRotates(t *testing.T) {
	p := newTestIDP(t)
	p.AddKey("r1", false)
	v, _, clk := newIDPApp(t, p, time.Millisecond)
	now := clk.Now()
	mustVerify(t, v, p.token("r1", now, nil))
	p.AddKey("r2", false)
	p.Publish("r2")
	mustVerify(t, v, p.token("r2", now, nil))
	mustRefuse(t, v, p.token("r1", now, nil), "a key the provider dropped, once fetched again")
}

// TestIdentityProviderDown: when the provider fails, the keys fetched
// before keep verifying and an unknown key is refused (401, never 500); a
// provider down at start verifies nothing until it answers.
func TestIdentityProviderDown(t *testing.T) {
	p := newTestIDP(t)
	p.AddKey("r1", false)
	v, store, clk := newIDPApp(t, p, time.Millisecond)
	now := clk.Now()
	mustVerify(t, v, p.token("r1", now, nil))
	p.SetDown(true)
	p.AddKey("r2", false)
	before := p.Fetches()
	mustRefuse(t, v, p.token("r2", now, nil), "a new key while the provider is down")
	if p.Fetches() == before {
		t.Fatal("an unknown kid did not make the registry try the provider")
	}
	mustVerify(t, v, p.token("r1", now, nil)) // the cached key

	// Down from the start: nothing verifies, and nothing fails harder.
	q := newTestIDP(t)
	q.AddKey("q1", false)
	q.SetDown(true)
	if _, err := store.SetJWKS(context.Background(), "idpapp", apps.JWKS{URL: q.URL(), Issuer: "https://idp.test", Audience: "voiceroom", AppClaim: "tenant"}, "cli"); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, v, q.token("q1", now, nil), "a provider down since it was set")
	q.SetDown(false)
	testenv.Eventually(t, 10*time.Second, func() error {
		_, err := v.Verify(context.Background(), q.token("q1", now, nil))
		return err
	})
}

// TestSetJWKSChecks: the provider's values are checked when set.
func TestSetJWKSChecks(t *testing.T) {
	db := testenv.NewDB(t)
	clk := testenv.NewClock(time.Time{})
	store := newTestStore(t, db, clk, apps.StoreConfig{})
	ctx := context.Background()
	if _, err := store.Create(ctx, "appa", "cli"); err != nil {
		t.Fatal(err)
	}
	ok := apps.JWKS{URL: "https://idp.example/.well-known/jwks.json", Issuer: "https://idp.example/", Audience: "voiceroom"}
	for name, edit := range map[string]func(j *apps.JWKS){
		"http":           func(j *apps.JWKS) { j.URL = "http://idp.example/jwks" },
		"no host":        func(j *apps.JWKS) { j.URL = "https:///jwks" },
		"user":           func(j *apps.JWKS) { j.URL = "https://u:p@idp.example/jwks" },
		"no issuer":      func(j *apps.JWKS) { j.Issuer = "" },
		"no audience":    func(j *apps.JWKS) { j.Audience = "" },
		"claim w/ space": func(j *apps.JWKS) { j.AppClaim = "a b" },
	} {
		j := ok
		edit(&j)
		if _, err := store.SetJWKS(ctx, "appa", j, "cli"); !apperr.Is(err, apperr.InvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
	a, err := store.SetJWKS(ctx, "appa", ok, "cli")
	if err != nil || a.JWKS == nil || *a.JWKS != ok {
		t.Fatalf("set: %+v %v", a, err)
	}
	if a, err = store.RemoveJWKS(ctx, "appa", "cli"); err != nil || a.JWKS != nil {
		t.Fatalf("remove: %+v %v", a, err)
	}
	if _, err := store.SetJWKS(ctx, "nobody", ok, "cli"); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("unknown app: %v", err)
	}
}
