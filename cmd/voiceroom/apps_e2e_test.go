package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

// answer is one answer of the API.
type answer struct {
	status  int
	code    string
	message string
	data    json.RawMessage
}

// callWith sends method path with body and the bearer token tok (none when
// empty) and reads the envelope.
func callWith(tb testing.TB, base, method, path, tok, body string) answer {
	tb.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	var env struct {
		Code    string          `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		tb.Fatalf("%s %s: not the envelope (%d): %s", method, path, resp.StatusCode, raw)
	}
	return answer{status: resp.StatusCode, code: env.Code, message: env.Message, data: env.Data}
}

// newKey is the key the platform routes answer once.
type newKey struct {
	NewKey struct {
		KeyID  string `json:"key_id"`
		Secret string `json:"secret"`
	} `json:"new_key"`
}

func (k newKey) key() authtoken.Key {
	return authtoken.Key{ID: k.NewKey.KeyID, Secret: []byte(k.NewKey.Secret)}
}

// platformTok is a platform operator's token of startServe's key.
func platformTok(tb testing.TB) string {
	tb.Helper()
	tok, err := authtoken.Key{ID: testPlatformKeyID, Secret: []byte(testPlatformKey)}.IssuePlatform(1, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// mustKey makes the platform call that answers a new key.
func mustKey(tb testing.TB, base, method, path, body string) authtoken.Key {
	tb.Helper()
	a := callWith(tb, base, method, path, platformTok(tb), body)
	var k newKey
	if a.status != 200 || json.Unmarshal(a.data, &k) != nil || k.NewKey.KeyID == "" {
		tb.Fatalf("%s %s: %d %s %s", method, path, a.status, a.code, a.message)
	}
	return k.key()
}

// signed is app's token signed with k: a user's, or an admin's for user 0.
func signed(tb testing.TB, k authtoken.Key, app string, user int64) string {
	tb.Helper()
	role := ""
	if user == 0 {
		role = authtoken.RoleAdmin
	}
	tok, err := k.Issue(app, user, role, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// startKeyedServe is startServe with per-app keys only: no single secret.
func startKeyedServe(t *testing.T, extra ...string) (string, map[string]string) {
	t.Helper()
	p, vars := startServe(t, append([]string{"VOICEROOM_JWT_SECRET=", "VOICEROOM_DEV_SINGLE_SECRET=false"}, extra...)...)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	return base, vars
}

// TestAppsKeepEachOthersTokensOut drives issue 48's rules over HTTP on a
// serve with per-app keys only: a token for app B signed with app A's key
// is refused, for a user and for an admin, while B's own key works; a
// rotated-out key works for its grace period and not after; a disabled
// app's tokens are refused; an app's admin reaches neither another app
// nor any platform route, and a platform operator no app route. Every key
// failure answers the same 401.
func TestAppsKeepEachOthersTokensOut(t *testing.T) {
	base, vars := startKeyedServe(t)
	keyA := mustKey(t, base, "POST", "/platform/v1/apps", `{"app_code":"appa"}`)
	keyB := mustKey(t, base, "POST", "/platform/v1/apps", `{"app_code":"appb"}`)
	refusals := map[string]answer{}
	refused := func(why, method, path, tok string) {
		t.Helper()
		a := callWith(t, base, method, path, tok, "")
		if a.status != 401 || a.code != "UNAUTHENTICATED" {
			t.Fatalf("%s: %d %s %q, want 401", why, a.status, a.code, a.message)
		}
		refusals[why] = a
	}
	accepted := func(why, method, path, tok string, want int) {
		t.Helper()
		if a := callWith(t, base, method, path, tok, ""); a.status != want {
			t.Fatalf("%s: %d %s %q, want %d", why, a.status, a.code, a.message, want)
		}
	}
	const me, regions = "/api/v1/users/me", "/admin/v1/regions"

	accepted("B's user token with B's key", "GET", me, signed(t, keyB, "appb", 42), 404) // no profile: authenticated
	accepted("B's admin token with B's key", "GET", regions, signed(t, keyB, "appb", 0), 200)
	refused("B's user token signed with A's key", "GET", me, signed(t, keyA, "appb", 42))
	refused("B's admin token signed with A's key", "GET", regions, signed(t, keyA, "appb", 0))
	refused("an unknown kid", "GET", me, signed(t, authtoken.Key{ID: "appb-00000000", Secret: keyB.Secret}, "appb", 42))
	refused("the single secret of development, off", "GET", me, signed(t, authtoken.Key{Secret: []byte(testJWTSecret)}, "appb", 42))

	// A rotated-out key verifies for its grace period, then not.
	oldB := keyB
	keyB = mustKey(t, base, "POST", "/platform/v1/apps/appb/keys/rotate", `{"grace_seconds":8}`)
	accepted("B's new key", "GET", me, signed(t, keyB, "appb", 42), 404)
	oldTok := signed(t, oldB, "appb", 0)
	accepted("B's old key in its grace period", "GET", regions, oldTok, 200)
	testenv.Eventually(t, 60*time.Second, func() error {
		if a := callWith(t, base, "GET", regions, oldTok, ""); a.status != 401 {
			return fmt.Errorf("old key still answers %d", a.status)
		}
		return nil
	})
	refused("a rotated-out key after its grace period", "GET", regions, oldTok)
	accepted("B's new key after the old one's grace", "GET", regions, signed(t, keyB, "appb", 0), 200)

	// A disabled app's tokens are refused, whatever they are.
	if a := callWith(t, base, "PATCH", "/platform/v1/apps/appa", platformTok(t), `{"status":"disabled"}`); a.status != 200 {
		t.Fatalf("disable: %d %s", a.status, a.message)
	}
	refused("a disabled app's user token", "GET", me, signed(t, keyA, "appa", 42))
	refused("a disabled app's admin token", "GET", regions, signed(t, keyA, "appa", 0))
	if a := callWith(t, base, "PATCH", "/platform/v1/apps/appa", platformTok(t), `{"status":"active"}`); a.status != 200 {
		t.Fatalf("enable: %d %s", a.status, a.message)
	}
	accepted("an enabled app's admin token", "GET", regions, signed(t, keyA, "appa", 0), 200)

	// One message, whatever failed.
	for why, a := range refusals {
		if a.message != "invalid token" {
			t.Errorf("%s: message %q, want the one message for every key failure", why, a.message)
		}
	}

	// An app's admin: no other app, no platform route.
	adminA, adminB := signed(t, keyA, "appa", 0), signed(t, keyB, "appb", 0)
	var region struct {
		RegionID int64 `json:"region_id"`
	}
	a := callWith(t, base, "POST", regions, adminB, `{"region_code":"BBB","name":"B's"}`)
	if a.status != 200 || json.Unmarshal(a.data, &region) != nil {
		t.Fatalf("B's region: %d %s", a.status, a.message)
	}
	if a := callWith(t, base, "PATCH", fmt.Sprintf("%s/%d", regions, region.RegionID), adminA, `{"name":"A's now"}`); a.status != 404 {
		t.Fatalf("A's admin on B's region: %d %s, want 404", a.status, a.code)
	}
	for _, route := range [][2]string{{"GET", "/platform/v1/apps"}, {"POST", "/platform/v1/apps/appb/keys/rotate"},
		{"PATCH", "/platform/v1/apps/appb"}, {"DELETE", "/platform/v1/apps/appb/keys/" + keyB.ID}} {
		if a := callWith(t, base, route[0], route[1], adminA, `{"status":"disabled"}`); a.status != 403 || a.code != "PERMISSION_DENIED" {
			t.Fatalf("an app's admin on %s %s: %d %s, want 403", route[0], route[1], a.status, a.code)
		}
	}
	if a := callWith(t, base, "GET", regions, platformTok(t), ""); a.status != 403 {
		t.Fatalf("a platform operator on /admin: %d, want 403", a.status)
	}
	if a := callWith(t, base, "GET", me, platformTok(t), ""); a.status != 401 {
		t.Fatalf("a platform operator on /api: %d, want 401", a.status)
	}
	accepted("B's new key, unchanged by A's attempts", "GET", regions, adminB, 200)

	_, _, metrics := testenv.Fetch(t, "GET", opsURL(vars)+"/metrics")
	if !strings.Contains(metrics, `voiceroom_auth_refused_total{reason="no_key"}`) || strings.Contains(metrics, `voiceroom_auth_refused_total{reason="no_key"} 0`) {
		t.Errorf("no_key refusals not counted:\n%s", grepLines(metrics, "voiceroom_auth_"))
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestBadKeyIDsAreRefused: tokens whose kid is missing, empty, unknown,
// huge, not a string or holds path characters, each otherwise genuine
// (signed with the app's secret), answer 401 with the one message; a kid
// too big for the headers answers 400; never a 500.
func TestBadKeyIDsAreRefused(t *testing.T) {
	base, _ := startKeyedServe(t)
	k := mustKey(t, base, "POST", "/platform/v1/apps", `{"app_code":"fuzz"}`)
	claims := jwt.MapClaims{"app_code": "fuzz", "sub": "42", "exp": time.Now().Add(time.Hour).Unix()}
	sign := func(kid any) string {
		tk := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		if kid != nil {
			tk.Header["kid"] = kid
		}
		s, err := tk.SignedString(k.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if a := callWith(t, base, "GET", "/api/v1/users/me", sign(k.ID), ""); a.status != 404 {
		t.Fatalf("the genuine kid: %d %s", a.status, a.message)
	}
	for name, kid := range map[string]any{
		"missing": nil, "empty": "", "unknown": "fuzz-ffffffff", "huge": strings.Repeat("k", 1500),
		"path": "../../../etc/passwd", "path to the key": "../" + k.ID, "slash": "fuzz/" + k.ID, "encoded path": "..%2f..%2f" + k.ID,
		"backslash": `..\` + k.ID, "url": "http://127.0.0.1:1/jwks", "nul": k.ID + "\x00", "newline": k.ID + "\n",
		"space": " " + k.ID, "number": 7, "object": map[string]string{"id": k.ID}, "upper case": strings.ToUpper(k.ID),
		"another app's form": "appa-" + k.ID[len("fuzz-"):], "sql": "' OR '1'='1", "glob": "fuzz-*",
	} {
		a := callWith(t, base, "GET", "/api/v1/users/me", sign(kid), "")
		if a.status != 401 || a.message != "invalid token" {
			t.Errorf("kid %s: %d %s %q, want 401 invalid token", name, a.status, a.code, a.message)
		}
	}
	// Past the server's header size: refused before any token is read,
	// with 400 and the connection closed; a client still sending the
	// rest of the header may see the close first (a reset), which is the
	// same refusal.
	huge, err := http.NewRequest("GET", base+"/api/v1/users/me", nil)
	if err != nil {
		t.Fatal(err)
	}
	huge.Header.Set("Authorization", "Bearer "+sign(strings.Repeat("k", 20000)))
	if resp, err := http.DefaultClient.Do(huge); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("a kid too big for the headers: %d", resp.StatusCode)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Errorf("a kid too big for the headers: %v, want 400 or the connection closed", err)
	}
	// A header that is not base64, not JSON, or names no alg.
	for name, tok := range map[string]string{
		"not base64": "!!!." + strings.SplitN(sign(k.ID), ".", 2)[1],
		"not json":   base64.RawURLEncoding.EncodeToString([]byte("kid")) + "." + strings.SplitN(sign(k.ID), ".", 2)[1],
		"no alg":     base64.RawURLEncoding.EncodeToString([]byte(`{"kid":"`+k.ID+`"}`)) + "." + strings.SplitN(sign(k.ID), ".", 2)[1],
	} {
		if a := callWith(t, base, "GET", "/api/v1/users/me", tok, ""); a.status != 401 {
			t.Errorf("%s: %d %s", name, a.status, a.message)
		}
	}
}

// TestServeRefusesTheSingleSecretAlone: with VOICEROOM_JWT_SECRET as the
// only key, serve exits (2) saying what to do, unless development's flag
// or an upgrade window says otherwise; with an app's key it starts, and
// then the secret verifies nothing.
func TestServeRefusesTheSingleSecretAlone(t *testing.T) {
	p, _ := startServe(t, "VOICEROOM_DEV_SINGLE_SECRET=false")
	if code := p.wait(t, 60*time.Second); code != 2 {
		t.Fatalf("exit %d, want 2:\n%s", code, p.logs.String())
	}
	for _, want := range []string{"VOICEROOM_JWT_SECRET", "voiceroom apps create", "VOICEROOM_APP_KEYS", "VOICEROOM_JWT_SECRET_UNTIL", "VOICEROOM_DEV_SINGLE_SECRET=true"} {
		if !strings.Contains(p.logs.String(), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, p.logs.String())
		}
	}

	base, _ := startKeyedServe(t, "VOICEROOM_JWT_SECRET="+testJWTSecret, "VOICEROOM_APP_KEYS=cfg:cfg-1:a-configured-key-0123456789")
	if a := callWith(t, base, "GET", "/admin/v1/regions", signed(t, authtoken.Key{ID: "cfg-1", Secret: []byte("a-configured-key-0123456789")}, "cfg", 0), ""); a.status != 200 {
		t.Fatalf("the configured key: %d %s", a.status, a.message)
	}
	if a := callWith(t, base, "GET", "/admin/v1/regions", signed(t, authtoken.Key{Secret: []byte(testJWTSecret)}, "cfg", 0), ""); a.status != 401 {
		t.Fatalf("the single secret without window or development: %d, want 401", a.status)
	}
}

// TestUpgradeWindow: during the window the single secret keeps verifying
// the registered apps' tokens (and serve starts on it alone), counted per
// app; an app not registered gets nothing; the app's own key works too.
func TestUpgradeWindow(t *testing.T) {
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	base, vars := startKeyedServe(t, "VOICEROOM_JWT_SECRET="+testJWTSecret, "VOICEROOM_JWT_SECRET_UNTIL="+until)
	old := authtoken.Key{Secret: []byte(testJWTSecret)}
	if a := callWith(t, base, "GET", "/admin/v1/regions", signed(t, old, "legacy", 0), ""); a.status != 401 {
		t.Fatalf("an app not registered, by the secret: %d, want 401", a.status)
	}
	k := mustKey(t, base, "POST", "/platform/v1/apps", `{"app_code":"legacy"}`)
	for range 3 {
		if a := callWith(t, base, "GET", "/admin/v1/regions", signed(t, old, "legacy", 0), ""); a.status != 200 {
			t.Fatalf("a registered app, by the secret, in the window: %d %s", a.status, a.message)
		}
	}
	if a := callWith(t, base, "GET", "/admin/v1/regions", signed(t, k, "legacy", 0), ""); a.status != 200 {
		t.Fatalf("its own key: %d", a.status)
	}
	_, _, metrics := testenv.Fetch(t, "GET", opsURL(vars)+"/metrics")
	if !strings.Contains(metrics, `voiceroom_auth_secret_requests_total{app_code="legacy"} 3`) {
		t.Errorf("want 3 requests by the secret counted for legacy:\n%s", grepLines(metrics, "voiceroom_auth_secret"))
	}
}

// TestAppsCommandAndToken: `voiceroom apps create` makes a key a running
// serve accepts from its first use, `voiceroom token` signs with it (its
// kid), `voiceroom token --platform` signs a platform operator's token,
// and `voiceroom apps disable` is seen by serve within its refresh.
func TestAppsCommandAndToken(t *testing.T) {
	base, vars := startKeyedServe(t)
	code, out := runCommand(t, vars, "apps", "create", "cliapp")
	var created newKey
	if code != 0 || json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &created) != nil || created.NewKey.KeyID == "" {
		t.Fatalf("apps create: exit %d\n%s", code, out)
	}
	code, tok := runCommand(t, vars, "token", "--app", "cliapp", "--user", "0", "--role", "admin")
	tok = strings.TrimSpace(tok)
	if code != 0 {
		t.Fatalf("token: exit %d\n%s", code, tok)
	}
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if !bytes.Contains(header, []byte(`"kid":"`+created.NewKey.KeyID+`"`)) {
		t.Fatalf("token header %s, want kid %s", header, created.NewKey.KeyID)
	}
	if a := callWith(t, base, "GET", "/admin/v1/regions", tok, ""); a.status != 200 {
		t.Fatalf("the CLI's key on serve: %d %s", a.status, a.message)
	}
	code, ptok := runCommand(t, vars, "token", "--platform")
	if a := callWith(t, base, "GET", "/platform/v1/apps", strings.TrimSpace(ptok), ""); code != 0 || a.status != 200 || !bytes.Contains(a.data, []byte(`"cliapp"`)) {
		t.Fatalf("token --platform: exit %d, %d %s", code, a.status, a.data)
	}
	if code, out := runCommand(t, vars, "apps", "disable", "cliapp"); code != 0 {
		t.Fatalf("apps disable: exit %d\n%s", code, out)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if a := callWith(t, base, "GET", "/admin/v1/regions", tok, ""); a.status != 401 {
			return fmt.Errorf("a disabled app's token answers %d", a.status)
		}
		return nil
	})
	if code, out := runCommand(t, vars, "apps", "nonsense"); code != 2 || !strings.Contains(out, "unknown command") {
		t.Fatalf("apps nonsense: exit %d\n%s", code, out)
	}
}

// TestIdentityProviderThroughServe: an app's own RS256 user tokens verify
// against its provider's JWKS over HTTP, through a rotation of the
// provider's keys; while the provider is down the key fetched before
// keeps working and an unknown key is 401 (never 500); a wrong audience
// or an expired token is 401.
func TestIdentityProviderThroughServe(t *testing.T) {
	idp := testenv.NewIdentityProvider(t)
	idp.AddKey("r1", false)
	base, _ := startKeyedServe(t, "VOICEROOM_AUTH_JWKS_ALLOW_HTTP=true")
	mustKey(t, base, "POST", "/platform/v1/apps", `{"app_code":"idp"}`)
	body := `{"url":"` + idp.URL() + `","issuer":"https://idp.test/","audience":"voiceroom","app_claim":"https://idp.test/app"}`
	if a := callWith(t, base, "PUT", "/platform/v1/apps/idp/jwks", platformTok(t), body); a.status != 200 {
		t.Fatalf("set jwks: %d %s", a.status, a.message)
	}
	tok := func(kid string, edit map[string]any) string {
		c := map[string]any{"iss": "https://idp.test/", "aud": []string{"voiceroom"}, "https://idp.test/app": "idp", "sub": "77",
			"exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range edit {
			c[k] = v
		}
		return idp.Token(kid, c)
	}
	// 404 (no profile yet) is an authenticated answer.
	if a := callWith(t, base, "GET", "/api/v1/users/me", tok("r1", nil), ""); a.status != 404 {
		t.Fatalf("an identity provider's token: %d %s", a.status, a.message)
	}
	// The provider rotates: r2 is published, r1 dropped.
	idp.AddKey("r2", false)
	idp.Publish("r2")
	if a := callWith(t, base, "GET", "/api/v1/users/me", tok("r2", nil), ""); a.status != 404 {
		t.Fatalf("the provider's new key: %d %s", a.status, a.message)
	}
	// Down: the key fetched before keeps working; an unknown one is 401.
	idp.SetDown(true)
	idp.AddKey("r3", false)
	for name, c := range map[string]struct {
		tok  string
		want int
	}{
		"the cached key":             {tok("r2", nil), 404},
		"a key the provider dropped": {tok("r1", nil), 401},
		"an unknown key":             {tok("r3", nil), 401},
		"a wrong audience":           {tok("r2", map[string]any{"aud": "other"}), 401},
		"a wrong issuer":             {tok("r2", map[string]any{"iss": "https://evil.test/"}), 401},
		"another app in the claim":   {tok("r2", map[string]any{"https://idp.test/app": "other"}), 401},
		"expired":                    {tok("r2", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), 401},
	} {
		if a := callWith(t, base, "GET", "/api/v1/users/me", c.tok, ""); a.status != c.want {
			t.Errorf("%s: %d %s %q, want %d", name, a.status, a.code, a.message, c.want)
		}
	}
}
