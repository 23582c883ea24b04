package main

import (
	"maps"
	"strings"
	"testing"

	"voiceroom/bus"
	"voiceroom/listprojector"
)

// TestPackageRulesNameTheVariable: the room list's, the IM bridge's and
// the dead-letter components' rules live in their packages' Configs, and
// their errors are reported under the variable that set the field.
func TestPackageRulesNameTheVariable(t *testing.T) {
	tests := []struct{ name, value string }{
		{"VOICEROOM_PROJECTOR_FETCH_BATCH", "5001"},
		{"VOICEROOM_LIST_RECONCILE_EVERY", "500ms"},
		{"VOICEROOM_LIST_CARD_TTL", "40s"},
		{"VOICEROOM_LIST_REDIS_TIMEOUT", "20s"},
		{"VOICEROOM_LIST_CHAIN_TTL", "2h"},
		{"VOICEROOM_LIST_FREEZE_EVERY", "5ms"},
		{"VOICEROOM_LIST_FREEZE_EVERY", "3m"},
		{"VOICEROOM_LIST_CHAIN_DEPTH", "10"},
		{"VOICEROOM_LIST_MAX_FROZEN_ROOMS", "999"},
		{"VOICEROOM_LIST_SEARCH_MAX_RESULTS", "1001"},
		{"VOICEROOM_LIST_NEAR_CACHE_CARDS", "-2"},
		{"VOICEROOM_LIST_NEAR_CACHE_MAX_AGE", "500ms"},
		{"VOICEROOM_IMBRIDGE_CALL_TIMEOUT", "10ms"},
		{"VOICEROOM_IMBRIDGE_CALL_TIMEOUT", "2m"},
		{"VOICEROOM_IMBRIDGE_SENDERS", "2000"},
		{"VOICEROOM_IMBRIDGE_MAX_BATCH_EVENTS", "1001"},
		{"VOICEROOM_IMBRIDGE_FETCH_BATCH", "100001"},
		{"VOICEROOM_TIM_CALLBACK_MAX_SKEW", "2h"},
		{"VOICEROOM_DLQ_MAX_REPLAY", "100001"},
		{"VOICEROOM_DLQ_GAP_CHECK_INTERVAL", "2h"},
		{"VOICEROOM_APP_TIMEZONES", "demo=Mars/Olympus"},
		{"VOICEROOM_APP_TIMEZONES", "demo"},
		{"VOICEROOM_APP_TIMEZONES", "demo=UTC,demo=Asia/Shanghai"},
		{"VOICEROOM_APP_TIMEZONES", "bad.app=UTC"},
		{"VOICEROOM_RANKS_EXPIRE_AFTER", "10s"},
		{"VOICEROOM_RANKS_CONCURRENCY", "1000"},
		{"VOICEROOM_RANKS_MAX_DELIVER", "-2"},
		{"VOICEROOM_RANKS_BACKOFF", "1s,-1s"},
		{"VOICEROOM_MYSQL_REPLICA_MAX_LAG", "500ms"},
		{"VOICEROOM_MYSQL_REPLICA_MAX_LAG", "2h"},
		{"VOICEROOM_MYSQL_REPLICA_DSN", "not a dsn"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			if tt.name == "VOICEROOM_PROJECTOR_FETCH_BATCH" || tt.name == "VOICEROOM_IMBRIDGE_FETCH_BATCH" {
				// Past the packages' bounds, not past the ack-pending rule.
				t.Setenv("VOICEROOM_PROJECTOR_MAX_ACK_PENDING", "200000")
				t.Setenv("VOICEROOM_IMBRIDGE_MAX_ACK_PENDING", "200000")
			}
			_, err := loadConfig()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.name+":") {
				t.Fatalf("error %q does not name %s", err, tt.name)
			}
		})
	}
}

// TestProjectorConcurrencySetsTheWorkers: VOICEROOM_PROJECTOR_CONCURRENCY
// is the projector's consume loop's Concurrency, the number of batches it
// writes at once (bus's TestConsumer/batch/per_room_order shows batches
// of different rooms running at once), and only the projector's.
func TestProjectorConcurrencySetsTheWorkers(t *testing.T) {
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.consumerRun(bus.DurableListProjector).Concurrency; got != listprojector.DefaultWorkers {
		t.Fatalf("default projector workers %d, want %d", got, listprojector.DefaultWorkers)
	}
	t.Setenv("VOICEROOM_PROJECTOR_CONCURRENCY", "16")
	if cfg, err = loadConfig(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.consumerRun(bus.DurableListProjector).Concurrency; got != 16 {
		t.Fatalf("projector workers %d, want 16", got)
	}
	if got := cfg.consumerRun(bus.DurableIMBridge).Concurrency; got != 8 {
		t.Fatalf("imbridge workers %d, want its own default 8", got)
	}
	if got := cfg.consumerRun(bus.DurableRoomRanks).Concurrency; got != 4 {
		t.Fatalf("ranks workers %d, want their own default 4", got)
	}
}

// TestAppTimeZones: VOICEROOM_APP_TIMEZONES names each app's zone, spaces
// aside; the ranks get them.
func TestAppTimeZones(t *testing.T) {
	t.Setenv("VOICEROOM_APP_TIMEZONES", " demo = Asia/Shanghai , other=Europe/Berlin,")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"demo": "Asia/Shanghai", "other": "Europe/Berlin"}
	if got := cfg.ranks().TimeZones; !maps.Equal(got, want) {
		t.Fatalf("zones %v, want %v", got, want)
	}
}

// TestTrustedProxiesVariable: VOICEROOM_HTTP_TRUSTED_PROXIES reaches the
// gateway, and a bad entry is reported under the variable.
func TestTrustedProxiesVariable(t *testing.T) {
	t.Setenv("VOICEROOM_HTTP_TRUSTED_PROXIES", "10.0.0.5, 10.1.0.0/16")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.gateway(nil).TrustedProxies; len(got) != 2 || strings.TrimSpace(got[1]) != "10.1.0.0/16" {
		t.Fatalf("gateway's trusted proxies %q", got)
	}
	t.Setenv("VOICEROOM_HTTP_TRUSTED_PROXIES", "10.0.0.5,proxy.internal")
	if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "VOICEROOM_HTTP_TRUSTED_PROXIES:") {
		t.Fatalf("a host name: %v, want an error naming VOICEROOM_HTTP_TRUSTED_PROXIES", err)
	}
}
