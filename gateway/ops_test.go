package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// mustServe listens and serves s until the test ends, and returns the
// public and operators' base URLs ("" without an operators' listener).
// Listen has bound both sockets, so requests need no wait for Serve.
func mustServe(tb testing.TB, s *Server) (public, ops string) {
	tb.Helper()
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	tb.Cleanup(func() { mustShutDown(tb, s, served) })
	if a := s.OpsAddr(); a != "" {
		ops = "http://" + a
	}
	return "http://" + s.Addr(), ops
}

// mustShutDown shuts s down and fails the test unless Serve, whose result
// served receives, then returns nil.
func mustShutDown(tb testing.TB, s *Server, served <-chan error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		tb.Fatalf("shutdown: %v", err)
	}
	if err := <-served; err != nil {
		tb.Fatalf("serve returned %v after shutdown", err)
	}
}

// mustBeNotFound fails unless body is the envelope of an unknown route.
func mustBeNotFound(tb testing.TB, url string) {
	tb.Helper()
	status, _, body := testenv.Fetch(tb, "GET", url)
	var env Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil || status != 404 || env.Code != "NOT_FOUND" {
		tb.Fatalf("GET %s: %d %q, want 404 NOT_FOUND in the envelope", url, status, body)
	}
}

func TestOpsListenerServesMetricsProfilesAndHealth(t *testing.T) {
	cfg := Config{Addr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", Pprof: true, JWTSecret: testSecret}
	s, _ := newTestServerConfig(t, cfg)
	public, ops := mustServe(t, s)
	if ops == "" {
		t.Fatal("no operators' listener")
	}

	// The public listener: not metrics, not profiles, even with pprof on.
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1"} {
		mustBeNotFound(t, public+path)
	}
	if status, _, _ := testenv.Fetch(t, "GET", public+"/readyz"); status != 200 {
		t.Fatalf("public /readyz = %d", status)
	}

	// The operators' listener.
	status, hdr, body := testenv.Fetch(t, "GET", ops+"/metrics")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || !strings.Contains(body, "voiceroom_http_requests_total") {
		t.Fatalf("ops /metrics = %d %q:\n%.300s", status, hdr.Get("Content-Type"), body)
	}
	if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("ops /metrics headers: %v", hdr)
	}
	if status, _, body := testenv.Fetch(t, "GET", ops+"/debug/pprof/"); status != 200 || !strings.Contains(body, "heap") {
		t.Fatalf("ops /debug/pprof/ = %d:\n%.300s", status, body)
	}
	if status, _, _ := testenv.Fetch(t, "GET", ops+"/debug/pprof/heap?gc=1"); status != 200 {
		t.Fatalf("ops /debug/pprof/heap = %d", status)
	}
	if status, _, _ := testenv.Fetch(t, "GET", ops+"/healthz"); status != 200 {
		t.Fatalf("ops /healthz = %d", status)
	}
	if status, _, _ := testenv.Fetch(t, "GET", ops+"/readyz"); status != 200 {
		t.Fatalf("ops /readyz = %d", status)
	}
	// The API is the public listener's only.
	mustBeNotFound(t, ops+"/api/v1/echo")

	// One readiness for both listeners.
	s.SetDraining()
	for _, base := range []string{public, ops} {
		if status, _, body := testenv.Fetch(t, "GET", base+"/readyz"); status != 503 || !strings.Contains(body, "draining") {
			t.Fatalf("%s/readyz while draining = %d %s", base, status, body)
		}
	}
}

func TestOpsListenerWithoutPprofServesNoProfiles(t *testing.T) {
	s, _ := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", JWTSecret: testSecret})
	public, ops := mustServe(t, s)
	mustBeNotFound(t, ops+"/debug/pprof/")
	mustBeNotFound(t, public+"/debug/pprof/")
	if status, _, _ := testenv.Fetch(t, "GET", ops+"/metrics"); status != 200 {
		t.Fatalf("ops /metrics = %d", status)
	}
}

func TestNoOpsAddrNoOperatorsListener(t *testing.T) {
	s, _ := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", JWTSecret: testSecret})
	public, ops := mustServe(t, s)
	if ops != "" {
		t.Fatalf("operators' listener on %s without OpsAddr", ops)
	}
	mustBeNotFound(t, public+"/metrics")
}

func TestShutdownStopsBothListeners(t *testing.T) {
	s, _ := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0", JWTSecret: testSecret})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	addrs := []string{s.Addr(), s.OpsAddr()}
	for _, a := range addrs {
		if status, _, _ := testenv.Fetch(t, "GET", "http://"+a+"/healthz"); status != 200 {
			t.Fatalf("%s/healthz = %d", a, status)
		}
	}
	mustShutDown(t, s, served)
	for _, a := range addrs {
		if c, err := net.Dial("tcp", a); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after shutdown", a)
		}
	}
}

func TestListenOnTakenOpsAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	s, _ := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", OpsAddr: taken.Addr().String(), JWTSecret: testSecret})
	err = s.Listen()
	var ce *apperr.ConfigError
	if !errors.As(err, &ce) || ce.Field != "OpsAddr" || !strings.Contains(err.Error(), taken.Addr().String()) {
		t.Fatalf("Listen() = %v, want a ConfigError on OpsAddr naming %s", err, taken.Addr())
	}
	if s.ln != nil || s.opsLn != nil {
		t.Fatal("a failed Listen kept a listener")
	}
}

func TestConfigValidateListenersAndOrigins(t *testing.T) {
	ok := Config{JWTSecret: testSecret, OpsAddr: "127.0.0.1:9090", CORSOrigins: []string{
		"https://events.example.com", "http://localhost:3000", "http://[::1]:8080", "https://Events.Example.com",
	}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"public addr without port", func(c *Config) { c.Addr = "8080" }, "Addr"},
		{"public port not a number", func(c *Config) { c.Addr = "127.0.0.1:http" }, "Addr"},
		{"ops addr without port", func(c *Config) { c.OpsAddr = "9090" }, "OpsAddr"},
		{"ops port out of range", func(c *Config) { c.OpsAddr = "127.0.0.1:70000" }, "OpsAddr"},
		{"ops on the public port", func(c *Config) { c.Addr, c.OpsAddr = "127.0.0.1:8080", "127.0.0.1:8080" }, "OpsAddr"},
		{"ops on the public port of every address", func(c *Config) { c.Addr, c.OpsAddr = "0.0.0.0:8080", "127.0.0.1:8080" }, "OpsAddr"},
		{"pprof without ops", func(c *Config) { c.OpsAddr, c.Pprof = "", true }, "Pprof"},
		{"wildcard origin", func(c *Config) { c.CORSOrigins = []string{"*"} }, "CORSOrigins"},
		{"wildcard subdomain", func(c *Config) { c.CORSOrigins = []string{"https://*.example.com"} }, "CORSOrigins"},
		{"origin with a slash", func(c *Config) { c.CORSOrigins = []string{"https://events.example.com/"} }, "CORSOrigins"},
		{"origin with a path", func(c *Config) { c.CORSOrigins = []string{"https://events.example.com/page"} }, "CORSOrigins"},
		{"origin with a query", func(c *Config) { c.CORSOrigins = []string{"https://events.example.com?x=1"} }, "CORSOrigins"},
		{"origin with a user", func(c *Config) { c.CORSOrigins = []string{"https://me@events.example.com"} }, "CORSOrigins"},
		{"origin without scheme", func(c *Config) { c.CORSOrigins = []string{"events.example.com"} }, "CORSOrigins"},
		{"origin of another scheme", func(c *Config) { c.CORSOrigins = []string{"ftp://events.example.com"} }, "CORSOrigins"},
		{"origin in capitals", func(c *Config) { c.CORSOrigins = []string{"HTTPS://events.example.com"} }, "CORSOrigins"},
		{"null origin", func(c *Config) { c.CORSOrigins = []string{"null"} }, "CORSOrigins"},
		{"origin without host", func(c *Config) { c.CORSOrigins = []string{"http://:8080"} }, "CORSOrigins"},
		{"empty origin", func(c *Config) { c.CORSOrigins = []string{""} }, "CORSOrigins"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			if got := apperr.ConfigFieldOf(c.Validate()); got != tc.field {
				t.Fatalf("Validate() = %v, want an error on %s", c.Validate(), tc.field)
			}
		})
	}
	// Two free ports never clash.
	if err := (Config{JWTSecret: testSecret, Addr: "127.0.0.1:0", OpsAddr: "127.0.0.1:0"}).Validate(); err != nil {
		t.Fatalf("both on port 0: %v", err)
	}
}
