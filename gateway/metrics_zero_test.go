package gateway

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
)

// TestServerErrorSeriesExistAtZero: each route's 500 and 503 series of
// voiceroom_http_requests_total exist at 0 before the first request, so that an
// error-rate alert reads 0, not nothing.
func TestServerErrorSeriesExistAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := New(Config{JWTSecret: testSecret}, testenv.Logger(t), reg, reg, nil, func(r Routers) {
		r.API.Post("/v1/things/:id", func(c *fiber.Ctx) error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, series := range [][2]string{{"/api/v1/things/:id", "POST"}, {"/readyz", "GET"}} {
		for _, status := range []string{"500", "503"} {
			v, ok := testenv.Metric(t, reg, "voiceroom_http_requests_total", "route", series[0], "method", series[1], "status", status)
			if !ok || v != 0 {
				t.Errorf("voiceroom_http_requests_total{route=%s,method=%s,status=%s}: %v, exists %v; want 0 from the start", series[0], series[1], status, v, ok)
			}
		}
	}
	if _, ok := testenv.Metric(t, reg, "voiceroom_http_requests_total", "method", "HEAD"); ok {
		t.Error("HEAD routes Fiber adds for GET need no series")
	}
}
