package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"voiceroom/apperr"
)

// EmbeddedConfig configures the in-process nats-server that runs
// JetStream when no external cluster is configured.
type EmbeddedConfig struct {
	// Listen is host:port for client connections. The host must be a
	// loopback address or "localhost": the embedded server has no
	// authentication, so it must not be reachable from other machines.
	// Port "-1" or "0" picks a free port (tests). Default "127.0.0.1:4222".
	Listen string
	// StoreDir is the JetStream file store directory. Required.
	StoreDir string
	// ServerName names the server in its logs and JetStream metadata.
	// Default "voiceroom".
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept connections.
	// Default 10s.
	ReadyTimeout time.Duration
	// Cluster joins the server to a cluster (see ClusterConfig). The zero
	// value runs it alone.
	Cluster ClusterConfig
}

// WithDefaults returns c with zero fields set to their defaults.
func (c EmbeddedConfig) WithDefaults() EmbeddedConfig {
	if c.Listen == "" {
		c.Listen = "127.0.0.1:4222"
	}
	if c.ServerName == "" {
		c.ServerName = "voiceroom"
	}
	if c.ReadyTimeout == 0 {
		c.ReadyTimeout = 10 * time.Second
	}
	return c
}

// Validate checks c after defaults are applied. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c EmbeddedConfig) Validate() error {
	c = c.WithDefaults()
	if _, _, err := parseListen(c.Listen); err != nil {
		return &apperr.ConfigError{Field: "Listen", Err: err}
	}
	if c.StoreDir == "" {
		return apperr.BadConfig("StoreDir", "%w: embedded nats store dir: required", ErrInvalidConfig)
	}
	if strings.ContainsAny(c.ServerName, " \t\r\n") {
		return apperr.BadConfig("ServerName", "%w: embedded nats server name %q: must not contain whitespace", ErrInvalidConfig, c.ServerName)
	}
	if c.ReadyTimeout < 0 {
		return apperr.BadConfig("ReadyTimeout", "%w: embedded nats ready timeout %s: must be positive", ErrInvalidConfig, c.ReadyTimeout)
	}
	if err := c.Cluster.Validate(); err != nil {
		// The cluster's Listen is not the client Listen: name it apart.
		return apperr.BadConfig("Cluster."+apperr.ConfigFieldOf(err), "%w", err)
	}
	return nil
}

// parseListen splits listen into a loopback host and a port, where -1
// means "pick a free port".
func parseListen(listen string) (string, int, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("%w: embedded nats listen %q: %w", ErrInvalidConfig, listen, err)
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil || !ip.IsLoopback() {
			return "", 0, fmt.Errorf("%w: embedded nats listen %q: host must be loopback (127.0.0.1, ::1 or localhost)", ErrInvalidConfig, listen)
		}
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < -1 || port > 65535 {
		return "", 0, fmt.Errorf("%w: embedded nats listen %q: port must be 1-65535, or -1 or 0 for a free port", ErrInvalidConfig, listen)
	}
	if port == 0 {
		port = server.RANDOM_PORT // 0 means 4222 to nats-server
	}
	return host, port, nil
}

// Server is an embedded nats-server with JetStream enabled.
type Server struct {
	ns  *server.Server
	log *slog.Logger
}

// RunEmbedded starts an embedded nats-server with JetStream on a file
// store and returns once it accepts client connections. Its own logs go to
// log (notices at debug level, warnings and errors as such).
//
// A listen address that is already taken returns an error wrapping
// ErrAddrInUse at once. A server that is not ready within ReadyTimeout is
// shut down and an error wrapping ErrNotReady is returned.
func RunEmbedded(cfg EmbeddedConfig, log *slog.Logger) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	host, port, _ := parseListen(cfg.Listen) // checked by Validate

	// nats-server reports a listen failure only through its logger and
	// never returns it, so check the port ourselves first. A port taken in
	// between is still caught through the logger's Fatalf below.
	if port != server.RANDOM_PORT {
		if err := probeListen(net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
			return nil, err
		}
	}
	if addr := cfg.Cluster.probeAddr(); addr != "" {
		if err := probeListen(addr); err != nil {
			return nil, err
		}
	}

	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true, // cmd owns signals
		NoLog:      true, // logger set below
	}
	cfg.Cluster.apply(opts)
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("create embedded nats server: %w", err)
	}
	sl := &serverLogger{log: log.With("component", "nats-server"), fatal: make(chan string, 1)}
	ns.SetLoggerV2(sl, false, false, false)
	ns.Start()

	if err := waitReady(ns, sl.fatal, cfg.ReadyTimeout); err != nil {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, err
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("embedded nats server: jetstream not enabled")
	}
	s := &Server{ns: ns, log: log}
	log.Info("embedded nats server ready", "url", s.ClientURL(), "store_dir", cfg.StoreDir, "server_name", cfg.ServerName)
	return s, nil
}

// probeListen binds addr and releases it at once.
func probeListen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("embedded nats listen %s: %w", addr, ErrAddrInUse)
		}
		return fmt.Errorf("embedded nats listen %s: %w", addr, err)
	}
	if err := ln.Close(); err != nil {
		return fmt.Errorf("embedded nats listen %s: release probe: %w", addr, err)
	}
	return nil
}

// waitReady polls the server's readiness signal in short slices so that a
// fatal error logged by the server ends the wait at once.
func waitReady(ns *server.Server, fatal <-chan string, timeout time.Duration) error {
	const slice = 50 * time.Millisecond
	deadline := time.Now().Add(timeout)
	for {
		select {
		case msg := <-fatal:
			if strings.Contains(msg, "address already in use") {
				return fmt.Errorf("embedded nats: %s: %w", msg, ErrAddrInUse)
			}
			return fmt.Errorf("embedded nats: %s", msg)
		default:
		}
		if ns.ReadyForConnections(slice) {
			select {
			case msg := <-fatal: // e.g. JetStream failed after the listener came up
				return fmt.Errorf("embedded nats: %s", msg)
			default:
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("embedded nats after %s: %w", timeout, ErrNotReady)
		}
	}
}

// ClientURL returns the URL clients connect to, with the real port when a
// free port was picked.
func (s *Server) ClientURL() string {
	return s.ns.ClientURL()
}

// Shutdown stops the server and waits until it is down. It is safe to call
// more than once.
func (s *Server) Shutdown() {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	s.log.Info("embedded nats server stopped")
}

// WaitForShutdown blocks until the server has shut down.
func (s *Server) WaitForShutdown() {
	s.ns.WaitForShutdown()
}

// serverLogger routes nats-server logs to slog. Notices are demoted to
// debug: the server is chatty at start and the app logs its own summary.
// Fatalf never exits the process; it is reported to RunEmbedded.
type serverLogger struct {
	log       *slog.Logger
	fatal     chan string
	fatalOnce sync.Once
}

var _ server.Logger = (*serverLogger)(nil)

func (l *serverLogger) Noticef(format string, v ...any) {
	l.logf(slog.LevelDebug, format, v...)
}

func (l *serverLogger) Warnf(format string, v ...any) {
	l.logf(slog.LevelWarn, format, v...)
}

func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg, "fatal", true)
	l.fatalOnce.Do(func() { l.fatal <- msg })
}

func (l *serverLogger) Errorf(format string, v ...any) {
	l.logf(slog.LevelError, format, v...)
}

func (l *serverLogger) Debugf(format string, v ...any) {
	l.logf(slog.LevelDebug, format, v...)
}

func (l *serverLogger) Tracef(format string, v ...any) {
	l.logf(slog.LevelDebug-4, format, v...)
}

func (l *serverLogger) logf(level slog.Level, format string, v ...any) {
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
}
