package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"voiceroom/bus"
)

// TestBadValuesNameTheVariable checks that every kind of bad value stops
// start-up with a message naming the variable.
func TestBadValuesNameTheVariable(t *testing.T) {
	tests := []struct{ name, value string }{
		{"VOICEROOM_HTTP_ADDR", "8080"},
		{"VOICEROOM_HTTP_BODY_LIMIT", "lots"},
		{"VOICEROOM_HTTP_BODY_LIMIT", "10"},
		{"VOICEROOM_HTTP_REQUEST_TIMEOUT", "1s"}, // shorter than the rooms command timeout
		{"VOICEROOM_MYSQL_DSN", "root@tcp(127.0.0.1:3306)"},
		{"VOICEROOM_MYSQL_MAX_OPEN_CONNS", "0"},
		{"VOICEROOM_REDIS_ADDR", "localhost"},
		{"VOICEROOM_REDIS_ADDRS", "127.0.0.1:7001,nope"},
		{"VOICEROOM_REDIS_DB", "16"},
		{"VOICEROOM_REDIS_SENTINEL_MASTER", "mymaster"}, // without VOICEROOM_REDIS_ADDRS
		{"VOICEROOM_REDIS_TLS_CA", "/etc/ca.pem"},       // without VOICEROOM_REDIS_TLS
		{"VOICEROOM_NATS_LISTEN", "0.0.0.0:4222"},
		{"VOICEROOM_NATS_URL", "localhost:4222"},
		{"VOICEROOM_STREAM_DUPLICATE_WINDOW", "2 minutes"},
		{"VOICEROOM_STREAM_REPLICAS", "2"},
		{"VOICEROOM_IMBRIDGE_MAX_DELIVER", "1"}, // not more than the one backoff step
		{"VOICEROOM_PROJECTOR_BACKOFF", "1s,soon"},
		{"VOICEROOM_PROJECTOR_BACKOFF", "1s,-2s"},
		{"VOICEROOM_PROJECTOR_ACK_WAIT", "10ms"},
		{"VOICEROOM_IMBRIDGE_MAX_ACK_PENDING", "0"},
		{"VOICEROOM_JWT_SECRET", "short"},
		{"VOICEROOM_ROLES", "api,chat"},
		{"VOICEROOM_LOG_FORMAT", "xml"},
		{"VOICEROOM_LOG_LEVEL", "loud"},
		{"VOICEROOM_MIGRATE_ON_START", "perhaps"},
		{"VOICEROOM_ROOMS_PRESENCE_TTL", "0s"},
		{"VOICEROOM_ROOMS_SWEEP_INTERVAL", "1m"},
		{"VOICEROOM_ROOMS_SNAPSHOT_EVERY", "0"},
		{"VOICEROOM_ROOMS_COMMIT_WORKERS", "64"},
		{"VOICEROOM_ROOMS_DEFAULT_COVER_URL", "ftp://x"},
		{"VOICEROOM_OUTBOX_RETRY_STRATEGY", "exponential"},
		{"VOICEROOM_OUTBOX_BATCH_SIZE", "100000"},
		{"VOICEROOM_OUTBOX_BATCH_SIZE", "many"},
		{"VOICEROOM_OUTBOX_POLL_INTERVAL", "soon"},
		{"VOICEROOM_OUTBOX_PUBLISH_TIMEOUT", "20s"}, // cannot finish within the 15s shutdown timeout
		{"VOICEROOM_OUTBOX_ENABLED", "maybe"},
		{"VOICEROOM_OUTBOX_FAST_WORKERS", "0"},
		{"VOICEROOM_OUTBOX_FAST_WORKERS", "5000"},
		{"VOICEROOM_REGIONS_CACHE_SIZE", "-1"},
		{"VOICEROOM_REGIONS_CACHE_SIZE", "many"},
		{"VOICEROOM_REGIONS_CACHE_TTL", "10ms"},
		{"VOICEROOM_REGIONS_CACHE_TTL", "1h"},
		{"VOICEROOM_REGIONS_REBUILD_BATCH", "0"},
		{"VOICEROOM_REGIONS_REBUILD_BATCH", "100000"},
		// Rules a package's Config holds, reported under the variable of the field.
		{"VOICEROOM_ROOMS_MAX_ONLINE", "200000"},
		{"VOICEROOM_ROOMS_IDLE_EVICT", "500ms"},
		{"VOICEROOM_ROOMS_MIC_REQUEST_TTL", "5s"},
		{"VOICEROOM_STREAM_REPLICAS", "4"},
		{"VOICEROOM_REGIONS_CACHE_SIZE", "20000000"},
		{"VOICEROOM_HTTP_BODY_LIMIT", "100000000"},
		{"VOICEROOM_NATS_TLS_CERT", "cert.pem"},
		{"VOICEROOM_PROJECTOR_CONCURRENCY", "1000"},
		{"VOICEROOM_MYSQL_MAX_OPEN_CONNS", "5000"},
		{"VOICEROOM_DLQ_GAP_CHECK_INTERVAL", "10ms"},
		{"VOICEROOM_DLQ_GAP_CHECK_INTERVAL", "often"},
		{"VOICEROOM_BUS_MONITOR_INTERVAL", "2h"},
		{"VOICEROOM_DLQ_MAX_REPLAY", "0"},
		// Tokens (auth.go).
		{"VOICEROOM_APP_KEYS", "demo:k1"},
		{"VOICEROOM_APP_KEYS", "demo:k/1:a-secret-of-some-length"},
		{"VOICEROOM_APP_KEYS", "demo:k1:short"},
		{"VOICEROOM_APP_KEYS", "demo:k1:a-secret-of-some-length,demo:k2:a-secret-of-some-length,demo:k3:a-secret-of-some-length"},
		{"VOICEROOM_PLATFORM_KEYS", "ops"},
		{"VOICEROOM_PLATFORM_KEYS", "ops:short"},
		{"VOICEROOM_APPS_SECRET_KEY", "abcd"},
		{"VOICEROOM_JWT_SECRET_UNTIL", "next week"},
		{"VOICEROOM_JWT_SECRET_UNTIL", "2030-01-01T00:00:00Z"}, // no VOICEROOM_JWT_SECRET
		{"VOICEROOM_AUTH_REFRESH_INTERVAL", "10ms"},
		{"VOICEROOM_AUTH_KEY_GRACE", "0s"},
		{"VOICEROOM_AUTH_KEY_GRACE", "1000h"},
		{"VOICEROOM_DEV_SINGLE_SECRET", "perhaps"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			_, err := loadConfig()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("error %q does not name %s", err, tt.name)
			}
		})
	}
}

// TestValidateChangesNothing: normalising is loadConfig's step, and
// validate only reads.
func TestValidateChangesNothing(t *testing.T) {
	t.Setenv("VOICEROOM_ROLES", " api, rooms")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Roles[0] != "api" || cfg.Roles[1] != "rooms" {
		t.Fatalf("roles not trimmed: %q", cfg.Roles)
	}
	raw := cfg
	raw.Roles = []string{" api"}
	raw.NodeID = ""
	if err := raw.validate(); err == nil || !strings.Contains(err.Error(), "VOICEROOM_NODE_ID") || !strings.Contains(err.Error(), "VOICEROOM_ROLES") {
		t.Fatalf("want errors naming VOICEROOM_NODE_ID and VOICEROOM_ROLES, got %v", err)
	}
	if raw.Roles[0] != " api" || raw.NodeID != "" {
		t.Fatalf("validate changed the config: %q %q", raw.Roles, raw.NodeID)
	}
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Roles) != 7 || cfg.NodeID == "" {
		t.Fatalf("roles %v node %q", cfg.Roles, cfg.NodeID)
	}
	var durables, sinks []string
	for _, c := range cfg.consumers() {
		durables = append(durables, c.Durable)
	}
	for _, c := range bus.DefaultConsumers() {
		sinks = append(sinks, c.Durable)
	}
	if !slices.Equal(durables, sinks) {
		t.Fatalf("consumers %v, want one per sink: %v", durables, sinks)
	}
}

// TestOutboxValuesAtOrBelowZeroTakeTheDefaults is the rule of the README's
// "The outbox": no busy loop, no full-table scan, no unbounded wait.
func TestOutboxValuesAtOrBelowZeroTakeTheDefaults(t *testing.T) {
	t.Setenv("VOICEROOM_OUTBOX_POLL_INTERVAL", "0s")
	t.Setenv("VOICEROOM_OUTBOX_BATCH_SIZE", "-5")
	t.Setenv("VOICEROOM_OUTBOX_PUBLISH_TIMEOUT", "-1s")
	t.Setenv("VOICEROOM_OUTBOX_RETENTION", "0s")
	t.Setenv("VOICEROOM_OUTBOX_RETRY_STRATEGY", "")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.outbox().WithDefaults()
	if got.PollInterval != time.Second || got.BatchSize != 100 || got.PublishTimeout != 3*time.Second ||
		got.Retention != 72*time.Hour || got.RetryStrategy != "fixed_interval" {
		t.Fatalf("outbox config %+v", got)
	}
	if !cfg.OutboxEnabled {
		t.Fatal("the relay is enabled by default")
	}
}

// TestOpsAndCORSVariables: the operators' listener is on 127.0.0.1:9090
// unless VOICEROOM_OPS_ADDR says otherwise, and set empty it is off; the
// origins are trimmed; bad values of both name their variable, and
// profiles without the operators' listener are refused.
func TestOpsAndCORSVariables(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil || cfg.OpsAddr != "127.0.0.1:9090" || len(cfg.CORSOrigins) != 0 || cfg.RedisAddr != "127.0.0.1:6379" {
		t.Fatalf("defaults: ops %q, origins %q, redis %q, %v", cfg.OpsAddr, cfg.CORSOrigins, cfg.RedisAddr, err)
	}
	t.Setenv("VOICEROOM_REDIS_ADDR", "")
	if cfg, err = loadConfig(); err != nil || cfg.RedisAddr != "" {
		t.Fatalf("VOICEROOM_REDIS_ADDR set empty: redis %q (the cache must be off), %v", cfg.RedisAddr, err)
	}
	t.Setenv("VOICEROOM_OPS_ADDR", "")
	t.Setenv("VOICEROOM_CORS_ORIGINS", " https://events.example.com, http://localhost:3000 ,")
	cfg, err = loadConfig()
	if err != nil || cfg.OpsAddr != "" || strings.Join(cfg.CORSOrigins, "|") != "https://events.example.com|http://localhost:3000" {
		t.Fatalf("ops %q, origins %q, %v", cfg.OpsAddr, cfg.CORSOrigins, err)
	}
	if g := cfg.gateway(nil); g.OpsAddr != "" || len(g.CORSOrigins) != 2 {
		t.Fatalf("gateway config: ops %q, origins %q", g.OpsAddr, g.CORSOrigins)
	}

	for _, tt := range []struct{ name, value, also string }{
		{"VOICEROOM_OPS_ADDR", "9090", ""},
		{"VOICEROOM_OPS_ADDR", "127.0.0.1:metrics", ""},
		{"VOICEROOM_OPS_ADDR", "127.0.0.1:8080", "VOICEROOM_HTTP_ADDR=127.0.0.1:8080"},
		{"VOICEROOM_CORS_ORIGINS", "*", ""},
		{"VOICEROOM_CORS_ORIGINS", "https://events.example.com,https://*.example.com", ""},
		{"VOICEROOM_CORS_ORIGINS", "https://events.example.com/", ""},
		{"VOICEROOM_CORS_ORIGINS", "events.example.com", ""},
		{"VOICEROOM_PPROF", "true", "VOICEROOM_OPS_ADDR="},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv("VOICEROOM_OPS_ADDR", "127.0.0.1:9090")
			t.Setenv("VOICEROOM_CORS_ORIGINS", "")
			if k, v, ok := strings.Cut(tt.also, "="); ok {
				t.Setenv(k, v)
			}
			t.Setenv(tt.name, tt.value)
			_, err := loadConfig()
			if err == nil || !strings.Contains(err.Error(), tt.name+":") {
				t.Fatalf("error %v does not name %s", err, tt.name)
			}
		})
	}
}

// TestEveryVariableIsDocumented: deploy/voiceroom.env.example names every
// variable serve reads.
func TestEveryVariableIsDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "voiceroom.env.example"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("env"), ","); name != "" {
				names = append(names, name)
			}
		}
	}
	walk(reflect.TypeOf(config{}))
	if len(names) < 50 {
		t.Fatalf("found %d variables: the walk is wrong", len(names))
	}
	for _, name := range names {
		if !strings.Contains(string(raw), name) {
			t.Errorf("deploy/voiceroom.env.example does not name %s", name)
		}
	}
}

// TestRedisVariables: one server by default, as before; VOICEROOM_REDIS_ADDRS
// names a cluster or, with a master name, the sentinels; it and
// VOICEROOM_REDIS_ADDR exclude each other; a cluster has only db 0.
func TestRedisVariables(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil || cfg.redis().Describe() != "127.0.0.1:6379" || cfg.redis().Cluster() {
		t.Fatalf("default: %s, %v", cfg.redis().Describe(), err)
	}
	t.Setenv("VOICEROOM_REDIS_ADDRS", " 127.0.0.1:7001, 127.0.0.1:7002 ,127.0.0.1:7003,")
	if cfg, err = loadConfig(); err != nil || !cfg.redis().Cluster() || len(cfg.redis().Addrs) != 3 {
		t.Fatalf("cluster: %s, %v", cfg.redis().Describe(), err)
	}
	t.Setenv("VOICEROOM_REDIS_DB", "2")
	if _, err = loadConfig(); err == nil || !strings.Contains(err.Error(), "VOICEROOM_REDIS_DB:") {
		t.Fatalf("a cluster with db 2: %v", err)
	}
	t.Setenv("VOICEROOM_REDIS_SENTINEL_MASTER", "voiceroom")
	if cfg, err = loadConfig(); err != nil || cfg.redis().SentinelMaster != "voiceroom" || cfg.redis().Cluster() {
		t.Fatalf("sentinel: %s, %v", cfg.redis().Describe(), err)
	}
	t.Setenv("VOICEROOM_REDIS_ADDR", "127.0.0.1:6379")
	if _, err = loadConfig(); err == nil || !strings.Contains(err.Error(), "VOICEROOM_REDIS_ADDRS:") {
		t.Fatalf("both set: %v", err)
	}
}
