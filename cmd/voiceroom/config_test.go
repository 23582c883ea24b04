package main

import (
	"strings"
	"testing"
)

// TestBadValuesNameTheVariable checks that every kind of bad value stops
// start-up with a message naming the variable.
func TestBadValuesNameTheVariable(t *testing.T) {
	tests := []struct{ name, value string }{
		{"VOICEROOM_HTTP_ADDR", "8080"},
		{"VOICEROOM_HTTP_BODY_LIMIT", "lots"},
		{"VOICEROOM_HTTP_BODY_LIMIT", "10"},
		{"VOICEROOM_MYSQL_DSN", "root@tcp(127.0.0.1:3306)"},
		{"VOICEROOM_MYSQL_MAX_OPEN_CONNS", "0"},
		{"VOICEROOM_REDIS_ADDR", "localhost"},
		{"VOICEROOM_NATS_LISTEN", "0.0.0.0:4222"},
		{"VOICEROOM_NATS_URL", "localhost:4222"},
		{"VOICEROOM_STREAM_DUPLICATE_WINDOW", "2 minutes"},
		{"VOICEROOM_STREAM_REPLICAS", "2"},
		{"VOICEROOM_IMBRIDGE_MAX_DELIVER", "3"}, // not more than the 5 backoff steps
		{"VOICEROOM_PROJECTOR_BACKOFF", "1s,soon"},
		{"VOICEROOM_PROJECTOR_BACKOFF", "1s,-2s"},
		{"VOICEROOM_PROJECTOR_ACK_WAIT", "10ms"},
		{"VOICEROOM_IMBRIDGE_MAX_ACK_PENDING", "0"},
		{"VOICEROOM_JWT_SECRET", "short"},
		{"VOICEROOM_ROLES", "api,chat"},
		{"VOICEROOM_LOG_FORMAT", "xml"},
		{"VOICEROOM_LOG_LEVEL", "loud"},
		{"VOICEROOM_MIGRATE_ON_START", "perhaps"},
		{"VOICEROOM_REGIONS_CACHE_SIZE", "-1"},
		{"VOICEROOM_REGIONS_CACHE_SIZE", "many"},
		{"VOICEROOM_REGIONS_CACHE_TTL", "10ms"},
		{"VOICEROOM_REGIONS_CACHE_TTL", "1h"},
		{"VOICEROOM_REGIONS_REBUILD_BATCH", "0"},
		{"VOICEROOM_REGIONS_REBUILD_BATCH", "100000"},
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

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Roles) != 5 || cfg.NodeID == "" {
		t.Fatalf("roles %v node %q", cfg.Roles, cfg.NodeID)
	}
	if len(cfg.consumers()) != 2 {
		t.Fatal("want one consumer per sink")
	}
}
