// Package every runs a function on a ticker until a context ends: the
// loop the background workers (pingers, sweepers, resamplers) all wrote
// alike.
package every

import (
	"context"
	"time"
)

// Tick calls f every d, the first time d from now, until ctx ends; it
// returns when ctx ends (never while f runs), and f is not called once
// ctx has ended. A tick missed while f runs long is dropped, as
// time.Ticker drops it.
func Tick(ctx context.Context, d time.Duration, f func()) { TickOr(ctx, d, nil, f) }

// TickOr is Tick that also calls f at once each time wake delivers (a
// nil wake never does): a refresh that runs on a period and when kicked.
func TickOr(ctx context.Context, d time.Duration, wake <-chan struct{}, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		if ctx.Err() != nil { // both were ready: select picked either
			return
		}
		f()
	}
}

// Now calls f at once and then as Tick does, every d from its return,
// until ctx ends. The first call is made even if ctx has ended already:
// f sees ctx and gives up at once.
func Now(ctx context.Context, d time.Duration, f func()) {
	f()
	Tick(ctx, d, f)
}
