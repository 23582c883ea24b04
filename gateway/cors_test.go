package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"voiceroom/authtoken"
)

const allowedOrigin = "https://events.example.com"

// send answers the status and headers of one request through the app.
func send(tb testing.TB, s *Server, method, path string, headers ...string) (int, http.Header) {
	tb.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.App().Test(req, 5000)
	if err != nil {
		tb.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func preflight(tb testing.TB, s *Server, path, origin, method string) (int, http.Header) {
	tb.Helper()
	return send(tb, s, "OPTIONS", path, "Origin", origin, "Access-Control-Request-Method", method,
		"Access-Control-Request-Headers", "authorization,content-type,idempotency-key,x-request-id")
}

func newCORSTestServer(tb testing.TB) *Server {
	tb.Helper()
	s, _ := newTestServerConfig(tb, Config{JWTSecret: testSecret, RatePerUser: 1000, RateBurst: 1000,
		CORSOrigins: []string{allowedOrigin, "http://localhost:3000"}})
	return s
}

func TestCORSPreflightFromAnAllowedOrigin(t *testing.T) {
	s := newCORSTestServer(t)
	status, hdr := preflight(t, s, "/api/v1/echo", allowedOrigin, "POST")
	if status != http.StatusNoContent {
		t.Fatalf("preflight: %d, want 204 (before authentication)", status)
	}
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":  allowedOrigin,
		"Access-Control-Allow-Methods": "GET,POST", // the test server's /api routes
		"Access-Control-Allow-Headers": "Authorization,Content-Type,Idempotency-Key,X-Request-Id",
		"Access-Control-Max-Age":       "600",
	} {
		if got := hdr.Get(name); got != want {
			t.Errorf("%s %q, want %q", name, got, want)
		}
	}
	if got := hdr.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("Access-Control-Allow-Credentials %q: credentials must stay off", got)
	}
	if !strings.Contains(hdr.Get("Vary"), "Origin") {
		t.Errorf("Vary %q lacks Origin", hdr.Get("Vary"))
	}
}

func TestCORSRequestsFromAnAllowedOrigin(t *testing.T) {
	s := newCORSTestServer(t)
	user := mustToken(t, "app1", 42, "", time.Hour)
	// A success and an error (no token) alike: the page may read both.
	for _, tc := range []struct {
		token  string
		status int
	}{{user, 200}, {"", 401}} {
		headers := []string{"Origin", allowedOrigin}
		if tc.token != "" {
			headers = append(headers, "Authorization", "Bearer "+tc.token)
		}
		status, hdr := send(t, s, "POST", "/api/v1/echo", headers...)
		if status != tc.status || hdr.Get("Access-Control-Allow-Origin") != allowedOrigin {
			t.Errorf("POST with token %v: %d, Access-Control-Allow-Origin %q", tc.token != "", status, hdr.Get("Access-Control-Allow-Origin"))
		}
		if got := hdr.Get("Access-Control-Expose-Headers"); got != "X-Request-Id,Idempotent-Replayed" {
			t.Errorf("Access-Control-Expose-Headers %q", got)
		}
		if hdr.Get("Cache-Control") != "no-store" || hdr.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("headers %v", hdr)
		}
	}
}

func TestCORSRefusesOtherOrigins(t *testing.T) {
	s := newCORSTestServer(t)
	for _, origin := range []string{"https://evil.example.com", "https://events.example.com.evil.example", "http://events.example.com", "null"} {
		status, hdr := preflight(t, s, "/api/v1/echo", origin, "POST")
		if status == http.StatusUnauthorized {
			t.Errorf("%s: the preflight reached authentication", origin)
		}
		if got := hdr.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%s: preflight allowed (Access-Control-Allow-Origin %q)", origin, got)
		}
		_, hdr = send(t, s, "POST", "/api/v1/echo", "Origin", origin, "Authorization", "Bearer "+mustToken(t, "app1", 42, "", time.Hour))
		if got := hdr.Get("Access-Control-Allow-Origin"); got != "" {
			t.Errorf("%s: request allowed (Access-Control-Allow-Origin %q)", origin, got)
		}
	}
}

// TestCORSNeverOnAdmin: /admin answers no Access-Control-* header, to a
// preflight or a request, from any origin.
func TestCORSNeverOnAdmin(t *testing.T) {
	s := newCORSTestServer(t)
	admin := mustToken(t, "app1", 7, authtoken.RoleAdmin, time.Hour)
	status, pre := preflight(t, s, "/admin/v1/whoami", allowedOrigin, "GET")
	st, get := send(t, s, "GET", "/admin/v1/whoami", "Origin", allowedOrigin, "Authorization", "Bearer "+admin)
	if status != http.StatusUnauthorized || st != 200 {
		t.Fatalf("admin preflight %d (want 401: no policy, authentication first), GET %d", status, st)
	}
	for _, hdr := range []http.Header{pre, get} {
		for name := range hdr {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("/admin answered %s: %q", name, hdr.Get(name))
			}
		}
	}
}

// TestCORSOffByDefault: without origins nothing changes: a preflight is
// an unauthenticated request like any other, and no answer allows an
// origin.
func TestCORSOffByDefault(t *testing.T) {
	s, _ := newTestServer(t)
	status, hdr := preflight(t, s, "/api/v1/echo", allowedOrigin, "POST")
	if status != http.StatusUnauthorized || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("preflight without CORS: %d, Access-Control-Allow-Origin %q", status, hdr.Get("Access-Control-Allow-Origin"))
	}
	_, hdr = send(t, s, "POST", "/api/v1/echo", "Origin", allowedOrigin, "Authorization", "Bearer "+mustToken(t, "app1", 42, "", time.Hour))
	if hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("request without CORS allowed %q", hdr.Get("Access-Control-Allow-Origin"))
	}
}
