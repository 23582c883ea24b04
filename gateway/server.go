package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/adaptor"
	"github.com/gofiber/fiber/v2/middleware/pprof"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"voiceroom/apperr"
)

// Config configures the HTTP edge. Zero fields take the defaults given.
type Config struct {
	// Addr is the listen address, host:port. Default "127.0.0.1:8080".
	Addr string
	// BodyLimit is the largest request body in bytes. 1 KiB..16 MiB,
	// default 64 KiB.
	BodyLimit int
	// JWTSecret is the HS256 key of app and admin tokens. Required, ≥ 16 bytes.
	JWTSecret []byte
	// ReadTimeout, WriteTimeout and IdleTimeout bound a connection's phases.
	// Defaults 10s, 10s, 60s.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// RatePerUser is the sustained requests per second one principal may make
	// on /api and /admin; RateBurst the burst above it. Defaults 50 and 100.
	RatePerUser float64
	RateBurst   int
	// RequestTimeout bounds each request: the context its handler passes
	// to every I/O ends then, and the request answers UNAVAILABLE. Keep it
	// above the rooms' command timeout. Default 10s.
	RequestTimeout time.Duration
	// Pprof serves Go's profiles under /debug/pprof (unauthenticated: only
	// for a loopback or otherwise private listener). Default false.
	Pprof bool
}

// Limits of Config.BodyLimit.
const (
	MinBodyLimit = 1 << 10
	MaxBodyLimit = 16 << 20
)

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8080"
	}
	if c.BodyLimit <= 0 {
		c.BodyLimit = 64 << 10
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 10 * time.Second
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = 60 * time.Second
	}
	if c.RatePerUser <= 0 {
		c.RatePerUser = 50
	}
	if c.RateBurst <= 0 {
		c.RateBurst = 100
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 10 * time.Second
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return apperr.BadConfig("Addr", "addr %q: want host:port: %w", c.Addr, err)
	}
	if c.BodyLimit < MinBodyLimit || c.BodyLimit > MaxBodyLimit {
		return apperr.BadConfig("BodyLimit", "body limit %d: want %d..%d bytes", c.BodyLimit, MinBodyLimit, MaxBodyLimit)
	}
	if len(c.JWTSecret) < 16 {
		return apperr.BadConfig("JWTSecret", "jwt secret must be at least 16 bytes")
	}
	return nil
}

// Check is one readiness probe: nil means ready.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Routers are the groups a Mount adds routes to. API routes see an
// authenticated user, Admin routes an authenticated admin; Public routes are
// unauthenticated (callbacks that check their own credentials).
type Routers struct {
	API    fiber.Router // under /api
	Admin  fiber.Router // under /admin
	Public fiber.Router // under /
}

// Mount adds one domain's routes.
type Mount func(r Routers)

// Server is the HTTP edge.
type Server struct {
	cfg      Config
	log      *slog.Logger
	app      *fiber.App
	checks   []Check
	draining atomic.Bool
	serving  atomic.Bool
	ln       net.Listener
	limiter  *rateLimiter
	metrics  *httpMetrics
}

// New builds the server and its routes. Nothing listens until Listen.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer, checks []Check, mounts ...Mount) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	metrics, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		log:     log,
		checks:  checks,
		limiter: newRateLimiter(cfg.RatePerUser, cfg.RateBurst, time.Now),
		metrics: metrics,
	}
	s.app = fiber.New(fiber.Config{
		AppName:               "voiceroom",
		BodyLimit:             cfg.BodyLimit,
		ReadTimeout:           cfg.ReadTimeout,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           cfg.IdleTimeout,
		DisableStartupMessage: true,
		Immutable:             true, // values taken from a request outlive it (room ids in cells)
		ErrorHandler:          s.handleError,
	})
	auth := newAuthenticator(cfg.JWTSecret, time.Now)

	s.app.Use(requestIDMiddleware, s.metrics.middleware, s.recoverMiddleware, s.deadlineMiddleware)
	s.app.Get("/healthz", func(c *fiber.Ctx) error { return OK(c, fiber.Map{"status": "alive"}) })
	s.app.Get("/readyz", s.handleReady)
	s.app.Get("/metrics", adaptor.HTTPHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
	if cfg.Pprof {
		s.app.Use(pprof.New())
	}

	routers := Routers{
		API:    s.app.Group("/api", auth.requireUser, s.limiter.middleware),
		Admin:  s.app.Group("/admin", auth.requireAdmin, s.limiter.middleware),
		Public: s.app,
	}
	for _, m := range mounts {
		m(routers)
	}
	s.metrics.zeroServerErrors(s.app)
	return s, nil
}

// App returns the Fiber app, for tests that call app.Test.
func (s *Server) App() *fiber.App { return s.app }

// Listen binds the address. A taken address is an error at once.
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Addr, err)
	}
	s.ln = ln
	return nil
}

// Addr returns the bound address, after Listen.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves on the listener until Shutdown. It returns nil after a
// graceful shutdown.
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("serve before listen")
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	if err := s.app.Listener(s.ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("http serve: %w", err)
	}
	return nil
}

// SetDraining makes /readyz answer 503 so load balancers stop sending traffic.
func (s *Server) SetDraining() { s.draining.Store(true) }

// Shutdown stops accepting connections and waits for in-flight requests until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.app.ShutdownWithContext(ctx)
}

func (s *Server) handleReady(c *fiber.Ctx) error {
	if s.draining.Load() {
		return apperr.New(apperr.Unavailable, "draining")
	}
	if !s.serving.Load() {
		return apperr.New(apperr.Unavailable, "not serving yet")
	}
	ctx, cancel := context.WithTimeout(c.UserContext(), 2*time.Second)
	defer cancel()
	for _, ch := range s.checks {
		if err := ch.Fn(ctx); err != nil {
			s.log.Warn("readiness check failed", "check", ch.Name, "error", err)
			return apperr.New(apperr.Unavailable, "%s not ready", ch.Name)
		}
	}
	return OK(c, fiber.Map{"status": "ready"})
}

// handleError is Fiber's error handler: every error becomes the envelope.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	e := kindOf(err)
	status := httpStatus(e.Code)
	if status >= 500 {
		s.log.Error("request failed", "request_id", RequestID(c), "method", c.Method(), "path", c.Path(), "code", e.Code, "error", err)
	} else {
		s.log.Debug("request rejected", "request_id", RequestID(c), "method", c.Method(), "path", c.Path(), "code", e.Code, "error", err)
	}
	return writeError(c, e)
}

// recoverMiddleware turns a panic into INTERNAL and logs it with the request id.
func (s *Server) recoverMiddleware(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "request_id", RequestID(c), "method", c.Method(), "path", c.Path(),
				"panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = apperr.New(apperr.Internal, "internal error")
		}
	}()
	return c.Next()
}
