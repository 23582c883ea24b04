package redisgate

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
)

// TestProbedOnce: after a Redis error, requests skip Redis; once the
// backoff is over one probe runs, and requests use Redis again only after
// it succeeded. Every failure is counted.
func TestProbedOnce(t *testing.T) {
	testenv.NewRedis(t)
	var pings atomic.Int64
	counted := testenv.RedisClient(t)
	release := make(chan struct{})
	counted.AddHook(pingCounter{&pings, release})
	t.Cleanup(func() { counted.Close() })
	var failures atomic.Int64
	g := New(counted, time.Second, "the test", testenv.Logger(t), func() { failures.Add(1) })
	if !g.Up() {
		t.Fatal("a new gate skips redis")
	}
	g.Failed(errors.New("boom"))
	if g.Up() {
		t.Fatal("redis used right after a failure")
	}
	g.downUntil.Store(time.Now().Add(-time.Millisecond).UnixMilli()) // the backoff is over
	var wg sync.WaitGroup
	var up atomic.Int64
	for range 16 {
		wg.Go(func() {
			if g.Up() {
				up.Add(1)
			}
		})
	}
	wg.Wait()
	if up.Load() != 0 {
		t.Errorf("%d requests used redis before the probe answered", up.Load())
	}
	close(release) // the probe answers
	testenv.Eventually(t, 10*time.Second, func() error {
		if !g.Up() {
			return errors.New("redis still skipped after the probe's time")
		}
		return nil
	})
	if n := pings.Load(); n != 1 {
		t.Errorf("%d probes, want 1", n)
	}
	if n := failures.Load(); n != 1 {
		t.Errorf("%d failures counted, want 1", n)
	}
	var none *Gate
	if none.Up() {
		t.Error("a gate without redis lets requests through")
	}
	none.Failed(errors.New("nothing to fail"))
}

// TestFailedProbeBacksOffAgain: a probe of a stopped Redis counts a
// failure and keeps requests off it for another backoff.
func TestFailedProbeBacksOffAgain(t *testing.T) {
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	var failures atomic.Int64
	g := New(down, 200*time.Millisecond, "the test", testenv.Logger(t), func() { failures.Add(1) })
	g.Failed(errors.New("boom"))
	g.downUntil.Store(time.Now().Add(-time.Millisecond).UnixMilli())
	if g.Up() {
		t.Fatal("redis used before the probe answered")
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if failures.Load() != 2 || g.probing.Load() {
			return errors.New("the probe has not failed yet")
		}
		return nil
	})
	if until := g.downUntil.Load(); until <= time.Now().UnixMilli() {
		t.Errorf("after a failed probe redis may be used again at once (until %d)", until)
	}
}

// pingCounter counts pings; each waits until release is closed (nil:
// at once), so a test can hold the probe's answer.
type pingCounter struct {
	n       *atomic.Int64
	release chan struct{}
}

func (pingCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (p pingCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "ping" {
			p.n.Add(1)
			if p.release != nil {
				select {
				case <-p.release:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		return next(ctx, cmd)
	}
}
func (pingCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
