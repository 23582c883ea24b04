package webhooks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
)

// Sink delivers room events from the durable "webhooks" to the apps'
// endpoints (see the package doc). Several processes may run one: the
// holder of the delivery lease delivers, the others stand by.
type Sink struct {
	db      *sql.DB
	js      jetstream.JetStream
	sealer  *Sealer
	history *DeliveryLog
	cfg     Config
	log     *slog.Logger
	metrics *Metrics
	busM    *bus.Metrics
	holder  string
	client  *http.Client
	serving chan struct{}
	once    sync.Once
}

// New returns a Sink over db (the endpoints) and js (the durable, the
// stream, the lease, the delivery log), opening secrets with sealer.
// holder names this process in the lease. log, m and busMetrics may be
// nil.
func New(db *sql.DB, js jetstream.JetStream, sealer *Sealer, holder string, cfg Config, log *slog.Logger, m *Metrics, busMetrics *bus.Metrics) (*Sink, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || js == nil || sealer == nil {
		return nil, fmt.Errorf("%w: the sink needs a database, jetstream and a sealer", ErrInvalidConfig)
	}
	if holder == "" {
		return nil, fmt.Errorf("%w: the sink needs a holder name", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{db: db, js: js, sealer: sealer, cfg: cfg, log: log.With("component", "webhooks"), metrics: m,
		busM: busMetrics, holder: holder, client: newHTTPClient(cfg), serving: make(chan struct{})}, nil
}

// Serving is closed once this Sink delivers for the first time: it holds
// the lease, has read the endpoints and its consumer runs.
func (s *Sink) Serving() <-chan struct{} { return s.serving }

func (s *Sink) servingOnce() { s.once.Do(func() { close(s.serving) }) }

// Run delivers while this process holds the delivery lease, and waits to
// take it while another does, until ctx ends. A process that loses the
// lease (it could not renew it in time) stops delivering, hands what it
// held back to the durable and tries to take the lease again. Run returns
// an error only if it cannot start (the lease bucket or the delivery log
// cannot be created).
func (s *Sink) Run(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	l, err := openLease(octx, s.js, s.holder, s.cfg.LeaseTTL, s.cfg.Replicas)
	if err == nil {
		s.history, err = OpenDeliveryLog(octx, s.js, s.cfg.Replicas)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("webhooks: %w", err)
	}
	defer s.client.CloseIdleConnections()
	waiting := false
	for ctx.Err() == nil {
		tctx, tcancel := context.WithTimeout(ctx, s.cfg.LeaseTTL/4)
		held, err := l.take(tctx)
		tcancel()
		if err != nil && ctx.Err() == nil {
			s.log.Warn("delivery lease: cannot take it", "error", err)
		}
		if !held {
			if !waiting {
				s.log.Info("delivery lease held by another process: standing by", "lease_ttl", s.cfg.LeaseTTL)
				waiting = true
			}
			sleep(ctx, s.cfg.LeaseTTL/4)
			continue
		}
		waiting = false
		s.log.Info("delivery lease taken: delivering", "holder", s.holder)
		s.metrics.setLease(true)
		err = l.hold(ctx, s.serve)
		s.metrics.setLease(false)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		l.release(rctx)
		rcancel()
		switch {
		case errors.Is(err, errReconnected):
			s.log.Warn("delivering stopped: the connection to NATS was lost and made again; a new tenure reads back what this one left unsettled")
		case err != nil:
			s.log.Error("delivering stopped", "error", err)
			sleep(ctx, s.cfg.LeaseTTL/4)
		case ctx.Err() == nil:
			s.log.Warn("delivery lease lost: stopped delivering")
		}
	}
	return nil
}

// serve delivers until ctx ends: one tenure of the lease.
func (s *Sink) serve(ctx context.Context) error {
	w, err := s.newWorker(ctx)
	if err != nil {
		return err
	}
	return w.run(ctx)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
