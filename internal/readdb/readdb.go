package readdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/apperr"
	"voiceroom/internal/every"
	"voiceroom/mysqldb"
)

// ErrInvalidConfig is wrapped by every error of Config.Validate.
var ErrInvalidConfig = errors.New("readdb: invalid configuration")

// MaxReplicas bounds Config.ReplicaDSNs.
const MaxReplicas = 32

// Config says where the primary and the replicas are and when a replica
// is fit.
type Config struct {
	// PrimaryDSN is the primary's DSN (VOICEROOM_MYSQL_DSN): reads go
	// there while no replica is fit. Required.
	PrimaryDSN string
	// ReplicaDSNs are the replicas' DSNs, 0..MaxReplicas; one that names
	// no database reads the primary's. None: every read goes to the
	// primary.
	ReplicaDSNs []string
	// MaxLag is the most a replica may lag and still take reads, 1s..1h
	// (Seconds_Behind_Master counts whole seconds). Default 5s.
	MaxLag time.Duration
	// CheckInterval is how often each replica's lag is read, 100ms..1m.
	// Default 1s.
	CheckInterval time.Duration
	// MaxOpenConns bounds the reads' pool, 1..1000. Default 64.
	MaxOpenConns int
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	if c.MaxLag == 0 {
		c.MaxLag = 5 * time.Second
	}
	if c.CheckInterval == 0 {
		c.CheckInterval = time.Second
	}
	if c.MaxOpenConns == 0 {
		c.MaxOpenConns = 64
	}
	return c
}

// Validate checks c after defaults are applied; errors are
// *apperr.ConfigError naming the field, wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	c = c.WithDefaults()
	checks := apperr.NewConfigChecks(ErrInvalidConfig)
	_, perr := mysqldb.ParseDSN(c.PrimaryDSN)
	checks.Check(perr == nil, "PrimaryDSN", "%v", perr)
	checks.Check(len(c.ReplicaDSNs) <= MaxReplicas, "ReplicaDSNs", "%d replicas: want at most %d", len(c.ReplicaDSNs), MaxReplicas)
	for i, dsn := range c.ReplicaDSNs {
		_, err := mysql.ParseDSN(dsn)
		checks.Check(err == nil, "ReplicaDSNs", "replica %d: %v", i+1, err)
	}
	checks.Check(c.MaxLag >= time.Second && c.MaxLag <= time.Hour, "MaxLag", "%v: want 1s..1h", c.MaxLag)
	checks.Check(c.CheckInterval >= 100*time.Millisecond && c.CheckInterval <= time.Minute, "CheckInterval", "%v: want 100ms..1m", c.CheckInterval)
	checks.Check(c.MaxOpenConns >= 1 && c.MaxOpenConns <= 1000, "MaxOpenConns", "%d: want 1..1000", c.MaxOpenConns)
	return checks.Err()
}

// Router holds the primary and the replicas and hands out the pool of
// the reads that tolerate lag. Safe for concurrent use.
type Router struct {
	cfg      Config
	log      *slog.Logger
	m        *Metrics
	primary  driver.Connector
	replicas []*replica
	next     atomic.Uint64 // round robin over the replicas
	db       *sql.DB
}

// replica is one read replica: where it is, the pool its lag is read
// on, and whether it takes reads now.
type replica struct {
	addr      string // host:port or a socket's path; never the DSN
	connector driver.Connector
	check     *sql.DB // one connection, for the lag check
	fit       atomic.Bool
}

// New returns a Router of cfg. It connects to nothing: every replica is
// unfit, and reads go to the primary, until the first Check (Run checks
// at once). Close releases it.
func New(cfg Config, log *slog.Logger, m *Metrics) (*Router, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	pcfg, err := mysqldb.ParseDSN(cfg.PrimaryDSN)
	if err != nil {
		return nil, err
	}
	primary, err := mysql.NewConnector(pcfg)
	if err != nil {
		return nil, fmt.Errorf("primary connector: %w", err)
	}
	r := &Router{cfg: cfg, log: log, m: m, primary: primary}
	for i, dsn := range cfg.ReplicaDSNs {
		rep, err := newReplica(dsn, pcfg.DBName, cfg.CheckInterval)
		if err != nil {
			r.closeReplicas()
			return nil, apperr.BadConfig("ReplicaDSNs", "%w: replica %d: %v", ErrInvalidConfig, i+1, err)
		}
		r.replicas = append(r.replicas, rep)
		m.setLag(rep.addr, false, -1)
	}
	r.db = sql.OpenDB(&connector{r: r})
	r.db.SetMaxOpenConns(cfg.MaxOpenConns)
	r.db.SetMaxIdleConns(cfg.MaxOpenConns)
	r.db.SetConnMaxIdleTime(5 * time.Minute)
	// New connections are what spreads reads over the replicas (round
	// robin per connection): retire old ones so that the spread follows
	// replicas that were added back.
	r.db.SetConnMaxLifetime(5 * time.Minute)
	return r, nil
}

// newReplica parses a replica's DSN with the primary's options (database
// dbName unless it names one) and opens its lag check's pool.
func newReplica(dsn, dbName string, interval time.Duration) (*replica, error) {
	raw, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if raw.DBName == "" {
		raw.DBName = dbName
	}
	cfg, err := mysqldb.ParseDSN(raw.FormatDSN())
	if err != nil {
		return nil, err
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	// The check must not wait on a server that does not answer longer
	// than an interval.
	ccfg := cfg.Clone()
	ccfg.Timeout = min(ccfg.Timeout, max(interval, time.Second))
	cc, err := mysql.NewConnector(ccfg)
	if err != nil {
		return nil, err
	}
	check := sql.OpenDB(cc)
	check.SetMaxOpenConns(1)
	check.SetMaxIdleConns(1)
	return &replica{addr: cfg.Addr, connector: c, check: check}, nil
}

// DB is the pool of the reads that tolerate lag: its connections go to
// a fit replica, else to the primary. Close closes it.
func (r *Router) DB() *sql.DB { return r.db }

// Replicas are the replicas' addresses, in the configured order.
func (r *Router) Replicas() []string {
	out := make([]string, len(r.replicas))
	for i, rep := range r.replicas {
		out[i] = rep.addr
	}
	return out
}

// Fit reports which replicas take reads now, by address.
func (r *Router) Fit() map[string]bool {
	out := make(map[string]bool, len(r.replicas))
	for _, rep := range r.replicas {
		out[rep.addr] = rep.fit.Load()
	}
	return out
}

// Run checks every replica at once and then each CheckInterval, until
// ctx ends; it returns nil then. Without replicas it only waits.
func (r *Router) Run(ctx context.Context) error {
	if len(r.replicas) == 0 {
		<-ctx.Done()
		return nil
	}
	every.Now(ctx, r.cfg.CheckInterval, func() { r.Check(ctx) })
	return nil
}

// Check reads every replica's lag now (each within CheckInterval, at
// least a second) and sets which take reads.
func (r *Router) Check(ctx context.Context) {
	for _, rep := range r.replicas {
		cctx, cancel := context.WithTimeout(ctx, max(r.cfg.CheckInterval, time.Second))
		lag, err := readLag(cctx, rep.check)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil:
			r.setFit(rep, false, -1, err.Error())
		case lag > r.cfg.MaxLag:
			r.setFit(rep, false, lag.Seconds(), fmt.Sprintf("lag %v above the most allowed, %v", lag, r.cfg.MaxLag))
		default:
			r.setFit(rep, true, lag.Seconds(), "")
		}
	}
}

// setFit records a replica's state, logging each change.
func (r *Router) setFit(rep *replica, fit bool, lagSecs float64, why string) {
	r.m.setLag(rep.addr, fit, lagSecs)
	if rep.fit.Swap(fit) == fit {
		return
	}
	if fit {
		r.log.Info("mysql replica takes reads", "replica", rep.addr, "lag_seconds", lagSecs)
	} else {
		r.log.Warn("mysql replica left out of reads", "replica", rep.addr, "reason", why)
	}
}

// anyFit reports whether some replica takes reads.
func (r *Router) anyFit() bool {
	for _, rep := range r.replicas {
		if rep.fit.Load() {
			return true
		}
	}
	return false
}

// Close closes the reads' pool and the checks' connections.
func (r *Router) Close() error {
	err := r.db.Close()
	r.closeReplicas()
	return err
}

func (r *Router) closeReplicas() {
	for _, rep := range r.replicas {
		rep.check.Close()
	}
}
