package roomcluster

import (
	"context"
	"sync/atomic"
	"time"

	"voiceroom/internal/every"
)

// clockResample is how often a node's clock reads bootClock again.
const clockResample = 5 * time.Millisecond

// nodeClock is bootClock read cheaply: a sample of it plus Go's monotonic
// time since the sample (a vDSO read, where bootClock is a system call),
// resampled every clockResample while run runs. The two clocks differ only
// while the machine is suspended, which the monotonic clock does not
// count: after a resume the node's clock catches up within clockResample
// (plus scheduling), far inside a lease's margin. Routing asks the clock
// several times per command, so this keeps a system call off each.
type nodeClock struct {
	at atomic.Pointer[clockSample]
}

type clockSample struct {
	boot time.Duration // bootClock
	mono time.Time     // time.Now (with its monotonic reading) at the same moment
}

func newNodeClock() *nodeClock {
	c := &nodeClock{}
	c.sample()
	return c
}

func (c *nodeClock) sample() { c.at.Store(&clockSample{boot: bootClock(), mono: time.Now()}) }

// now is bootClock as of the last sample plus the monotonic time since.
func (c *nodeClock) now() time.Duration {
	s := c.at.Load()
	return s.boot + time.Since(s.mono)
}

// run resamples every clockResample until ctx ends.
func (c *nodeClock) run(ctx context.Context) { every.Tick(ctx, clockResample, c.sample) }
