package gateway

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"voiceroom/authtoken"

	"github.com/prometheus/client_golang/prometheus"
)

// TestAnswerHeaders: every answer says nosniff; answers under /api and
// /admin, successes and errors alike, say no-store; the rest (health, the
// API reference) may be cached.
func TestAnswerHeaders(t *testing.T) {
	s, _ := newTestServer(t)
	user := mustToken(t, "app1", 42, "", time.Hour)
	admin := mustToken(t, "app1", 7, authtoken.RoleAdmin, time.Hour)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		noStore                         bool
	}{
		{"user route", "POST", "/api/v1/echo", user, `{}`, 200, true},
		{"user route without token", "POST", "/api/v1/echo", "", `{}`, 401, true},
		{"user route failing", "GET", "/api/v1/fail", user, ``, 503, true},
		{"user route panicking", "GET", "/api/v1/panic", user, ``, 500, true},
		{"unknown user route", "GET", "/api/v1/nope", user, ``, 404, true},
		{"user route in capitals", "POST", "/API/v1/echo", user, `{}`, 200, true},
		{"admin route", "GET", "/admin/v1/whoami", admin, ``, 200, true},
		{"admin route as a user", "GET", "/admin/v1/whoami", user, ``, 403, true},
		{"admin route without token", "GET", "/admin/v1/whoami", "", ``, 401, true},
		{"health", "GET", "/healthz", "", ``, 200, false},
		{"unknown public route", "GET", "/nope", "", ``, 404, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, hdr := do(t, s, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
			if got := hdr.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
			want := ""
			if tc.noStore {
				want = "no-store"
			}
			if got := hdr.Get("Cache-Control"); got != want {
				t.Errorf("Cache-Control %q, want %q", got, want)
			}
		})
	}
}

// TestAnswerHeadersOnEarlyErrors: an error fasthttp raises before any
// middleware runs (a body over the limit) carries the headers too.
func TestAnswerHeadersOnEarlyErrors(t *testing.T) {
	s, _ := newTestServer(t)
	public, _ := mustServe(t, s)
	req, err := http.NewRequest("POST", public+"/api/v1/echo", strings.NewReader(`{"name":"`+strings.Repeat("x", 4096)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mustToken(t, "app1", 42, "", time.Hour))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("body too large: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestDocsStayCacheable(t *testing.T) {
	spec := []byte("openapi: 3.0.3\ninfo: {title: t, version: \"1\"}\npaths: {}\n")
	reg := prometheus.NewRegistry()
	s, err := New(Config{JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil, DocsRoutes(spec))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/openapi.yaml", "/docs", "/docs/swagger-ui-bundle.js"} {
		resp, err := s.App().Test(httptest.NewRequest("GET", path, nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Content-Type-Options") != "nosniff" || resp.Header.Get("Cache-Control") == "no-store" {
			t.Errorf("%s: %d, nosniff %q, Cache-Control %q", path, resp.StatusCode, resp.Header.Get("X-Content-Type-Options"), resp.Header.Get("Cache-Control"))
		}
		// nosniff makes browsers refuse a script served as another type.
		if strings.HasSuffix(path, ".js") && !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
			t.Errorf("%s served as %q: with nosniff the page would not run it", path, resp.Header.Get("Content-Type"))
		}
	}
}
