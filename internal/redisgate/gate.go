// Package redisgate keeps the readers of a Redis cache off it while it
// fails. After a failed call, Redis is left alone for Backoff; then the
// first request to find the backoff over starts one probe (a PING in the
// background, bounded by the gate's timeout), and it and every other
// request go on without Redis until the probe succeeds. So a stopped
// Redis costs one failed round trip per Backoff, not one per request, and
// a dead Redis (a dial that hangs or is retried) never holds a request up.
package redisgate

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Backoff is how long a gate leaves Redis alone after a failure.
const Backoff = time.Second

// Gate says whether a request may use Redis. A nil *Gate (no Redis) never
// lets one through.
type Gate struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	what    string
	onError func()
	log     *slog.Logger

	downUntil atomic.Int64 // unix ms: 0 while Redis is up; after a failure, when it may be probed
	probing   atomic.Bool  // a probe is in flight
}

// New returns a gate over rdb, nil when rdb is nil. timeout bounds a
// probe; what names what is read ("the list"), for the log; onError
// (may be nil) counts each failed call and probe.
func New(rdb redis.UniversalClient, timeout time.Duration, what string, log *slog.Logger, onError func()) *Gate {
	if rdb == nil {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if onError == nil {
		onError = func() {}
	}
	return &Gate{rdb: rdb, timeout: timeout, what: what, onError: onError, log: log}
}

// Up reports whether a request may use Redis: not after a failure until
// a probe succeeded (see the package comment).
func (g *Gate) Up() bool {
	if g == nil {
		return false
	}
	until := g.downUntil.Load()
	if until == 0 {
		return true
	}
	if time.Now().UnixMilli() >= until && g.probing.CompareAndSwap(false, true) {
		go g.probe()
	}
	return false
}

// probe pings Redis: success lets requests use it again, failure starts
// another backoff.
func (g *Gate) probe() {
	defer g.probing.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	if c, ok := g.rdb.(*redis.ClusterClient); ok {
		// The failure may be a master that is gone: learn who serves its
		// slots now (a PING reaches any node, and proves nothing of them).
		c.ReloadState(ctx)
	}
	if err := g.rdb.Ping(ctx).Err(); err != nil {
		g.onError()
		g.downUntil.Store(time.Now().Add(Backoff).UnixMilli())
		return
	}
	g.downUntil.Store(0)
	g.log.Info("redis answers again; reading " + g.what + " from it")
}

// Failed notes a failed Redis call: requests leave Redis alone for
// Backoff, then probe it.
func (g *Gate) Failed(err error) {
	if g == nil {
		return
	}
	g.onError()
	if g.downUntil.Swap(time.Now().Add(Backoff).UnixMilli()) == 0 {
		g.log.Warn("redis read failed; reading "+g.what+" from MySQL", "retry_in", Backoff, "error", err)
	}
}
