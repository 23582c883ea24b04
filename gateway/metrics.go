package gateway

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	r := promreg.On(reg)
	s := r.Sub("http")
	m := &httpMetrics{
		requests: s.CounterVec("requests_total",
			"HTTP requests by route template, method and status.", "route", "method", "status"),
		duration: s.HistogramVec("request_duration_seconds",
			"HTTP request latency by route template and method.",
			[]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5}, "route", "method"),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("gateway metrics: %w", err)
	}
	return m, nil
}

// middleware records every request under its route template, so the label
// set stays bounded whatever paths clients send.
func (m *httpMetrics) middleware(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := answeredStatus(c, err)
	route := "unmatched"
	if r := c.Route(); r != nil && r.Path != "/" {
		route = r.Path
	}
	m.requests.WithLabelValues(route, c.Method(), strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, c.Method()).Observe(time.Since(start).Seconds())
	return err
}

// answeredStatus is the status of the answer to a request whose handlers
// returned err: the error handler runs after the middlewares that ask, so
// an error's status is the one it will write.
func answeredStatus(c *fiber.Ctx, err error) int {
	if err != nil {
		return httpStatus(kindOf(err).Code)
	}
	return c.Response().StatusCode()
}

// zeroServerErrors creates the series of the server's failures (500, 503)
// of every route at 0, so that an error-rate alert reads 0, not nothing,
// until the first failure. HEAD routes Fiber adds for GET are left out.
func (m *httpMetrics) zeroServerErrors(app *fiber.App) {
	for _, r := range app.GetRoutes(true) {
		if r.Method == fiber.MethodHead || r.Path == "/" {
			continue
		}
		for _, status := range []int{fiber.StatusInternalServerError, fiber.StatusServiceUnavailable} {
			m.requests.WithLabelValues(r.Path, r.Method, strconv.Itoa(status))
		}
	}
}
