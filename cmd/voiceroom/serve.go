package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/bus"
	"voiceroom/docs"
	"voiceroom/gateway"
	"voiceroom/internal/readdb"
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
	cfg config
	log *slog.Logger
	db  *sql.DB
	// reads is the pool of the reads that tolerate lag: on fit replicas
	// (readRouter) when VOICEROOM_MYSQL_REPLICA_DSN names any, else db
	// itself. Commands, the outbox, recovery and read-your-writes use db.
	reads      *sql.DB
	readRouter *readdb.Router        // nil without replicas
	redis      redis.UniversalClient // nil when VOICEROOM_REDIS_ADDR is empty
	nats       *bus.Conn
	embed      *bus.Server // nil with an external NATS
	reg        *prometheus.Registry
	// keys verify tokens (wireAuth): the apps' registry for the api role.
	keys authtoken.Keys
	// serverKey keys the room list's cursors and the console's forms,
	// the same in every api process (see serverKey).
	serverKey []byte
	workers   []worker
	mounts    []gateway.Mount
	closers   []func() // run in reverse order after HTTP has stopped, before NATS closes

	// fastPath publishes each committed command's outbox events at once;
	// set when the rooms role runs, for the rooms package to call.
	fastPath *outboxrelay.FastPath
}

// serve runs the roles of VOICEROOM_ROLES until SIGINT or SIGTERM, then shuts
// down in the order of docs/operating.md's "Lifecycle": draining (readyz 503),
// workers stop taking work and finish within a bound, HTTP shuts down
// gracefully, then NATS, MySQL and Redis close.
func serve(ctx context.Context) error {
	cfg, err := loadConfig()
	if err != nil {
		return err
	}
	log := newLogger(cfg)
	bv := readBuildVersion()
	log.Info("starting", "version", bv.Version, "revision", bv.Revision, "roles", cfg.Roles)

	d, err := open(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer d.close()

	r, err := start(ctx, d)
	if err != nil {
		return err
	}
	runErr := r.supervise(ctx)
	return errors.Join(runErr, r.shutDown())
}

// running is what start started: HTTP serving and the workers.
type running struct {
	d           *deps
	srv         *gateway.Server
	httpDone    chan error // Serve's result; refilled with nil once read early
	stopWorkers context.CancelFunc
	workersDone chan error // the workers' joined result
	// workersFinished is set when the workers' result was taken early.
	workersFinished bool
}

// start wires the roles, starts HTTP and then the workers (only once HTTP
// serves). A worker that returns before shutdown, with or without an
// error, stops the process (see supervise).
func start(ctx context.Context, d *deps) (*running, error) {
	if err := wireRoles(ctx, d); err != nil {
		return nil, err
	}
	checks := []gateway.Check{
		{Name: "mysql", Fn: d.db.PingContext},
		{Name: "nats", Fn: d.nats.Ping},
	}
	mounts := append(d.mounts, gateway.DocsRoutes(docs.OpenAPI))
	srv, err := gateway.New(d.cfg.gateway(d.keys), d.log, d.reg, d.reg, checks, mounts...)
	if err != nil {
		return nil, err
	}
	for _, rt := range srv.Routes() {
		d.log.Debug("http route", "method", rt.Method, "path", rt.Path)
	}
	if err := srv.Listen(); err != nil {
		if apperr.ConfigFieldOf(err) == "OpsAddr" {
			return nil, badVar("VOICEROOM_OPS_ADDR", "%v (another voiceroom on this host? give each its own address, or set it empty to turn the operators' listener off)", err)
		}
		return nil, badVar("VOICEROOM_HTTP_ADDR", "%v", err)
	}
	r := &running{d: d, srv: srv, httpDone: make(chan error, 1), workersDone: make(chan error, 1)}
	go func() { r.httpDone <- srv.Serve() }()
	if a := srv.OpsAddr(); a != "" {
		d.log.Info("ops http serving", "addr", a, "pprof", d.cfg.HTTPPprof)
	} else {
		d.log.Info("ops http off (VOICEROOM_OPS_ADDR is empty): no /metrics, no profiles")
	}
	d.log.Info("http serving", "addr", srv.Addr(), "cors_origins", d.cfg.CORSOrigins)

	// The workers' context is not serve's: they stop when shutDown says,
	// after the process has started draining.
	workerCtx, stopWorkers := context.WithCancel(context.Background())
	r.stopWorkers = stopWorkers
	var group errgroup.Group
	for _, w := range d.workers {
		d.log.Info("worker starting", "worker", w.name)
		group.Go(func() error {
			err := w.run(workerCtx)
			if err != nil {
				d.log.Error("worker failed", "worker", w.name, "error", err)
				return fmt.Errorf("worker %s: %w", w.name, err)
			}
			if workerCtx.Err() == nil {
				return fmt.Errorf("worker %s stopped on its own", w.name)
			}
			d.log.Info("worker stopped", "worker", w.name)
			return nil
		})
	}
	go func() { r.workersDone <- group.Wait() }()
	return r, nil
}

// supervise waits for a signal (ctx), HTTP failing, or a worker returning,
// and returns the failure that ended the run, if any.
func (r *running) supervise(ctx context.Context) error {
	var workersEarly <-chan error // stays nil (never ready) without workers
	if len(r.d.workers) > 0 {
		workersEarly = r.workersDone
	}
	select {
	case <-ctx.Done():
		r.d.log.Info("shutdown: signal received")
		return nil
	case err := <-r.httpDone:
		r.httpDone <- nil // shutDown reads it again
		return fmt.Errorf("http stopped: %w", err)
	case err := <-workersEarly:
		r.workersFinished = true
		return err
	}
}

// shutDown drains: readyz answers 503, the workers stop within
// VOICEROOM_SHUTDOWN_TIMEOUT, then HTTP shuts down gracefully within
// VOICEROOM_HTTP_SHUTDOWN_TIMEOUT, the public listener first and the
// operators' one last (metrics stay readable while the rest drains).
// deps.close does the rest.
func (r *running) shutDown() error {
	log, cfg := r.d.log, r.d.cfg
	var errs error
	log.Info("shutdown: draining, readyz answers 503")
	r.srv.SetDraining()

	log.Info("shutdown: stopping workers", "timeout", cfg.ShutdownTimeout)
	r.stopWorkers()
	if !r.workersFinished {
		select {
		case err := <-r.workersDone:
			errs = errors.Join(errs, err)
		case <-time.After(cfg.ShutdownTimeout):
			errs = errors.Join(errs, errors.New("workers did not stop within VOICEROOM_SHUTDOWN_TIMEOUT"))
			log.Error("shutdown: workers did not stop in time", "timeout", cfg.ShutdownTimeout)
		}
	}
	log.Info("shutdown: workers stopped")

	log.Info("shutdown: http (public, then ops)", "timeout", cfg.HTTPShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTPShutdownTimeout)
	defer cancel()
	if err := r.srv.Shutdown(sctx); err != nil {
		errs = errors.Join(errs, fmt.Errorf("http shutdown: %w", err))
	}
	if err := <-r.httpDone; err != nil {
		errs = errors.Join(errs, err)
	}
	log.Info("shutdown: http stopped")
	return errs
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

	log.Info("mysql: connecting")
	d.db, err = mysqldb.Open(ctx, cfg.mysql(), log)
	if err != nil {
		return d, fmt.Errorf("VOICEROOM_MYSQL_DSN: %w", err)
	}
	if cfg.MigrateOnStart {
		if err := mysqldb.Migrate(ctx, d.db, log); err != nil {
			return d, err
		}
	}
	if err := openReads(d); err != nil {
		return d, err
	}

	if d.redis, err = cfg.redisClient(); err != nil {
		return d, err
	}
	if d.redis != nil {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := d.redis.Ping(pctx).Err(); err != nil {
			// Redis is a cache: the product works without it and the client reconnects.
			log.Warn("redis not reachable; continuing without the cache until it is", "redis", cfg.redis().Describe(), "error", err)
		}
		cancel()
	}

	natsCfg := cfg.natsConn()
	if cfg.NATSURL == "" {
		log.Info("nats: starting embedded server", "listen", cfg.NATSListen)
		d.embed, err = bus.RunEmbedded(cfg.embedded(), log)
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

	// Whether each dependency answers, at every scrape (the alerts'
	// voiceroom_{mysql,redis,nats}_up); no Redis configured, no redis_up.
	ups := []*promreg.Up{
		promreg.NewUp("mysql", "1 when MySQL answered a ping within 1 s at this scrape, else 0.", d.db.PingContext),
		promreg.NewUp("nats", "1 when JetStream answered (account info) within 1 s at this scrape, else 0.", d.nats.Ping),
	}
	if d.redis != nil {
		ups = append(ups, promreg.NewUp("redis", "1 when Redis answered a PING within 1 s at this scrape, else 0.",
			func(ctx context.Context) error { return d.redis.Ping(ctx).Err() }))
	}
	for i := range ups {
		promreg.Add(r, &ups[i])
	}
	return d, r.Err()
}

// openReads sets d.reads: the primary's pool without replicas, else the
// router's, whose lag checks run as a worker.
func openReads(d *deps) error {
	d.reads = d.db
	rcfg := d.cfg.reads()
	if len(rcfg.ReplicaDSNs) == 0 {
		return nil
	}
	m, err := readdb.NewMetrics(d.reg)
	if err != nil {
		return err
	}
	if d.readRouter, err = readdb.New(rcfg, d.log.With("component", "readdb"), m); err != nil {
		return configErr(err, "mysql replicas", readsVars)
	}
	d.reads = d.readRouter.DB()
	d.log.Info("mysql: reads that tolerate lag go to replicas", "replicas", d.readRouter.Replicas(), "max_lag", rcfg.MaxLag)
	d.workers = append(d.workers, worker{name: "mysql-replicas", run: d.readRouter.Run})
	return nil
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
	if d.readRouter != nil {
		d.log.Info("shutdown: closing mysql replicas")
		d.readRouter.Close()
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
