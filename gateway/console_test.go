package gateway

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/authtoken"
)

// TestLoopbackRunsTheServersOwnChecks: a call through the console's
// Loopback passes the same authentication and role check as one over the
// network, and gets the same envelope.
func TestLoopbackRunsTheServersOwnChecks(t *testing.T) {
	lb := NewLoopback()
	if _, err := lb.RoundTrip(httptest.NewRequest("GET", "/admin/v1/whoami", nil)); err == nil {
		t.Fatal("an unbound loopback answered")
	}
	// The console stand-in answers what the loopback got, as status and body.
	console := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequest("GET", "/admin/v1/whoami", nil)
		req.Header.Set("Authorization", r.Header.Get("Authorization"))
		resp, err := lb.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
	})
	reg := prometheus.NewRegistry()
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil,
		func(r Routers) {
			r.Admin.Get("/v1/whoami", func(c *fiber.Ctx) error { return OK(c, fiber.Map{"operator": PrincipalOf(c).Operator()}) })
		}, ConsoleRoutes(console, lb))
	if err != nil {
		t.Fatal(err)
	}
	tok := func(user int64, role string) string {
		tk, err := authtoken.Issue(testSecret, "app1", user, role, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tk
	}
	for _, tt := range []struct {
		name, auth string
		status     int
		has        string
	}{
		{"no token", "", 401, "UNAUTHENTICATED"},
		{"bad token", "Bearer x.y.z", 401, "invalid token"},
		{"user token", tok(5, ""), 403, "admin role required"},
		{"admin token", tok(9, authtoken.RoleAdmin), 200, `"operator":"admin:9"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/console/x", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := s.App().Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(body), tt.has) {
				t.Fatalf("%d %s, want %d with %s", resp.StatusCode, body, tt.status, tt.has)
			}
		})
	}
}
