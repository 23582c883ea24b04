package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
)

// NewJetStreamServer starts a bare embedded nats-server with JetStream (no
// streams) on a free loopback port, chosen by the server itself so no other
// process can take it first, with a file store in a temporary directory. It
// shuts down when the test ends.
func NewJetStreamServer(tb testing.TB) *bus.Server {
	tb.Helper()
	srv := startServer(tb, "127.0.0.1:-1", tb.TempDir())
	tb.Cleanup(srv.Shutdown)
	return srv
}

// NewJetStream is RunJetStream(tb).Conn(): a connection to a server of the
// test's own with ROOM_EVENTS, ROOM_EVENTS_DLQ and the default consumers.
func NewJetStream(tb testing.TB) *bus.Conn {
	tb.Helper()
	return RunJetStream(tb).Conn()
}

// JetStream is an embedded JetStream server of one test, with one client
// connection, that the test can stop and start again: the connection sees
// a real outage and reconnects, and the stream keeps what it stored.
type JetStream struct {
	tb     testing.TB
	listen string // host:port, fixed after the first start
	dir    string
	srv    *bus.Server
	conn   *bus.Conn
}

// RunJetStream starts the server on a free port (see NewJetStreamServer),
// connects, provisions ROOM_EVENTS, ROOM_EVENTS_DLQ and the default
// consumers, and closes the connection and the server when the test ends.
// Skipped under -short like every test with servers.
func RunJetStream(tb testing.TB) *JetStream {
	tb.Helper()
	if testing.Short() {
		tb.Skip("needs JetStream; skipped with -short")
	}
	j := &JetStream{tb: tb, dir: tb.TempDir()}
	j.srv = startServer(tb, "127.0.0.1:-1", j.dir)
	u, err := url.Parse(j.srv.ClientURL())
	if err != nil {
		tb.Fatalf("embedded jetstream url: %v", err)
	}
	j.listen = u.Host
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j.conn, err = bus.Connect(ctx, bus.ConnConfig{URL: j.URL(), Name: tb.Name()}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("connect to embedded jetstream: %v", err)
	}
	tb.Cleanup(func() {
		j.conn.Close()
		if j.srv != nil {
			j.srv.Shutdown()
		}
	})
	if err := bus.Provision(ctx, j.conn.JetStream(), bus.StreamConfig{}, bus.DefaultConsumers()...); err != nil {
		tb.Fatalf("provision jetstream: %v", err)
	}
	return j
}

// Conn returns the test's connection; it survives Stop and Start.
func (j *JetStream) Conn() *bus.Conn { return j.conn }

// URL returns the client URL, for more connections.
func (j *JetStream) URL() string { return "nats://" + j.listen }

// Server returns the running server; nil after Stop.
func (j *JetStream) Server() *bus.Server { return j.srv }

// Stop shuts the server down and waits until the connection has noticed.
func (j *JetStream) Stop() {
	j.tb.Helper()
	j.srv.Shutdown()
	j.srv = nil
	Eventually(j.tb, 10*time.Second, func() error {
		if j.conn.NATS().IsConnected() {
			return fmt.Errorf("connection still up")
		}
		return nil
	})
}

// Start starts the server again on the same port and store directory and
// waits until the connection is back. The port was the server's own until
// Stop; should another process have taken it since, Start retries until
// it is free again.
func (j *JetStream) Start() {
	j.tb.Helper()
	Eventually(j.tb, 15*time.Second, func() error {
		srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Listen: j.listen, StoreDir: j.dir}, slog.New(slog.DiscardHandler))
		if errors.Is(err, bus.ErrAddrInUse) {
			return err
		}
		if err != nil {
			j.tb.Fatalf("start embedded jetstream on %s: %v", j.listen, err)
		}
		j.srv = srv
		return nil
	})
	Eventually(j.tb, 15*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return j.conn.Ping(ctx)
	})
}

func startServer(tb testing.TB, listen, dir string) *bus.Server {
	tb.Helper()
	srv, err := bus.RunEmbedded(bus.EmbeddedConfig{Listen: listen, StoreDir: dir}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("start embedded jetstream: %v", err)
	}
	return srv
}

// ConnectJetStream opens a plain nats.go connection to url (a server of the
// test's own, or one a process under test runs) and returns its JetStream
// context; the connection is closed when the test ends.
func ConnectJetStream(tb testing.TB, url string) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("jetstream on %s: %v", url, err)
	}
	return js
}

// NewPublisher returns a bus.Publisher on conn with the default
// configuration.
func NewPublisher(tb testing.TB, conn *bus.Conn) *bus.Publisher {
	tb.Helper()
	p, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		tb.Fatalf("new publisher: %v", err)
	}
	return p
}
