package mysqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"voiceroom/apperr"
)

// Config says how to reach MySQL.
type Config struct {
	// DSN is a go-sql-driver DSN, e.g. "root:@tcp(127.0.0.1:3306)/voiceroom".
	// It must name a database; that database is created if missing. Required.
	DSN string
	// MaxOpenConns bounds the pool. 1..1000, default 64.
	MaxOpenConns int
	// ConnectTimeout bounds how long Open retries an unreachable server before
	// giving up. Default 15s.
	ConnectTimeout time.Duration
}

// WithDefaults returns c with every zero or negative field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.MaxOpenConns <= 0 {
		c.MaxOpenConns = 64
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = 15 * time.Second
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c. Errors
// are *apperr.ConfigError naming the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	if _, err := ParseDSN(c.DSN); err != nil {
		return &apperr.ConfigError{Field: "DSN", Err: err}
	}
	if c.MaxOpenConns > 1000 {
		return apperr.BadConfig("MaxOpenConns", "max open conns %d: want 1..1000", c.MaxOpenConns)
	}
	return nil
}

// DefaultLockWaitSeconds is the session's innodb_lock_wait_timeout unless
// the DSN sets one.
const DefaultLockWaitSeconds = 5

// ParseDSN checks a DSN and returns the driver configuration with the options
// voiceroom relies on: dial, read and write timeouts and
// innodb_lock_wait_timeout (unless the DSN sets them), UTC, client-side
// parameter interpolation and several statements per query (Batch).
// Times are stored as Unix milliseconds, so parseTime plays no part. It
// fails when the DSN names no database.
func ParseDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("mysql dsn names no database (add /voiceroom after the address)")
	}
	if strings.ContainsAny(cfg.DBName, "`\\/ .") {
		return nil, fmt.Errorf("mysql database name %q has characters that are not allowed", cfg.DBName)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 5 * time.Second
	}
	// A server that stops answering mid-query (a network partition) must
	// fail the query, not hang it: nothing voiceroom runs takes this long.
	if cfg.ReadTimeout == 0 {
		cfg.ReadTimeout = 30 * time.Second
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = 30 * time.Second
	}
	// A transaction whose client gave up (its context ended, so the driver
	// closed the connection) goes on waiting on the server for the row lock
	// it wanted, holding the locks it already took, until this timeout:
	// keep that near the deadlines of requests, not the server's 50s.
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(DefaultLockWaitSeconds)
	}
	cfg.Loc = time.UTC
	// Client-side interpolation sends each statement in one round trip
	// instead of prepare, execute and close. Safe with utf8mb4, the only
	// charset voiceroom uses.
	cfg.InterpolateParams = true
	// A Batch sends several statements in one query (a group commit's
	// inserts in one round trip). Every statement is built from constant
	// text and placeholders, never from a client's text.
	cfg.MultiStatements = true
	return cfg, nil
}

// Open connects to MySQL, creating the database if it is missing, and returns
// a pool. An unreachable server is retried with backoff until
// cfg.ConnectTimeout; then Open fails with the last error, never hangs.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*sql.DB, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dcfg, err := ParseDSN(cfg.DSN)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()

	if err := retry(ctx, log, func() error { return createDatabase(ctx, dcfg) }); err != nil {
		return nil, fmt.Errorf("mysql at %s: %w", dcfg.Addr, err)
	}
	connector, err := mysql.NewConnector(dcfg)
	if err != nil {
		return nil, fmt.Errorf("mysql connector: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(cfg.MaxOpenConns)
	db.SetMaxIdleConns(cfg.MaxOpenConns)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := retry(ctx, log, func() error { return db.PingContext(ctx) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql at %s: %w", dcfg.Addr, err)
	}
	return db, nil
}

// createDatabase runs CREATE DATABASE IF NOT EXISTS over a connection that
// names no database.
func createDatabase(ctx context.Context, dcfg *mysql.Config) error {
	server := dcfg.Clone()
	server.DBName = ""
	connector, err := mysql.NewConnector(server)
	if err != nil {
		return err
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	// The name was checked by ParseDSN; identifiers cannot be parameters.
	_, err = db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+dcfg.DBName+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
	return err
}

// retry calls fn until it succeeds, fails with an error the server answered
// (bad credentials, an unknown variable: retrying cannot fix those), or ctx
// ends. Only failures to reach the server are retried.
func retry(ctx context.Context, log *slog.Logger, fn func() error) error {
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil {
			return nil
		}
		var merr *mysql.MySQLError
		if errors.As(err, &merr) {
			return err
		}
		log.Warn("mysql not reachable yet", "attempt", attempt, "error", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up connecting: %w", err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}
