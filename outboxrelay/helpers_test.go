package outboxrelay_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

const testApp = "app1"

// newTestMetrics returns outbox metrics registered on reg.
func newTestMetrics(tb testing.TB, reg prometheus.Registerer) *outboxrelay.Metrics {
	tb.Helper()
	m, err := outboxrelay.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// newTestRelay returns a relay with short intervals on db and conn.
func newTestRelay(tb testing.TB, db *sql.DB, pub outboxrelay.Publisher, m *outboxrelay.Metrics, cfg outboxrelay.Config) *outboxrelay.Relay {
	tb.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 50 * time.Millisecond
	}
	r, err := outboxrelay.New(db, pub, testenv.Logger(tb).With("node_id", "test-node"), m, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// runTaking runs fp in the background and waits until it takes groups in
// flight.
func runTaking(tb testing.TB, fp *outboxrelay.FastPath) *running {
	tb.Helper()
	r := runInBackground(tb, fp.Run)
	testenv.Eventually(tb, 5*time.Second, func() error {
		if !fp.Taking() {
			return fmt.Errorf("not taking yet")
		}
		return nil
	})
	return r
}

// runInBackground runs fn(ctx) until the test stops it or ends.
type running struct {
	cancel context.CancelFunc
	done   chan error
}

func runInBackground(tb testing.TB, fn func(context.Context) error) *running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- fn(ctx) }()
	tb.Cleanup(func() { r.stop(tb, 30*time.Second) })
	return r
}

// stop cancels and waits, failing after limit; it returns how long Run took
// to return. Safe to call twice.
func (r *running) stop(tb testing.TB, limit time.Duration) time.Duration {
	tb.Helper()
	start := time.Now()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			tb.Errorf("run: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(limit):
		tb.Fatalf("run did not return within %s of cancel", limit)
	}
	return time.Since(start)
}

// logBuffer collects the JSON logs of a test (testenv.LogBuffer) and picks
// lines from them.
type logBuffer struct{ testenv.LogBuffer }

func (l *logBuffer) logger() *slog.Logger {
	return l.JSONLogger().With("node_id", "test-node")
}

func (l *logBuffer) lines(containing string) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, containing) {
			out = append(out, line)
		}
	}
	return out
}
