package testenv

import (
	"bytes"
	"log/slog"
	"sync"
	"time"
)

// Clock is a clock the test moves by hand, so that expiry is a decision of
// the test, never a wait. Pass its Now where a component takes a
// func() time.Time. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at start; the zero time means a fixed instant
// in 2027 (Unix milliseconds 1.8e12).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = time.UnixMilli(1_800_000_000_000)
	}
	return &Clock{t: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// LogBuffer collects what a logger or a process writes, safe to read while
// it is written to.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// JSONLogger returns a logger that writes JSON lines at debug level to l.
func (l *LogBuffer) JSONLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
