package gateway

import (
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

// TestVerifiedTokensKeepEveryRule: a token accepted once is accepted again
// from the cache with the same principal, until its expiry (plus leeway),
// then refused as expired; an edited or foreign token is refused even
// while the genuine one is cached.
func TestVerifiedTokensKeepEveryRule(t *testing.T) {
	clk := testenv.NewClock(time.Time{})
	a := newAuthenticator(testSecret, clk.Now)
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
		p, err := a.principal("Bearer " + tok)
		if err != nil || p.AppCode != "app1" || p.UserID != 42 || p.Admin {
			t.Fatalf("genuine token: %+v %v", p, err)
		}
	}
	for name, bad := range map[string]string{"edited": edited, "foreign": foreign, "empty": ""} {
		if _, err := a.principal("Bearer " + bad); !apperr.Is(err, apperr.Unauthenticated) {
			t.Errorf("%s token: %v, want UNAUTHENTICATED", name, err)
		}
	}
	clk.Advance(time.Minute + authtoken.Leeway - time.Millisecond)
	if _, err := a.principal("Bearer " + tok); err != nil {
		t.Fatalf("within the leeway: %v", err)
	}
	clk.Advance(2 * time.Millisecond)
	_, err = a.principal("Bearer " + tok)
	if ae, ok := err.(*apperr.Error); !ok || ae.Code != apperr.Unauthenticated || ae.Message != "token expired" {
		t.Fatalf("past expiry: %v, want token expired", err)
	}
}
