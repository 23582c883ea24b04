package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/regions"
	"voiceroom/rooms"
)

// The roles serve can run (VOICEROOM_ROLES).
const (
	roleAPI       = "api"
	roleRooms     = "rooms"
	roleRelay     = "relay"
	roleIMBridge  = "imbridge"
	roleProjector = "projector"
)

var allRoles = []string{roleAPI, roleRooms, roleRelay, roleIMBridge, roleProjector}

// config is every setting of the process, read from the environment only here.
// deploy/voiceroom.env.example documents each variable; keep the two in step.
type config struct {
	HTTPAddr            string        `env:"VOICEROOM_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	HTTPBodyLimit       int           `env:"VOICEROOM_HTTP_BODY_LIMIT" envDefault:"65536"`
	HTTPRatePerUser     float64       `env:"VOICEROOM_HTTP_RATE_PER_USER" envDefault:"50"`
	HTTPRateBurst       int           `env:"VOICEROOM_HTTP_RATE_BURST" envDefault:"100"`
	HTTPShutdownTimeout time.Duration `env:"VOICEROOM_HTTP_SHUTDOWN_TIMEOUT" envDefault:"10s"`

	MySQLDSN          string        `env:"VOICEROOM_MYSQL_DSN" envDefault:"root:@tcp(127.0.0.1:3306)/voiceroom"`
	MySQLMaxOpenConns int           `env:"VOICEROOM_MYSQL_MAX_OPEN_CONNS" envDefault:"64"`
	MySQLConnectWait  time.Duration `env:"VOICEROOM_MYSQL_CONNECT_TIMEOUT" envDefault:"15s"`
	MigrateOnStart    bool          `env:"VOICEROOM_MIGRATE_ON_START" envDefault:"true"`

	RedisAddr     string `env:"VOICEROOM_REDIS_ADDR" envDefault:"127.0.0.1:6379"`
	RedisPassword string `env:"VOICEROOM_REDIS_PASSWORD"`
	RedisDB       int    `env:"VOICEROOM_REDIS_DB" envDefault:"0"`

	NATSURL            string        `env:"VOICEROOM_NATS_URL"`
	NATSListen         string        `env:"VOICEROOM_NATS_LISTEN" envDefault:"127.0.0.1:14222"`
	NATSUser           string        `env:"VOICEROOM_NATS_USER"`
	NATSPassword       string        `env:"VOICEROOM_NATS_PASSWORD"`
	NATSCredsFile      string        `env:"VOICEROOM_NATS_CREDS"`
	NATSTLSCA          string        `env:"VOICEROOM_NATS_TLS_CA"`
	NATSTLSCert        string        `env:"VOICEROOM_NATS_TLS_CERT"`
	NATSTLSKey         string        `env:"VOICEROOM_NATS_TLS_KEY"`
	NATSConnectTimeout time.Duration `env:"VOICEROOM_NATS_CONNECT_TIMEOUT" envDefault:"10s"`
	DataDir            string        `env:"VOICEROOM_DATA_DIR" envDefault:"./data"`

	StreamDuplicateWindow time.Duration `env:"VOICEROOM_STREAM_DUPLICATE_WINDOW" envDefault:"2m"`
	StreamMaxAge          time.Duration `env:"VOICEROOM_STREAM_MAX_AGE" envDefault:"168h"`
	StreamReplicas        int           `env:"VOICEROOM_STREAM_REPLICAS" envDefault:"1"`
	DLQMaxAge             time.Duration `env:"VOICEROOM_DLQ_MAX_AGE" envDefault:"720h"`

	IMBridgeAckWait       time.Duration   `env:"VOICEROOM_IMBRIDGE_ACK_WAIT" envDefault:"30s"`
	IMBridgeBackOff       []time.Duration `env:"VOICEROOM_IMBRIDGE_BACKOFF" envDefault:"1s,5s,30s,2m,5m" envSeparator:","`
	IMBridgeMaxDeliver    int             `env:"VOICEROOM_IMBRIDGE_MAX_DELIVER" envDefault:"10"`
	IMBridgeMaxAckPending int             `env:"VOICEROOM_IMBRIDGE_MAX_ACK_PENDING" envDefault:"1000"`
	IMBridgeConcurrency   int             `env:"VOICEROOM_IMBRIDGE_CONCURRENCY" envDefault:"8"`

	ProjectorAckWait       time.Duration   `env:"VOICEROOM_PROJECTOR_ACK_WAIT" envDefault:"30s"`
	ProjectorBackOff       []time.Duration `env:"VOICEROOM_PROJECTOR_BACKOFF" envDefault:"500ms,2s,10s,1m" envSeparator:","`
	ProjectorMaxDeliver    int             `env:"VOICEROOM_PROJECTOR_MAX_DELIVER" envDefault:"10"`
	ProjectorMaxAckPending int             `env:"VOICEROOM_PROJECTOR_MAX_ACK_PENDING" envDefault:"5000"`
	ProjectorConcurrency   int             `env:"VOICEROOM_PROJECTOR_CONCURRENCY" envDefault:"4"`
	ProjectorFetchBatch    int             `env:"VOICEROOM_PROJECTOR_FETCH_BATCH" envDefault:"500"`

	ListReconcileEvery  time.Duration `env:"VOICEROOM_LIST_RECONCILE_EVERY" envDefault:"30s"`
	ListCardTTL         time.Duration `env:"VOICEROOM_LIST_CARD_TTL" envDefault:"10m"`
	ListRedisTimeout    time.Duration `env:"VOICEROOM_LIST_REDIS_TIMEOUT" envDefault:"50ms"`
	ListFreezeEvery     time.Duration `env:"VOICEROOM_LIST_FREEZE_EVERY" envDefault:"1s"`
	ListChainTTL        time.Duration `env:"VOICEROOM_LIST_CHAIN_TTL" envDefault:"2m"`
	ListChainDepth      int           `env:"VOICEROOM_LIST_CHAIN_DEPTH" envDefault:"1000"`
	ListMaxFrozenRooms  int           `env:"VOICEROOM_LIST_MAX_FROZEN_ROOMS" envDefault:"2000000"`
	ListSearchMaxResult int           `env:"VOICEROOM_LIST_SEARCH_MAX_RESULTS" envDefault:"200"`

	RoomsPresenceTTL      time.Duration `env:"VOICEROOM_ROOMS_PRESENCE_TTL" envDefault:"30s"`
	RoomsSweepInterval    time.Duration `env:"VOICEROOM_ROOMS_SWEEP_INTERVAL" envDefault:"10s"`
	RoomsIdleEvict        time.Duration `env:"VOICEROOM_ROOMS_IDLE_EVICT" envDefault:"10m"`
	RoomsSnapshotEvery    int           `env:"VOICEROOM_ROOMS_SNAPSHOT_EVERY" envDefault:"64"`
	RoomsMaxOnline        int           `env:"VOICEROOM_ROOMS_MAX_ONLINE" envDefault:"1000"`
	RoomsCommitWorkers    int           `env:"VOICEROOM_ROOMS_COMMIT_WORKERS" envDefault:"4"`
	RoomsCommitBatch      int           `env:"VOICEROOM_ROOMS_COMMIT_BATCH" envDefault:"128"`
	RoomsCommandTimeout   time.Duration `env:"VOICEROOM_ROOMS_COMMAND_TIMEOUT" envDefault:"5s"`
	RoomsPasswordAttempts int           `env:"VOICEROOM_ROOMS_PASSWORD_ATTEMPTS" envDefault:"5"`
	RoomsDefaultCoverURL  string        `env:"VOICEROOM_ROOMS_DEFAULT_COVER_URL" envDefault:"https://cdn.voiceroom.example/default-room-cover.png"`
	OutboxEnabled         bool          `env:"VOICEROOM_OUTBOX_ENABLED" envDefault:"true"`
	OutboxPollInterval    time.Duration `env:"VOICEROOM_OUTBOX_POLL_INTERVAL" envDefault:"1s"`
	OutboxBatchSize       int           `env:"VOICEROOM_OUTBOX_BATCH_SIZE" envDefault:"100"`
	OutboxPublishTimeout  time.Duration `env:"VOICEROOM_OUTBOX_PUBLISH_TIMEOUT" envDefault:"3s"`
	OutboxRetryStrategy   string        `env:"VOICEROOM_OUTBOX_RETRY_STRATEGY" envDefault:"fixed_interval"`
	OutboxRetention       time.Duration `env:"VOICEROOM_OUTBOX_RETENTION" envDefault:"72h"`

	JWTSecret string `env:"VOICEROOM_JWT_SECRET"`

	RegionsCacheSize    int           `env:"VOICEROOM_REGIONS_CACHE_SIZE" envDefault:"100000"`
	RegionsCacheTTL     time.Duration `env:"VOICEROOM_REGIONS_CACHE_TTL" envDefault:"3s"`
	RegionsRebuildBatch int           `env:"VOICEROOM_REGIONS_REBUILD_BATCH" envDefault:"500"`

	Roles           []string      `env:"VOICEROOM_ROLES" envDefault:"api,rooms,relay,imbridge,projector" envSeparator:","`
	NodeID          string        `env:"VOICEROOM_NODE_ID"`
	ShutdownTimeout time.Duration `env:"VOICEROOM_SHUTDOWN_TIMEOUT" envDefault:"15s"`
	LogFormat       string        `env:"VOICEROOM_LOG_FORMAT" envDefault:"json"`
	LogLevel        string        `env:"VOICEROOM_LOG_LEVEL" envDefault:"info"`
}

// configError is a bad setting; its message names the variable.
type configError struct {
	Var string
	Msg string
}

func (e *configError) Error() string { return e.Var + ": " + e.Msg }

func badVar(name, format string, args ...any) error {
	return &configError{Var: name, Msg: fmt.Sprintf(format, args...)}
}

// loadConfig reads and validates the environment. Every error names the
// variable at fault.
func loadConfig() (config, error) {
	var cfg config
	if err := env.Parse(&cfg); err != nil {
		return cfg, nameParseErrors(err)
	}
	return cfg, cfg.validate()
}

// nameParseErrors rewrites the parser's errors, which name Go fields, into
// errors that name the environment variables.
func nameParseErrors(err error) error {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return err
	}
	t := reflect.TypeOf(config{})
	var out []error
	for _, e := range agg.Errors {
		var pe env.ParseError
		if errors.As(e, &pe) {
			if f, ok := t.FieldByName(pe.Name); ok {
				name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
				out = append(out, badVar(name, "cannot parse %q as %s: %v", os.Getenv(name), pe.Type, unwrapAll(pe.Err)))
				continue
			}
		}
		out = append(out, e)
	}
	return errors.Join(out...)
}

func unwrapAll(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

func (c *config) validate() error {
	var errs []error
	check := func(ok bool, name, format string, args ...any) {
		if !ok {
			errs = append(errs, badVar(name, format, args...))
		}
	}
	_, _, err := net.SplitHostPort(c.HTTPAddr)
	check(err == nil, "VOICEROOM_HTTP_ADDR", "want host:port, got %q", c.HTTPAddr)
	check(c.HTTPBodyLimit >= 1024 && c.HTTPBodyLimit <= 16<<20, "VOICEROOM_HTTP_BODY_LIMIT", "want 1024..16777216 bytes, got %d", c.HTTPBodyLimit)
	check(c.HTTPRatePerUser > 0, "VOICEROOM_HTTP_RATE_PER_USER", "must be positive")
	check(c.HTTPRateBurst > 0, "VOICEROOM_HTTP_RATE_BURST", "must be positive")
	check(c.HTTPShutdownTimeout > 0, "VOICEROOM_HTTP_SHUTDOWN_TIMEOUT", "must be positive")

	_, err = mysqldb.ParseDSN(c.MySQLDSN)
	check(err == nil, "VOICEROOM_MYSQL_DSN", "%v", err)
	check(c.MySQLMaxOpenConns > 0 && c.MySQLMaxOpenConns <= 1000, "VOICEROOM_MYSQL_MAX_OPEN_CONNS", "want 1..1000, got %d", c.MySQLMaxOpenConns)
	check(c.MySQLConnectWait > 0, "VOICEROOM_MYSQL_CONNECT_TIMEOUT", "must be positive")
	if c.RedisAddr != "" {
		_, _, err = net.SplitHostPort(c.RedisAddr)
		check(err == nil, "VOICEROOM_REDIS_ADDR", "want host:port or empty, got %q", c.RedisAddr)
	}
	check(c.RedisDB >= 0 && c.RedisDB <= 15, "VOICEROOM_REDIS_DB", "want 0..15, got %d", c.RedisDB)

	if c.NATSURL == "" {
		host, _, err := net.SplitHostPort(c.NATSListen)
		check(err == nil, "VOICEROOM_NATS_LISTEN", "want host:port, got %q", c.NATSListen)
		if err == nil {
			ip := net.ParseIP(host)
			check(host == "localhost" || (ip != nil && ip.IsLoopback()), "VOICEROOM_NATS_LISTEN", "the embedded server listens on loopback only, got %q", host)
		}
		check(c.DataDir != "", "VOICEROOM_DATA_DIR", "must not be empty")
	} else {
		for _, u := range strings.Split(c.NATSURL, ",") {
			check(strings.Contains(u, "://"), "VOICEROOM_NATS_URL", "want nats://host:port[,nats://...], got %q", u)
		}
	}
	check((c.NATSTLSCert == "") == (c.NATSTLSKey == ""), "VOICEROOM_NATS_TLS_CERT", "set VOICEROOM_NATS_TLS_CERT and VOICEROOM_NATS_TLS_KEY together")
	check(c.NATSConnectTimeout > 0, "VOICEROOM_NATS_CONNECT_TIMEOUT", "must be positive")

	check(c.StreamDuplicateWindow >= time.Second, "VOICEROOM_STREAM_DUPLICATE_WINDOW", "want at least 1s, got %v", c.StreamDuplicateWindow)
	check(c.StreamMaxAge >= c.StreamDuplicateWindow, "VOICEROOM_STREAM_MAX_AGE", "must be at least the duplicate window")
	check(c.StreamReplicas == 1 || c.StreamReplicas == 3 || c.StreamReplicas == 5, "VOICEROOM_STREAM_REPLICAS", "want 1, 3 or 5, got %d", c.StreamReplicas)
	check(c.DLQMaxAge >= time.Hour, "VOICEROOM_DLQ_MAX_AGE", "want at least 1h, got %v", c.DLQMaxAge)
	for _, sink := range []struct {
		prefix                 string
		ackWait                time.Duration
		backOff                []time.Duration
		maxDeliver, maxPending int
	}{
		{"VOICEROOM_IMBRIDGE_", c.IMBridgeAckWait, c.IMBridgeBackOff, c.IMBridgeMaxDeliver, c.IMBridgeMaxAckPending},
		{"VOICEROOM_PROJECTOR_", c.ProjectorAckWait, c.ProjectorBackOff, c.ProjectorMaxDeliver, c.ProjectorMaxAckPending},
	} {
		check(sink.ackWait >= time.Second, sink.prefix+"ACK_WAIT", "want at least 1s, got %v", sink.ackWait)
		check(len(sink.backOff) > 0, sink.prefix+"BACKOFF", "name at least one delay")
		for _, d := range sink.backOff {
			check(d > 0, sink.prefix+"BACKOFF", "delays must be positive, got %v", d)
		}
		check(sink.maxDeliver > len(sink.backOff) && sink.maxDeliver <= 1000, sink.prefix+"MAX_DELIVER",
			"want more than the %d BACKOFF steps and at most 1000, got %d", len(sink.backOff), sink.maxDeliver)
		check(sink.maxPending > 0 && sink.maxPending <= 100000, sink.prefix+"MAX_ACK_PENDING", "want 1..100000, got %d", sink.maxPending)
	}
	check(c.IMBridgeConcurrency > 0 && c.IMBridgeConcurrency <= 256, "VOICEROOM_IMBRIDGE_CONCURRENCY", "want 1..256, got %d", c.IMBridgeConcurrency)
	check(c.ProjectorConcurrency > 0 && c.ProjectorConcurrency <= 256, "VOICEROOM_PROJECTOR_CONCURRENCY", "want 1..256, got %d", c.ProjectorConcurrency)
	errs = append(errs, c.listErrors()...)

	check(c.RoomsPresenceTTL >= time.Second && c.RoomsPresenceTTL <= time.Hour, "VOICEROOM_ROOMS_PRESENCE_TTL", "want 1s..1h, got %v", c.RoomsPresenceTTL)
	check(c.RoomsSweepInterval > 0 && c.RoomsSweepInterval <= c.RoomsPresenceTTL, "VOICEROOM_ROOMS_SWEEP_INTERVAL", "want more than 0 and at most VOICEROOM_ROOMS_PRESENCE_TTL, got %v", c.RoomsSweepInterval)
	check(c.RoomsIdleEvict >= time.Second, "VOICEROOM_ROOMS_IDLE_EVICT", "want at least 1s, got %v", c.RoomsIdleEvict)
	check(c.RoomsSnapshotEvery >= 1 && c.RoomsSnapshotEvery <= 10000, "VOICEROOM_ROOMS_SNAPSHOT_EVERY", "want 1..10000, got %d", c.RoomsSnapshotEvery)
	check(c.RoomsMaxOnline >= 1 && c.RoomsMaxOnline <= 100000, "VOICEROOM_ROOMS_MAX_ONLINE", "want 1..100000, got %d", c.RoomsMaxOnline)
	check(c.RoomsCommitWorkers >= 1 && c.RoomsCommitWorkers <= 64, "VOICEROOM_ROOMS_COMMIT_WORKERS", "want 1..64, got %d", c.RoomsCommitWorkers)
	check(c.RoomsCommitWorkers < c.MySQLMaxOpenConns, "VOICEROOM_ROOMS_COMMIT_WORKERS", "must be below VOICEROOM_MYSQL_MAX_OPEN_CONNS (%d), which reads need too", c.MySQLMaxOpenConns)
	check(c.RoomsCommitBatch >= 1 && c.RoomsCommitBatch <= 1000, "VOICEROOM_ROOMS_COMMIT_BATCH", "want 1..1000, got %d", c.RoomsCommitBatch)
	check(c.RoomsCommandTimeout >= 100*time.Millisecond, "VOICEROOM_ROOMS_COMMAND_TIMEOUT", "want at least 100ms, got %v", c.RoomsCommandTimeout)
	check(c.RoomsPasswordAttempts >= 1 && c.RoomsPasswordAttempts <= 1000, "VOICEROOM_ROOMS_PASSWORD_ATTEMPTS", "want 1..1000, got %d", c.RoomsPasswordAttempts)
	check(checkHTTPURL(c.RoomsDefaultCoverURL), "VOICEROOM_ROOMS_DEFAULT_COVER_URL", "want an http(s) URL, got %q", c.RoomsDefaultCoverURL)
	// The outbox spec: a value <= 0 takes the default (outboxrelay does
	// that); an unknown retry strategy stops the process.
	outbox := c.outbox()
	if err := outbox.Validate(); errors.Is(err, outboxrelay.ErrUnknownRetryStrategy) {
		errs = append(errs, badVar("VOICEROOM_OUTBOX_RETRY_STRATEGY", "unknown retry strategy %q (want %s)", c.OutboxRetryStrategy, outboxrelay.RetryFixedInterval))
	} else if err != nil {
		errs = append(errs, badVar("VOICEROOM_OUTBOX_BATCH_SIZE", "want at most %d, got %d", outboxrelay.MaxBatchSize, c.OutboxBatchSize))
	}
	// MySQL closes once the workers have stopped or the shutdown timeout
	// has passed: the relay must be able to finish its batch before that.
	check(outbox.DrainBound() < c.ShutdownTimeout, "VOICEROOM_OUTBOX_PUBLISH_TIMEOUT",
		"the publish timeout (%v) plus %v to record the results must be shorter than VOICEROOM_SHUTDOWN_TIMEOUT (%v)",
		outbox.WithDefaults().PublishTimeout, outboxrelay.DefaultStatementTimeout, c.ShutdownTimeout)
	check(c.RegionsCacheSize >= 0 && c.RegionsCacheSize <= 10_000_000, "VOICEROOM_REGIONS_CACHE_SIZE", "want 0 (no cache) ..10000000 users, got %d", c.RegionsCacheSize)
	check(c.RegionsCacheTTL >= 100*time.Millisecond && c.RegionsCacheTTL <= 10*time.Minute, "VOICEROOM_REGIONS_CACHE_TTL", "want 100ms..10m, got %v", c.RegionsCacheTTL)
	check(c.RegionsRebuildBatch >= 1 && c.RegionsRebuildBatch <= 5000, "VOICEROOM_REGIONS_REBUILD_BATCH", "want 1..5000, got %d", c.RegionsRebuildBatch)

	check(c.JWTSecret == "" || len(c.JWTSecret) >= 16, "VOICEROOM_JWT_SECRET", "must be at least 16 bytes (or empty in development)")
	check(len(c.Roles) > 0, "VOICEROOM_ROLES", "name at least one role of %s", strings.Join(allRoles, ","))
	for i, r := range c.Roles {
		c.Roles[i] = strings.TrimSpace(r)
		check(slices.Contains(allRoles, c.Roles[i]), "VOICEROOM_ROLES", "unknown role %q (want some of %s)", r, strings.Join(allRoles, ","))
	}
	if c.NodeID == "" {
		c.NodeID, _ = os.Hostname()
	}
	check(c.ShutdownTimeout > 0, "VOICEROOM_SHUTDOWN_TIMEOUT", "must be positive")
	check(c.LogFormat == "json" || c.LogFormat == "text", "VOICEROOM_LOG_FORMAT", "want json or text, got %q", c.LogFormat)
	_, err = parseLevel(c.LogLevel)
	check(err == nil, "VOICEROOM_LOG_LEVEL", "want debug, info, warn or error, got %q", c.LogLevel)
	return errors.Join(errs...)
}

// hasRole reports whether serve runs role.
func (c *config) hasRole(role string) bool { return slices.Contains(c.Roles, role) }

func (c *config) streams() bus.StreamConfig {
	return bus.StreamConfig{
		DuplicateWindow: c.StreamDuplicateWindow,
		MaxAge:          c.StreamMaxAge,
		Replicas:        c.StreamReplicas,
		DLQMaxAge:       c.DLQMaxAge,
	}
}

// consumers are the durable consumers of the sinks, one per sink. The server
// redelivers a message left unacknowledged for AckWait (a crashed or stuck
// handler; a running handler extends it); the BACKOFF schedule is applied by
// the consume loop as the delay before redelivering a failed message (see
// consumerRun), so it is not set on the server.
func (c *config) consumers() []bus.ConsumerConfig {
	return []bus.ConsumerConfig{
		{Durable: bus.DurableIMBridge, AckWait: c.IMBridgeAckWait, MaxDeliver: c.IMBridgeMaxDeliver, MaxAckPending: c.IMBridgeMaxAckPending},
		{Durable: bus.DurableListProjector, AckWait: c.ProjectorAckWait, MaxDeliver: c.ProjectorMaxDeliver, MaxAckPending: c.ProjectorMaxAckPending},
	}
}

// consumerRun is the consume-loop configuration of a sink's durable.
func (c *config) consumerRun(durable string) bus.ConsumerRunConfig {
	if durable == bus.DurableIMBridge {
		return bus.ConsumerRunConfig{Durable: durable, Concurrency: c.IMBridgeConcurrency, NakDelays: c.IMBridgeBackOff,
			MaxDeliver: c.IMBridgeMaxDeliver, ShutdownTimeout: c.ShutdownTimeout}
	}
	return bus.ConsumerRunConfig{Durable: durable, Concurrency: c.ProjectorConcurrency, NakDelays: c.ProjectorBackOff,
		MaxDeliver: c.ProjectorMaxDeliver, ShutdownTimeout: c.ShutdownTimeout}
}

// outbox is the configuration of the outbox relay.
func (c *config) outbox() outboxrelay.Config {
	return outboxrelay.Config{
		PollInterval:   c.OutboxPollInterval,
		BatchSize:      c.OutboxBatchSize,
		PublishTimeout: c.OutboxPublishTimeout,
		RetryStrategy:  c.OutboxRetryStrategy,
		Retention:      c.OutboxRetention,
	}
}

// fastPath is the configuration of the outbox fast path: it shares the
// relay's publish timeout.
func (c *config) fastPath() outboxrelay.FastPathConfig {
	return outboxrelay.FastPathConfig{PublishTimeout: c.OutboxPublishTimeout}
}

func (c *config) natsConn() bus.ConnConfig {
	return bus.ConnConfig{
		URL:            c.NATSURL,
		Name:           "voiceroom-" + c.NodeID,
		User:           c.NATSUser,
		Password:       c.NATSPassword,
		CredsFile:      c.NATSCredsFile,
		TLSCAFile:      c.NATSTLSCA,
		TLSCertFile:    c.NATSTLSCert,
		TLSKeyFile:     c.NATSTLSKey,
		ConnectTimeout: c.NATSConnectTimeout,
	}
}

func (c *config) gateway(secret []byte) gateway.Config {
	return gateway.Config{
		Addr:        c.HTTPAddr,
		BodyLimit:   c.HTTPBodyLimit,
		JWTSecret:   secret,
		RatePerUser: c.HTTPRatePerUser,
		RateBurst:   c.HTTPRateBurst,
	}
}

func (c *config) regions() regions.Config {
	return regions.Config{
		CacheSize:    c.RegionsCacheSize,
		CacheTTL:     c.RegionsCacheTTL,
		DisableCache: c.RegionsCacheSize == 0,
		RebuildBatch: c.RegionsRebuildBatch,
		Now:          time.Now,
	}
}

// jwtSecret returns VOICEROOM_JWT_SECRET or, when it is empty (development),
// a random key generated once and kept in $VOICEROOM_DATA_DIR/jwt-secret so
// that serve and token agree across restarts.
func (c *config) jwtSecret(log *slog.Logger) ([]byte, error) {
	if c.JWTSecret != "" {
		return []byte(c.JWTSecret), nil
	}
	path := filepath.Join(c.DataDir, "jwt-secret")
	if b, err := os.ReadFile(path); err == nil {
		secret := strings.TrimSpace(string(b))
		if len(secret) < 16 {
			return nil, badVar("VOICEROOM_JWT_SECRET", "empty, and %s holds fewer than 16 bytes", path)
		}
		return []byte(secret), nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, badVar("VOICEROOM_JWT_SECRET", "empty, and %s cannot be read: %v", path, err)
	}
	if err := os.MkdirAll(c.DataDir, 0o700); err != nil {
		return nil, badVar("VOICEROOM_DATA_DIR", "%v", err)
	}
	b := make([]byte, 32)
	rand.Read(b)
	secret := hex.EncodeToString(b)
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		return nil, badVar("VOICEROOM_DATA_DIR", "write %s: %v", path, err)
	}
	log.Warn("VOICEROOM_JWT_SECRET is empty: generated a development key; set the variable in production", "file", path)
	return []byte(secret), nil
}

func (c *config) rooms() rooms.Config {
	return rooms.Config{
		PresenceTTL:      c.RoomsPresenceTTL,
		SweepInterval:    c.RoomsSweepInterval,
		IdleEvict:        c.RoomsIdleEvict,
		SnapshotEvery:    c.RoomsSnapshotEvery,
		MaxOnline:        c.RoomsMaxOnline,
		CommitWorkers:    c.RoomsCommitWorkers,
		CommitBatch:      c.RoomsCommitBatch,
		CommandTimeout:   c.RoomsCommandTimeout,
		PasswordAttempts: c.RoomsPasswordAttempts,
		DefaultCoverURL:  c.RoomsDefaultCoverURL,
	}
}

func checkHTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	err := l.UnmarshalText([]byte(s))
	return l, err
}

func newLogger(c config) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(os.Stderr, opts)
	if c.LogFormat == "text" {
		h = slog.NewTextHandler(os.Stderr, opts)
	}
	return slog.New(h).With("node_id", c.NodeID)
}
