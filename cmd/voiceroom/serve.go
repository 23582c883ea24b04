package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/promreg"
)

// worker is a background component with a lifetime: Run blocks until its ctx
// ends and drains within its own bound.
type worker struct {
	name string
	run  func(ctx context.Context) error
}

// deps are the connections every role shares.
type deps struct {
	cfg     config
	log     *slog.Logger
	db      *sql.DB
	redis   *redis.Client // nil when VOICEROOM_REDIS_ADDR is empty
	nats    *bus.Conn
	embed   *bus.Server // nil with an external NATS
	reg     *prometheus.Registry
	secret  []byte
	workers []worker
	mounts  []gateway.Mount
	closers []func() // run in reverse order after HTTP has stopped, before NATS closes

	// fastPath publishes each committed command's outbox events at once;
	// set when the rooms role runs, for the rooms package to call.
	fastPath *outboxrelay.FastPath
}

// serve runs the roles of VOICEROOM_ROLES until SIGINT or SIGTERM, then shuts
// down in the order of the outbox spec's App Lifecycle: draining (readyz 503),
// workers stop taking work and finish within a bound, HTTP shuts down
// gracefully, then NATS, MySQL and Redis close.
func serve(ctx context.Context) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	log.Info("starting", "version", version, "roles", cfg.Roles)

	d, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.close()

	if err := wireRoles(ctx, d); err != nil {
		return err
	}

	checks := []gateway.Check{
		{Name: "mysql", Fn: d.db.PingContext},
		{Name: "nats", Fn: d.nats.Ping},
	}
	srv, err := gateway.New(cfg.gateway(d.secret), log, d.reg, d.reg, checks, d.mounts...)
	if err != nil {
		return err
	}
	if err := srv.Listen(); err != nil {
		return badVar("VOICEROOM_HTTP_ADDR", "%v", err)
	}
	httpDone := make(chan error, 1)
	go func() { httpDone <- srv.Serve() }()
	log.Info("http serving", "addr", srv.Addr())

	// Workers start only once HTTP serves. A worker that returns before
	// shutdown, with or without an error, stops the process.
	workerCtx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	var group errgroup.Group
	for _, w := range d.workers {
		log.Info("worker starting", "worker", w.name)
		group.Go(func() error {
			err := w.run(workerCtx)
			if err != nil {
				log.Error("worker failed", "worker", w.name, "error", err)
				return fmt.Errorf("worker %s: %w", w.name, err)
			}
			if workerCtx.Err() == nil {
				return fmt.Errorf("worker %s stopped on its own", w.name)
			}
			log.Info("worker stopped", "worker", w.name)
			return nil
		})
	}
	workersDone := make(chan error, 1)
	var workersEarly <-chan error // stays nil (never ready) without workers
	if len(d.workers) > 0 {
		workersEarly = workersDone
	}
	go func() { workersDone <- group.Wait() }()

	var runErr error
	workersFinished := false
	select {
	case <-ctx.Done():
		log.Info("shutdown: signal received")
	case err := <-httpDone:
		runErr = fmt.Errorf("http stopped: %w", err)
		httpDone <- nil
	case err := <-workersEarly:
		runErr = err
		workersFinished = true
	}

	log.Info("shutdown: draining, readyz answers 503")
	srv.SetDraining()

	log.Info("shutdown: stopping workers", "timeout", cfg.ShutdownTimeout)
	stopWorkers()
	if !workersFinished {
		select {
		case err := <-workersDone:
			runErr = errors.Join(runErr, err)
		case <-time.After(cfg.ShutdownTimeout):
			runErr = errors.Join(runErr, errors.New("workers did not stop within VOICEROOM_SHUTDOWN_TIMEOUT"))
			log.Error("shutdown: workers did not stop in time", "timeout", cfg.ShutdownTimeout)
		}
	}
	log.Info("shutdown: workers stopped")

	log.Info("shutdown: http", "timeout", cfg.HTTPShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTPShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("http shutdown: %w", err))
	}
	if err := <-httpDone; err != nil {
		runErr = errors.Join(runErr, err)
	}
	log.Info("shutdown: http stopped")
	return runErr
}

// open connects MySQL (migrating it when configured), Redis and NATS (the
// embedded server when VOICEROOM_NATS_URL is empty) and provisions the streams.
func open(ctx context.Context, cfg config, log *slog.Logger) (d *deps, err error) {
	d = &deps{cfg: cfg, log: log, reg: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	r := promreg.On(d.reg)
	goc, proc := collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
	promreg.Add(r, &goc)
	promreg.Add(r, &proc)
	if err := r.Err(); err != nil {
		return d, err
	}

	if d.secret, err = cfg.jwtSecret(log); err != nil {
		return d, err
	}

	log.Info("mysql: connecting")
	d.db, err = mysqldb.Open(ctx, mysqldb.Config{DSN: cfg.MySQLDSN, MaxOpenConns: cfg.MySQLMaxOpenConns, ConnectTimeout: cfg.MySQLConnectWait}, log)
	if err != nil {
		return d, fmt.Errorf("VOICEROOM_MYSQL_DSN: %w", err)
	}
	if cfg.MigrateOnStart {
		if err := mysqldb.Migrate(ctx, d.db, log); err != nil {
			return d, err
		}
	}

	if cfg.RedisAddr != "" {
		d.redis = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, Password: cfg.RedisPassword, DB: cfg.RedisDB})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := d.redis.Ping(pctx).Err(); err != nil {
			// Redis is a cache: the product works without it and the client reconnects.
			log.Warn("redis not reachable; continuing without the cache until it is", "addr", cfg.RedisAddr, "error", err)
		}
		cancel()
	}

	natsCfg := cfg.natsConn()
	if cfg.NATSURL == "" {
		log.Info("nats: starting embedded server", "listen", cfg.NATSListen)
		d.embed, err = bus.RunEmbedded(bus.EmbeddedConfig{
			Listen:   cfg.NATSListen,
			StoreDir: filepath.Join(cfg.DataDir, "jetstream"),
		}, log)
		if errors.Is(err, bus.ErrAddrInUse) {
			return d, badVar("VOICEROOM_NATS_LISTEN", "%s is already in use (another voiceroom or nats-server?): %v", cfg.NATSListen, err)
		}
		if err != nil {
			return d, fmt.Errorf("embedded nats: %w", err)
		}
		natsCfg.URL = d.embed.ClientURL()
		natsCfg.User, natsCfg.Password, natsCfg.CredsFile = "", "", ""
	}
	log.Info("nats: connecting", "url", natsCfg.URL)
	if d.nats, err = bus.Connect(ctx, natsCfg, log); err != nil {
		return d, fmt.Errorf("VOICEROOM_NATS_URL: %w", err)
	}
	if err := bus.Provision(ctx, d.nats.JetStream(), cfg.streams(), cfg.consumers()...); err != nil {
		return d, fmt.Errorf("provision streams: %w", err)
	}
	log.Info("nats: streams provisioned", "stream", bus.StreamName, "dlq", bus.DLQStreamName)
	return d, nil
}

// close releases what open and the roles opened: role closers in reverse,
// then NATS, MySQL and Redis, logging each step.
func (d *deps) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	if d.nats != nil {
		d.log.Info("shutdown: closing nats connection")
		d.nats.Close()
	}
	if d.embed != nil {
		d.log.Info("shutdown: stopping embedded nats server")
		d.embed.Shutdown()
	}
	if d.db != nil {
		d.log.Info("shutdown: closing mysql")
		d.db.Close()
	}
	if d.redis != nil {
		d.log.Info("shutdown: closing redis")
		d.redis.Close()
	}
	d.log.Info("shutdown: complete")
}
