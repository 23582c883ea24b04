package main

import (
	"strings"
	"testing"
)

// TestRoomListBadValuesNameTheVariable: the room list's variables are
// checked like the others.
func TestRoomListBadValuesNameTheVariable(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"VOICEROOM_PROJECTOR_FETCH_BATCH", "0"},
		{"VOICEROOM_PROJECTOR_FETCH_BATCH", "6000"}, // above the max ack pending too
		{"VOICEROOM_LIST_RECONCILE_EVERY", "10ms"},
		{"VOICEROOM_LIST_CARD_TTL", "30s"}, // under twice the reconcile period
		{"VOICEROOM_LIST_REDIS_TIMEOUT", "0s"},
		{"VOICEROOM_LIST_FREEZE_EVERY", "1h"},
		{"VOICEROOM_LIST_CHAIN_TTL", "2h"},
		{"VOICEROOM_LIST_CHAIN_DEPTH", "10"},
		{"VOICEROOM_LIST_MAX_FROZEN_ROOMS", "100"},
		{"VOICEROOM_LIST_SEARCH_MAX_RESULTS", "5000"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			_, err := loadConfig()
			if err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("error %v does not name %s", err, tt.name)
			}
		})
	}
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	lc := cfg.roomList([]byte("a jwt secret of some length"))
	if err := lc.Validate(); err != nil || len(lc.CursorSecret) < 16 {
		t.Errorf("default room list config: %v", err)
	}
}
