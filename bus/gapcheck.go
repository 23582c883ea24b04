package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/internal/every"
)

// GapCheckConfig configures a GapChecker. Zero fields take their defaults
// (see WithDefaults).
type GapCheckConfig struct {
	// Durable names the durable consumer whose messages are checked.
	// Required.
	Durable string
	// Interval is the time between two checks. Default 30s.
	Interval time.Duration
	// Timeout bounds one check. Default 20s.
	Timeout time.Duration
	// MaxPerCheck bounds the marks one check looks at; the rest wait for
	// the next. Default 1,000.
	MaxPerCheck int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c GapCheckConfig) WithDefaults() GapCheckConfig {
	if c.Interval == 0 {
		c.Interval = 30 * time.Second
	}
	if c.Timeout == 0 {
		c.Timeout = 20 * time.Second
	}
	if c.MaxPerCheck == 0 {
		c.MaxPerCheck = 1_000
	}
	return c
}

// Validate checks c after defaults are applied; it never changes c.
// Errors are *apperr.ConfigError naming the field and wrap
// ErrInvalidConfig.
func (c GapCheckConfig) Validate() error {
	c = c.WithDefaults()
	if err := checkToken("durable", c.Durable); err != nil {
		return apperr.BadConfig("Durable", "%w: gap check: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.Interval < 0 || c.Interval > time.Hour:
		return apperr.BadConfig("Interval", "%w: gap check %s: interval %s: want more than 0, at most 1h", ErrInvalidConfig, c.Durable, c.Interval)
	case c.Timeout < 0:
		return apperr.BadConfig("Timeout", "%w: gap check %s: timeout %s: must be positive", ErrInvalidConfig, c.Durable, c.Timeout)
	case c.MaxPerCheck < 1:
		return apperr.BadConfig("MaxPerCheck", "%w: gap check %s: max per check %d: must be at least 1", ErrInvalidConfig, c.Durable, c.MaxPerCheck)
	}
	return nil
}

// GapChecker dead-letters the messages of one durable that the server gave
// up on (MaxDeliver reached) while no instance heard the MAX_DELIVERIES
// advisory, for example because every instance was down. It finds them
// through the marks consumers leave on a message's last two deliveries
// (see the package doc, "Gaps"). Run it in every process that runs the
// durable's sink; several checkers of one durable are safe together.
type GapChecker struct {
	js      jetstream.JetStream
	cfg     GapCheckConfig
	log     *slog.Logger
	metrics *DLQMetrics
}

// NewGapChecker returns a GapChecker. log may be nil (discard), m may be
// nil (no metrics).
func NewGapChecker(js jetstream.JetStream, cfg GapCheckConfig, log *slog.Logger, m *DLQMetrics) (*GapChecker, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: gap check: nil jetstream", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &GapChecker{js: js, cfg: cfg, log: log.With("component", "gapcheck", "consumer", cfg.Durable), metrics: m}, nil
}

// Run checks every Interval until ctx ends, then returns nil. A failed
// check is logged and tried again at the next interval. A check in
// progress when ctx ends is abandoned at once: what it did not finish,
// the next run does.
func (g *GapChecker) Run(ctx context.Context) error {
	every.Tick(ctx, g.cfg.Interval, func() {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
		n, err := g.Check(cctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			g.log.Warn("gap check failed", "error", err)
		case n > 0:
			g.log.Warn("gap check dead-lettered messages the server gave up on unheard", "letters", n)
		}
	})
	return nil
}

// Check runs one check and returns how many dead letters it stored. It
// reads the durable's state first (ack floor, delivered, ack pending) and
// then the marks of messages that state shows settled: a message whose
// handler succeeded lost its mark before its ack could settle it, so a
// mark found settled belongs to a message that was dead-lettered (then
// only the mark is removed) or that the server gave up on (then it gets a
// letter with reason ReasonMaxDeliveries).
func (g *GapChecker) Check(ctx context.Context) (int, error) {
	durable := g.cfg.Durable
	cons, err := g.js.Consumer(ctx, StreamName, durable)
	if err != nil {
		return 0, fmt.Errorf("gap check: consumer %s: %w", durable, err)
	}
	// A message at or below the ack floor is settled; so is every
	// delivered one when nothing is pending. (nats-server does not always
	// move the floor when it gives up on a message: it stays until a later
	// ack finds nothing pending before it.)
	info := cons.CachedInfo()
	settledUpTo := info.AckFloor.Stream
	if info.NumAckPending == 0 {
		settledUpTo = max(settledUpTo, info.Delivered.Stream)
	}
	stream, err := g.js.Stream(ctx, StreamName)
	if err != nil {
		return 0, fmt.Errorf("gap check: stream %s: %w", StreamName, err)
	}
	dlq, err := g.js.Stream(ctx, DLQStreamName)
	if err != nil {
		return 0, fmt.Errorf("gap check: stream %s: %w", DLQStreamName, err)
	}
	mk, err := openMarks(ctx, g.js, durable)
	if err != nil {
		return 0, fmt.Errorf("gap check: %w", err)
	}
	settled, err := mk.list(ctx, settledUpTo, g.cfg.MaxPerCheck)
	if err != nil {
		return 0, fmt.Errorf("gap check: %w", err)
	}
	lettered := 0
	for _, m := range settled {
		stored, err := g.settle(ctx, stream, dlq, mk, m)
		if stored { // counted even when removing its mark then failed
			lettered++
			g.metrics.gapLettered(durable)
		}
		if err != nil {
			return lettered, fmt.Errorf("gap check %s seq %d: %w", durable, m.seq, err)
		}
	}
	return lettered, nil
}

// settle makes sure the settled message of mark m has a dead letter, then
// removes the mark. It reports whether it stored a letter.
func (g *GapChecker) settle(ctx context.Context, stream, dlq jetstream.Stream, mk marks, m mark) (bool, error) {
	raw, err := stream.GetMsg(ctx, m.seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		g.log.Error("message given up on is no longer in the stream; no dead letter", "stream_seq", m.seq, "deliveries", m.deliveries)
		return false, mk.remove(ctx, m.seq)
	}
	if err != nil {
		return false, fmt.Errorf("get message: %w", err)
	}
	l, replayOf := letterOfStored(g.cfg.Durable, raw, m.deliveries)
	has, err := hasLetter(ctx, dlq, g.cfg.Durable, l.subject, m.seq)
	if err != nil {
		return false, err
	}
	if !has {
		if err := l.publish(ctx, g.js); err != nil {
			return false, err
		}
		g.log.Warn("message dead-lettered", "subject", l.subject, "stream_seq", m.seq, "deliveries", m.deliveries, "error", ReasonMaxDeliveries)
	}
	if replayOf > 0 {
		if err := removeLetter(ctx, dlq, replayOf); err != nil {
			return !has, err
		}
	}
	return !has, mk.remove(ctx, m.seq)
}

// maxLettersPerSubject bounds the letters hasLetter reads on one subject
// (one room's events of one type); past it the letter is assumed missing
// and stored again, which the duplicate window or the sinks absorb.
const maxLettersPerSubject = 1_000

// hasLetter reports whether ROOM_EVENTS_DLQ holds a letter of durable for
// the message at seq on subject (its room.events subject).
func hasLetter(ctx context.Context, dlq jetstream.Stream, durable, subject string, seq uint64) (bool, error) {
	want := strconv.FormatUint(seq, 10)
	filter := dlqSubject(durable, subject)
	next := uint64(1)
	for range maxLettersPerSubject {
		raw, err := dlq.GetMsg(ctx, next, jetstream.WithGetMsgSubject(filter))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("look for dead letter on %s: %w", filter, err)
		}
		if raw.Header.Get(HeaderDLQStreamSeq) == want {
			return true, nil
		}
		next = raw.Sequence + 1
	}
	return false, nil
}

// removeLetter deletes a dead letter; one already gone is no error.
func removeLetter(ctx context.Context, dlq jetstream.Stream, dlqSeq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, dlqPublishTimeout)
	defer cancel()
	if err := dlq.DeleteMsg(ctx, dlqSeq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("remove dead letter %d: %w", dlqSeq, err)
	}
	return nil
}
