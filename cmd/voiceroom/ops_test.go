package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"voiceroom/authtoken"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
)

// mustRouteNotFound fails unless url answers the API's 404 envelope.
func mustRouteNotFound(tb testing.TB, url string) {
	tb.Helper()
	status, _, body := testenv.Fetch(tb, "GET", url)
	var env gateway.Envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil || status != 404 || env.Code != "NOT_FOUND" {
		tb.Fatalf("GET %s: %d %.200q, want 404 NOT_FOUND in the envelope", url, status, body)
	}
}

func mustToken(tb testing.TB, secret string, user int64, role string) string {
	tb.Helper()
	tok, err := authtoken.Issue([]byte(secret), "e2e", user, role, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

const eventsOrigin = "https://events.example.com"

// TestServeSplitsPublicAndOperatorsListeners runs serve with profiles on
// and CORS for two origins: the public listener serves neither metrics nor
// profiles, the operators' one does; API answers carry the headers; a
// browser's preflight from a listed origin is answered before
// authentication, one from another origin is not allowed, and /admin has
// no CORS at all.
func TestServeSplitsPublicAndOperatorsListeners(t *testing.T) {
	p, vars := startServe(t, "VOICEROOM_PPROF=true", "VOICEROOM_CORS_ORIGINS= "+eventsOrigin+" , http://localhost:3000")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	ops := opsURL(vars)

	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		mustRouteNotFound(t, base+path)
	}
	status, hdr, body := testenv.Fetch(t, "GET", ops+"/metrics")
	if status != 200 || !strings.Contains(body, "voiceroom_rooms_commands_total") || hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("ops /metrics: %d %v\n%.300s", status, hdr, body)
	}
	for _, path := range []string{"/debug/pprof/", "/healthz", "/readyz"} {
		if status, _, body := testenv.Fetch(t, "GET", ops+path); status != 200 {
			t.Fatalf("ops %s: %d %.200s", path, status, body)
		}
	}
	mustRouteNotFound(t, ops+"/api/v1/wallet")

	// The headers, on user and admin routes, successes and errors.
	secret := vars["VOICEROOM_JWT_SECRET"]
	user, admin := "Bearer "+mustToken(t, secret, 31, ""), "Bearer "+mustToken(t, secret, 1, authtoken.RoleAdmin)
	for _, c := range []struct {
		method, path, auth string
		status             int
	}{
		{"GET", "/api/v1/wallet", user, 200},
		{"GET", "/api/v1/users/me", user, 404}, // no profile yet
		{"GET", "/api/v1/wallet", "", 401},
		{"GET", "/admin/v1/regions", admin, 200},
		{"GET", "/admin/v1/regions", user, 403},
		{"PATCH", "/admin/v1/regions/999999", admin, 400}, // no body
	} {
		status, hdr, body := testenv.Fetch(t, c.method, base+c.path, "Authorization", c.auth)
		if status != c.status {
			t.Errorf("%s %s: %d, want %d: %.200s", c.method, c.path, status, c.status, body)
		}
		if hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Cache-Control") != "no-store" {
			t.Errorf("%s %s (%d): X-Content-Type-Options %q, Cache-Control %q", c.method, c.path, status,
				hdr.Get("X-Content-Type-Options"), hdr.Get("Cache-Control"))
		}
	}
	if _, hdr, _ := testenv.Fetch(t, "GET", base+"/openapi.yaml"); hdr.Get("X-Content-Type-Options") != "nosniff" || hdr.Get("Cache-Control") == "no-store" {
		t.Errorf("/openapi.yaml: %v, want nosniff and cacheable", hdr)
	}

	// CORS.
	pre := []string{"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type,idempotency-key"}
	status, hdr, _ = testenv.Fetch(t, "OPTIONS", base+"/api/v1/rooms/create", append([]string{"Origin", eventsOrigin}, pre...)...)
	if status != 204 || hdr.Get("Access-Control-Allow-Origin") != eventsOrigin {
		t.Fatalf("preflight from %s: %d %v", eventsOrigin, status, hdr)
	}
	if got := hdr.Get("Access-Control-Allow-Methods"); got != "DELETE,GET,PATCH,POST,PUT" {
		t.Errorf("Access-Control-Allow-Methods %q, want the API's DELETE,GET,PATCH,POST,PUT", got)
	}
	if got := hdr.Get("Access-Control-Allow-Headers"); got != "Authorization,Content-Type,Idempotency-Key,X-Request-Id" {
		t.Errorf("Access-Control-Allow-Headers %q", got)
	}
	if got := hdr.Get("Access-Control-Allow-Credentials"); got != "" {
		t.Errorf("Access-Control-Allow-Credentials %q: credentials must stay off", got)
	}
	status, hdr, _ = testenv.Fetch(t, "GET", base+"/api/v1/wallet", "Origin", eventsOrigin, "Authorization", user)
	if status != 200 || hdr.Get("Access-Control-Allow-Origin") != eventsOrigin || !strings.Contains(hdr.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Errorf("GET from %s: %d %v", eventsOrigin, status, hdr)
	}
	status, hdr, _ = testenv.Fetch(t, "OPTIONS", base+"/api/v1/rooms/create", append([]string{"Origin", "https://elsewhere.example.com"}, pre...)...)
	if status == 401 || hdr.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d, Access-Control-Allow-Origin %q", status, hdr.Get("Access-Control-Allow-Origin"))
	}
	for _, method := range []string{"OPTIONS", "GET"} {
		_, hdr, _ := testenv.Fetch(t, method, base+"/admin/v1/regions", append([]string{"Origin", eventsOrigin, "Authorization", admin}, pre...)...)
		for name := range hdr {
			if strings.HasPrefix(name, "Access-Control-") {
				t.Errorf("%s /admin/v1/regions answered %s", method, name)
			}
		}
	}
}

// TestServeWithoutOperatorsListener: VOICEROOM_OPS_ADDR= turns it off;
// metrics are then served nowhere, and serve says so.
func TestServeWithoutOperatorsListener(t *testing.T) {
	p, vars := startServe(t, "VOICEROOM_OPS_ADDR=")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	logs := p.logs.String()
	if strings.Contains(logs, `msg="ops http serving"`) || !strings.Contains(logs, "ops http off") {
		t.Fatalf("logs do not say the operators' listener is off:\n%s", logs)
	}
	mustRouteNotFound(t, base+"/metrics")
}
