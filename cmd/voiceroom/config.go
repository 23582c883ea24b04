package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"
	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
	"voiceroom/authtoken"
	"voiceroom/bus"
	"voiceroom/gateway"
	"voiceroom/internal/readdb"
	"voiceroom/internal/redisconn"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
	"voiceroom/regions"
	"voiceroom/roomcluster"
	"voiceroom/rooms"
)

// The roles serve can run (VOICEROOM_ROLES).
const (
	roleAPI       = "api"
	roleRooms     = "rooms"
	roleRelay     = "relay"
	roleIMBridge  = "imbridge"
	roleProjector = "projector"
	roleWebhooks  = "webhooks"
	roleActivity  = "activity"
)

var allRoles = []string{roleAPI, roleRooms, roleRelay, roleIMBridge, roleProjector, roleWebhooks, roleActivity}

// config is every setting of the process, read from the environment only here.
// deploy/voiceroom.env.example documents each variable; keep the two in step.
type config struct {
	HTTPAddr            string        `env:"VOICEROOM_HTTP_ADDR" envDefault:"127.0.0.1:8080"`
	HTTPBodyLimit       int           `env:"VOICEROOM_HTTP_BODY_LIMIT" envDefault:"65536"`
	HTTPRatePerUser     float64       `env:"VOICEROOM_HTTP_RATE_PER_USER" envDefault:"50"`
	HTTPRateBurst       int           `env:"VOICEROOM_HTTP_RATE_BURST" envDefault:"100"`
	HTTPShutdownTimeout time.Duration `env:"VOICEROOM_HTTP_SHUTDOWN_TIMEOUT" envDefault:"10s"`
	HTTPRequestTimeout  time.Duration `env:"VOICEROOM_HTTP_REQUEST_TIMEOUT" envDefault:"10s"`
	HTTPPprof           bool          `env:"VOICEROOM_PPROF" envDefault:"false"`
	// OpsAddr is the operators' listener; its default is set by loadConfig
	// (offDefaults) so that an empty value can turn it off.
	OpsAddr     string   `env:"VOICEROOM_OPS_ADDR"`
	CORSOrigins []string `env:"VOICEROOM_CORS_ORIGINS" envSeparator:","`
	// Console serves the operators' console under /console with the api role.
	Console bool `env:"VOICEROOM_CONSOLE" envDefault:"true"`
	// HTTPTrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed (docs/proxy.md); HTTPAccessLog logs every request.
	HTTPTrustedProxies []string `env:"VOICEROOM_HTTP_TRUSTED_PROXIES" envSeparator:","`
	HTTPAccessLog      bool     `env:"VOICEROOM_HTTP_ACCESS_LOG" envDefault:"false"`

	MySQLDSN          string        `env:"VOICEROOM_MYSQL_DSN" envDefault:"root:@tcp(127.0.0.1:3306)/voiceroom"`
	MySQLMaxOpenConns int           `env:"VOICEROOM_MYSQL_MAX_OPEN_CONNS" envDefault:"64"`
	MySQLConnectWait  time.Duration `env:"VOICEROOM_MYSQL_CONNECT_TIMEOUT" envDefault:"15s"`
	MigrateOnStart    bool          `env:"VOICEROOM_MIGRATE_ON_START" envDefault:"true"`
	// MySQLReplicaDSNs are read replicas for the reads that tolerate lag
	// (package readdb); none: every read on the primary, as before.
	MySQLReplicaDSNs   []string      `env:"VOICEROOM_MYSQL_REPLICA_DSN" envSeparator:","`
	MySQLReplicaMaxLag time.Duration `env:"VOICEROOM_MYSQL_REPLICA_MAX_LAG" envDefault:"5s"`

	// RedisAddr's default is set by loadConfig (offDefaults): set empty,
	// it turns the cache off. RedisAddrs replaces it for a cluster (several
	// addresses) or Sentinel (the sentinels, with RedisSentinelMaster); see
	// redis().
	RedisAddr             string   `env:"VOICEROOM_REDIS_ADDR"`
	RedisAddrs            []string `env:"VOICEROOM_REDIS_ADDRS" envSeparator:","`
	RedisSentinelMaster   string   `env:"VOICEROOM_REDIS_SENTINEL_MASTER"`
	RedisSentinelUsername string   `env:"VOICEROOM_REDIS_SENTINEL_USERNAME"`
	RedisSentinelPassword string   `env:"VOICEROOM_REDIS_SENTINEL_PASSWORD"`
	RedisUsername         string   `env:"VOICEROOM_REDIS_USERNAME"`
	RedisPassword         string   `env:"VOICEROOM_REDIS_PASSWORD"`
	RedisDB               int      `env:"VOICEROOM_REDIS_DB" envDefault:"0"`
	RedisTLS              bool     `env:"VOICEROOM_REDIS_TLS" envDefault:"false"`
	RedisTLSCA            string   `env:"VOICEROOM_REDIS_TLS_CA"`

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
	IMBridgeBackOff       []time.Duration `env:"VOICEROOM_IMBRIDGE_BACKOFF" envDefault:"1s" envSeparator:","`
	IMBridgeMaxDeliver    int             `env:"VOICEROOM_IMBRIDGE_MAX_DELIVER" envDefault:"-1"`
	IMBridgeMaxAckPending int             `env:"VOICEROOM_IMBRIDGE_MAX_ACK_PENDING" envDefault:"20000"`
	IMBridgeConcurrency   int             `env:"VOICEROOM_IMBRIDGE_CONCURRENCY" envDefault:"8"`

	ProjectorAckWait       time.Duration   `env:"VOICEROOM_PROJECTOR_ACK_WAIT" envDefault:"30s"`
	ProjectorBackOff       []time.Duration `env:"VOICEROOM_PROJECTOR_BACKOFF" envDefault:"500ms,2s,10s,1m" envSeparator:","`
	ProjectorMaxDeliver    int             `env:"VOICEROOM_PROJECTOR_MAX_DELIVER" envDefault:"10"`
	ProjectorMaxAckPending int             `env:"VOICEROOM_PROJECTOR_MAX_ACK_PENDING" envDefault:"5000"`
	ProjectorConcurrency   int             `env:"VOICEROOM_PROJECTOR_CONCURRENCY" envDefault:"1"` // listprojector.DefaultWorkers
	ProjectorFetchBatch    int             `env:"VOICEROOM_PROJECTOR_FETCH_BATCH" envDefault:"500"`
	ProjectorMaxHeld       int             `env:"VOICEROOM_PROJECTOR_MAX_HELD" envDefault:"3000"`

	ListReconcileEvery  time.Duration `env:"VOICEROOM_LIST_RECONCILE_EVERY" envDefault:"30s"`
	ListCardTTL         time.Duration `env:"VOICEROOM_LIST_CARD_TTL" envDefault:"10m"`
	ListCountsDelay     time.Duration `env:"VOICEROOM_LIST_COUNTS_DELAY" envDefault:"1s"`
	ListRedisTimeout    time.Duration `env:"VOICEROOM_LIST_REDIS_TIMEOUT" envDefault:"50ms"`
	ListFreezeEvery     time.Duration `env:"VOICEROOM_LIST_FREEZE_EVERY" envDefault:"1s"`
	ListChainTTL        time.Duration `env:"VOICEROOM_LIST_CHAIN_TTL" envDefault:"2m"`
	ListChainDepth      int           `env:"VOICEROOM_LIST_CHAIN_DEPTH" envDefault:"1000"`
	ListMaxFrozenRooms  int           `env:"VOICEROOM_LIST_MAX_FROZEN_ROOMS" envDefault:"2000000"`
	ListSearchMaxResult int           `env:"VOICEROOM_LIST_SEARCH_MAX_RESULTS" envDefault:"200"`
	ListNearCacheCards  int           `env:"VOICEROOM_LIST_NEAR_CACHE_CARDS" envDefault:"100000"`
	ListNearCacheMaxAge time.Duration `env:"VOICEROOM_LIST_NEAR_CACHE_MAX_AGE" envDefault:"30s"`

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
	RoomsMicRequestTTL    time.Duration `env:"VOICEROOM_ROOMS_MIC_REQUEST_TTL" envDefault:"5m"`
	RoomsPartitions       int           `env:"VOICEROOM_ROOMS_PARTITIONS" envDefault:"256"`
	RoomsLeaseTTL         time.Duration `env:"VOICEROOM_ROOMS_LEASE_TTL" envDefault:"5s"`
	OutboxEnabled         bool          `env:"VOICEROOM_OUTBOX_ENABLED" envDefault:"true"`
	OutboxPollInterval    time.Duration `env:"VOICEROOM_OUTBOX_POLL_INTERVAL" envDefault:"1s"`
	OutboxBatchSize       int           `env:"VOICEROOM_OUTBOX_BATCH_SIZE" envDefault:"100"`
	OutboxPublishTimeout  time.Duration `env:"VOICEROOM_OUTBOX_PUBLISH_TIMEOUT" envDefault:"3s"`
	OutboxFastWorkers     int           `env:"VOICEROOM_OUTBOX_FAST_WORKERS" envDefault:"128"`
	OutboxRetryStrategy   string        `env:"VOICEROOM_OUTBOX_RETRY_STRATEGY" envDefault:"fixed_interval"`
	OutboxRetention       time.Duration `env:"VOICEROOM_OUTBOX_RETENTION" envDefault:"72h"`
	// PKRetention is how long a settled PK battle keeps its pk_seen rows
	// and every sender's total (pk.ClockConfig.Retention).
	PKRetention time.Duration `env:"VOICEROOM_PK_RETENTION" envDefault:"168h"`

	JWTSecret string `env:"VOICEROOM_JWT_SECRET"`

	RegionsCacheSize    int           `env:"VOICEROOM_REGIONS_CACHE_SIZE" envDefault:"100000"`
	RegionsCacheTTL     time.Duration `env:"VOICEROOM_REGIONS_CACHE_TTL" envDefault:"3s"`
	RegionsRebuildBatch int           `env:"VOICEROOM_REGIONS_REBUILD_BATCH" envDefault:"500"`

	Roles           []string      `env:"VOICEROOM_ROLES" envDefault:"api,rooms,relay,imbridge,projector,webhooks,activity" envSeparator:","`
	NodeID          string        `env:"VOICEROOM_NODE_ID"`
	ShutdownTimeout time.Duration `env:"VOICEROOM_SHUTDOWN_TIMEOUT" envDefault:"15s"`
	LogFormat       string        `env:"VOICEROOM_LOG_FORMAT" envDefault:"json"`
	LogLevel        string        `env:"VOICEROOM_LOG_LEVEL" envDefault:"info"`

	DLQSettings           // VOICEROOM_DLQ_GAP_CHECK_INTERVAL, _MAX_REPLAY, VOICEROOM_BUS_MONITOR_INTERVAL (dlq.go)
	IMConfig              // Tencent IM (imbridge.go)
	RanksSettings         // VOICEROOM_APP_TIMEZONES, VOICEROOM_RANKS_* (ranks.go)
	WebhooksConfig        // VOICEROOM_WEBHOOKS_* (webhooks.go)
	ActivityDefineConfig  // VOICEROOM_ACTIVITY_MAX_REWARD_COINS (activity_api.go)
	ActivityScoreSettings // VOICEROOM_ACTIVITY_* of the scoring and boards (activityscore.go)
	AuthConfig            // VOICEROOM_APP_KEYS, VOICEROOM_PLATFORM_KEYS, VOICEROOM_AUTH_* ... (auth.go)
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

// offDefaults are the defaults of the variables that, set empty, turn
// something off: the operators' listener and the Redis cache. envDefault
// would apply to an empty value too, so loadConfig sets them only when the
// variable is unset.
var offDefaults = []struct {
	name  string
	value string
	field func(*config) *string
}{
	{"VOICEROOM_OPS_ADDR", "127.0.0.1:9090", func(c *config) *string { return &c.OpsAddr }},
	{"VOICEROOM_REDIS_ADDR", "127.0.0.1:6379", func(c *config) *string { return &c.RedisAddr }},
}

// loadConfig reads the environment, normalises it (see normalised) and
// validates it. Every error names the variable at fault.
func loadConfig() (config, error) {
	var cfg config
	if err := env.Parse(&cfg); err != nil {
		return cfg, nameParseErrors(err)
	}
	cfg.RedisAddrs = trimmed(cfg.RedisAddrs)
	for _, d := range offDefaults {
		if d.name == "VOICEROOM_REDIS_ADDR" && len(cfg.RedisAddrs) > 0 {
			continue // VOICEROOM_REDIS_ADDRS names the Redis
		}
		if _, set := os.LookupEnv(d.name); !set {
			*d.field(&cfg) = d.value
		}
	}
	cfg = cfg.normalised()
	if err := cfg.validate(); err != nil {
		return cfg, err
	}
	_, cfg.imApps = cfg.IMConfig.apps()
	return cfg, nil
}

// normalised returns c with the roles and CORS origins trimmed of spaces
// (empty origins dropped) and an empty node id replaced by the host name.
func (c config) normalised() config {
	roles := make([]string, len(c.Roles))
	for i, r := range c.Roles {
		roles[i] = strings.TrimSpace(r)
	}
	c.Roles = roles
	var origins []string
	for _, o := range c.CORSOrigins {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, o)
		}
	}
	c.CORSOrigins = origins
	if c.NodeID == "" {
		c.NodeID, _ = os.Hostname()
	}
	return c
}

// trimmed returns ss trimmed of spaces, empty ones dropped (nil for none).
func trimmed(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
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

// validate checks c without changing it. Its own rules are about the
// process (roles, logging, Redis, the JWT variable) and about values that
// span packages; each package's Config checks its own fields, and its
// errors are reported under the variable that set the field (the *Vars
// maps below).
// A variable with a default may not be set to zero or less (it would
// silently become the package's default), except where zero means
// something (zeroOK).
func (c config) validate() error {
	var errs varErrors
	check := func(ok bool, name, format string, args ...any) {
		if !ok {
			errs.add(&configError{Var: name, Msg: fmt.Sprintf(format, args...)})
		}
	}
	errs.positive(c)
	check(c.HTTPRequestTimeout >= c.RoomsCommandTimeout, "VOICEROOM_HTTP_REQUEST_TIMEOUT",
		"want at least VOICEROOM_ROOMS_COMMAND_TIMEOUT (%v), got %v", c.RoomsCommandTimeout, c.HTTPRequestTimeout)

	// The process.
	if c.RedisAddr != "" && !strings.HasPrefix(c.RedisAddr, "/") { // a path is a unix socket
		_, _, err := net.SplitHostPort(c.RedisAddr)
		check(err == nil, "VOICEROOM_REDIS_ADDR", "want host:port, a unix socket's absolute path, or empty, got %q", c.RedisAddr)
	}
	check(c.RedisSentinelMaster == "" || len(c.RedisAddrs) > 0, "VOICEROOM_REDIS_SENTINEL_MASTER", "set VOICEROOM_REDIS_ADDRS to the sentinels' addresses")
	if len(c.RedisAddrs) > 0 {
		check(c.RedisAddr == "", "VOICEROOM_REDIS_ADDRS", "set it or VOICEROOM_REDIS_ADDR, not both")
		errs.of(c.redis().Validate(), "redis", redisVars)
	} else {
		rc := c.redis() // VOICEROOM_REDIS_ADDR and the master are checked above
		rc.Addrs, rc.SentinelMaster = nil, ""
		errs.of(rc.Validate(), "redis", redisVars)
	}
	check(c.JWTSecret == "" || len(c.JWTSecret) >= 16, "VOICEROOM_JWT_SECRET", "must be at least 16 bytes (or empty in development)")
	check(len(c.Roles) > 0, "VOICEROOM_ROLES", "name at least one role of %s", strings.Join(allRoles, ","))
	for _, r := range c.Roles {
		check(slices.Contains(allRoles, r), "VOICEROOM_ROLES", "unknown role %q (want some of %s)", r, strings.Join(allRoles, ","))
	}
	check(c.NodeID != "", "VOICEROOM_NODE_ID", "empty, and the host name is unknown: set it")
	check(c.LogFormat == "json" || c.LogFormat == "text", "VOICEROOM_LOG_FORMAT", "want json or text, got %q", c.LogFormat)
	_, err := parseLevel(c.LogLevel)
	check(err == nil, "VOICEROOM_LOG_LEVEL", "want debug, info, warn or error, got %q", c.LogLevel)

	// Operators' bounds, tighter than the packages' (whose tests run them
	// faster).
	check(c.StreamDuplicateWindow >= time.Second, "VOICEROOM_STREAM_DUPLICATE_WINDOW", "want at least 1s, got %v", c.StreamDuplicateWindow)
	check(c.DLQMaxAge >= time.Hour, "VOICEROOM_DLQ_MAX_AGE", "want at least 1h, got %v", c.DLQMaxAge)
	check(c.IMBridgeAckWait >= time.Second, "VOICEROOM_IMBRIDGE_ACK_WAIT", "want at least 1s, got %v", c.IMBridgeAckWait)
	check(c.ProjectorAckWait >= time.Second, "VOICEROOM_PROJECTOR_ACK_WAIT", "want at least 1s, got %v", c.ProjectorAckWait)
	check(c.RegionsCacheTTL >= 100*time.Millisecond, "VOICEROOM_REGIONS_CACHE_TTL", "want at least 100ms, got %v", c.RegionsCacheTTL)
	check(c.PKRetention >= time.Hour && c.PKRetention <= 8760*time.Hour, "VOICEROOM_PK_RETENTION", "want 1h to 8760h, got %v", c.PKRetention)
	c.DLQSettings.validate(&errs)
	c.RanksSettings.validate(&errs)
	c.ActivityScoreSettings.validate(&errs)
	check(c.IMBridgeMaxDeliver == -1 || c.IMBridgeMaxDeliver > 0, "VOICEROOM_IMBRIDGE_MAX_DELIVER", "want -1 (no limit) or a positive count, got %d", c.IMBridgeMaxDeliver)
	imErrs, _ := c.IMConfig.apps()
	for _, err := range imErrs {
		errs.add(err)
	}
	check(c.IMBridgeGroupMsgsPerSec <= 30, "VOICEROOM_IMBRIDGE_GROUP_MESSAGES_PER_SECOND", "want at most 30 (Tencent drops above 40), got %v", c.IMBridgeGroupMsgsPerSec)
	check(c.IMBridgeFetchBatch <= c.IMBridgeMaxAckPending, "VOICEROOM_IMBRIDGE_FETCH_BATCH", "must be at most VOICEROOM_IMBRIDGE_MAX_ACK_PENDING (%d)", c.IMBridgeMaxAckPending)
	check(c.ListFreezeEvery >= 10*time.Millisecond, "VOICEROOM_LIST_FREEZE_EVERY", "want at least 10ms, got %v", c.ListFreezeEvery)

	// Values that span packages.
	check(c.ProjectorFetchBatch <= c.ProjectorMaxAckPending, "VOICEROOM_PROJECTOR_FETCH_BATCH", "must not exceed VOICEROOM_PROJECTOR_MAX_ACK_PENDING (%d)", c.ProjectorMaxAckPending)
	if c.ListCountsDelay > 0 {
		// A held event keeps its message unacked: a batch must still fit.
		check(c.ProjectorMaxHeld+c.ProjectorFetchBatch <= c.ProjectorMaxAckPending, "VOICEROOM_PROJECTOR_MAX_HELD",
			"with VOICEROOM_PROJECTOR_FETCH_BATCH (%d) must not exceed VOICEROOM_PROJECTOR_MAX_ACK_PENDING (%d)", c.ProjectorFetchBatch, c.ProjectorMaxAckPending)
	}
	check(c.RoomsCommitWorkers < c.MySQLMaxOpenConns, "VOICEROOM_ROOMS_COMMIT_WORKERS", "must be below VOICEROOM_MYSQL_MAX_OPEN_CONNS (%d), which reads need too", c.MySQLMaxOpenConns)
	// MySQL closes once the workers have stopped or the shutdown timeout
	// has passed: the relay must be able to finish its batch before that.
	outbox := c.outbox()
	check(outbox.DrainBound() < c.ShutdownTimeout, "VOICEROOM_OUTBOX_PUBLISH_TIMEOUT",
		"the publish timeout (%v) plus %v to record the results must be shorter than VOICEROOM_SHUTDOWN_TIMEOUT (%v)",
		outbox.WithDefaults().PublishTimeout, outboxrelay.DefaultStatementTimeout, c.ShutdownTimeout)

	// Each package's own rules.
	errs.of(c.mysql().Validate(), "mysql", mysqlVars)
	errs.of(c.reads().Validate(), "mysql replicas", readsVars)
	errs.of(c.gateway(authtoken.SingleSecret(nil)).Validate(), "http", httpVars)
	errs.of(c.streams().Validate(), "stream", streamVars)
	for _, cc := range c.consumers() {
		errs.of(cc.Validate(), cc.Durable, sinkVars(cc.Durable))
		errs.of(c.consumerRun(cc.Durable).Validate(), cc.Durable, sinkVars(cc.Durable))
	}
	conn := c.natsConn()
	if c.NATSURL == "" {
		errs.of(c.embedded().Validate(), "nats", natsVars)
		conn.URL = "nats://" + c.NATSListen // where serve will connect
	}
	errs.of(conn.Validate(), "nats", natsVars)
	errs.of(outbox.Validate(), "outbox", outboxVars)
	errs.of(c.fastPath().Validate(), "outbox", outboxVars)
	errs.of(c.rooms().Validate(), "rooms", roomsVars)
	errs.of(c.roomCluster().Validate(), "rooms cluster", roomClusterVars)
	errs.of(c.regions().Validate(), "regions", regionsVars)
	errs.of(c.listProjector().Validate(), "room list", listVars)
	errs.of(c.roomList(c.secretForValidation()).Validate(), "room list", listVars)
	errs.of(c.imBridgeConfig().Validate(), "imbridge", imBridgeVars())
	errs.of(c.guardConfig().Validate(), "im callback", imBridgeVars())
	c.WebhooksConfig.validate(&errs)
	c.validateAuth(&errs)
	errs.of(c.webhooksConfig().Validate(), "webhooks", webhooksVars())
	errs.of(c.endpointsConfig().Validate(), "webhooks", webhooksVars())
	errs.of(c.defineConfig().Validate(), "activity", activityDefineVars)
	return errs.join()
}

// The variables that set each package's Config fields, by Go field name,
// so that a package's *apperr.ConfigError is reported under its variable.
var (
	redisVars = map[string]string{
		"Addrs": "VOICEROOM_REDIS_ADDRS", "SentinelMaster": "VOICEROOM_REDIS_SENTINEL_MASTER", "DB": "VOICEROOM_REDIS_DB",
		"TLSCAFile": "VOICEROOM_REDIS_TLS_CA",
	}
	readsVars = map[string]string{
		"PrimaryDSN": "VOICEROOM_MYSQL_DSN", "ReplicaDSNs": "VOICEROOM_MYSQL_REPLICA_DSN",
		"MaxLag": "VOICEROOM_MYSQL_REPLICA_MAX_LAG", "MaxOpenConns": "VOICEROOM_MYSQL_MAX_OPEN_CONNS",
	}
	mysqlVars = map[string]string{
		"DSN": "VOICEROOM_MYSQL_DSN", "MaxOpenConns": "VOICEROOM_MYSQL_MAX_OPEN_CONNS", "ConnectTimeout": "VOICEROOM_MYSQL_CONNECT_TIMEOUT",
	}
	httpVars = map[string]string{
		"Addr": "VOICEROOM_HTTP_ADDR", "BodyLimit": "VOICEROOM_HTTP_BODY_LIMIT",
		"RatePerUser": "VOICEROOM_HTTP_RATE_PER_USER", "RateBurst": "VOICEROOM_HTTP_RATE_BURST",
		"RequestTimeout": "VOICEROOM_HTTP_REQUEST_TIMEOUT", "OpsAddr": "VOICEROOM_OPS_ADDR",
		"CORSOrigins": "VOICEROOM_CORS_ORIGINS", "Pprof": "VOICEROOM_PPROF",
		"TrustedProxies": "VOICEROOM_HTTP_TRUSTED_PROXIES", "AccessLog": "VOICEROOM_HTTP_ACCESS_LOG",
	}
	streamVars = map[string]string{
		"DuplicateWindow": "VOICEROOM_STREAM_DUPLICATE_WINDOW", "MaxAge": "VOICEROOM_STREAM_MAX_AGE",
		"Replicas": "VOICEROOM_STREAM_REPLICAS", "DLQMaxAge": "VOICEROOM_DLQ_MAX_AGE",
	}
	natsVars = map[string]string{
		"Listen": "VOICEROOM_NATS_LISTEN", "StoreDir": "VOICEROOM_DATA_DIR", "URL": "VOICEROOM_NATS_URL",
		"User": "VOICEROOM_NATS_USER", "Password": "VOICEROOM_NATS_PASSWORD", "CredsFile": "VOICEROOM_NATS_CREDS",
		"TLSCAFile": "VOICEROOM_NATS_TLS_CA", "TLSCertFile": "VOICEROOM_NATS_TLS_CERT", "TLSKeyFile": "VOICEROOM_NATS_TLS_KEY",
		"ConnectTimeout": "VOICEROOM_NATS_CONNECT_TIMEOUT",
	}
	outboxVars = map[string]string{
		"PollInterval": "VOICEROOM_OUTBOX_POLL_INTERVAL", "BatchSize": "VOICEROOM_OUTBOX_BATCH_SIZE",
		"PublishTimeout": "VOICEROOM_OUTBOX_PUBLISH_TIMEOUT", "RetryStrategy": "VOICEROOM_OUTBOX_RETRY_STRATEGY",
		"Retention": "VOICEROOM_OUTBOX_RETENTION", "Workers": "VOICEROOM_OUTBOX_FAST_WORKERS",
	}
	roomsVars = map[string]string{
		"PresenceTTL": "VOICEROOM_ROOMS_PRESENCE_TTL", "SweepInterval": "VOICEROOM_ROOMS_SWEEP_INTERVAL",
		"IdleEvict": "VOICEROOM_ROOMS_IDLE_EVICT", "SnapshotEvery": "VOICEROOM_ROOMS_SNAPSHOT_EVERY",
		"MaxOnline": "VOICEROOM_ROOMS_MAX_ONLINE", "CommitWorkers": "VOICEROOM_ROOMS_COMMIT_WORKERS",
		"CommitBatch": "VOICEROOM_ROOMS_COMMIT_BATCH", "CommandTimeout": "VOICEROOM_ROOMS_COMMAND_TIMEOUT",
		"PasswordAttempts": "VOICEROOM_ROOMS_PASSWORD_ATTEMPTS", "DefaultCoverURL": "VOICEROOM_ROOMS_DEFAULT_COVER_URL",
		"MicRequestTTL": "VOICEROOM_ROOMS_MIC_REQUEST_TTL",
	}
	roomClusterVars = map[string]string{
		"Partitions": "VOICEROOM_ROOMS_PARTITIONS", "LeaseTTL": "VOICEROOM_ROOMS_LEASE_TTL", "Replicas": "VOICEROOM_STREAM_REPLICAS",
	}
	regionsVars = map[string]string{
		"CacheSize": "VOICEROOM_REGIONS_CACHE_SIZE", "CacheTTL": "VOICEROOM_REGIONS_CACHE_TTL", "RebuildBatch": "VOICEROOM_REGIONS_REBUILD_BATCH",
	}
)

// sinkVars are the variables of a sink's consumer and consume loop.
func sinkVars(durable string) map[string]string {
	prefix := "VOICEROOM_PROJECTOR_"
	switch durable {
	case bus.DurableIMBridge:
		prefix = "VOICEROOM_IMBRIDGE_"
	case bus.DurableRoomRanks:
		prefix = "VOICEROOM_RANKS_"
	case bus.DurableWebhooks:
		prefix = "VOICEROOM_WEBHOOKS_"
	case bus.DurableActivity:
		prefix = "VOICEROOM_ACTIVITY_"
	}
	return map[string]string{
		"AckWait": prefix + "ACK_WAIT", "BackOff": prefix + "BACKOFF", "NakDelays": prefix + "BACKOFF",
		"MaxDeliver": prefix + "MAX_DELIVER", "MaxAckPending": prefix + "MAX_ACK_PENDING",
		"Concurrency": prefix + "CONCURRENCY", "ShutdownTimeout": "VOICEROOM_SHUTDOWN_TIMEOUT",
	}
}

// zeroOK are the numeric variables that may be zero or less: zero has a
// meaning of its own, or (the outbox's variables, docs/operating.md, "The outbox") a
// value at or below zero takes the default.
var zeroOK = map[string]bool{
	"VOICEROOM_REDIS_DB":                  true,
	"VOICEROOM_REGIONS_CACHE_SIZE":        true, // 0: no cache
	"VOICEROOM_OUTBOX_POLL_INTERVAL":      true,
	"VOICEROOM_OUTBOX_BATCH_SIZE":         true,
	"VOICEROOM_OUTBOX_PUBLISH_TIMEOUT":    true,
	"VOICEROOM_OUTBOX_RETENTION":          true,
	"VOICEROOM_IMBRIDGE_MAX_DELIVER":      true, // -1: no delivery limit
	"VOICEROOM_RANKS_MAX_DELIVER":         true, // -1: no delivery limit
	"VOICEROOM_TIM_SDKAPPID":              true, // 0: no default Tencent application
	"VOICEROOM_LIST_COUNTS_DELAY":         true, // 0: every count change written at once
	"VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE": true, // 0: no bound
}

// varErrors collects configuration errors, at most one per variable.
type varErrors struct {
	errs []error
	seen map[string]bool
}

func (e *varErrors) add(err *configError) {
	if e.seen == nil {
		e.seen = map[string]bool{}
	}
	if e.seen[err.Var] {
		return
	}
	e.seen[err.Var] = true
	e.errs = append(e.errs, err)
}

// of adds a package's Validate error under the variable of its field;
// an error naming a field no variable sets is reported under the
// component's name. Joined errors (errors.Join) are reported one by one.
func (e *varErrors) of(err error, component string, vars map[string]string) {
	if err == nil {
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		// A join of several fields' errors, or a wrap of a sentinel and
		// one field's error: each field's error under its variable.
		split := false
		for _, err := range j.Unwrap() {
			if apperr.ConfigFieldOf(err) != "" {
				e.of(err, component, vars)
				split = true
			}
		}
		if split {
			return
		}
	}
	name, ok := vars[apperr.ConfigFieldOf(err)]
	if !ok {
		name = component + " configuration"
	}
	e.add(&configError{Var: name, Msg: err.Error()})
}

// positive reports every numeric variable at or below zero, except zeroOK,
// the embedded parts' (DLQSettings, IMConfig) too.
func (e *varErrors) positive(c config) { e.positiveFields(reflect.ValueOf(c)) }

func (e *varErrors) positiveFields(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		if t.Field(i).Anonymous && t.Field(i).Type.Kind() == reflect.Struct {
			e.positiveFields(v.Field(i))
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("env"), ",")
		if name == "" || zeroOK[name] {
			continue
		}
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			if f.Int() <= 0 {
				e.add(&configError{Var: name, Msg: fmt.Sprintf("must be positive, got %v", f.Interface())})
			}
		case reflect.Float64:
			if f.Float() <= 0 {
				e.add(&configError{Var: name, Msg: fmt.Sprintf("must be positive, got %v", f.Float())})
			}
		}
	}
}

func (e *varErrors) join() error { return errors.Join(e.errs...) }

// secretForValidation is the JWT key the gateway's Config is checked with:
// the variable, or when it is empty a stand-in for the development key
// jwtSecret generates (32 bytes), which the variable's rule cannot see yet.
func (c config) secretForValidation() []byte {
	if c.JWTSecret != "" {
		return []byte(c.JWTSecret)
	}
	return make([]byte, 32)
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
		{Durable: bus.DurableRoomRanks, AckWait: c.RanksAckWait, MaxDeliver: c.RanksMaxDeliver, MaxAckPending: c.RanksMaxAckPend},
		{Durable: bus.DurableWebhooks, AckWait: c.WebhooksAckWait, MaxDeliver: -1, MaxAckPending: c.WebhooksMaxAckPending},
		{Durable: bus.DurableActivity, AckWait: c.ActivityAckWait, MaxDeliver: -1, MaxAckPending: c.ActivityMaxAckPend},
		{Durable: bus.DurablePK, FilterSubject: bus.PKFilterSubject, MaxDeliver: -1},
	}
}

// consumerRun is the consume-loop configuration of a sink's durable.
func (c *config) consumerRun(durable string) bus.ConsumerRunConfig {
	switch durable {
	case bus.DurableIMBridge:
		return bus.ConsumerRunConfig{Durable: durable, Concurrency: c.IMBridgeConcurrency, NakDelays: c.IMBridgeBackOff,
			MaxDeliver: c.IMBridgeMaxDeliver, ShutdownTimeout: c.ShutdownTimeout}
	case bus.DurableRoomRanks:
		return bus.ConsumerRunConfig{Durable: durable, Concurrency: c.RanksConcurrency, NakDelays: c.RanksBackOff,
			MaxDeliver: c.RanksMaxDeliver, ShutdownTimeout: c.ShutdownTimeout}
	case bus.DurableActivity:
		// Never gives up on a retryable failure (MySQL or Redis down): an
		// event it cannot read still dead-letters.
		return bus.ConsumerRunConfig{Durable: durable, Concurrency: c.ActivityConcurrency, NakDelays: c.ActivityBackOff,
			MaxDeliver: -1, ShutdownTimeout: c.ShutdownTimeout}
	case bus.DurablePK:
		// Never gives up on a retryable failure (MySQL down): a battle's
		// score must not lose a gift.
		return bus.ConsumerRunConfig{Durable: durable, MaxDeliver: -1, ShutdownTimeout: c.ShutdownTimeout}
	case bus.DurableWebhooks:
		// Retries are the sink's own (it holds a room's events, never
		// nakking them); a nak is only shutdown's, redelivered at once.
		return bus.ConsumerRunConfig{Durable: durable, MaxDeliver: -1, ShutdownTimeout: c.ShutdownTimeout}
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
	return outboxrelay.FastPathConfig{PublishTimeout: c.OutboxPublishTimeout, Workers: c.OutboxFastWorkers}
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

// gateway is the HTTP edge's configuration; tokens are verified with keys.
func (c *config) gateway(keys authtoken.Keys) gateway.Config {
	return gateway.Config{
		Addr:        c.HTTPAddr,
		BodyLimit:   c.HTTPBodyLimit,
		Keys:        keys,
		RatePerUser: c.HTTPRatePerUser,
		RateBurst:   c.HTTPRateBurst,
		// A room command's own timeout ends first; this bounds the rest.
		RequestTimeout: c.HTTPRequestTimeout,
		Pprof:          c.HTTPPprof,
		OpsAddr:        c.OpsAddr,
		CORSOrigins:    c.CORSOrigins,
		TrustedProxies: c.HTTPTrustedProxies,
		AccessLog:      c.HTTPAccessLog,
	}
}

// mysql is the configuration of the pool serve opens.
// redis is the Redis the process uses: VOICEROOM_REDIS_ADDRS when set
// (several: a cluster; with VOICEROOM_REDIS_SENTINEL_MASTER, the
// sentinels), else the one server VOICEROOM_REDIS_ADDR (empty: none).
func (c *config) redis() redisconn.Config {
	rc := redisconn.Config{
		Addrs: c.RedisAddrs, SentinelMaster: c.RedisSentinelMaster,
		SentinelUsername: c.RedisSentinelUsername, SentinelPassword: c.RedisSentinelPassword,
		Username: c.RedisUsername, Password: c.RedisPassword, DB: c.RedisDB,
		TLS: c.RedisTLS, TLSCAFile: c.RedisTLSCA,
	}
	if len(rc.Addrs) == 0 && c.RedisAddr != "" {
		rc.Addrs = []string{c.RedisAddr}
	}
	return rc
}

// redisClient returns the process's Redis client, nil when there is none
// (VOICEROOM_REDIS_ADDR set empty). It does not connect.
func (c *config) redisClient() (redis.UniversalClient, error) {
	rc := c.redis()
	if !rc.Enabled() {
		return nil, nil
	}
	rdb, err := redisconn.New(rc, "")
	if err != nil {
		return nil, configErr(err, "redis", redisVars)
	}
	return rdb, nil
}

func (c *config) mysql() mysqldb.Config {
	return mysqldb.Config{DSN: c.MySQLDSN, MaxOpenConns: c.MySQLMaxOpenConns, ConnectTimeout: c.MySQLConnectWait}
}

// reads is the configuration of the pool of the reads that tolerate lag:
// the replicas, each with a pool as large as the primary's.
func (c *config) reads() readdb.Config {
	return readdb.Config{PrimaryDSN: c.MySQLDSN, ReplicaDSNs: trimmed(c.MySQLReplicaDSNs),
		MaxLag: c.MySQLReplicaMaxLag, MaxOpenConns: c.MySQLMaxOpenConns}
}

// embedded is the configuration of the embedded NATS server (used when
// VOICEROOM_NATS_URL is empty).
func (c *config) embedded() bus.EmbeddedConfig {
	return bus.EmbeddedConfig{Listen: c.NATSListen, StoreDir: filepath.Join(c.DataDir, "jetstream")}
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

// jwtSecret returns VOICEROOM_JWT_SECRET or, when it is empty (development
// with VOICEROOM_DEV_SINGLE_SECRET), a random key generated once and kept
// in $VOICEROOM_DATA_DIR/jwt-secret so that serve and token agree across
// restarts.
func (c *config) jwtSecret(log *slog.Logger) ([]byte, error) {
	return c.readJWTSecret(log, true)
}

// existingJWTSecret is jwtSecret without creating the development key:
// a missing key file is an error that names the absolute path looked at
// and the ways out.
func (c *config) existingJWTSecret() ([]byte, error) {
	return c.readJWTSecret(slog.New(slog.DiscardHandler), false)
}

func (c *config) readJWTSecret(log *slog.Logger, create bool) ([]byte, error) {
	v, err := c.devKey(log, "VOICEROOM_JWT_SECRET", c.JWTSecret, "jwt-secret", create,
		func() string { return hex.EncodeToString(randomBytes(32)) })
	if err != nil {
		return nil, err
	}
	if len(v) < authtoken.MinSecret {
		return nil, badVar("VOICEROOM_JWT_SECRET", "empty, and %s holds fewer than %d bytes", filepath.Join(c.DataDir, "jwt-secret"), authtoken.MinSecret)
	}
	return []byte(v), nil
}

// roomCluster is the partitioning of the rooms role over nodes; its
// buckets have the streams' replicas.
func (c *config) roomCluster() roomcluster.Config {
	return roomcluster.Config{Partitions: c.RoomsPartitions, LeaseTTL: c.RoomsLeaseTTL, Replicas: c.StreamReplicas}
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
		MicRequestTTL:    c.RoomsMicRequestTTL,
	}
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
