package gateway

import (
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/pprof"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newOpsApp builds the operators' listener: /metrics, /healthz, /readyz
// and, with Pprof, /debug/pprof. It has no authentication and no rate
// limit: it is meant for loopback or a private network only, never the
// internet (the public listener answers 404 for these paths). Its requests
// are not counted in voiceroom_http_requests_total, which measures the API.
func (s *Server) newOpsApp(gatherer prometheus.Gatherer) *fiber.App {
	app := fiber.New(fiber.Config{
		AppName:               "voiceroom-ops",
		BodyLimit:             s.cfg.BodyLimit,
		ReadTimeout:           s.cfg.ReadTimeout,
		WriteTimeout:          s.cfg.WriteTimeout,
		IdleTimeout:           s.cfg.IdleTimeout,
		DisableStartupMessage: true,
		ErrorHandler:          s.handleError,
	})
	app.Use(opsAnswerHeaders, requestIDMiddleware, s.recoverMiddleware)
	app.Get("/healthz", handleAlive)
	app.Get("/readyz", s.handleReady)
	app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	if s.cfg.Pprof {
		app.Use(pprof.New())
	}
	return app
}

// opsAnswerHeaders: everything the operators' listener answers is the
// process's internals, never to be kept by a cache.
func opsAnswerHeaders(c *fiber.Ctx) error {
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.Next()
}
