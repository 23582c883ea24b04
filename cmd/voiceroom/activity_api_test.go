package main

import (
	"strings"
	"testing"
	"time"
)

// TestActivityDefineVariables: the definitions' budget is reported under
// its variable.
func TestActivityDefineVariables(t *testing.T) {
	for _, value := range []string{"-1", "1000000000001", "lots"} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("VOICEROOM_ACTIVITY_MAX_REWARD_COINS", value)
			_, err := loadConfig()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "VOICEROOM_ACTIVITY_MAX_REWARD_COINS") {
				t.Fatalf("error %q does not name VOICEROOM_ACTIVITY_MAX_REWARD_COINS", err)
			}
		})
	}
	t.Setenv("VOICEROOM_ACTIVITY_MAX_REWARD_COINS", "5000")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.defineConfig().MaxRewardCoins; got != 5000 {
		t.Fatalf("MaxRewardCoins %d, want 5000", got)
	}
}

// TestActivityCatchupMaxRateVariable: the read backs' rate is reported
// under its variable and reaches the configuration.
func TestActivityCatchupMaxRateVariable(t *testing.T) {
	for _, value := range []string{"-1", "10000001", "fast"} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE", value)
			_, err := loadConfig()
			if err == nil || !strings.Contains(err.Error(), "VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE") {
				t.Fatalf("error %v does not name VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE", err)
			}
		})
	}
	t.Setenv("VOICEROOM_ACTIVITY_CATCHUP_MAX_RATE", "2000")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ActivityCatchupMaxRate != 2000 {
		t.Fatalf("ActivityCatchupMaxRate %d, want 2000", cfg.ActivityCatchupMaxRate)
	}
}

// TestActivitySettleLeaseVariable: the settlement lease is read from its
// variable, and one shorter than two of the loop's rounds (or past an
// hour) is refused naming it.
func TestActivitySettleLeaseVariable(t *testing.T) {
	for _, value := range []string{"1s", "2h", "soon"} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("VOICEROOM_ACTIVITY_SETTLE_LEASE", value)
			_, err := loadConfig()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), "VOICEROOM_ACTIVITY_SETTLE_LEASE") {
				t.Fatalf("error %q does not name VOICEROOM_ACTIVITY_SETTLE_LEASE", err)
			}
		})
	}
	t.Setenv("VOICEROOM_ACTIVITY_SETTLE_LEASE", "3s")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ActivitySettleLease; got != 3*time.Second {
		t.Fatalf("ActivitySettleLease %v, want 3s", got)
	}
}
