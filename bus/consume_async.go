package bus

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// AsyncHandler takes one delivery and must return at once; it settles the
// message later by calling done exactly once (later calls are ignored):
// nil acks, an error is sorted like a Handler's. Until done is called the
// message holds one of the FetchBatch slots and the consumer keeps telling
// the server it is in progress. Deliveries of one room are handed over one
// at a time in stream order, so a handler that queues them per room keeps
// room order while many of them wait together: that is what lets a sink
// batch events (imbridge under Tencent's rate limits).
//
// ctx is the handlers' context: cancelled only when the consumer shuts down
// and done calls are outstanding after ShutdownTimeout.
type AsyncHandler func(ctx context.Context, d Delivery, done func(error))

// NewAsyncConsumer is NewConsumer for an AsyncHandler. At shutdown Run
// naks what was fetched and not handed over, then waits (ShutdownTimeout)
// for the done calls of what was; a retryable error reported after Run's
// ctx ended is nakked without delay, as it was cut short by shutdown.
func NewAsyncConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h AsyncHandler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil handler", ErrInvalidConfig, cfg.Durable)
	}
	c, err := NewConsumer(js, cfg, func(context.Context, Delivery) error { return nil }, log, m)
	if err != nil {
		return nil, err
	}
	c.async = h
	return c, nil
}

// processAsync hands one message to the async handler; release frees its
// slot once the message is settled.
func (c *Consumer) processAsync(j job, release func()) {
	d, ok := c.delivery(&j)
	if !ok {
		release()
		return
	}
	stop := c.keepInProgress(j)
	start := time.Now()
	c.pending.Add(1)
	var once sync.Once
	done := func(err error) {
		once.Do(func() {
			stop()
			c.metrics.observe(time.Since(start))
			if err != nil && c.stopping.Load() && !c.cfg.Classify(err) {
				c.nak(j, 0, err)
			} else {
				c.finish(j, err)
			}
			release()
			c.pending.Done()
		})
	}
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "subject", d.Subject, "stream_seq", d.StreamSeq,
				"event_id", d.Envelope.EventID, "panic", r, "stack", string(debug.Stack()))
			done(fmt.Errorf("handler panic: %v", r))
		}
	}()
	c.async(c.hctx, d, done)
}
