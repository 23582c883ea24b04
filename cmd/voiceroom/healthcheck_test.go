package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

func TestHealthcheck(t *testing.T) {
	var ready atomic.Bool
	ready.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/healthz":
			w.Write([]byte(`{"code":"OK"}`))
		case r.URL.Path == "/readyz" && ready.Load():
			w.Write([]byte(`{"code":"OK"}`))
		case r.URL.Path == "/readyz":
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"code":"UNAVAILABLE","message":"draining"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx := context.Background()

	if err := healthcheck(ctx, []string{"--addr", addr}); err != nil {
		t.Errorf("ready: %v", err)
	}
	ready.Store(false)
	if err := healthcheck(ctx, []string{"--addr", addr}); err == nil || !strings.Contains(err.Error(), "draining") {
		t.Errorf("draining: %v, want an error with the answer", err)
	}
	if err := healthcheck(ctx, []string{"--addr", addr, "--path", "/healthz"}); err != nil {
		t.Errorf("alive: %v", err)
	}
	t.Setenv("VOICEROOM_HTTP_ADDR", addr)
	if err := healthcheck(ctx, []string{"--path", "/healthz"}); err != nil {
		t.Errorf("address from VOICEROOM_HTTP_ADDR: %v", err)
	}
	srv.Close()
	if err := healthcheck(ctx, []string{"--addr", addr, "--path", "/healthz"}); err == nil {
		t.Error("a stopped server passed")
	}
	for _, args := range [][]string{{"--path", "/metrics"}, {"--timeout", "0s"}, {"--addr", "8080"}, {"--bogus"}} {
		if err := healthcheck(ctx, args); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

func TestLocalURL(t *testing.T) {
	tests := []struct{ addr, want string }{
		{"0.0.0.0:8080", "http://127.0.0.1:8080/readyz"},
		{":8080", "http://127.0.0.1:8080/readyz"},
		{"[::]:8080", "http://127.0.0.1:8080/readyz"},
		{"127.0.0.1:9000", "http://127.0.0.1:9000/readyz"},
		{"[::1]:9000", "http://[::1]:9000/readyz"},
	}
	for _, tt := range tests {
		if got, err := localURL(tt.addr, "/readyz"); err != nil || got != tt.want {
			t.Errorf("localURL(%q) = %q, %v; want %q", tt.addr, got, err, tt.want)
		}
	}
}
