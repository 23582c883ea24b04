package main

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTokenSignsWithServesKeyOrRefuses: token reads the key serve uses and
// never makes one of its own, which serve would refuse with 401.
func TestTokenSignsWithServesKeyOrRefuses(t *testing.T) {
	dir := t.TempDir()
	cfg := config{DataDir: filepath.Join(dir, "data")}

	_, err := cfg.existingJWTSecret()
	var ce *configError
	if !errors.As(err, &ce) || ce.Var != "VOICEROOM_JWT_SECRET" {
		t.Fatalf("no key yet: %v, want a VOICEROOM_JWT_SECRET error", err)
	}
	if want := filepath.Join(dir, "data", "jwt-secret"); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "voiceroom serve") {
		t.Errorf("error %q does not name %s and serve", err, want)
	}
	if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
		t.Errorf("token created %s: %v", cfg.DataDir, err)
	}

	served, err := cfg.jwtSecret(slog.New(slog.DiscardHandler)) // what serve does at start
	if err != nil {
		t.Fatal(err)
	}
	got, err := cfg.existingJWTSecret()
	if err != nil || !bytes.Equal(got, served) {
		t.Fatalf("token key %q (%v), want serve's %q", got, err, served)
	}

	cfg.JWTSecret = "an-operator-set-secret-0123"
	if got, err := cfg.existingJWTSecret(); err != nil || string(got) != cfg.JWTSecret {
		t.Fatalf("with VOICEROOM_JWT_SECRET: %q, %v", got, err)
	}
}

// TestTokenCommandFromAnotherDirectory runs the binary where no key is
// (no app key, no stored key it can open, no single secret): exit code 2,
// a message that says what to do, no file written.
func TestTokenCommandFromAnotherDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "token", "--app", "demo", "--user", "1001")
	cmd.Dir = dir
	for _, kv := range os.Environ() { // the defaults: ./data, no secret
		if !strings.HasPrefix(kv, "VOICEROOM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want code 2; stderr %s", err, stderr.String())
	}
	if msg := stderr.String(); stdout.Len() != 0 || !strings.Contains(msg, "voiceroom apps create demo") || !strings.Contains(msg, "VOICEROOM_APP_KEYS") {
		t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("token wrote %v into its working directory (%v)", entries, err)
	}
}
