package bus_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

func TestRunEmbeddedAddrInUse(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	const readyTimeout = 20 * time.Second
	start := time.Now()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{
		Listen:       taken.Addr().String(),
		StoreDir:     t.TempDir(),
		ReadyTimeout: readyTimeout,
	}, testenv.Logger(t))
	if err == nil {
		srv.Shutdown()
		t.Fatal("started on a taken port")
	}
	if !errors.Is(err, bus.ErrAddrInUse) {
		t.Fatalf("err %v, want ErrAddrInUse", err)
	}
	// The point is failing instead of waiting for readiness.
	if took := time.Since(start); took > readyTimeout/2 {
		t.Fatalf("took %s to report a taken port", took)
	}
}

func TestRunEmbeddedStoreFailureIsFast(t *testing.T) {
	// A store dir that is a file: JetStream cannot start, which nats-server
	// only logs; RunEmbedded must report it instead of waiting.
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	const readyTimeout = 20 * time.Second
	start := time.Now()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Listen: "127.0.0.1:-1", StoreDir: file, ReadyTimeout: readyTimeout}, testenv.Logger(t))
	if err == nil {
		srv.Shutdown()
		t.Fatal("started with a file as store dir")
	}
	if errors.Is(err, bus.ErrAddrInUse) {
		t.Fatalf("err %v wraps ErrAddrInUse", err)
	}
	if took := time.Since(start); took > readyTimeout/2 {
		t.Fatalf("took %s to report a broken store", took)
	}
}

func TestRunEmbeddedServesJetStream(t *testing.T) {
	srv := testenv.NewJetStreamServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: srv.ClientURL(), Name: "test"}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}

	srv.Shutdown()
	testenv.Eventually(t, 5*time.Second, func() error {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if conn.Ping(pctx) == nil {
			return errors.New("ping still succeeds after server shutdown")
		}
		return nil
	})
}

func TestEmbeddedConfigValidate(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		cfg  bus.EmbeddedConfig
		ok   bool
	}{
		{"defaults", bus.EmbeddedConfig{StoreDir: dir}, true},
		{"random port", bus.EmbeddedConfig{Listen: "127.0.0.1:-1", StoreDir: dir}, true},
		{"zero port", bus.EmbeddedConfig{Listen: "127.0.0.1:0", StoreDir: dir}, true},
		{"ipv6 loopback", bus.EmbeddedConfig{Listen: "[::1]:4222", StoreDir: dir}, true},
		{"localhost", bus.EmbeddedConfig{Listen: "localhost:4222", StoreDir: dir}, true},
		{"no store dir", bus.EmbeddedConfig{Listen: "127.0.0.1:4222"}, false},
		{"all interfaces", bus.EmbeddedConfig{Listen: "0.0.0.0:4222", StoreDir: dir}, false},
		{"empty host", bus.EmbeddedConfig{Listen: ":4222", StoreDir: dir}, false},
		{"no port", bus.EmbeddedConfig{Listen: "127.0.0.1", StoreDir: dir}, false},
		{"port too big", bus.EmbeddedConfig{Listen: "127.0.0.1:70000", StoreDir: dir}, false},
		{"negative ready timeout", bus.EmbeddedConfig{StoreDir: dir, ReadyTimeout: -time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok && err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if !tt.ok && !errors.Is(err, bus.ErrInvalidConfig) {
				t.Fatalf("err %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestConnectGivesUp(t *testing.T) {
	addr := testenv.ClosedAddr(t)
	url := "nats://user:secret@" + addr

	_, err := bus.Connect(context.Background(), bus.ConnConfig{URL: url, ConnectTimeout: 300 * time.Millisecond}, testenv.Logger(t))
	if err == nil {
		t.Fatal("connected to nothing")
	}
	if msg := err.Error(); !strings.Contains(msg, addr) || strings.Contains(msg, "secret") {
		t.Fatalf("error should name the address without the password: %q", msg)
	}
}

func TestConnConfigValidate(t *testing.T) {
	for name, cfg := range map[string]bus.ConnConfig{
		"no url":                {},
		"cert without key":      {URL: "nats://127.0.0.1:4222", TLSCertFile: "c.pem"},
		"password without user": {URL: "nats://127.0.0.1:4222", Password: "x"},
	} {
		if err := cfg.Validate(); !errors.Is(err, bus.ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", name, err)
		}
	}
}
