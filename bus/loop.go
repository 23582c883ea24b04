package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
)

// Timings of the consume loop that nobody needs to tune.
const (
	fetchHeartbeat    = time.Second     // a pull request ends after two missed (the server went away)
	fetchRetryMax     = 5 * time.Second // cap of the wait after a failed fetch
	dlqPublishTimeout = 5 * time.Second // bound of one dead-letter publish
	ackSyncTimeout    = 5 * time.Second // bound of a confirmed ack
	maxShutdownGrace  = time.Second     // wait after cancelling stuck handlers

	// shutdownNakDelay is the redelivery delay of what shutdown hands
	// back. nats.go ends a cancelled fetch by closing its channel first
	// and unsubscribing after, so an immediate nak can reach the server
	// before the unsubscribe: the server then redelivers the message to
	// this instance's dead pull request, and it comes back only after
	// the ack wait. By this delay the unsubscribe has long arrived and
	// the message goes to a live instance's pull.
	shutdownNakDelay = time.Second
)

// A batch is handed to its handler once no message came for turnGap,
// turnLinger after its first message, or at FetchBatch messages.
const (
	turnGap    = time.Millisecond
	turnLinger = 5 * time.Millisecond
)

// Run fetches and handles messages until ctx ends. Then it stops fetching
// at once, naks messages fetched but not handed to the handler, lets the
// handler calls in flight finish within ShutdownTimeout (cancelling their
// ctx after that; for an AsyncHandler, until every done is called),
// settles their messages and returns nil. It returns an error only if it
// cannot start: the durable, ROOM_EVENTS or ROOM_EVENTS_DLQ is missing,
// or the advisory subscription fails. Run may be called once.
//
// The loop: one goroutine fetches as many messages as there are free
// slots (inFlight in all) and queues each on the worker of its room
// (Concurrency workers). A worker cuts turns (one delivery, or a batch)
// from its queue and calls the handler for one turn at a time, in stream
// order; while the handler runs, the next turn's messages are fetched,
// decoded and queued. A message frees its slot when it is settled.
func (c *Consumer) Run(ctx context.Context) error {
	cons, advisories, err := c.start(ctx)
	if err != nil {
		return err
	}
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	c.runCtx, c.hctx = ctx, hctx
	c.slots = make(chan struct{}, c.inFlight)

	var workers, watch, beating sync.WaitGroup
	beating.Go(func() { c.beats.run(hctx, c.beatTick()) })
	queues := make([]chan *job, c.cfg.Concurrency)
	for i := range queues {
		q := make(chan *job, c.inFlight) // never blocks: it holds what the slots allow
		queues[i] = q
		workers.Go(func() { c.work(q) })
	}
	watch.Go(func() { advisories.watch(ctx) })
	close(c.running)
	c.log.Info("consumer running", "concurrency", c.cfg.Concurrency, "fetch_batch", c.cfg.FetchBatch,
		"max_turn", c.maxTurn, "ack_wait", c.ackWait, "max_deliver", c.maxDeliver)

	c.fetchLoop(ctx, cons, queues)

	for _, q := range queues {
		close(q)
	}
	done := make(chan struct{})
	go func() {
		workers.Wait()    // queued messages nakked, turns in flight returned
		c.turns.Wait()    // every delivery handed over settled (AsyncHandler's done)
		c.settling.Wait() // bounded: each removal has its own timeout
		close(done)
	}()
	c.awaitHandlers(done, cancelHandlers)
	cancelHandlers() // every turn is over or abandoned: no more heartbeats
	beating.Wait()
	watch.Wait()
	advisories.close()
	// Acks and naks are fire-and-forget; make sure they left.
	nc := c.js.Conn()
	if err := nc.FlushTimeout(time.Second); err != nil && !nc.IsClosed() {
		c.log.Warn("flush acks at shutdown", "error", err)
	}
	c.log.Info("consumer stopped")
	return nil
}

// start begins Run: it may happen once. It opens the durable and its
// streams and subscribes to the durable's MAX_DELIVERIES advisories.
func (c *Consumer) start(ctx context.Context) (jetstream.Consumer, *advisories, error) {
	if !c.started.CompareAndSwap(false, true) {
		return nil, nil, ErrAlreadyRunning
	}
	cons, stream, err := c.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	adv, err := c.subscribeAdvisories(stream)
	if err != nil {
		return nil, nil, err
	}
	return cons, adv, nil
}

// open finds the durable, ROOM_EVENTS, ROOM_EVENTS_DLQ and the durable's
// last-delivery marks, and takes the durable's settings.
func (c *Consumer) open(ctx context.Context) (jetstream.Consumer, jetstream.Stream, error) {
	durable := c.cfg.Durable
	cons, err := c.js.Consumer(ctx, StreamName, durable)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s on %s: %w", durable, StreamName, err)
	}
	stream, err := c.js.Stream(ctx, StreamName)
	if err != nil {
		return nil, nil, fmt.Errorf("consumer %s: stream %s: %w", durable, StreamName, err)
	}
	if c.dlq, err = c.js.Stream(ctx, DLQStreamName); err != nil {
		return nil, nil, fmt.Errorf("consumer %s: dead-letter stream %s: %w", durable, DLQStreamName, err)
	}
	if c.marks, err = openMarks(ctx, c.js, durable); err != nil {
		return nil, nil, fmt.Errorf("consumer %s: %w", durable, err)
	}
	c.adopt(cons.CachedInfo().Config)
	c.stream = stream
	// What was delivered before this consumer started is an earlier
	// instance's: never read back.
	c.ledger = ledger{floor: cons.CachedInfo().Delivered.Stream, seqs: map[uint64]entry{}}
	return cons, stream, nil
}

// adopt takes the durable's server-side settings as defaults.
func (c *Consumer) adopt(server jetstream.ConsumerConfig) {
	c.ackWait = server.AckWait
	c.backOff = server.BackOff
	c.serverMaxDeliver = server.MaxDeliver
	c.maxDeliver = c.cfg.MaxDeliver
	if c.maxDeliver == 0 {
		c.maxDeliver = server.MaxDeliver // -1 or 0 on the server: unlimited
	} else if server.MaxDeliver > 0 && c.maxDeliver != server.MaxDeliver {
		c.log.Warn("max deliver differs from the consumer's", "max_deliver", c.maxDeliver, "server_max_deliver", server.MaxDeliver)
	}
	if server.MaxAckPending > 0 && c.inFlight > server.MaxAckPending {
		// The server never has more out; slots past it would only cost
		// queue memory. A turn cannot be larger either.
		c.inFlight = server.MaxAckPending
		c.maxTurn = min(c.maxTurn, c.inFlight)
	}
	c.nakDelays = c.cfg.NakDelays
	if len(c.nakDelays) == 0 {
		c.nakDelays = server.BackOff
	}
	if len(c.nakDelays) == 0 {
		c.nakDelays = []time.Duration{time.Second}
	}
}

// fetchLoop pulls as many messages as there are free slots and queues
// them on their workers, until ctx ends.
func (c *Consumer) fetchLoop(ctx context.Context, cons jetstream.Consumer, queues []chan *job) {
	retryWait := 100 * time.Millisecond
	defer c.giveUpResume(queues)
	for {
		if c.resume.pending {
			// Before anything newer: settle what broken pulls lost.
			if err := c.resumeAfterBreak(ctx, cons, queues); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.log.Warn("resume after a broken pull failed", "error", err, "retry_in", retryWait)
				if !c.wait(ctx, retryWait) {
					return
				}
				retryWait = min(2*retryWait, fetchRetryMax)
				continue
			}
		} else {
			c.pruneLedger(ctx, cons)
		}
		n, ok := c.acquire(ctx)
		if !ok {
			return
		}
	fill:
		for n < c.inFlight {
			select {
			case c.slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		got, err := c.fetch(ctx, cons, n, queues)
		for range n - got {
			c.free()
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			retryWait = 100 * time.Millisecond
			continue
		}
		c.log.Warn("fetch failed", "error", err, "retry_in", retryWait)
		if !c.wait(ctx, retryWait) {
			return
		}
		retryWait = min(2*retryWait, fetchRetryMax)
	}
}

// wait waits for d; false if ctx ended first.
func (c *Consumer) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// acquire takes the slots of the next pull: one, or for a batch handler
// a whole batch's worth, which the worker's previous batch frees at once
// (pulling for the first few slots freed would cut the next batch short).
// It gives them back and returns false if ctx ends first.
func (c *Consumer) acquire(ctx context.Context) (int, bool) {
	n := 0
	for n < c.maxTurn || n == 0 {
		select {
		case c.slots <- struct{}{}:
			n++
		case <-ctx.Done():
			for range n {
				c.free()
			}
			return 0, false
		}
	}
	return n, true
}

// fetch runs one pull request for up to n messages and queues each as it
// arrives. It returns how many it queued.
//
// The request ends on the server's word (a full batch, or its expiry, a
// 408 status), on a missed heartbeat (the server went away), or when ctx
// ends (shutdown), and never on a deadline of the client's own. A
// request that reaches the server late (a busy machine) expires there
// later than the client would expect, and a client that stopped reading
// at its own deadline would drop the messages still on the way: the
// server counts them delivered and hands them out again only after the
// ack wait, after later events of their rooms
// (TestFetchOutlivesALatePullRequest).
//
// A pull that breaks (the connection was made again while it ran, or
// it failed) may have lost messages on the way: fetch then holds back
// what it receives after the reconnect, keeps the slots of what it did
// not get, and leaves the rest to the resume before the next pull (see
// resume.go).
func (c *Consumer) fetch(ctx context.Context, cons jetstream.Consumer, n int, queues []chan *job) (int, error) {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reconnects := c.reconnects()
	batch, err := cons.Fetch(n, jetstream.FetchContext(cancelOnly{pctx}), jetstream.FetchHeartbeat(fetchHeartbeat))
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	received, kept := 0, 0
	broken := false
	var back []*job
	for msg := range batch.Messages() {
		received++
		if !broken && c.reconnects() != reconnects {
			broken = true // what comes now may overtake what the old connection lost
			cancel()
		}
		j := newJob(msg)
		if j.meta != nil && c.ledger.receive(j) {
			continue // settled again without handling
		}
		kept++
		if broken {
			back = append(back, j)
			continue
		}
		c.noteQueued(j, 1)
		queues[j.shard(len(queues))] <- j
	}
	err = batch.Error()
	if err != nil && errorsIsContext(err) {
		err = nil
	}
	if ctx.Err() != nil {
		for _, j := range back { // shutdown: nakked by admit
			c.noteQueued(j, 1)
			queues[j.shard(len(queues))] <- j
		}
		return kept, err
	}
	if broken || err != nil || c.reconnects() != reconnects {
		c.broke(n-received, back)
		kept += n - received
	}
	if err != nil {
		return kept, fmt.Errorf("fetch: %w", err)
	}
	return kept, nil
}

// cancelOnly is a context without its deadline: a fetch with it lives
// until the server ends it (nats.go's default expiry, 30 s) or ctx is
// cancelled.
type cancelOnly struct{ context.Context }

func (cancelOnly) Deadline() (time.Time, bool) { return time.Time{}, false }

// noteQueued counts j in (n 1) or out of (n -1) the messages fetched and
// not yet handed over.
func (c *Consumer) noteQueued(j *job, n int) {
	if j.meta == nil {
		return
	}
	seq := j.meta.Sequence.Stream
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.queued == nil {
		c.queued = map[uint64]int{}
	}
	if c.queued[seq] += n; c.queued[seq] <= 0 {
		delete(c.queued, seq)
	}
}

// OldestQueued returns the lowest stream sequence fetched and not yet
// handed to the handler (or settled instead); ok is false when none
// waits. Workers hand messages over in stream order within a room, not
// across rooms: a handler that has been handed sequence s may still be
// handed a lower one of another room, and this says which is the lowest.
func (c *Consumer) OldestQueued() (seq uint64, ok bool) {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	for s := range c.queued {
		if !ok || s < seq {
			seq, ok = s, true
		}
	}
	return seq, ok
}

// free gives back the slot of a message that is settled (or was never
// fetched).
func (c *Consumer) free() { <-c.slots }

// shard is the worker of n that j goes to: its room's (FNV-1a of the
// RoomKey), or its subject's when the envelope does not decode.
func (j *job) shard(n int) int {
	if j.decodeErr != nil {
		return int(voiceroom.Hash(j.subject) % uint32(n))
	}
	return int(voiceroom.RoomKey{AppCode: j.env.AppCode, RoomID: j.env.RoomID}.Hash() % uint32(n))
}

// work runs one worker until its queue is closed and drained: it cuts a
// turn from its queue and runs the handler over it, one turn after the
// other. While the handler runs, the fetcher goes on fetching, decoding
// and queueing, so that the next turn waits in the queue when it returns.
func (c *Consumer) work(q <-chan *job) {
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	for {
		jobs := gather(q, c.maxTurn, wait)
		if len(jobs) == 0 {
			return
		}
		c.take(jobs)
	}
}

// gather cuts the next turn of up to max jobs from q: it waits for one,
// takes what is queued, and waits for more while they keep coming: until
// no job came for turnGap, turnLinger after the first, or max jobs. It
// returns nil once q is closed and drained. wait is the caller's stopped
// timer.
func gather(q <-chan *job, max int, wait *time.Timer) []*job {
	j, ok := <-q
	if !ok {
		return nil
	}
	if max == 1 {
		return []*job{j}
	}
	jobs := make([]*job, 1, max)
	jobs[0] = j
	deadline := time.Now().Add(turnLinger)
	for len(jobs) < max {
		select {
		case j, ok := <-q: // what is queued goes without waiting
			if !ok {
				return jobs
			}
			jobs = append(jobs, j)
			continue
		default:
		}
		gap := min(time.Until(deadline), turnGap)
		if gap <= 0 {
			return jobs
		}
		wait.Reset(gap)
		select {
		case j, ok := <-q:
			wait.Stop()
			if !ok {
				return jobs
			}
			jobs = append(jobs, j)
		case <-wait.C:
			return jobs
		}
	}
	return jobs
}

// take admits a turn's jobs and runs the handler over those admitted.
func (c *Consumer) take(jobs []*job) {
	defer func() {
		for _, j := range jobs {
			c.noteQueued(j, -1)
		}
	}()
	admitted := jobs[:0]
	ds := make([]Delivery, 0, len(jobs))
	for _, j := range jobs {
		if d, ok := c.admit(j); ok {
			admitted = append(admitted, j)
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return
	}
	start := time.Now()
	t := newTurn(admitted, ds, func(j *job, err error) {
		c.metrics.observe(time.Since(start))
		c.settle(j, err)
		c.free()
	})
	c.turns.Add(1)
	t.whenDone(c.turns.Done)
	c.handle(c.hctx, t)
}

// admit readies a fetched message for the handler: ok is false when it
// was settled instead (no metadata, shutting down, another sink's replay,
// undecodable). A message on one of its last deliveries is marked first
// (see marked).
func (c *Consumer) admit(j *job) (d Delivery, ok bool) {
	switch {
	case j.meta == nil:
		// Not a JetStream delivery we can reason about; let it come again.
		c.log.Error("message without jetstream metadata", "subject", j.msg.Subject())
		c.nak(j, 0, errors.New("no jetstream metadata"))
		c.free()
		return d, false
	case c.stopping():
		c.nak(j, shutdownNakDelay, nil)
		c.free()
		return d, false
	case j.replayFor != "" && j.replayFor != c.cfg.Durable:
		// Another sink's replay: the durable reads the whole stream (see
		// ConsumerConfig.consumer), and this sink never handles it. A lost
		// ack only brings it back here, to be skipped again.
		_ = c.ledger.settle(j, entryAcked, jetstream.Msg.Ack)
		c.metrics.otherReplay()
		c.free()
		return d, false
	}
	if marked(j.meta.NumDelivered, c.serverMaxDeliver) {
		// If this process dies now, the server may give up on the
		// message while nobody hears its advisory; the gap check finds
		// the mark. A failed mark leaves only the advisory path.
		if err := c.marks.put(context.Background(), j.meta.Sequence.Stream, j.meta.NumDelivered); err != nil {
			c.logFor(j, slog.LevelWarn, "last-delivery mark failed", err)
		} else {
			j.marked = true
		}
	}
	if j.decodeErr != nil {
		c.settle(j, &undecodableError{j.decodeErr})
		c.free()
		return d, false
	}
	return Delivery{
		Envelope:     j.env,
		Subject:      j.subject,
		StreamSeq:    j.meta.Sequence.Stream,
		NumDelivered: j.meta.NumDelivered,
		Consumer:     c.cfg.Durable,
		ReplayOf:     j.replayOf,
	}, true
}

// stopping reports whether Run's ctx ended: what was fetched and not yet
// handed over is nakked, to come again at once.
func (c *Consumer) stopping() bool { return c.runCtx.Err() != nil }

// awaitHandlers waits, after Run's ctx ended, until done closes: at most
// ShutdownTimeout, then it cancels the handlers' ctx and waits a short
// grace more before abandoning them (their messages are redelivered after
// the ack wait).
func (c *Consumer) awaitHandlers(done <-chan struct{}, cancelHandlers context.CancelFunc) {
	timer := time.NewTimer(c.cfg.ShutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	c.log.Warn("handlers still running at shutdown timeout, cancelling them", "shutdown_timeout", c.cfg.ShutdownTimeout)
	cancelHandlers()
	grace := time.NewTimer(min(maxShutdownGrace, c.cfg.ShutdownTimeout))
	defer grace.Stop()
	select {
	case <-done:
	case <-grace.C:
		c.log.Error("abandoning handlers that ignore their context; their messages are redelivered after ack wait")
	}
}
