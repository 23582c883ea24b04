package main

import (
	"strings"
	"testing"
)

// TestWebhooksVariables: the webhooks sink's and admin side's rules are
// reported under the variable that set the field.
func TestWebhooksVariables(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"VOICEROOM_WEBHOOKS_SECRET_KEY", "too-short"},
		{"VOICEROOM_WEBHOOKS_TIMEOUT", "5m"},
		{"VOICEROOM_WEBHOOKS_CONCURRENCY", "300"},
		{"VOICEROOM_WEBHOOKS_MAX_BATCH_EVENTS", "1001"},
		{"VOICEROOM_WEBHOOKS_BACKOFF", "1s,20m"},
		{"VOICEROOM_WEBHOOKS_MAX_HELD", "5000"},
		{"VOICEROOM_WEBHOOKS_FETCH_BATCH", "9000"},
		{"VOICEROOM_WEBHOOKS_ROTATION_WINDOW", "1000h"},
		{"VOICEROOM_WEBHOOKS_LEASE_TTL", "100ms"},
		{"VOICEROOM_WEBHOOKS_ACK_WAIT", "500ms"},
		{"VOICEROOM_WEBHOOKS_PAUSE_AFTER", "0s"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
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
