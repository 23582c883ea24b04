package bus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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

// BatchHandler handles the deliveries of one batch together, so a sink
// can coalesce them (many events of one room into one write) and write
// many rooms in one statement. It returns one error per delivery, in the
// same order, sorted like a Handler's; a nil slice acks every delivery.
// Events of one room appear in ds in stream order, and no two batches
// holding events of one room run at once. With Concurrency above 1 the
// handler runs for several batches (of different rooms) at once. ctx is
// cancelled only when the consumer shuts down and the handler outlives
// ShutdownTimeout.
type BatchHandler func(ctx context.Context, ds []Delivery) []error

// HoldingBatchHandler is a BatchHandler that may keep some deliveries
// past its return: it reports each delivery's result by calling settle(i,
// err) exactly once (later calls are ignored), during the call or later,
// with nil to ack and an error sorted like a Handler's. Until it is
// settled a delivery holds one slot (see ConsumerRunConfig.Held) and the
// consumer keeps telling the server it is in progress; at shutdown Run
// waits for every settle (ShutdownTimeout), so a handler that holds
// deliveries must settle them once Run's ctx ends. Batches are cut as for
// a BatchHandler, and the next batch of a room may come while the
// handler still holds earlier deliveries of that room: a sink that holds
// a room's events to write them together (the list projector's counts)
// keeps its own order.
type HoldingBatchHandler func(ctx context.Context, ds []Delivery, settle func(i int, err error))

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

// ConsumerRunConfig configures a Consumer. Zero fields take their defaults
// (see WithDefaults); NakDelays and MaxDeliver default to the durable
// consumer's own settings, read from the server when Run starts.
type ConsumerRunConfig struct {
	// Durable names an existing durable consumer on ROOM_EVENTS (see
	// Provision). Required.
	Durable string
	// Concurrency is the number of workers, each running the handler for
	// the rooms sharded to it: events of one room always go to the same
	// worker, in stream order. A batch consumer runs up to this many
	// batches at once. Default 4.
	Concurrency int
	// FetchBatch bounds the messages fetched and not yet settled (queued,
	// in a handler or, for an AsyncHandler, not yet done). A batch
	// consumer hands its handler at most FetchBatch deliveries at once and
	// holds up to (Concurrency+2) × FetchBatch, so that each worker's next
	// batch is fetched and decoded while its handler runs. Neither bound
	// exceeds the durable's MaxAckPending. Default 64.
	FetchBatch int
	// Held is, for a HoldingBatchHandler, the most deliveries it holds
	// after returning: they get slots of their own, on top of a batch
	// consumer's (Concurrency+2) × FetchBatch, so that holding does not
	// starve the fetch. Default 0; ignored by the other handlers.
	Held int
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
	if c.Held < 0 {
		return apperr.BadConfig("Held", "%w: consumer %s: held %d: must not be negative", ErrInvalidConfig, c.Durable, c.Held)
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

// Consumer runs a handler over a durable pull consumer of ROOM_EVENTS: a
// Handler, a BatchHandler or an AsyncHandler, each adapted to the one
// consume loop (loop.go) and wrapped in the same middlewares
// (middleware.go).
type Consumer struct {
	js      jetstream.JetStream
	cfg     ConsumerRunConfig
	log     *slog.Logger
	metrics *consumerMetrics
	running chan struct{}
	started atomic.Bool

	handle   handlerFunc // the mode's adapter inside the middlewares
	beats    *beats      // reports the open turns in progress (inProgress)
	settle   settleFunc  // sorts a handler's result into ack, nak or dead letter
	maxTurn  int         // deliveries per handler call: 1, or FetchBatch for a batch handler
	inFlight int         // messages fetched and not yet settled, at most

	turns    sync.WaitGroup // handler calls whose deliveries are not all settled
	settling sync.WaitGroup // replays whose letter is being removed before their ack

	qmu    sync.Mutex
	queued map[uint64]int // stream sequences fetched and not yet through take, counted (see OldestQueued)

	// Set by Run before any goroutine starts.
	runCtx           context.Context  // Run's: once it ends, queued messages are nakked, not handled
	slots            chan struct{}    // one per message fetched and not yet settled
	ackWait          time.Duration    // the durable's
	backOff          []time.Duration  // the durable's
	nakDelays        []time.Duration  // NakDelays, or the durable's BackOff
	maxDeliver       int              // the delivery whose retryable failure dead-letters
	serverMaxDeliver int              // the durable's MaxDeliver: marks follow it
	marks            marks            // last-delivery marks of the durable
	dlq              jetstream.Stream // ROOM_EVENTS_DLQ, to remove replayed letters
	stream           jetstream.Stream // ROOM_EVENTS, to read back what a broken pull lost
	ledger           ledger           // what the consumer was handed and how it settled it (resume.go)
	resume           resumption       // the fetch loop's: what broken pulls left to settle
	hctx             context.Context  // handlers' ctx: cancelled ShutdownTimeout after Run's ctx
}

// NewConsumer returns a Consumer that runs h for every message of the
// durable cfg.Durable, one message at a time per worker. log may be nil
// (discard), m may be nil (no metrics).
func NewConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h Handler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil handler", ErrInvalidConfig, cfg.Durable)
	}
	return newConsumer(js, cfg, perMessage(h), false, log, m)
}

// NewBatchConsumer returns a Consumer that runs h over batches of the
// durable's messages: up to FetchBatch, gathered while they keep coming
// (see turnGap and turnLinger). Each worker gathers its next batch (and
// decodes its envelopes) while its handler runs one, and hands it over
// when the handler returns. log may be nil (discard), m may be nil.
func NewBatchConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h BatchHandler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil batch handler", ErrInvalidConfig, cfg.Durable)
	}
	return newConsumer(js, cfg, batched(h), true, log, m)
}

// NewHoldingBatchConsumer returns a Consumer that runs h over batches as
// NewBatchConsumer does, and lets h settle deliveries after it returns
// (see HoldingBatchHandler); cfg.Held slots are added for those it holds.
// log may be nil (discard), m may be nil.
func NewHoldingBatchConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h HoldingBatchHandler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil holding batch handler", ErrInvalidConfig, cfg.Durable)
	}
	c, err := newConsumer(js, cfg, holding(h), true, log, m)
	if err != nil {
		return nil, err
	}
	c.inFlight += c.cfg.Held
	return c, nil
}

// NewAsyncConsumer returns a Consumer that hands every message to h, which
// settles it later. At shutdown Run naks what was fetched and not handed
// over, then waits (ShutdownTimeout) for the done calls of what was; a
// retryable error reported after Run's ctx ended is nakked without delay,
// as it was cut short by shutdown. log may be nil (discard), m may be nil.
func NewAsyncConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h AsyncHandler, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if h == nil {
		return nil, fmt.Errorf("%w: consumer %s: nil handler", ErrInvalidConfig, cfg.Durable)
	}
	return newConsumer(js, cfg, async(h), false, log, m)
}

// newConsumer wraps the mode's adapter in the middlewares and builds the
// settle chain.
func newConsumer(js jetstream.JetStream, cfg ConsumerRunConfig, h handlerFunc, batch bool, log *slog.Logger, m *Metrics) (*Consumer, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: consumer: nil jetstream", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Consumer{
		js:       js,
		cfg:      cfg,
		log:      log.With("consumer", cfg.Durable),
		metrics:  m.forConsumer(cfg.Durable),
		running:  make(chan struct{}),
		maxTurn:  1,
		inFlight: cfg.FetchBatch,
	}
	if batch {
		c.maxTurn = cfg.FetchBatch
		c.inFlight = (cfg.Concurrency + 2) * cfg.FetchBatch
	}
	c.beats = newBeats(c.log)
	c.handle = recoverer(c.log)(inProgress(c.heartbeatEvery, c.beats)(h))
	c.settle = poisonQueue(c.sortFailure, c.deadLetter)(retry(c.sortFailure, c.nak)(c.handled))
	return c, nil
}

// Running is closed once Run has found the durable consumer, subscribed to
// its MAX_DELIVERIES advisories and started fetching.
func (c *Consumer) Running() <-chan struct{} {
	return c.running
}

// perMessage adapts a Handler: one delivery per call.
func perMessage(h Handler) handlerFunc {
	return func(ctx context.Context, t *turn) {
		for i, d := range t.ds {
			t.settle(i, h(ctx, d))
		}
	}
}

// batched adapts a BatchHandler: one result per delivery, settled when
// the handler returns. A result of the wrong length fails every delivery
// (retryable).
func batched(h BatchHandler) handlerFunc {
	return func(ctx context.Context, t *turn) {
		errs := h(ctx, t.ds)
		if errs != nil && len(errs) != len(t.ds) {
			t.settleRest(fmt.Errorf("batch handler returned %d results for %d deliveries", len(errs), len(t.ds)))
			return
		}
		for i := range t.ds {
			var err error
			if errs != nil {
				err = errs[i]
			}
			t.settle(i, err)
		}
	}
}

// holding adapts a HoldingBatchHandler: it settles through the turn, now
// or later.
func holding(h HoldingBatchHandler) handlerFunc {
	return func(ctx context.Context, t *turn) { h(ctx, t.ds, t.settle) }
}

// async adapts an AsyncHandler: each delivery is settled by its done.
func async(h AsyncHandler) handlerFunc {
	return func(ctx context.Context, t *turn) {
		for i, d := range t.ds {
			h(ctx, d, func(err error) { t.settle(i, err) })
		}
	}
}
