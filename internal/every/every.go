// Package every runs a function on a ticker until a context ends: the
// loop the background workers (pingers, sweepers, resamplers) all wrote
// alike.
package every

import (
	"context"
	"time"
)

// Tick calls f every d, the first time d from now, until ctx ends; it
// returns when ctx ends (never while f runs). A tick missed while f runs
// long is dropped, as time.Ticker drops it.
func Tick(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
