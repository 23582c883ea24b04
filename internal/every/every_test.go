package every_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/internal/every"
)

// TestTick: f runs on each tick, not before the first, and Tick returns
// once ctx ends, after which f runs no more.
func TestTick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n atomic.Int32
	ticked := make(chan struct{}, 16)
	done := make(chan struct{})
	go func() {
		every.Tick(ctx, time.Millisecond, func() {
			n.Add(1)
			select {
			case ticked <- struct{}{}:
			default:
			}
		})
		close(done)
	}()
	for range 3 {
		<-ticked
	}
	cancel()
	<-done
	after := n.Load()
	if after < 3 {
		t.Fatalf("%d calls, want at least 3", after)
	}
	time.Sleep(5 * time.Millisecond)
	if got := n.Load(); got != after {
		t.Fatalf("f ran %d more times after Tick returned", got-after)
	}
}

// TestTickNotBeforeTheFirst: with a long period and ctx ended at once, f
// never runs.
func TestTickNotBeforeTheFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	every.Tick(ctx, time.Hour, func() { t.Fatal("f ran before its first tick") })
}
