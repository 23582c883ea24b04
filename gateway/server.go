package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/authtoken"
)

// Config configures the HTTP edge. Zero fields take the defaults given.
type Config struct {
	// Addr is the public listen address, host:port: the API, /healthz,
	// /readyz, /docs and /openapi.yaml. Default "127.0.0.1:8080".
	Addr string
	// OpsAddr is the operators' listen address, host:port: /metrics,
	// /healthz, /readyz and, with Pprof, /debug/pprof, all
	// unauthenticated, so keep it on loopback or a private network. Empty
	// (the default here; serve's default is 127.0.0.1:9090): no operators'
	// listener, and no metrics or profiles served at all.
	OpsAddr string
	// CORSOrigins are the exact browser origins (scheme://host[:port]) that
	// may call /api from a page; empty (the default): no CORS, and
	// browsers refuse cross-origin calls. /admin never answers CORS.
	CORSOrigins []string
	// BodyLimit is the largest request body in bytes. 1 KiB..16 MiB,
	// default 64 KiB.
	BodyLimit int
	// Keys are the keys tokens are verified with (package apps' Registry:
	// each app's own keys, the platform operators' key, identity
	// providers). Nil: JWTSecret alone verifies every app's tokens (tests
	// and development).
	Keys authtoken.Keys
	// JWTSecret is the single HS256 secret used when Keys is nil; then
	// required, ≥ 16 bytes.
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
	// Pprof serves Go's profiles under /debug/pprof on the operators'
	// listener (never on the public one); it needs OpsAddr. Default false.
	Pprof bool
	// TrustedProxies are the reverse proxies in front of the public
	// listener, as IP addresses or CIDR prefixes: a request whose TCP peer
	// is one of them has its client address read from X-Forwarded-For
	// (clientip.go). Empty (the default): no proxy is trusted, and the
	// client is the TCP peer whatever the request's headers say.
	TrustedProxies []string
	// AccessLog logs every request of the public listener at Info once
	// answered (method, path, status, duration, client address, request
	// id), passing health checks left out. Default false.
	AccessLog bool
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
	if err := checkAddr("Addr", "addr", c.Addr); err != nil {
		return err
	}
	if c.OpsAddr != "" {
		if err := checkAddr("OpsAddr", "ops addr", c.OpsAddr); err != nil {
			return err
		}
		if samePort(c.Addr, c.OpsAddr) {
			return apperr.BadConfig("OpsAddr", "ops addr %q: the public listener (%s) takes that port; give the operators' listener its own", c.OpsAddr, c.Addr)
		}
	}
	if c.Pprof && c.OpsAddr == "" {
		return apperr.BadConfig("Pprof", "pprof is served on the operators' listener only, which is off (empty ops addr)")
	}
	for _, o := range c.CORSOrigins {
		if err := checkOrigin(o); err != nil {
			return apperr.BadConfig("CORSOrigins", "cors origin %q: %w", o, err)
		}
	}
	if c.BodyLimit < MinBodyLimit || c.BodyLimit > MaxBodyLimit {
		return apperr.BadConfig("BodyLimit", "body limit %d: want %d..%d bytes", c.BodyLimit, MinBodyLimit, MaxBodyLimit)
	}
	if _, err := parseTrustedProxies(c.TrustedProxies); err != nil {
		return apperr.BadConfig("TrustedProxies", "trusted proxy %w", err)
	}
	if c.Keys == nil && len(c.JWTSecret) < authtoken.MinSecret {
		return apperr.BadConfig("JWTSecret", "jwt secret must be at least %d bytes", authtoken.MinSecret)
	}
	return nil
}

// checkAddr accepts host:port with a numeric port (0 picks a free one).
func checkAddr(field, name, addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return apperr.BadConfig(field, "%s %q: want host:port: %w", name, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return apperr.BadConfig(field, "%s %q: want a port of 0..65535", name, addr)
	}
	return nil
}

// samePort reports whether two valid listen addresses would take the same
// port: the same fixed port on the same host, or on any host when one of
// them listens on every address.
func samePort(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	return ha == hb || wildcardHost(ha) || wildcardHost(hb)
}

// wildcardHost reports whether a listen host means every address.
func wildcardHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "" || (ip != nil && ip.IsUnspecified())
}

// Check is one readiness probe: nil means ready.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Routers are the groups a Mount adds routes to. API routes see an
// authenticated user, Admin routes an authenticated admin of an app,
// Platform routes an authenticated platform operator; Public routes are
// unauthenticated (callbacks that check their own credentials).
type Routers struct {
	API      fiber.Router // under /api
	Admin    fiber.Router // under /admin
	Platform fiber.Router // under /platform
	Public   fiber.Router // under /
	// app is the server's own, for the console's in-process calls.
	app *fiber.App
}

// Mount adds one domain's routes.
type Mount func(r Routers)

// Server is the HTTP edge: the public listener and, when OpsAddr is set,
// the operators' listener. Both share the readiness state (checks,
// draining), and start and stop together.
type Server struct {
	cfg      Config
	log      *slog.Logger
	app      *fiber.App // the public listener's
	ops      *fiber.App // the operators' listener's; nil without OpsAddr
	checks   []Check
	draining atomic.Bool
	serving  atomic.Bool
	ln       net.Listener
	opsLn    net.Listener
	limiter  *rateLimiter
	metrics  *httpMetrics
	trusted  []netip.Prefix // Config.TrustedProxies
}

// New builds the server and its routes. Nothing listens until Listen.
// gatherer is what the operators' /metrics serves.
func New(cfg Config, log *slog.Logger, reg prometheus.Registerer, gatherer prometheus.Gatherer, checks []Check, mounts ...Mount) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.OpsAddr != "" && gatherer == nil {
		return nil, errors.New("gateway: the operators' listener needs a gatherer for /metrics")
	}
	metrics, err := newHTTPMetrics(reg)
	if err != nil {
		return nil, err
	}
	authMetrics, err := newAuthMetrics(reg)
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
	s.trusted, _ = parseTrustedProxies(cfg.TrustedProxies) // Validate checked them
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
	keys := cfg.Keys
	if keys == nil {
		keys = authtoken.SingleSecret(cfg.JWTSecret)
	}
	auth := newAuthenticator(keys, time.Now, authMetrics)

	edge := []any{answerHeaders, requestIDMiddleware}
	if cfg.AccessLog {
		edge = append(edge, s.accessLog) // outside recover: it logs what a panic answered too
	}
	s.app.Use(append(edge, s.metrics.middleware, s.recoverMiddleware, s.deadlineMiddleware)...)
	s.app.Get("/healthz", handleAlive)
	s.app.Get("/readyz", s.handleReady)

	// A browser's preflight carries no token: the CORS policy answers it
	// before authentication. It names the methods of the /api routes,
	// known once every mount has run.
	apiHandlers := []fiber.Handler{auth.requireUser, s.limiter.middleware}
	var cors fiber.Handler
	if len(cfg.CORSOrigins) > 0 {
		apiHandlers = append([]fiber.Handler{func(c *fiber.Ctx) error { return cors(c) }}, apiHandlers...)
	}
	routers := Routers{
		API:      s.app.Group("/api", apiHandlers...),
		Admin:    s.app.Group("/admin", auth.requireAdmin, s.limiter.middleware),
		Platform: s.app.Group("/platform", auth.requirePlatform, s.limiter.middleware),
		Public:   s.app,
		app:      s.app,
	}
	for _, m := range mounts {
		m(routers)
	}
	if len(cfg.CORSOrigins) > 0 {
		cors = newCORS(cfg.CORSOrigins, apiMethods(s.app))
	}
	s.metrics.zeroServerErrors(s.app)
	if cfg.OpsAddr != "" {
		s.ops = s.newOpsApp(gatherer)
	}
	return s, nil
}

// App returns the Fiber app, for tests that call app.Test.
func (s *Server) App() *fiber.App { return s.app }

// Listen binds the public address and, when set, the operators' one. A
// taken address is an error at once: an *apperr.ConfigError naming Addr or
// OpsAddr, with nothing left bound.
func (s *Server) Listen() error {
	ln, err := listen("Addr", s.cfg.Addr)
	if err != nil {
		return err
	}
	if s.ops != nil {
		opsLn, err := listen("OpsAddr", s.cfg.OpsAddr)
		if err != nil {
			ln.Close()
			return err
		}
		s.opsLn = opsLn
	}
	s.ln = ln
	return nil
}

func listen(field, addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, apperr.BadConfig(field, "listen on %s: %w", addr, err)
	}
	return ln, nil
}

// Addr returns the bound public address, after Listen.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// OpsAddr returns the bound operators' address after Listen, or "" when
// there is no operators' listener.
func (s *Server) OpsAddr() string {
	if s.opsLn == nil {
		return ""
	}
	return s.opsLn.Addr().String()
}

// Serve serves both listeners until Shutdown. It returns nil after a
// graceful shutdown, or the first listener's failure at once (the other
// serves on until Shutdown).
func (s *Server) Serve() error {
	if s.ln == nil {
		return errors.New("serve before listen")
	}
	s.serving.Store(true)
	defer s.serving.Store(false)
	done := make(chan error, 2)
	go func() { done <- serveApp("http", s.app, s.ln) }()
	n := 1
	if s.opsLn != nil {
		go func() { done <- serveApp("ops http", s.ops, s.opsLn) }()
		n++
	}
	for range n {
		if err := <-done; err != nil {
			return err
		}
	}
	return nil
}

func serveApp(name string, app *fiber.App, ln net.Listener) error {
	if err := app.Listener(ln); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%s serve: %w", name, err)
	}
	return nil
}

// SetDraining makes /readyz answer 503 so load balancers stop sending traffic.
func (s *Server) SetDraining() { s.draining.Store(true) }

// Shutdown stops accepting connections and waits for in-flight requests
// until ctx ends: the public listener first, then the operators' one, so
// that metrics and readiness stay readable while the API drains.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.app.ShutdownWithContext(ctx)
	if s.ops != nil {
		if opsErr := s.ops.ShutdownWithContext(ctx); opsErr != nil {
			err = errors.Join(err, fmt.Errorf("ops http: %w", opsErr))
		}
	}
	return err
}

func handleAlive(c *fiber.Ctx) error { return OK(c, fiber.Map{"status": "alive"}) }

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
		s.log.Error("request failed", "request_id", RequestID(c), "method", c.Method(), "path", c.Path(), "code", e.Code,
			"client_ip", s.clientIP(c).String(), "error", err)
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
