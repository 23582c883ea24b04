package gateway

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

func newTestAuthenticator(tb testing.TB, keys authtoken.Keys, now func() time.Time) (*authenticator, *prometheus.Registry) {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m, err := newAuthMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return newAuthenticator(keys, now, m), reg
}

// TestVerifiedTokensKeepEveryRule: a token accepted once is accepted again
// from the cache with the same principal, until its expiry (plus leeway),
// then refused as expired; an edited or foreign token is refused even
// while the genuine one is cached.
func TestVerifiedTokensKeepEveryRule(t *testing.T) {
	clk := testenv.NewClock(time.Time{})
	a, reg := newTestAuthenticator(t, authtoken.SingleSecret(testSecret), clk.Now)
	ctx := context.Background()
	tok, err := authtoken.Issue(testSecret, "app1", 42, "", time.Minute, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := authtoken.Issue([]byte("another-secret-0123456789abcdef"), "app1", 42, "", time.Minute, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	edited := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[tok[len(tok)-2:] != "AA"]
	for range 2 { // first checked in full, then from the cache
		p, err := a.principal(ctx, "Bearer "+tok)
		if err != nil || p.AppCode != "app1" || p.UserID != 42 || p.Admin {
			t.Fatalf("genuine token: %+v %v", p, err)
		}
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_auth_secret_requests_total", "app_code", "app1"); got != 2 {
		t.Errorf("requests by the single secret: %v, want 2 (cached ones count too)", got)
	}
	for name, bad := range map[string]string{"edited": edited, "foreign": foreign, "empty": ""} {
		if _, err := a.principal(ctx, "Bearer "+bad); !apperr.Is(err, apperr.Unauthenticated) {
			t.Errorf("%s token: %v, want UNAUTHENTICATED", name, err)
		}
	}
	clk.Advance(time.Minute + authtoken.Leeway - time.Millisecond)
	if _, err := a.principal(ctx, "Bearer "+tok); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	clk.Advance(2 * time.Millisecond)
	_, err = a.principal(ctx, "Bearer "+tok)
	if ae, ok := err.(*apperr.Error); !ok || ae.Code != apperr.Unauthenticated || ae.Message != "token expired" {
		t.Fatalf("past expiry: %v, want token expired", err)
	}
}

// switchKeys are one app key that the test turns off, with or without
// moving the generation, and whose end of grace it sets.
type switchKeys struct {
	on    atomic.Bool
	gen   atomic.Uint64
	until time.Time
}

func (k *switchKeys) AppKey(_ context.Context, app, kid string, now time.Time) ([]byte, time.Time, bool) {
	if app != "app1" || kid != "k1" || !k.on.Load() || (!k.until.IsZero() && !now.Before(k.until)) {
		return nil, time.Time{}, false
	}
	return testSecret, k.until, true
}
func (*switchKeys) PlatformKey(string) ([]byte, bool)      { return nil, false }
func (*switchKeys) Providers(string) []*authtoken.Provider { return nil }
func (k *switchKeys) Generation() uint64                   { return k.gen.Load() }

// TestVerifiedTokensFollowTheKeys: a cached verdict ends when the keys'
// generation moves (a key revoked, an app disabled) and when the key's
// grace period ends, though the token has not expired.
func TestVerifiedTokensFollowTheKeys(t *testing.T) {
	clk := testenv.NewClock(time.Unix(1700000000, 0))
	keys := &switchKeys{until: clk.Now().Add(time.Minute)}
	keys.on.Store(true)
	a, _ := newTestAuthenticator(t, keys, clk.Now)
	ctx := context.Background()
	tok, err := authtoken.Key{ID: "k1", Secret: testSecret}.Issue("app1", 42, "", time.Hour, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.principal(ctx, "Bearer "+tok); err != nil {
		t.Fatal(err)
	}
	keys.on.Store(false) // turned off without a new generation: the cache still answers
	if _, err := a.principal(ctx, "Bearer "+tok); err != nil {
		t.Fatalf("cached under the same generation: %v", err)
	}
	keys.gen.Add(1)
	if _, err := a.principal(ctx, "Bearer "+tok); !apperr.Is(err, apperr.Unauthenticated) {
		t.Fatalf("after a new generation: %v, want UNAUTHENTICATED", err)
	}
	keys.on.Store(true)
	if _, err := a.principal(ctx, "Bearer "+tok); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	if _, err := a.principal(ctx, "Bearer "+tok); !apperr.Is(err, apperr.Unauthenticated) {
		t.Fatalf("past the key's grace: %v, want UNAUTHENTICATED", err)
	}
}
