package authtoken_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom/authtoken"
)

var testSecret = []byte("test-secret-0123456789")

// TestIssueRejectsBadInput: no token for a bad app code, a user token
// without a user, or a lifetime that is not positive.
func TestIssueRejectsBadInput(t *testing.T) {
	now := time.Now()
	for name, issue := range map[string]func() (string, error){
		"app code with a dot":     func() (string, error) { return authtoken.Issue(testSecret, "bad.app", 1, "", time.Hour, now) },
		"user token without user": func() (string, error) { return authtoken.Issue(testSecret, "app", 0, "", time.Hour, now) },
		"negative user": func() (string, error) {
			return authtoken.Issue(testSecret, "app", -1, authtoken.RoleAdmin, time.Hour, now)
		},
		"zero ttl": func() (string, error) { return authtoken.Issue(testSecret, "app", 1, "", 0, now) },
	} {
		if tok, err := issue(); err == nil {
			t.Errorf("%s: issued %s", name, tok)
		}
	}
}

// TestIssuedClaims pins the token format clients and other issuers rely
// on: HS256, app_code, sub as a decimal string (absent for an admin token
// without a user), role only when set, iat and exp in Unix seconds.
func TestIssuedClaims(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name   string
		user   int64
		role   string
		claims string
	}{
		{"user", 42, "", `{"app_code":"app1","sub":"42","exp":1700003600,"iat":1700000000}`},
		{"admin without user", 0, authtoken.RoleAdmin, `{"app_code":"app1","role":"admin","exp":1700003600,"iat":1700000000}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := authtoken.Issue(testSecret, "app1", tc.user, tc.role, time.Hour, now)
			if err != nil {
				t.Fatal(err)
			}
			if header := decodePart(t, tok, 0); header != `{"alg":"HS256","typ":"JWT"}` {
				t.Fatalf("header %s", header)
			}
			if body := decodePart(t, tok, 1); body != tc.claims {
				t.Fatalf("claims %s, want %s", body, tc.claims)
			}
		})
	}
}

// TestVerify: a genuine token says what was issued; every other is
// refused with the error the HTTP edge turns into its message.
func TestVerify(t *testing.T) {
	now := time.Unix(1700000000, 0)
	v := authtoken.NewVerifier(authtoken.SingleSecret(testSecret), func() time.Time { return now })
	ctx := context.Background()
	issue := func(secret []byte, user int64, role string, ttl time.Duration, at time.Time) string {
		t.Helper()
		tok, err := authtoken.Issue(secret, "app1", user, role, ttl, at)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// sign signs claims as they are, for tokens Issue would not make.
	sign := func(method jwt.SigningMethod, key any, claims map[string]any) string {
		t.Helper()
		tok, err := jwt.NewWithClaims(method, jwt.MapClaims(claims)).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	exp := now.Add(time.Hour).Unix()

	got, err := v.Verify(ctx, issue(testSecret, 42, "", time.Hour, now))
	if want := (authtoken.Token{AppCode: "app1", UserID: 42, ExpiresAt: now.Add(time.Hour), Source: authtoken.SourceSecret,
		Until: now.Add(time.Hour + authtoken.Leeway)}); err != nil || got != want || got.Admin() {
		t.Fatalf("user token: %+v %v, want %+v", got, err, want)
	}
	got, err = v.Verify(ctx, issue(testSecret, 0, authtoken.RoleAdmin, time.Hour, now))
	if err != nil || !got.Admin() || got.UserID != 0 || got.AppCode != "app1" {
		t.Fatalf("admin token: %+v %v", got, err)
	}
	if _, err := v.Verify(ctx, issue(testSecret, 42, "", time.Second, now.Add(-authtoken.Leeway))); err != nil { // expired 4 s ago
		t.Fatalf("expired within the leeway: %v", err)
	}

	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"expired", issue(testSecret, 42, "", time.Second, now.Add(-time.Hour)), authtoken.ErrExpired},
		{"another secret", issue([]byte("another-secret-0123456789"), 42, "", time.Hour, now), authtoken.ErrInvalid},
		{"garbage", "abc.def.ghi", authtoken.ErrInvalid},
		{"empty", "", authtoken.ErrInvalid},
		{"HS512", sign(jwt.SigningMethodHS512, testSecret, map[string]any{"app_code": "app1", "sub": "42", "exp": exp}), authtoken.ErrInvalid},
		{"alg none", sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, map[string]any{"app_code": "app1", "sub": "42", "exp": exp}), authtoken.ErrInvalid},
		{"no exp", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"app_code": "app1", "sub": "42"}), authtoken.ErrInvalid},
		{"not yet valid", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"app_code": "app1", "sub": "42", "exp": exp, "nbf": exp - 60}), authtoken.ErrInvalid},
		{"no app code", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"sub": "42", "exp": exp}), authtoken.ErrNoAppCode},
		{"a kid the single secret does not know", mustSign(t, jwt.SigningMethodHS256, "k1", testSecret, map[string]any{"app_code": "app1", "sub": "42", "exp": exp}), authtoken.ErrNoKey},
		{"a platform token", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"role": "platform", "exp": exp}), authtoken.ErrNoKey},
		{"bad app code", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"app_code": "a.b", "sub": "42", "exp": exp}), authtoken.ErrNoAppCode},
		{"sub not a number", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"app_code": "app1", "sub": "bob", "exp": exp}), authtoken.ErrBadSubject},
		{"sub zero", sign(jwt.SigningMethodHS256, testSecret, map[string]any{"app_code": "app1", "sub": "0", "exp": exp}), authtoken.ErrBadSubject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, err := v.Verify(ctx, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// decodePart is the JSON of a token's header (0) or claims (1).
func decodePart(tb testing.TB, tok string, i int) string {
	tb.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		tb.Fatalf("token %q: want three parts", tok)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[i])
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}
