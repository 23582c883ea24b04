package testenv

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Eventually calls check until it returns nil or timeout passes, then fails the
// test with check's last error. It polls every 10ms growing to 100ms, so a
// condition that comes true is seen quickly without a fixed sleep.
func Eventually(tb testing.TB, timeout time.Duration, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(wait)
		wait = min(wait*2, 100*time.Millisecond)
	}
}

// Logger returns a logger that writes through tb.Log, so a failing test shows
// what the code under test logged.
func Logger(tb testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tbWriter{tb}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tbWriter struct{ tb testing.TB }

func (w tbWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
