package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
	"voiceroom/apperr"
)

// Delivery is one message handed to a handler.
type Delivery struct {
	// Envelope is the decoded, validated event.
	Envelope Envelope
	// Subject is the event's subject,
	// room.events.<app_code>.<room_id>.<event_type>, also for a replay
	// (which is stored on a replay subject).
	Subject string
	// StreamSeq is the message's sequence in ROOM_EVENTS (for a replay,
	// the replayed copy's).
	StreamSeq uint64
	// NumDelivered counts deliveries to this consumer, 1 the first time.
	NumDelivered uint64
	// Consumer is the durable consumer's name.
	Consumer string
	// ReplayOf is, for a dead letter an operator replayed, the letter's
	// sequence in ROOM_EVENTS_DLQ; 0 for an ordinary delivery. Handlers
	// need not look at it: a replay carries the original envelope and
	// event_id, and de-duplication applies as usual.
	ReplayOf uint64
}

// Handler handles one delivery. nil acks the message; an error is sorted
// by the consumer's Classify into retryable (nak with delay) or permanent
// (dead-letter, then term). ctx is cancelled only when the consumer shuts
// down and the handler outlives ShutdownTimeout.
type Handler func(ctx context.Context, d Delivery) error

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: the message is dead-lettered and
// terminated instead of redelivered. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent. It is the default Classify.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// ConsumerRunConfig configures a Consumer. Zero fields take their defaults
// (see WithDefaults); NakDelays and MaxDeliver default to the durable
// consumer's own settings, read from the server when Run starts.
type ConsumerRunConfig struct {
	// Durable names an existing durable consumer on ROOM_EVENTS (see
	// Provision). Required.
	Durable string
	// Concurrency is the number of handler goroutines. Events of one room
	// always go to the same goroutine, in stream order. Default 4.
	Concurrency int
	// FetchBatch bounds the messages fetched and not yet finished (queued
	// or in a handler). Default 64.
	FetchBatch int
	// NakDelays is the redelivery delay after a retryable error, by
	// delivery attempt: NakDelays[n-1] after delivery n, the last value
	// repeating. Default: the consumer's BackOff, else 1s.
	NakDelays []time.Duration
	// MaxDeliver is the delivery at which a retryable error dead-letters
	// the message instead of nakking it. It should equal the consumer's
	// MaxDeliver (the default); a larger value leaves the last word to the
	// server, whose MAX_DELIVERIES advisory then dead-letters the message.
	// A negative value never dead-letters retryable errors.
	MaxDeliver int
	// ShutdownTimeout bounds how long Run waits, after its ctx ends, for
	// handlers in flight; then their ctx is cancelled. Default 10s.
	ShutdownTimeout time.Duration
	// Classify sorts handler errors: true means permanent. Default
	// IsPermanent.
	Classify func(err error) (permanent bool)
	// AckSync waits for the server to confirm each ack (DoubleAck). Off by
	// default: a lost ack only means a redelivery, which handlers must
	// tolerate anyway, and a confirmed ack costs a round trip per message.
	AckSync bool
}

// WithDefaults returns c with zero fields set to their defaults, except
// those read from the server at Run.
func (c ConsumerRunConfig) WithDefaults() ConsumerRunConfig {
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.FetchBatch == 0 {
		c.FetchBatch = 64
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.Classify == nil {
		c.Classify = IsPermanent
	}
	return c
}

// Validate checks c after defaults are applied. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c ConsumerRunConfig) Validate() error {
	c = c.WithDefaults()
	if err := checkToken("durable", c.Durable); err != nil {
		return apperr.BadConfig("Durable", "%w: consumer: %w", ErrInvalidConfig, err)
	}
	if c.Concurrency < 1 || c.Concurrency > MaxConcurrency {
		return apperr.BadConfig("Concurrency", "%w: consumer %s: concurrency %d: want 1..%d", ErrInvalidConfig, c.Durable, c.Concurrency, MaxConcurrency)
	}
	if c.FetchBatch < 1 {
		return apperr.BadConfig("FetchBatch", "%w: consumer %s: fetch batch %d: must be at least 1", ErrInvalidConfig, c.Durable, c.FetchBatch)
	}
	for i, d := range c.NakDelays {
		if d < 0 {
			return apperr.BadConfig("NakDelays", "%w: consumer %s: nak delay [%d] %s: must not be negative", ErrInvalidConfig, c.Durable, i, d)
		}
	}
	if c.MaxDeliver > 0 && c.MaxDeliver <= len(c.NakDelays) {
		return apperr.BadConfig("MaxDeliver", "%w: consumer %s: max deliver %d: must exceed the %d nak delays", ErrInvalidConfig, c.Durable, c.MaxDeliver, len(c.NakDelays))
	}
	if c.ShutdownTimeout < 0 {
		return apperr.BadConfig("ShutdownTimeout", "%w: consumer %s: shutdown timeout %s: must be positive", ErrInvalidConfig, c.Durable, c.ShutdownTimeout)
	}
	return nil
}

// Timings of the consume loop that nobody needs to tune.
const (
	fetchExpiry        = 5 * time.Second        // one pull request's life; ctx cancels it sooner
	fetchRetryMax      = 5 * time.Second        // cap of the wait after a failed fetch
	dlqPublishTimeout  = 5 * time.Second        // bound of one dead-letter publish
	ackSyncTimeout     = 5 * time.Second        // bound of a confirmed ack
	maxShutdownGrace   = time.Second            // wait after cancelling stuck handlers
	advisoryRetryWait  = 500 * time.Millisecond // between dead-letter attempts of an advisory
	advisoryAttempts   = 3
	advisoryBufferSize = 256
)

// Consumer runs a handler over a durable pull consumer of ROOM_EVENTS.
type Consumer struct {
	js       jetstream.JetStream
	cfg      ConsumerRunConfig
	handler  Handler
	log      *slog.Logger
	metrics  *consumerMetrics
	running  chan struct{}
	started  atomic.Bool
	settling sync.WaitGroup // replays whose letter is being removed before their ack
	stopping atomic.Bool    // Run's ctx ended: queued messages are nakked, not handled

	// Set by Run before any goroutine starts.
	ackWait          time.Duration
	backOff          []time.Duration
	nakDelays        []time.Duration
	maxDeliver       int
	serverMaxDeliver int              // the durable's MaxDeliver: marks follow it
	marks            marks            // last-delivery marks of the durable
	dlq              jetstream.Stream // ROOM_EVENTS_DLQ, to remove replayed letters
	hctx             context.Context  // handlers' ctx: cancelled ShutdownTimeout after Run's ctx

	async   AsyncHandler   // set by NewAsyncConsumer instead of handler
	pending sync.WaitGroup // messages handed to async and not yet done
}

// NewConsumer returns a Consumer that runs h for every message of the
// durable cfg.Durable. log may be nil (discard), m may be nil (no metrics).
func NewConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h Handler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: consumer: nil jetstream", ErrInvalidConfig)
	}
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil handler", ErrInvalidConfig, cfg.Durable)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Consumer{
		js:      js,
		cfg:     cfg,
		handler: h,
		log:     log.With("consumer", cfg.Durable),
		metrics: m.forConsumer(cfg.Durable),
		running: make(chan struct{}),
	}, nil
}

// Running is closed once Run has found the durable consumer, subscribed to
// its MAX_DELIVERIES advisories and started fetching.
func (c *Consumer) Running() <-chan struct{} {
	return c.running
}

// job is one fetched message on its way to a handler goroutine.
type job struct {
	msg       jetstream.Msg
	meta      *jetstream.MsgMetadata
	env       Envelope
	decodeErr error
	subject   string // the event's room.events subject (a replay's original)
	replayFor string // the durable a replay is for, "" if not a replay
	replayOf  uint64 // the replayed letter's DLQ sequence, 0 if not a replay
	marked    bool   // a last-delivery mark was written for this delivery
}

// Run fetches and handles messages until ctx ends. Then it stops fetching
// at once, naks messages fetched but not started, lets handlers in flight
// finish within ShutdownTimeout (cancelling their ctx after that), settles
// their messages and returns nil. It returns an error only if it cannot
// start: the durable, ROOM_EVENTS or ROOM_EVENTS_DLQ is missing, or the
// advisory subscription fails. Run may be called once.
func (c *Consumer) Run(ctx context.Context) error {
	rs, err := c.start(ctx)
	if err != nil {
		return err
	}
	defer rs.close()
	cons, stream, advisories, cancelHandlers := rs.cons, rs.stream, rs.advisories, rs.cancelHandlers
	nc := c.js.Conn()

	slots := make(chan struct{}, c.cfg.FetchBatch)
	queues := make([]chan job, c.cfg.Concurrency)
	var wg sync.WaitGroup
	for i := range queues {
		q := make(chan job, c.cfg.FetchBatch)
		queues[i] = q
		wg.Go(func() {
			for j := range q {
				if c.async != nil {
					c.processAsync(j, func() { <-slots })
					continue
				}
				c.process(j)
				<-slots
			}
		})
	}
	wg.Go(func() { c.watchAdvisories(ctx, stream, advisories) })

	close(c.running)
	c.log.Info("consumer running", "concurrency", c.cfg.Concurrency, "fetch_batch", c.cfg.FetchBatch,
		"ack_wait", c.ackWait, "max_deliver", c.maxDeliver)

	c.fetchLoop(ctx, cons, queues, slots)

	c.stopping.Store(true)
	for _, q := range queues {
		close(q)
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		c.settling.Wait() // bounded: each removal has its own timeout
		c.pending.Wait()  // asynchronous handlers' messages
		close(done)
	}()
	c.awaitHandlers(done, cancelHandlers)
	// Acks and naks are fire-and-forget; make sure they left.
	if err := nc.FlushTimeout(time.Second); err != nil && !nc.IsClosed() {
		c.log.Warn("flush acks at shutdown", "error", err)
	}
	c.log.Info("consumer stopped")
	return nil
}

// settle takes the durable's server-side settings as defaults.
func (c *Consumer) settle(server jetstream.ConsumerConfig) {
	c.ackWait = server.AckWait
	c.backOff = server.BackOff
	c.serverMaxDeliver = server.MaxDeliver
	c.maxDeliver = c.cfg.MaxDeliver
	if c.maxDeliver == 0 {
		c.maxDeliver = server.MaxDeliver // -1 or 0 on the server: unlimited
	} else if server.MaxDeliver > 0 && c.maxDeliver != server.MaxDeliver {
		c.log.Warn("max deliver differs from the consumer's", "max_deliver", c.maxDeliver, "server_max_deliver", server.MaxDeliver)
	}
	c.nakDelays = c.cfg.NakDelays
	if len(c.nakDelays) == 0 {
		c.nakDelays = server.BackOff
	}
	if len(c.nakDelays) == 0 {
		c.nakDelays = []time.Duration{time.Second}
	}
}

// fetchLoop pulls as many messages as there are free slots and hands them
// to the handler goroutines, until ctx ends.
func (c *Consumer) fetchLoop(ctx context.Context, cons jetstream.Consumer, queues []chan job, slots chan struct{}) {
	retryWait := 100 * time.Millisecond
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	fill:
		for n < c.cfg.FetchBatch {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break fill
			}
		}
		got, err := c.fetch(ctx, cons, n, queues)
		for range n - got {
			<-slots
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			retryWait = 100 * time.Millisecond
			continue
		}
		c.log.Warn("fetch failed", "error", err, "retry_in", retryWait)
		t := time.NewTimer(retryWait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		retryWait = min(2*retryWait, fetchRetryMax)
	}
}

// fetch runs one pull request for up to n messages and dispatches each as
// it arrives. It returns how many it dispatched.
func (c *Consumer) fetch(ctx context.Context, cons jetstream.Consumer, n int, queues []chan job) (int, error) {
	fctx, cancel := context.WithTimeout(ctx, fetchExpiry)
	defer cancel()
	batch, err := cons.Fetch(n, jetstream.FetchContext(fctx))
	if err != nil {
		return 0, fmt.Errorf("fetch: %w", err)
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		c.dispatch(msg, queues)
	}
	if err := batch.Error(); err != nil && !errorsIsContext(err) {
		return got, fmt.Errorf("fetch: %w", err)
	}
	return got, nil
}

// dispatch queues msg on the handler goroutine of its room, so events of
// one room run one at a time in stream order. Queues never block: they
// hold as many jobs as there are slots.
func (c *Consumer) dispatch(msg jetstream.Msg, queues []chan job) {
	j := newJob(msg)
	key := j.subject
	if j.decodeErr == nil {
		key = voiceroom.RoomKey{AppCode: j.env.AppCode, RoomID: j.env.RoomID}.String()
	}
	queues[shard(key, len(queues))] <- j
}

// newJob decodes one fetched message: its envelope, and for a replayed
// dead letter the original subject and the letter's DLQ sequence.
func newJob(msg jetstream.Msg) job {
	j := job{msg: msg}
	j.meta, _ = msg.Metadata() // nil is handled by delivery
	j.subject, j.replayFor = eventSubjectOf(msg.Subject())
	if j.replayFor != "" {
		j.replayOf, _ = strconv.ParseUint(msg.Headers().Get(HeaderReplayOf), 10, 64)
	}
	j.env, j.decodeErr = DecodeEnvelope(msg.Data())
	return j
}

// shard hashes key (FNV-1a) onto n queues.
func shard(key string, n int) int {
	h := uint32(2166136261)
	for i := 0; i < len(key); i++ {
		h ^= uint32(key[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// process runs the handler for one message and settles it.
func (c *Consumer) process(j job) {
	d, ok := c.delivery(&j)
	if !ok {
		return
	}
	stop := c.keepInProgress(j)
	start := time.Now()
	err := c.call(d)
	stop()
	c.metrics.observe(time.Since(start))
	c.finish(j, err)
}

// delivery readies a fetched message for its handler: ok is false when it
// was settled instead (no metadata, shutting down, undecodable). A message
// on one of its last deliveries is marked first (see marked).
func (c *Consumer) delivery(j *job) (d Delivery, ok bool) {
	if j.meta == nil {
		// Not a JetStream delivery we can reason about; let it come again.
		c.log.Error("message without jetstream metadata", "subject", j.msg.Subject())
		c.nak(*j, 0, errors.New("no jetstream metadata"))
		return d, false
	}
	if c.stopping.Load() {
		c.nak(*j, 0, nil)
		return d, false
	}
	if j.replayFor != "" && j.replayFor != c.cfg.Durable {
		// Another sink's replay: the durable reads the whole stream (see
		// ConsumerConfig.consumer), and this sink never handles it. A lost
		// ack only brings it back here, to be skipped again.
		_ = j.msg.Ack()
		c.metrics.otherReplay()
		return d, false
	}
	if marked(j.meta.NumDelivered, c.serverMaxDeliver) {
		// If this process dies now, the server may give up on the
		// message while nobody hears its advisory; the gap check finds
		// the mark. A failed mark leaves only the advisory path.
		if err := c.marks.put(context.Background(), j.meta.Sequence.Stream, j.meta.NumDelivered); err != nil {
			c.logFor(*j, slog.LevelWarn, "last-delivery mark failed", err)
		} else {
			j.marked = true
		}
	}
	if j.decodeErr != nil {
		c.deadLetter(*j, j.decodeErr.Error())
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

// finish settles a handled message by its handler's result.
func (c *Consumer) finish(j job, err error) {
	nd := j.meta.NumDelivered
	switch {
	case err == nil:
		c.handled(j)
	case c.hctx.Err() != nil:
		// Cut short by shutdown: not the message's fault, never dead-letter.
		c.nak(j, 0, err)
	case c.cfg.Classify(err):
		c.deadLetter(j, err.Error())
	case c.maxDeliver > 0 && nd >= uint64(c.maxDeliver):
		c.deadLetter(j, fmt.Sprintf("retryable error at delivery %d of %d: %v", nd, c.maxDeliver, err))
	default:
		c.nak(j, c.nakDelay(nd), err)
	}
}

// call runs the handler, turning a panic into a retryable error.
func (c *Consumer) call(d Delivery) (err error) {
	defer func() {
		if r := recover(); r != nil {
			c.log.Error("handler panicked", "subject", d.Subject, "stream_seq", d.StreamSeq,
				"event_id", d.Envelope.EventID, "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panic: %v", r)
		}
	}()
	return c.handler(c.hctx, d)
}

// keepInProgress tells the server every third of the ack wait that the
// message is still being worked on, so a long handler does not see its
// message redelivered elsewhere. It stops when stop is called or handlers
// are cancelled.
func (c *Consumer) keepInProgress(j job) (stop func()) {
	every := c.ackWaitFor(j.meta.NumDelivered) / 3
	if every <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       *time.Timer
	)
	mu.Lock()
	defer mu.Unlock()
	t = time.AfterFunc(every, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped || c.hctx.Err() != nil {
			return
		}
		if err := j.msg.InProgress(); err != nil {
			c.log.Debug("in progress", "subject", j.msg.Subject(), "stream_seq", j.meta.Sequence.Stream, "error", err)
		}
		t.Reset(every)
	})
	return func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
	}
}

// ackWaitFor is the server's ack wait for delivery nd.
func (c *Consumer) ackWaitFor(nd uint64) time.Duration {
	if len(c.backOff) == 0 {
		return c.ackWait
	}
	return c.backOff[clampIndex(nd, len(c.backOff))]
}

// nakDelay is the redelivery delay after a retryable failure of delivery nd.
func (c *Consumer) nakDelay(nd uint64) time.Duration {
	return c.nakDelays[clampIndex(nd, len(c.nakDelays))]
}

// serverNakDelay converts the wanted redelivery delay into the value to
// send. With BackOff set, nats-server (2.10 to at least 2.15) waits
// delay + BackOff[n-1] - AckWait after a delayed nak of delivery n: it
// offsets the nak from AckWait but checks it against the BackOff entry.
// Subtracting that excess makes the configured NakDelays hold; when the
// excess alone exceeds the wanted delay, the shortest possible delay is
// sent.
func (c *Consumer) serverNakDelay(meta *jetstream.MsgMetadata, want time.Duration) time.Duration {
	if meta == nil {
		return want
	}
	excess := c.ackWaitFor(meta.NumDelivered) - c.ackWait
	if excess <= 0 {
		return want
	}
	return max(want-excess, time.Millisecond)
}

// clampIndex maps delivery nd (1-based) to an index below n.
func clampIndex(nd uint64, n int) int {
	if nd < 1 {
		return 0
	}
	if nd > uint64(n) {
		return n - 1
	}
	return int(nd - 1)
}

// handled settles a message its handler succeeded on: the replayed letter
// (if any) leaves the DLQ, the mark (if any) is removed, then the message
// is acked. Both go before the ack so that a crash in between leaves,
// at worst, a letter offered again or a mark the gap check clears, never
// a handled replay that is offered again after its ack. If the letter
// cannot be removed the message is nakked and handled again.
//
// A replay's removal runs beside the handler goroutine, which goes on
// with the next message: removals of a replay batch overlap instead of
// costing a round trip each. Their number is bounded by the durable's
// MaxAckPending, since each holds an unacked message; Run waits for them.
func (c *Consumer) handled(j job) {
	if j.replayOf == 0 {
		c.settleHandled(j)
		return
	}
	c.settling.Go(func() {
		if err := c.removeLetter(context.Background(), j.replayOf); err != nil {
			c.logFor(j, slog.LevelWarn, "replayed letter not removed, nakking", err, "dlq_seq", j.replayOf)
			c.nak(j, c.nakDelay(j.meta.NumDelivered), nil)
			return
		}
		c.settleHandled(j)
	})
}

// settleHandled removes the mark of a handled message, if any, and acks it.
func (c *Consumer) settleHandled(j job) {
	ctx := context.Background()
	if j.marked {
		if err := c.marks.remove(ctx, j.meta.Sequence.Stream); err != nil {
			// The gap check may later make a letter of a handled message;
			// replaying it is harmless (sinks de-duplicate).
			c.logFor(j, slog.LevelWarn, "last-delivery mark not removed", err)
		}
	}
	c.ack(j)
}

// removeLetter deletes a replayed letter from ROOM_EVENTS_DLQ; one
// already gone is no error.
func (c *Consumer) removeLetter(ctx context.Context, dlqSeq uint64) error {
	return removeLetter(ctx, c.dlq, dlqSeq)
}

// lettered cleans up after a message's dead letter was stored: the letter
// it replayed (now superseded by the new one) and its mark (if it may
// have one) go. Failures are logged: an old letter left behind is offered
// again (harmless), a mark left behind is cleared by the gap check, which
// finds the letter.
func (c *Consumer) lettered(ctx context.Context, seq, replayOf uint64, marked bool, log *slog.Logger) {
	if replayOf > 0 {
		if err := c.removeLetter(ctx, replayOf); err != nil {
			log.Warn("superseded dead letter not removed", "dlq_seq", replayOf, "error", err)
		}
	}
	if !marked {
		return
	}
	if err := c.marks.remove(ctx, seq); err != nil {
		log.Warn("last-delivery mark not removed", "error", err)
	}
}

func (c *Consumer) ack(j job) {
	var err error
	if c.cfg.AckSync {
		ctx, cancel := context.WithTimeout(context.Background(), ackSyncTimeout)
		err = j.msg.DoubleAck(ctx)
		cancel()
	} else {
		err = j.msg.Ack()
	}
	if err != nil {
		c.logFor(j, slog.LevelWarn, "ack failed; message will be redelivered", err)
		return
	}
	c.metrics.ack()
}

// nak asks for a redelivery after delay. cause is nil when the message was
// not handled at all (shutdown).
func (c *Consumer) nak(j job, delay time.Duration, cause error) {
	var err error
	if delay > 0 {
		err = j.msg.NakWithDelay(c.serverNakDelay(j.meta, delay))
	} else {
		err = j.msg.Nak()
	}
	if err != nil {
		c.logFor(j, slog.LevelWarn, "nak failed; message will be redelivered after ack wait", err)
		return
	}
	c.metrics.nak()
	if cause != nil {
		c.logFor(j, slog.LevelWarn, "handler failed, retrying", cause, "retry_in", delay)
	}
}

// deadLetter copies the message to the dead-letter stream and, once that
// is stored, terminates it. If storing fails the message is nakked, never
// dropped.
func (c *Consumer) deadLetter(j job, reason string) {
	l := letter{
		durable:    c.cfg.Durable,
		subject:    j.subject,
		streamSeq:  j.meta.Sequence.Stream,
		deliveries: j.meta.NumDelivered,
		reason:     reason,
		data:       j.msg.Data(),
		header:     j.msg.Headers(),
	}
	ctx, cancel := context.WithTimeout(context.Background(), dlqPublishTimeout)
	err := l.publish(ctx, c.js)
	cancel()
	if err != nil {
		c.logFor(j, slog.LevelError, "dead-letter failed, nakking", err)
		c.nak(j, c.nakDelay(j.meta.NumDelivered), nil)
		return
	}
	if j.replayOf > 0 || j.marked {
		c.lettered(context.Background(), j.meta.Sequence.Stream, j.replayOf, j.marked, c.log.With("subject", j.subject, "stream_seq", j.meta.Sequence.Stream))
	}
	if err := j.msg.TermWithReason("dead-lettered"); err != nil {
		// The message comes again after ack wait and is dead-lettered
		// again; the stream drops the repeat by Nats-Msg-Id.
		c.logFor(j, slog.LevelWarn, "term after dead-letter failed", err)
	}
	c.metrics.deadLetter()
	c.logFor(j, slog.LevelWarn, "message dead-lettered", errors.New(cleanReason(reason)))
}

// logFor logs about one message with the standard fields.
func (c *Consumer) logFor(j job, level slog.Level, msg string, err error, extra ...any) {
	ctx := context.Background()
	if !c.log.Enabled(ctx, level) {
		return
	}
	attrs := []any{"subject", j.msg.Subject()}
	if j.meta != nil {
		attrs = append(attrs, "stream_seq", j.meta.Sequence.Stream, "deliveries", j.meta.NumDelivered)
	}
	if j.env.EventID != "" {
		attrs = append(attrs, "event_id", j.env.EventID)
	}
	if err != nil {
		attrs = append(attrs, "error", err)
	}
	c.log.Log(ctx, level, msg, append(attrs, extra...)...)
}

// maxDeliveriesAdvisoryPrefix starts the subject of the server's
// MAX_DELIVERIES advisory; stream and consumer name follow.
const maxDeliveriesAdvisoryPrefix = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event that Run needs.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// watchAdvisories dead-letters the messages the server gave up on, until
// ctx ends.
func (c *Consumer) watchAdvisories(ctx context.Context, stream jetstream.Stream, advisories <-chan *nats.Msg) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-advisories:
			c.handleAdvisory(ctx, stream, m)
		}
	}
}

// handleAdvisory reads the message the server gave up on and dead-letters
// it with reason ReasonMaxDeliveries. The advisory is fire-and-forget: if
// this fails, or no instance was running when the server gave up, the
// message stays in ROOM_EVENTS without a dead letter and the error log
// names its sequence.
func (c *Consumer) handleAdvisory(ctx context.Context, stream jetstream.Stream, m *nats.Msg) {
	var adv maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &adv); err != nil {
		c.log.Warn("bad max deliveries advisory", "error", err)
		return
	}
	if adv.Stream != StreamName || adv.Consumer != c.cfg.Durable {
		return
	}
	log := c.log.With("stream_seq", adv.StreamSeq, "deliveries", adv.Deliveries)
	var err error
	for attempt := 1; attempt <= advisoryAttempts; attempt++ {
		if attempt > 1 {
			t := time.NewTimer(advisoryRetryWait)
			select {
			case <-ctx.Done():
				t.Stop()
				log.Error("max deliveries reached, dead-letter abandoned at shutdown", "error", err)
				return
			case <-t.C:
			}
		}
		err = c.deadLetterSeq(ctx, stream, adv)
		if err == nil || errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
	}
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		log.Warn("max deliveries reached, message no longer in stream", "error", err)
	case err != nil:
		log.Error("max deliveries reached, dead-letter failed; message stays in stream", "error", err)
	default:
		c.metrics.deadLetter()
		log.Warn("message dead-lettered", "error", ReasonMaxDeliveries)
	}
}

func (c *Consumer) deadLetterSeq(ctx context.Context, stream jetstream.Stream, adv maxDeliveriesAdvisory) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dlqPublishTimeout)
	defer cancel()
	raw, err := stream.GetMsg(ctx, adv.StreamSeq)
	if err != nil {
		return fmt.Errorf("get %s seq %d: %w", StreamName, adv.StreamSeq, err)
	}
	l, replayOf := letterOfStored(c.cfg.Durable, raw, adv.Deliveries)
	if err := l.publish(ctx, c.js); err != nil {
		return err
	}
	c.lettered(ctx, adv.StreamSeq, replayOf, marked(adv.Deliveries, c.serverMaxDeliver), c.log.With("stream_seq", adv.StreamSeq))
	return nil
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
	c.settle(cons.CachedInfo().Config)
	return cons, stream, nil
}

// runState is what a consume loop holds once it has started.
type runState struct {
	cons           jetstream.Consumer
	stream         jetstream.Stream
	advisories     chan *nats.Msg
	cancelHandlers context.CancelFunc
	close          func() // cancels the handlers' ctx, then unsubscribes the advisories
}

// start begins Run (of a Consumer or a BatchConsumer): it may happen once.
// It opens the durable and its streams, subscribes to the durable's
// MAX_DELIVERIES advisories (the server gives up on its own when a
// message's last delivery is never answered, and only publishes this
// advisory, which the loop turns into a dead letter) and makes the
// handlers' ctx, which outlives ctx by the shutdown bound.
func (c *Consumer) start(ctx context.Context) (*runState, error) {
	if !c.started.CompareAndSwap(false, true) {
		return nil, ErrAlreadyRunning
	}
	durable := c.cfg.Durable
	cons, stream, err := c.open(ctx)
	if err != nil {
		return nil, err
	}
	nc := c.js.Conn()
	advisories := make(chan *nats.Msg, advisoryBufferSize)
	subject := maxDeliveriesAdvisoryPrefix + StreamName + "." + durable
	sub, err := nc.ChanSubscribe(subject, advisories)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: subscribe %s: %w", durable, subject, err)
	}
	unsubscribe := func() {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			c.log.Warn("unsubscribe advisories", "error", err)
		}
	}
	if err := nc.FlushTimeout(dlqPublishTimeout); err != nil {
		unsubscribe()
		return nil, fmt.Errorf("consumer %s: subscribe %s: %w", durable, subject, err)
	}
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	c.hctx = hctx
	return &runState{cons: cons, stream: stream, advisories: advisories, cancelHandlers: cancelHandlers,
		close: func() { cancelHandlers(); unsubscribe() }}, nil
}

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
