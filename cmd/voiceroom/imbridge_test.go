package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTencentIMConfig(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"VOICEROOM_TIM_SDKAPPID", "many"},
		{"VOICEROOM_TIM_DOMAIN", "console.tim.qq.com"},
		{"VOICEROOM_TIM_APPS", "/nonexistent/apps.json"},
		{"VOICEROOM_TIM_CALLBACK_MAX_SKEW", "0s"},
		{"VOICEROOM_IMBRIDGE_CALLS_PER_SECOND", "250"},
		{"VOICEROOM_IMBRIDGE_GROUP_MESSAGES_PER_SECOND", "40"},
		{"VOICEROOM_IMBRIDGE_FETCH_BATCH", "0"},
		{"VOICEROOM_IMBRIDGE_MAX_DELIVER", "0"},
	} {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Setenv(tt.name, tt.value)
			if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), tt.name) {
				t.Fatalf("error %v does not name %s", err, tt.name)
			}
		})
	}
	t.Run("secret key without sdkappid", func(t *testing.T) {
		t.Setenv("VOICEROOM_TIM_SECRET_KEY", "k")
		if _, err := loadConfig(); err == nil || !strings.Contains(err.Error(), "VOICEROOM_TIM_SDKAPPID") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("none configured", func(t *testing.T) {
		cfg, err := loadConfig()
		if err != nil || cfg.imApps.Configured() {
			t.Fatalf("err %v, configured %v", err, cfg.imApps.Configured())
		}
		if cfg.IMBridgeMaxDeliver != -1 {
			t.Fatalf("imbridge max deliver %d, want unlimited", cfg.IMBridgeMaxDeliver)
		}
	})
	t.Run("default and apps file", func(t *testing.T) {
		example, err := os.ReadFile(filepath.Join("..", "..", "deploy", "tim-apps.example.json"))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "apps.json")
		if err := os.WriteFile(path, example, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("VOICEROOM_TIM_APPS", path)
		t.Setenv("VOICEROOM_TIM_SDKAPPID", "1400000009")
		t.Setenv("VOICEROOM_TIM_SECRET_KEY", "k")
		cfg, err := loadConfig()
		if err != nil {
			t.Fatal(err)
		}
		demo, err := cfg.imApps.For("demo")
		if err != nil {
			t.Fatal(err)
		}
		other, err := cfg.imApps.For("unlisted")
		if err != nil {
			t.Fatal(err)
		}
		if demo.SDKAppID != 1400000001 || other.SDKAppID != 1400000009 {
			t.Fatalf("demo %v, unlisted %v", demo, other)
		}
	})
}
