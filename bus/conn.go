package bus

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
)

// ConnConfig configures the client connection to NATS.
type ConnConfig struct {
	// URL is the server URL, or several separated by commas. Required.
	URL string
	// Name is the client connection name shown by the server.
	Name string
	// User and Password authenticate with a user and password. Optional.
	User, Password string
	// CredsFile is a NATS credentials file (JWT and seed). Optional.
	CredsFile string
	// TLSCAFile verifies the server; TLSCertFile and TLSKeyFile, given
	// together, authenticate the client. Optional.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// ConnectTimeout bounds the retries of the first connection; after it
	// Connect gives up with an error. Once connected, the connection
	// reconnects forever. Default 10s.
	ConnectTimeout time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ConnConfig) WithDefaults() ConnConfig {
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 10 * time.Second
	}
	return c
}

// Validate checks c after defaults are applied: every URL has a scheme
// (nats://host:port). Errors are *apperr.ConfigError naming the field and
// wrap ErrInvalidConfig.
func (c ConnConfig) Validate() error {
	c = c.WithDefaults()
	if strings.TrimSpace(c.URL) == "" {
		return apperr.BadConfig("URL", "%w: nats url: required", ErrInvalidConfig)
	}
	for _, u := range strings.Split(c.URL, ",") {
		if !strings.Contains(u, "://") {
			return apperr.BadConfig("URL", "%w: nats url %q: want nats://host:port[,nats://...]", ErrInvalidConfig, u)
		}
	}
	if c.ConnectTimeout < 0 {
		return apperr.BadConfig("ConnectTimeout", "%w: nats connect timeout %s: must be positive", ErrInvalidConfig, c.ConnectTimeout)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return apperr.BadConfig("TLSCertFile", "%w: nats tls cert file and key file: set both or neither", ErrInvalidConfig)
	}
	if c.Password != "" && c.User == "" {
		return apperr.BadConfig("Password", "%w: nats password without user", ErrInvalidConfig)
	}
	return nil
}

// Conn is a NATS connection with its JetStream context.
type Conn struct {
	nc        *nats.Conn
	js        jetstream.JetStream
	log       *slog.Logger
	closed    chan struct{}
	closeOnce sync.Once
}

// Timeouts of the connection, fixed because nobody needs to tune them.
const (
	reconnectWait  = time.Second
	drainTimeout   = 5 * time.Second
	dialTimeout    = 2 * time.Second
	asyncAckExpiry = 30 * time.Second // an async publish with no ack by then fails
)

// Connect connects to NATS, retrying for up to ConnectTimeout (and while
// ctx lives), and returns an error naming the URL (password redacted) if
// no attempt succeeds. After the first success the connection reconnects
// forever and logs every disconnect and reconnect.
func Connect(ctx context.Context, cfg ConnConfig, log *slog.Logger) (*Conn, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "nats")
	c := &Conn{log: log, closed: make(chan struct{})}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.Timeout(min(dialTimeout, cfg.ConnectTimeout)),
		nats.DrainTimeout(drainTimeout),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil { // our own Close or Drain
				log.Debug("nats disconnected")
				return
			}
			log.Warn("nats disconnected", "error", err)
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(*nats.Conn) {
			c.closeOnce.Do(func() { close(c.closed) })
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats async error", "subject", subject, "error", err)
		}),
	}
	if cfg.User != "" {
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCAFile))
	}
	if cfg.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCertFile, cfg.TLSKeyFile))
	}

	safeURL := redactURLs(cfg.URL)
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	wait := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		nc, err := nats.Connect(cfg.URL, opts...)
		if err == nil {
			c.nc = nc
			break
		}
		log.Warn("nats connect failed", "url", safeURL, "attempt", attempt, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("connect to nats %s: gave up after %d attempts in %s: %w", safeURL, attempt, cfg.ConnectTimeout, err)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}

	js, err := jetstream.New(c.nc, jetstream.WithPublishAsyncTimeout(asyncAckExpiry))
	if err != nil {
		c.nc.Close()
		return nil, fmt.Errorf("jetstream context: %w", err)
	}
	c.js = js
	log.Info("nats connected", "url", c.nc.ConnectedUrlRedacted(), "server", c.nc.ConnectedServerName())
	return c, nil
}

// redactURLs hides passwords in a comma-separated list of URLs.
func redactURLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := url.Parse(p); err == nil {
			p = u.Redacted()
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// NATS returns the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream returns the JetStream context of the connection. Its async
// publishes fail with jetstream.ErrAsyncPublishTimeout if unanswered for
// 30s.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// Ping reports whether the connection is up and JetStream answers, within
// ctx. Meant for /readyz. A down connection returns ErrNotConnected.
func (c *Conn) Ping(ctx context.Context) error {
	if !c.nc.IsConnected() {
		return fmt.Errorf("ping nats (%s): %w", c.nc.Status(), ErrNotConnected)
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("ping jetstream: %w", err)
	}
	return nil
}

// Close drains the connection (pending publishes and acks are flushed,
// subscriptions finish their messages) and closes it, within a few
// seconds. It is safe to call more than once.
func (c *Conn) Close() {
	if c.nc.IsClosed() {
		return
	}
	if err := c.nc.Drain(); err != nil {
		c.log.Warn("nats drain failed, closing", "error", err)
		c.nc.Close()
		return
	}
	t := time.NewTimer(drainTimeout + time.Second)
	defer t.Stop()
	select {
	case <-c.closed:
	case <-t.C:
		c.log.Warn("nats drain did not finish in time, closing")
		c.nc.Close()
	}
}
