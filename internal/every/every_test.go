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

// TestNow: f runs at once, even with ctx ended, and then on each tick
// until ctx ends.
func TestNow(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 0
	every.Now(ctx, time.Hour, func() { n++ })
	if n != 1 {
		t.Fatalf("%d calls with ctx ended, want 1 (at once)", n)
	}

	ctx, cancel = context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	go func() {
		every.Now(ctx, time.Millisecond, func() {
			if calls.Add(1) == 3 {
				cancel()
			}
		})
		close(done)
	}()
	<-done
	if got := calls.Load(); got != 3 {
		t.Fatalf("%d calls, want 3 (the third ended ctx)", got)
	}
}

// TestTickOr: a wake calls f at once, long before the first tick.
func TestTickOr(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	wake := make(chan struct{}, 1)
	called := make(chan struct{})
	done := make(chan struct{})
	go func() {
		every.TickOr(ctx, time.Hour, wake, func() { close(called) })
		close(done)
	}()
	wake <- struct{}{}
	<-called
	cancel()
	<-done
}
