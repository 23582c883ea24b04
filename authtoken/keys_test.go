package authtoken_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom/authtoken"
)

// mustSign signs claims as they are, with kid in the header when not
// empty, for tokens Issue would not make.
func mustSign(tb testing.TB, method jwt.SigningMethod, kid string, key any, claims map[string]any) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, jwt.MapClaims(claims))
	if kid != "" {
		t.Header["kid"] = kid
	}
	tok, err := t.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// testKeys are Keys of a test: apps' keys by app and kid, each with an
// end (zero: none), disabled apps, platform keys and providers.
type testKeys struct {
	apps     map[string]map[string]testKey
	disabled map[string]bool
	secret   []byte // the single secret, accepted for active apps; nil: refused
	platform map[string][]byte
	provs    []*authtoken.Provider
}

type testKey struct {
	secret []byte
	until  time.Time
}

func (k *testKeys) AppKey(_ context.Context, app, kid string, now time.Time) ([]byte, time.Time, bool) {
	if k.disabled[app] {
		return nil, time.Time{}, false
	}
	if kid == "" {
		return k.secret, time.Time{}, k.secret != nil
	}
	key, ok := k.apps[app][kid]
	if !ok || (!key.until.IsZero() && !now.Before(key.until)) {
		return nil, time.Time{}, false
	}
	return key.secret, key.until, true
}

func (k *testKeys) PlatformKey(kid string) ([]byte, bool) {
	s, ok := k.platform[kid]
	return s, ok
}

func (k *testKeys) Providers(iss string) []*authtoken.Provider {
	var out []*authtoken.Provider
	for _, p := range k.provs {
		if p.Issuer == iss && !k.disabled[p.AppCode] {
			out = append(out, p)
		}
	}
	return out
}

func (k *testKeys) Generation() uint64 { return 0 }

// staticProvider is a provider whose key set is keys, by kid.
func staticProvider(app, iss, aud, claim string, keys map[string]any) *authtoken.Provider {
	return &authtoken.Provider{AppCode: app, Issuer: iss, Audience: aud, AppClaim: claim,
		Keyfunc: func(context.Context) jwt.Keyfunc {
			return func(t *jwt.Token) (any, error) {
				kid, _ := t.Header["kid"].(string)
				if k, ok := keys[kid]; ok {
					return k, nil
				}
				return nil, fmt.Errorf("unknown kid %q", kid)
			}
		}}
}

// TestVerifyAppKeys: a token verifies only with the key its kid names, of
// the app it claims, while the key is usable and the app active; every
// other token is refused as invalid with ErrNoKey, whatever failed.
func TestVerifyAppKeys(t *testing.T) {
	now := time.Unix(1700000000, 0)
	secretA1, secretA2, secretB := []byte("app-a-key-1-0123456789"), []byte("app-a-key-2-0123456789"), []byte("app-b-key-1-0123456789")
	keys := &testKeys{
		apps: map[string]map[string]testKey{
			"a": {"a1": {secret: secretA1, until: now.Add(time.Minute)}, "a2": {secret: secretA2}, "gone": {secret: secretA1, until: now}},
			"b": {"b1": {secret: secretB}},
			"d": {"d1": {secret: secretB}},
		},
		disabled: map[string]bool{"d": true},
		platform: map[string][]byte{"p1": []byte("platform-key-0123456789")},
	}
	v := authtoken.NewVerifier(keys, func() time.Time { return now })
	ctx := context.Background()
	issue := func(k authtoken.Key, app string, user int64, role string) string {
		t.Helper()
		tok, err := k.Issue(app, user, role, time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}

	got, err := v.Verify(ctx, issue(authtoken.Key{ID: "a2", Secret: secretA2}, "a", 42, ""))
	if err != nil || got.AppCode != "a" || got.UserID != 42 || got.KeyID != "a2" || got.Source != authtoken.SourceKey || !got.Until.Equal(now.Add(time.Hour+authtoken.Leeway)) {
		t.Fatalf("a's current key: %+v %v", got, err)
	}
	got, err = v.Verify(ctx, issue(authtoken.Key{ID: "a1", Secret: secretA1}, "a", 0, authtoken.RoleAdmin))
	if err != nil || !got.Admin() || !got.Until.Equal(now.Add(time.Minute)) {
		t.Fatalf("a's key in its grace period: %+v %v; want admin until the key's end", got, err)
	}
	got, err = v.Verify(ctx, mustSign(t, jwt.SigningMethodHS256, "p1", keys.platform["p1"], map[string]any{"role": "platform", "sub": "9", "exp": now.Add(time.Hour).Unix()}))
	if err != nil || !got.Platform() || got.Admin() || got.AppCode != "" || got.UserID != 9 {
		t.Fatalf("platform token: %+v %v", got, err)
	}

	exp := now.Add(time.Hour).Unix()
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"b's token signed with a's key", issue(authtoken.Key{ID: "a2", Secret: secretA2}, "b", 42, "")},
		{"b's admin token signed with a's key", issue(authtoken.Key{ID: "a2", Secret: secretA2}, "b", 0, authtoken.RoleAdmin)},
		{"b's kid on a's token, signed with b's key", issue(authtoken.Key{ID: "b1", Secret: secretB}, "a", 42, "")},
		{"a key past its grace period", issue(authtoken.Key{ID: "gone", Secret: secretA1}, "a", 42, "")},
		{"a disabled app", issue(authtoken.Key{ID: "d1", Secret: secretB}, "d", 42, "")},
		{"an unknown kid", issue(authtoken.Key{ID: "a3", Secret: secretA2}, "a", 42, "")},
		{"the right kid, another secret", issue(authtoken.Key{ID: "a2", Secret: secretB}, "a", 42, "")},
		{"no kid, no single secret", issue(authtoken.Key{Secret: secretA2}, "a", 42, "")},
		{"a platform token signed with an app key", mustSign(t, jwt.SigningMethodHS256, "a2", secretA2, map[string]any{"role": "platform", "exp": exp})},
		{"a platform token without kid", mustSign(t, jwt.SigningMethodHS256, "", keys.platform["p1"], map[string]any{"role": "platform", "exp": exp})},
		{"an app token signed with the platform key", mustSign(t, jwt.SigningMethodHS256, "p1", keys.platform["p1"], map[string]any{"app_code": "a", "sub": "1", "exp": exp})},
		{"an app token under the platform kid", mustSign(t, jwt.SigningMethodHS256, "p1", keys.platform["p1"], map[string]any{"app_code": "a", "role": "platform", "exp": exp})},
		{"an expired token of an unknown kid", issue(authtoken.Key{ID: "zz", Secret: secretA2}, "a", 42, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(ctx, tc.token)
			if !errors.Is(err, authtoken.ErrInvalid) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalid", got, err)
			}
		})
	}
}

// TestVerifyBadKids: kid values that are missing, empty, unknown, huge,
// not a string, or hold path characters or control characters are all
// refused as invalid, never looked up as paths.
func TestVerifyBadKids(t *testing.T) {
	now := time.Unix(1700000000, 0)
	secret := []byte("app-a-key-1-0123456789")
	keys := &testKeys{apps: map[string]map[string]testKey{"a": {"a1": {secret: secret}}}}
	v := authtoken.NewVerifier(keys, func() time.Time { return now })
	claims := map[string]any{"app_code": "a", "sub": "42", "exp": now.Add(time.Hour).Unix()}
	for name, kid := range map[string]any{
		"missing":        nil,
		"empty":          "",
		"unknown":        "a2",
		"huge":           strings.Repeat("k", 5000),
		"just too long":  strings.Repeat("k", 257),
		"path":           "../../etc/passwd",
		"url":            "https://evil.example/jwks.json",
		"nul":            "a1\x00",
		"space":          "a1 ",
		"newline":        "a1\n",
		"number":         12,
		"object":         map[string]any{"x": 1},
		"array":          []string{"a1"},
		"null":           "null",
		"unicode":        "a1\u202e",
		"percent":        "%2e%2e%2fa1",
		"backslash":      `..\a1`,
		"query":          "a1?x=1",
		"case of a1":     "A1",
		"prefix of a1":   "a",
		"a1 with suffix": "a1x",
	} {
		t.Run(name, func(t *testing.T) {
			tk := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claims))
			if kid != nil {
				tk.Header["kid"] = kid
			}
			tok, err := tk.SignedString(secret)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := v.Verify(context.Background(), tok); !errors.Is(err, authtoken.ErrInvalid) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalid", got, err)
			}
		})
	}
}

// TestVerifyProviders: RS256 and ES256 tokens of an app's identity
// provider verify with its key set when iss, aud and the app claim match;
// the role claim is ignored; anything else is invalid.
func TestVerifyProviders(t *testing.T) {
	now := time.Unix(1700000000, 0)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherRSA, _ := rsa.GenerateKey(rand.Reader, 2048)
	keys := &testKeys{
		provs: []*authtoken.Provider{
			staticProvider("a", "https://idp.example", "voiceroom", "tenant", map[string]any{"r1": &rsaKey.PublicKey, "e1": &ecKey.PublicKey}),
			staticProvider("b", "https://idp.example", "voiceroom", "", map[string]any{"rb": &otherRSA.PublicKey}),
			staticProvider("d", "https://idp.example", "voiceroom", "", map[string]any{"r1": &rsaKey.PublicKey}),
		},
		disabled: map[string]bool{"d": true},
		apps:     map[string]map[string]testKey{"a": {"r1": {secret: []byte("an-hmac-key-under-r1-0123")}}},
	}
	v := authtoken.NewVerifier(keys, func() time.Time { return now })
	ctx := context.Background()
	claims := func(edit map[string]any) map[string]any {
		c := map[string]any{"iss": "https://idp.example", "aud": "voiceroom", "tenant": "a", "sub": "42", "exp": now.Add(time.Hour).Unix(), "role": "admin"}
		for k, v := range edit {
			if v == nil {
				delete(c, k)
			} else {
				c[k] = v
			}
		}
		return c
	}
	for name, tok := range map[string]string{
		"RS256": mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(nil)),
		"ES256": mustSign(t, jwt.SigningMethodES256, "e1", ecKey, claims(map[string]any{"aud": []string{"other", "voiceroom"}})),
	} {
		got, err := v.Verify(ctx, tok)
		if err != nil || got.AppCode != "a" || got.UserID != 42 || got.Admin() || got.Source != authtoken.SourceJWKS || got.KeyID == "" {
			t.Fatalf("%s: %+v %v", name, got, err)
		}
	}
	for name, tc := range map[string]struct {
		token string
		want  error
	}{
		"expired":                      {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"exp": now.Add(-time.Hour).Unix()})), authtoken.ErrExpired},
		"wrong issuer":                 {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"iss": "https://other.example"})), authtoken.ErrInvalid},
		"no issuer":                    {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"iss": nil})), authtoken.ErrInvalid},
		"wrong audience":               {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"aud": "other"})), authtoken.ErrInvalid},
		"no audience":                  {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"aud": nil})), authtoken.ErrInvalid},
		"unknown key":                  {mustSign(t, jwt.SigningMethodRS256, "r9", rsaKey, claims(nil)), authtoken.ErrInvalid},
		"no kid":                       {mustSign(t, jwt.SigningMethodRS256, "", rsaKey, claims(nil)), authtoken.ErrInvalid},
		"another key under r1's id":    {mustSign(t, jwt.SigningMethodRS256, "r1", otherRSA, claims(nil)), authtoken.ErrInvalid},
		"claims app b with a's key":    {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"tenant": nil, "app_code": "b"})), authtoken.ErrInvalid},
		"no app claim":                 {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"tenant": nil})), authtoken.ErrInvalid},
		"a disabled app's provider":    {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"tenant": nil, "app_code": "d"})), authtoken.ErrInvalid},
		"no sub":                       {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"sub": nil})), authtoken.ErrBadSubject},
		"sub not a number":             {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"sub": "auth0|abc"})), authtoken.ErrBadSubject},
		"no exp":                       {mustSign(t, jwt.SigningMethodRS256, "r1", rsaKey, claims(map[string]any{"exp": nil})), authtoken.ErrInvalid},
		"HS256 with the app's hmac r1": {mustSign(t, jwt.SigningMethodHS256, "r1", []byte("an-hmac-key-under-r1-0123"), claims(map[string]any{"app_code": "b"})), authtoken.ErrInvalid},
		"RS512":                        {mustSign(t, jwt.SigningMethodRS512, "r1", rsaKey, claims(nil)), authtoken.ErrInvalid},
		"alg none":                     {mustSign(t, jwt.SigningMethodNone, "r1", jwt.UnsafeAllowNoneSignatureType, claims(nil)), authtoken.ErrInvalid},
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := v.Verify(ctx, tc.token); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestIssueWithKey: a key's id is the header's kid; platform tokens name
// no app; bad ids and roles are refused.
func TestIssueWithKey(t *testing.T) {
	now := time.Unix(1700000000, 0)
	k := authtoken.Key{ID: "demo-3fa9c2d1", Secret: testSecret}
	tok, err := k.Issue("demo", 42, "", time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if h := decodePart(t, tok, 0); h != `{"alg":"HS256","kid":"demo-3fa9c2d1","typ":"JWT"}` {
		t.Fatalf("header %s", h)
	}
	tok, err = k.IssuePlatform(7, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if c := decodePart(t, tok, 1); c != `{"role":"platform","sub":"7","exp":1700003600,"iat":1700000000}` {
		t.Fatalf("platform claims %s", c)
	}
	for name, issue := range map[string]func() (string, error){
		"bad key id": func() (string, error) {
			return authtoken.Key{ID: "a/b", Secret: testSecret}.Issue("demo", 1, "", time.Hour, now)
		},
		"long key id": func() (string, error) {
			return authtoken.Key{ID: strings.Repeat("k", 65), Secret: testSecret}.Issue("demo", 1, "", time.Hour, now)
		},
		"platform role":        func() (string, error) { return k.Issue("demo", 1, authtoken.RolePlatform, time.Hour, now) },
		"negative operator":    func() (string, error) { return k.IssuePlatform(-1, time.Hour, now) },
		"platform with no ttl": func() (string, error) { return k.IssuePlatform(1, 0, now) },
	} {
		if tok, err := issue(); err == nil {
			t.Errorf("%s: issued %s", name, tok)
		}
	}
}

// TestNoSecretVerifiesNothing: SingleSecret(nil), the keys of processes
// that serve no token route, accepts no token.
func TestNoSecretVerifiesNothing(t *testing.T) {
	if _, _, ok := authtoken.SingleSecret(nil).AppKey(context.Background(), "app1", "", time.Now()); ok {
		t.Fatal("no secret verified a token")
	}
}
