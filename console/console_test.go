package console

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
)

// noAPI is the API of tests whose requests must be answered before the
// console calls it: a call fails the test.
type noAPI struct{ t *testing.T }

func (n noAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("the console called the API: %s %s", r.Method, r.URL)
	return nil, errors.New("no API in this test")
}

func newTestConsole(t *testing.T) *Console {
	t.Helper()
	c, err := New(noAPI{t}, Config{Key: []byte("console-test-key-0123")}, slog.New(slog.DiscardHandler), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve answers one request; header pairs are set on it.
func serve(c *Console, method, target, body string, header ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, target, rd)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cfg   Config
		field string
	}{
		{"short key", Config{Key: []byte("short")}, "Key"},
		{"page too large", Config{Key: make([]byte, 16), PageSize: MaxPageSize + 1}, "PageSize"},
		{"negative page", Config{Key: make([]byte, 16), PageSize: -1}, "PageSize"},
		{"ok", Config{Key: make([]byte, 16)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.field == "") || apperr.ConfigFieldOf(err) != tt.field {
				t.Fatalf("Validate() = %v, want an error on %q", err, tt.field)
			}
		})
	}
}

// TestShellCarriesNoDataAndTheHeaders: a navigation gets the empty shell,
// with the security headers; so do its assets and its content.
func TestShellCarriesNoDataAndTheHeaders(t *testing.T) {
	c := newTestConsole(t)
	for _, target := range []string{"/console", "/console/lists?region=1", "/console/assets/console.js", "/console/assets/console.css"} {
		w := serve(c, "GET", target, "")
		if w.Code != 200 {
			t.Fatalf("GET %s: %d", target, w.Code)
		}
		for k, v := range securityHeaders {
			if got := w.Header().Get(k); got != v {
				t.Errorf("GET %s: %s = %q, want %q", target, k, got, v)
			}
		}
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("CSP %q", w.Header().Get("Content-Security-Policy"))
		}
	}
	body := serve(c, "GET", "/console/lists?region=1", "").Body.String()
	if !strings.Contains(body, `<script src="/console/assets/console.js" defer></script>`) || strings.Contains(body, "<script>") ||
		strings.Contains(body, "style=") || strings.Contains(body, "csrf") {
		t.Fatalf("shell:\n%s", body)
	}
}

// TestContentWithoutTokenIsTheSignIn: the script's request without a token
// gets the sign-in form, without calling the API.
func TestContentWithoutTokenIsTheSignIn(t *testing.T) {
	w := serve(newTestConsole(t), "GET", "/console/regions", "", "X-Console", "1")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "data-signin") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

// TestFormsRefusedBeforeTheAPI: a POST is refused without the script's
// header, from another origin, and with a csrf field not of the token.
func TestFormsRefusedBeforeTheAPI(t *testing.T) {
	c := newTestConsole(t)
	token := "header.payload.signature"
	good := url.Values{"csrf": {c.csrf(token)}, "back": {"/console/rooms"}, "reason": {"x"}, "confirm": {"yes"}}
	bad := url.Values{"csrf": {c.csrf("another.token.x")}, "back": {"/console/rooms"}, "reason": {"x"}, "confirm": {"yes"}}
	for _, tt := range []struct {
		name   string
		body   string
		header []string
	}{
		{"no script header", good.Encode(), []string{"Authorization", "Bearer " + token}},
		{"another origin", good.Encode(), []string{"X-Console", "1", "Authorization", "Bearer " + token, "Origin", "https://evil.example"}},
		{"another token's csrf", bad.Encode(), []string{"X-Console", "1", "Authorization", "Bearer " + token}},
		{"no csrf", "reason=x&confirm=yes", []string{"X-Console", "1", "Authorization", "Bearer " + token}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if w := serve(c, "POST", "/console/rooms/app_1/ban", tt.body, tt.header...); w.Code != http.StatusForbidden {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
}

// TestConfirmationAsksFirst: a ban asks before it acts, carries the form's
// fields (escaped) to the confirmation, and calls no API.
func TestConfirmationAsksFirst(t *testing.T) {
	c := newTestConsole(t)
	token := "header.payload.signature"
	form := url.Values{"csrf": {c.csrf(token)}, "back": {"/console/rooms/app_1"}, "reason": {`<script>alert(1)</script>`}}
	w := serve(c, "POST", "/console/rooms/app_1/ban", form.Encode(), "X-Console", "1", "Authorization", "Bearer "+token)
	body := w.Body.String()
	if w.Code != 200 || !strings.Contains(body, "Ban room app_1?") || !strings.Contains(body, `name="confirm" value="yes"`) {
		t.Fatalf("%d %s", w.Code, body)
	}
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("the reason is not escaped:\n%s", body)
	}
	if got := w.Header().Get("X-Console-Location"); got != "/console/rooms/app_1" {
		t.Fatalf("location %q", got)
	}
}

func TestSafeBack(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/console/lists?region=2&tab=new", "/console/lists?region=2&tab=new"},
		{"/console", "/console"},
		{"", "/console/"},
		{"https://evil.example/console", "/console/"},
		{"//evil.example/console", "/console/"},
		{"/console\\..\\x", "/console/"},
		{"/consolex", "/console/"},
		{"/console/../admin/v1/regions", "/console/"},
		{"/console/rooms/./x", "/console/"},
		{"/api/v1/rooms", "/console/"},
	} {
		if got := safeBack(tt.in); got != tt.want {
			t.Errorf("safeBack(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestClaimsOnlyShow(t *testing.T) {
	// {"app_code":"demo","sub":"7"}
	if w := claims("x.eyJhcHBfY29kZSI6ImRlbW8iLCJzdWIiOiI3In0.y"); w != (who{App: "demo", Operator: "admin:7"}) {
		t.Fatalf("claims = %+v", w)
	}
	// {"role":"platform","sub":"3"}
	if w := claims("x.eyJyb2xlIjoicGxhdGZvcm0iLCJzdWIiOiIzIn0.y"); w != (who{Operator: "platform:3", Platform: true}) {
		t.Fatalf("platform claims = %+v", w)
	}
	if w := claims("garbage"); w != (who{}) {
		t.Fatalf("claims of garbage = %+v", w)
	}
}
