package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BatchHandler handles the deliveries one pull brought, together, so a sink
// can coalesce them (many events of one room into one write) and write many
// rooms in one statement. It returns one error per delivery, in the same
// order, sorted like a Handler's; a nil slice acks every delivery. Events
// of one room appear in ds in stream order. ctx is cancelled only when the
// consumer shuts down and the handler outlives ShutdownTimeout.
type BatchHandler func(ctx context.Context, ds []Delivery) []error

// A BatchConsumer gathers a batch while messages keep coming: it hands the
// batch over once no message came for batchGap, batchLinger after its
// first message, or at FetchBatch messages.
const (
	batchGap    = time.Millisecond
	batchLinger = 5 * time.Millisecond
)

// BatchConsumer runs a BatchHandler over a durable pull consumer of
// ROOM_EVENTS. It keeps the guarantees of Consumer (at least once, decode
// failures and permanent errors dead-lettered, retryable ones nakked with
// the same delays, MAX_DELIVERIES advisories dead-lettered), but handles
// one batch at a time: up to FetchBatch messages, gathered while they keep
// coming (see batchGap and batchLinger). The next batch is gathered (and
// its envelopes decoded) while the handler runs, and handed over when it
// returns: batches are handled one after the other, in stream order.
// Concurrency is not used.
type BatchConsumer struct {
	c       *Consumer
	handler BatchHandler
}

// NewBatchConsumer returns a BatchConsumer that runs h over the messages of
// the durable cfg.Durable. log may be nil (discard), m may be nil.
func NewBatchConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h BatchHandler, log *slog.Logger, m *Metrics) (*BatchConsumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil batch handler", ErrInvalidConfig, cfg.Durable)
	}
	// The per-message handler is never called; it only satisfies NewConsumer.
	c, err := NewConsumer(js, cfg, func(context.Context, Delivery) error { return nil }, log, m)
	if err != nil {
		return nil, err
	}
	return &BatchConsumer{c: c, handler: h}, nil
}

// Running is closed once Run has found the durable and started fetching.
func (b *BatchConsumer) Running() <-chan struct{} { return b.c.running }

// Run fetches and handles batches until ctx ends; then it naks what was
// fetched but not handled, lets the batch in flight finish within
// ShutdownTimeout (cancelling its ctx after that), settles it and returns
// nil. It returns an error only if it cannot start (see Consumer.Run). Run
// may be called once.
func (b *BatchConsumer) Run(ctx context.Context) error {
	c := b.c
	rs, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer rs.close()
	cons, stream, advisories, cancelHandlers := rs.cons, rs.stream, rs.advisories, rs.cancelHandlers
	nc := c.js.Conn()

	var wg sync.WaitGroup
	wg.Go(func() { c.watchAdvisories(ctx, stream, advisories) })
	close(c.running)
	c.log.Info("batch consumer running", "fetch_batch", c.cfg.FetchBatch, "ack_wait", c.ackWait, "max_deliver", c.maxDeliver)

	// The batch in flight runs on its own goroutine so that shutdown can
	// bound it; the loop waits for it before fetching on.
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.loop(ctx, cons)
	}()
	<-ctx.Done()
	c.awaitHandlers(done, cancelHandlers)
	wg.Wait()
	c.settling.Wait() // replays whose letter is being removed; each bounded
	if err := nc.FlushTimeout(time.Second); err != nil && !nc.IsClosed() {
		c.log.Warn("flush acks at shutdown", "error", err)
	}
	c.log.Info("batch consumer stopped")
	return nil
}

// loop pulls and handles batches until ctx ends. Pulls run ahead of the
// handler (up to two batches are buffered, and one gathered batch waits
// for the handler), so the next batch is waiting when the handler
// returns. Messages buffered or waiting when ctx ends are nakked.
func (b *BatchConsumer) loop(ctx context.Context, cons jetstream.Consumer) {
	c := b.c
	var (
		it  jetstream.MessagesContext
		err error
	)
	retryWait := 100 * time.Millisecond
	for {
		it, err = cons.Messages(jetstream.PullMaxMessages(2 * c.cfg.FetchBatch))
		if err == nil {
			break
		}
		c.log.Warn("pull failed", "error", err, "retry_in", retryWait)
		t := time.NewTimer(retryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retryWait = min(2*retryWait, fetchRetryMax)
	}
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			it.Drain() // Next hands out what is buffered, then ends
		case <-stopped:
			it.Stop()
		}
	}()
	// One batch waits while the handler runs the previous one.
	batches := make(chan []job, 1)
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		for jobs := range batches {
			if ctx.Err() != nil {
				for _, j := range jobs {
					c.nak(j, 0, nil)
				}
				continue
			}
			b.handle(jobs)
		}
	}()
	defer func() {
		close(batches)
		<-handled
	}()
	for {
		msg, err := it.Next()
		if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
			return
		}
		if err != nil {
			c.log.Warn("pull failed", "error", err)
			continue
		}
		jobs := make([]job, 1, c.cfg.FetchBatch)
		jobs[0] = newJob(msg)
		deadline := time.Now().Add(batchLinger)
		for len(jobs) < c.cfg.FetchBatch {
			wait := min(time.Until(deadline), batchGap)
			if wait <= 0 {
				break
			}
			m, err := it.Next(jetstream.NextMaxWait(wait))
			if err != nil {
				break
			}
			jobs = append(jobs, newJob(m))
		}
		if ctx.Err() != nil {
			for _, j := range jobs {
				c.nak(j, 0, nil)
			}
			continue
		}
		batches <- jobs
	}
}

// handle runs the handler over one batch and settles every message.
func (b *BatchConsumer) handle(jobs []job) {
	c := b.c
	ds := make([]Delivery, 0, len(jobs))
	of := make([]int, 0, len(jobs)) // of[i]: the job of ds[i]
	for i := range jobs {
		if d, ok := c.delivery(&jobs[i]); ok {
			ds = append(ds, d)
			of = append(of, i)
		}
	}
	if len(ds) == 0 {
		return
	}
	stop := b.keepInProgress(jobs, of)
	start := time.Now()
	errs := b.call(ds)
	stop()
	c.metrics.observe(time.Since(start))
	for i, ji := range of {
		var err error
		if errs != nil {
			if len(errs) != len(ds) {
				err = fmt.Errorf("batch handler returned %d results for %d deliveries", len(errs), len(ds))
			} else {
				err = errs[i]
			}
		}
		c.finish(jobs[ji], err)
	}
}

// call runs the handler, turning a panic into a retryable error for every
// delivery.
func (b *BatchConsumer) call(ds []Delivery) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			b.c.log.Error("batch handler panicked", "deliveries", len(ds), "panic", r, "stack", string(debug.Stack()))
			err := fmt.Errorf("handler panic: %v", r)
			errs = make([]error, len(ds))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	return b.handler(b.c.hctx, ds)
}

// keepInProgress tells the server every third of the ack wait that the
// batch's messages are still being worked on.
func (b *BatchConsumer) keepInProgress(jobs []job, of []int) (stop func()) {
	c := b.c
	every := c.ackWaitFor(1) / 3
	if every <= 0 {
		return func() {}
	}
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-c.hctx.Done():
				return
			case <-t.C:
				for _, i := range of {
					_ = jobs[i].msg.InProgress() // a lost one only risks a redelivery
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}
