package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

var testSecret = []byte("test-secret-0123456789")

type echoReq struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// newTestServer builds a server with a few routes that exercise the edge.
func newTestServer(tb testing.TB, checks ...Check) (*Server, *testenv.LogBuffer) {
	tb.Helper()
	return newTestServerConfig(tb, Config{Addr: "127.0.0.1:0", BodyLimit: 1024, JWTSecret: testSecret, RatePerUser: 1000, RateBurst: 1000}, checks...)
}

func newTestServerConfig(tb testing.TB, cfg Config, checks ...Check) (*Server, *testenv.LogBuffer) {
	tb.Helper()
	logs := &testenv.LogBuffer{}
	log := logs.JSONLogger()
	reg := prometheus.NewRegistry()
	s, err := New(cfg, log, reg, reg, checks, func(r Routers) {
		r.API.Post("/v1/echo", func(c *fiber.Ctx) error {
			var req echoReq
			if err := Bind(c, &req); err != nil {
				return err
			}
			p := PrincipalOf(c)
			return OK(c, fiber.Map{"name": req.Name, "count": req.Count, "app_code": p.AppCode, "user_id": p.UserID})
		})
		r.API.Get("/v1/panic", func(c *fiber.Ctx) error { panic("boom") })
		r.API.Get("/v1/fail", func(c *fiber.Ctx) error {
			return apperr.Wrap(apperr.Unavailable, "database unavailable", errors.New("dial tcp: secret-host:3306 refused"))
		})
		r.Admin.Get("/v1/whoami", func(c *fiber.Ctx) error { return OK(c, fiber.Map{"operator": PrincipalOf(c).Operator()}) })
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s, logs
}

func mustToken(tb testing.TB, app string, user int64, role string, ttl time.Duration) string {
	tb.Helper()
	tok, err := authtoken.Issue(testSecret, app, user, role, ttl, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

func do(tb testing.TB, s *Server, method, path, token, body string, headers ...string) (int, Envelope, http.Header) {
	tb.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := s.App().Test(req, 5000)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var env Envelope
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		tb.Fatalf("%s %s: body is not the envelope: %q", method, path, raw)
	}
	return resp.StatusCode, env, resp.Header
}

func TestEnvelopeAndErrors(t *testing.T) {
	s, logs := newTestServer(t)
	user := mustToken(t, "app1", 42, "", time.Hour)
	admin := mustToken(t, "app1", 7, authtoken.RoleAdmin, time.Hour)
	otherKey, err := authtoken.Issue([]byte("another-secret-0123456789"), "app1", 42, "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name, method, path, token, body string
		wantStatus                      int
		wantCode                        string
	}{
		{"ok", "POST", "/api/v1/echo", user, `{"name":"a","count":2}`, 200, "OK"},
		{"empty body", "POST", "/api/v1/echo", user, ``, 200, "OK"},
		{"malformed json", "POST", "/api/v1/echo", user, `{"name":`, 400, "INVALID_ARGUMENT"},
		{"wrong type", "POST", "/api/v1/echo", user, `{"count":"x"}`, 400, "INVALID_ARGUMENT"},
		{"trailing data", "POST", "/api/v1/echo", user, `{} {}`, 400, "INVALID_ARGUMENT"},
		{"no token", "POST", "/api/v1/echo", "", `{}`, 401, "UNAUTHENTICATED"},
		{"garbage token", "POST", "/api/v1/echo", "abc.def.ghi", `{}`, 401, "UNAUTHENTICATED"},
		{"wrong key", "POST", "/api/v1/echo", otherKey, `{}`, 401, "UNAUTHENTICATED"},
		{"admin route with user token", "GET", "/admin/v1/whoami", user, ``, 403, "PERMISSION_DENIED"},
		{"admin route", "GET", "/admin/v1/whoami", admin, ``, 200, "OK"},
		{"unknown route", "GET", "/api/v1/nope", user, ``, 404, "NOT_FOUND"},
		{"unknown public route", "GET", "/nope", "", ``, 404, "NOT_FOUND"},
		{"panic", "GET", "/api/v1/panic", user, ``, 500, "INTERNAL"},
		{"unavailable", "GET", "/api/v1/fail", user, ``, 503, "UNAVAILABLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, env, hdr := do(t, s, tt.method, tt.path, tt.token, tt.body)
			if status != tt.wantStatus || env.Code != tt.wantCode {
				t.Fatalf("got %d %s (%q), want %d %s", status, env.Code, env.Message, tt.wantStatus, tt.wantCode)
			}
			if env.RequestID == "" || hdr.Get("X-Request-Id") != env.RequestID {
				t.Fatalf("request id %q not echoed (header %q)", env.RequestID, hdr.Get("X-Request-Id"))
			}
		})
	}
	// Messages never carry causes.
	_, env, _ := do(t, s, "GET", "/api/v1/fail", user, "")
	if strings.Contains(env.Message, "secret-host") {
		t.Fatalf("cause leaked into message %q", env.Message)
	}
	// The panic is logged with its request id.
	_, env, _ = do(t, s, "GET", "/api/v1/panic", user, "", "X-Request-Id", "trace-panic-1")
	if env.RequestID != "trace-panic-1" || !strings.Contains(logs.String(), `"request_id":"trace-panic-1"`) {
		t.Fatalf("panic not logged with its request id; logs: %s", logs.String())
	}
}

func TestExpiredToken(t *testing.T) {
	s, _ := newTestServer(t)
	tok, err := authtoken.Issue(testSecret, "app1", 42, "", time.Second, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	status, env, _ := do(t, s, "POST", "/api/v1/echo", tok, `{}`)
	if status != 401 || env.Code != "UNAUTHENTICATED" || env.Message != "token expired" {
		t.Fatalf("got %d %s %q", status, env.Code, env.Message)
	}
}

func TestTokenWithoutSubIsRefusedOnAPI(t *testing.T) {
	s, _ := newTestServer(t)
	admin := mustToken(t, "app1", 0, authtoken.RoleAdmin, time.Hour)
	if status, env, _ := do(t, s, "POST", "/api/v1/echo", admin, `{}`); status != 401 {
		t.Fatalf("got %d %s", status, env.Code)
	}
	if status, env, _ := do(t, s, "GET", "/admin/v1/whoami", admin, ``); status != 200 || env.Data.(map[string]any)["operator"] != "admin" {
		t.Fatalf("got %d %v", status, env.Data)
	}
}

func TestPrincipalComesFromToken(t *testing.T) {
	s, _ := newTestServer(t)
	tok := mustToken(t, "app1", 42, "", time.Hour)
	_, env, _ := do(t, s, "POST", "/api/v1/echo?app_code=app2", tok, `{"name":"x","app_code":"app2"}`)
	data := env.Data.(map[string]any)
	if data["app_code"] != "app1" || data["user_id"] != float64(42) {
		t.Fatalf("principal = %v", data)
	}
}

func TestRequestID(t *testing.T) {
	s, _ := newTestServer(t)
	tests := []struct {
		sent     string
		wantSame bool
	}{
		{"abc-123", true},
		{"with space", false},
		{strings.Repeat("a", 65), false},
		{"", false},
	}
	for _, tt := range tests {
		_, env, _ := do(t, s, "GET", "/healthz", "", "", "X-Request-Id", tt.sent)
		if (env.RequestID == tt.sent) != tt.wantSame || env.RequestID == "" {
			t.Errorf("sent %q got %q", tt.sent, env.RequestID)
		}
	}
}

func TestRateLimit(t *testing.T) {
	s, _ := newTestServerConfig(t, Config{JWTSecret: testSecret, RatePerUser: 1, RateBurst: 3})
	tok := mustToken(t, "app1", 42, "", time.Hour)
	other := mustToken(t, "app1", 43, "", time.Hour)
	var limited bool
	for i := 0; i < 10 && !limited; i++ {
		status, env, _ := do(t, s, "POST", "/api/v1/echo", tok, `{}`)
		limited = status == 429 && env.Code == "RATE_LIMITED"
	}
	if !limited {
		t.Fatal("10 requests at burst 3 were never limited")
	}
	if status, _, _ := do(t, s, "POST", "/api/v1/echo", other, `{}`); status != 200 {
		t.Fatalf("another user was limited too: %d", status)
	}
}

// TestServeLifecycle runs the server on a real socket: body limit, readiness,
// draining and graceful shutdown.
func TestServeLifecycle(t *testing.T) {
	var dbDown bool
	var mu sync.Mutex
	s, _ := newTestServer(t, Check{Name: "mysql", Fn: func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if dbDown {
			return errors.New("down")
		}
		return nil
	}})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	base := "http://" + s.Addr()

	get := func(path string) (int, Envelope) {
		t.Helper()
		// Listen has bound the socket: a connection waits in its backlog
		// until Serve, started just above, accepts it.
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var env Envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil && path != "/metrics" {
			t.Fatalf("GET %s: body is not the envelope: %v", path, err)
		}
		return resp.StatusCode, env
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if status, env := get("/readyz"); status != 200 {
			return fmt.Errorf("readyz = %d %q", status, env.Message)
		}
		return nil
	})
	mu.Lock()
	dbDown = true
	mu.Unlock()
	if status, env := get("/readyz"); status != 503 || !strings.Contains(env.Message, "mysql") {
		t.Fatalf("readyz with mysql down = %d %q", status, env.Message)
	}
	mu.Lock()
	dbDown = false
	mu.Unlock()

	// Oversized body.
	tok := mustToken(t, "app1", 42, "", time.Hour)
	req, _ := http.NewRequest("POST", base+"/api/v1/echo", strings.NewReader(`{"name":"`+strings.Repeat("x", 4096)+`"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var env Envelope
	err = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("oversized body: answer is not the envelope: %v", err)
	}
	if resp.StatusCode != 400 || env.Code != "INVALID_ARGUMENT" || env.RequestID == "" {
		t.Fatalf("oversized body: %d %+v", resp.StatusCode, env)
	}

	if status, env := get("/metrics"); status != 404 || env.Code != "NOT_FOUND" {
		t.Fatalf("public /metrics = %d %s, want 404 NOT_FOUND", status, env.Code)
	}

	s.SetDraining()
	if status, env := get("/readyz"); status != 503 || env.Message != "draining" {
		t.Fatalf("readyz while draining = %d %q", status, env.Message)
	}
	mustShutDown(t, s, served)
}

func TestListenOnTakenAddress(t *testing.T) {
	a, _ := newTestServer(t)
	if err := a.Listen(); err != nil {
		t.Fatal(err)
	}
	defer a.ln.Close()
	b, err := New(Config{Addr: a.Addr(), JWTSecret: testSecret}, slog.New(slog.DiscardHandler), nil, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Listen(); err == nil {
		t.Fatal("second listen on the same address succeeded")
	}
}
