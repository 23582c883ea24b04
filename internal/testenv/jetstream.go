package testenv

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"voiceroom/bus"
)

// NewJetStreamServer starts an embedded nats-server with JetStream on a
// free loopback port and a file store in a temporary directory, and shuts
// it down when the test ends.
func NewJetStreamServer(tb testing.TB) *bus.Server {
	tb.Helper()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{
		Listen:   "127.0.0.1:-1",
		StoreDir: tb.TempDir(),
	}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("start embedded jetstream: %v", err)
	}
	tb.Cleanup(srv.Shutdown)
	return srv
}

// NewJetStream starts an embedded JetStream server (see
// NewJetStreamServer), connects to it, provisions ROOM_EVENTS,
// ROOM_EVENTS_DLQ and the default consumers, and closes the connection
// and the server when the test ends.
func NewJetStream(tb testing.TB) *bus.Conn {
	tb.Helper()
	srv := NewJetStreamServer(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := bus.Connect(ctx, bus.ConnConfig{URL: srv.ClientURL(), Name: tb.Name()}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("connect to embedded jetstream: %v", err)
	}
	tb.Cleanup(conn.Close) // runs before the server's shutdown
	if err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{}, bus.DefaultConsumers()...); err != nil {
		tb.Fatalf("provision jetstream: %v", err)
	}
	return conn
}
