package gateway

import (
	"log/slog"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
)

// A handler that waits on its request's context is let go when the
// request's deadline passes, and the request answers UNAVAILABLE.
func TestRequestNeverOutlivesItsDeadline(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RequestTimeout: 100 * time.Millisecond}
	s, err := New(cfg, slog.New(slog.DiscardHandler), reg, reg, nil, func(r Routers) {
		r.API.Get("/v1/wait", func(c *fiber.Ctx) error {
			ctx := c.UserContext()
			if _, ok := ctx.Deadline(); !ok {
				return apperr.New(apperr.Internal, "the request has no deadline")
			}
			select {
			case <-ctx.Done():
				return ctx.Err() // what a store returns when its query is cut off
			case <-time.After(4 * time.Second):
				return apperr.New(apperr.Internal, "the deadline did not end the request")
			}
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	status, env, _ := do(t, s, "GET", "/api/v1/wait", mustToken(t, "app1", 1, "", time.Hour), "")
	if status != 503 || env.Code != "UNAVAILABLE" {
		t.Fatalf("got %d %s (%q), want 503 UNAVAILABLE", status, env.Code, env.Message)
	}
}
