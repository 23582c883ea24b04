package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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

// undecodableError is the result of a message whose envelope does not
// decode: permanent whatever Classify says, as no handler saw it.
type undecodableError struct{ err error }

func (e *undecodableError) Error() string { return e.err.Error() }
func (e *undecodableError) Unwrap() error { return e.err }

// job is one fetched message on its way to a handler.
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

// newJob decodes one fetched message: its envelope, and for a replayed
// dead letter the original subject and the letter's DLQ sequence.
func newJob(msg jetstream.Msg) *job {
	j := &job{msg: msg}
	j.meta, _ = msg.Metadata() // nil is handled by admit
	j.subject, j.replayFor = eventSubjectOf(msg.Subject())
	if j.replayFor != "" {
		j.replayOf, _ = strconv.ParseUint(msg.Headers().Get(HeaderReplayOf), 10, 64)
	}
	j.env, j.decodeErr = decodeDelivered(j.subject, msg.Data())
	return j
}

// sortFailure is the one place a failed delivery is sorted, in this
// order:
//
//   - an envelope that does not decode is permanent;
//   - once the handlers' ctx is cancelled, or Run's ctx ended and the
//     error is retryable, the failure is shutdown's doing, never the
//     message's: nak without delay (the next instance to pull takes it);
//   - an error Classify calls permanent is dead-lettered;
//   - a retryable error on delivery MaxDeliver is dead-lettered;
//   - any other is nakked after NakDelays[n-1].
func (c *Consumer) sortFailure(j *job, err error) failure {
	var undecodable *undecodableError
	if errors.As(err, &undecodable) {
		return failure{permanent: true, reason: err.Error()}
	}
	permanent := c.cfg.Classify(err)
	nd := j.meta.NumDelivered
	switch {
	case c.hctx.Err() != nil || (c.stopping() && !permanent):
		return failure{retryIn: shutdownNakDelay}
	case permanent:
		return failure{permanent: true, reason: err.Error()}
	case c.maxDeliver > 0 && nd >= uint64(c.maxDeliver):
		return failure{permanent: true, reason: fmt.Sprintf("retryable error at delivery %d of %d: %v", nd, c.maxDeliver, err)}
	}
	return failure{retryIn: c.nakDelay(nd)}
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
func (c *Consumer) handled(j *job, _ error) {
	if j.replayOf == 0 {
		c.settleHandled(j)
		return
	}
	c.settling.Go(func() {
		if err := removeLetter(context.Background(), c.dlq, j.replayOf); err != nil {
			c.logFor(j, slog.LevelWarn, "replayed letter not removed, nakking", err, "dlq_seq", j.replayOf)
			c.nak(j, c.nakDelay(j.meta.NumDelivered), nil)
			return
		}
		c.settleHandled(j)
	})
}

// settleHandled removes the mark of a handled message, if any, and acks it.
func (c *Consumer) settleHandled(j *job) {
	if j.marked {
		if err := c.marks.remove(context.Background(), j.meta.Sequence.Stream); err != nil {
			// The gap check may later make a letter of a handled message;
			// replaying it is harmless (sinks de-duplicate).
			c.logFor(j, slog.LevelWarn, "last-delivery mark not removed", err)
		}
	}
	c.ack(j)
}

// lettered cleans up after a message's dead letter was stored: the letter
// it replayed (now superseded by the new one) and its mark (if it may
// have one) go. Failures are logged: an old letter left behind is offered
// again (harmless), a mark left behind is cleared by the gap check, which
// finds the letter.
func (c *Consumer) lettered(ctx context.Context, seq, replayOf uint64, marked bool, log *slog.Logger) {
	if replayOf > 0 {
		if err := removeLetter(ctx, c.dlq, replayOf); err != nil {
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

func (c *Consumer) ack(j *job) {
	var err error
	if c.cfg.AckSync {
		ctx, cancel := context.WithTimeout(context.Background(), ackSyncTimeout)
		err = c.ledger.settle(j, entryAcked, func(m jetstream.Msg) error { return m.DoubleAck(ctx) })
		cancel()
	} else {
		err = c.ledger.settle(j, entryAcked, jetstream.Msg.Ack)
	}
	if err != nil {
		c.logFor(j, slog.LevelWarn, "ack failed; message will be redelivered", err)
		return
	}
	c.metrics.ack()
}

// nak asks for a redelivery after delay. cause is nil when the message was
// not handled at all (shutdown).
func (c *Consumer) nak(j *job, delay time.Duration, cause error) {
	var err error
	if delay > 0 {
		d := c.serverNakDelay(j.meta, delay)
		err = c.ledger.settle(j, entryNakked, func(m jetstream.Msg) error { return m.NakWithDelay(d) })
	} else {
		err = c.ledger.settle(j, entryNakked, jetstream.Msg.Nak)
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
func (c *Consumer) deadLetter(j *job, reason string) {
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
	if err := c.ledger.settle(j, entryTermed, func(m jetstream.Msg) error { return m.TermWithReason("dead-lettered") }); err != nil {
		// The message comes again after ack wait and is dead-lettered
		// again; the stream drops the repeat by Nats-Msg-Id.
		c.logFor(j, slog.LevelWarn, "term after dead-letter failed", err)
	}
	c.metrics.deadLetter()
	c.logFor(j, slog.LevelWarn, "message dead-lettered", errors.New(cleanReason(reason)))
}

// logFor logs about one message with the standard fields.
func (c *Consumer) logFor(j *job, level slog.Level, msg string, err error, extra ...any) {
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

// heartbeatEvery is how often a turn's messages are reported in progress:
// a third of the shortest ack wait among them.
func (c *Consumer) heartbeatEvery(t *turn) time.Duration {
	shortest := time.Duration(0)
	for _, j := range t.jobs {
		if w := c.ackWaitFor(j.meta.NumDelivered); shortest == 0 || w < shortest {
			shortest = w
		}
	}
	return shortest / 3
}

// beatTick is how often the open turns are looked at for a heartbeat: a
// sixth of the shortest ack wait of any delivery, so that a turn is
// reported at most half its ack wait after the last time.
func (c *Consumer) beatTick() time.Duration {
	shortest := c.ackWait
	for _, w := range c.backOff {
		if shortest <= 0 || w > 0 && w < shortest {
			shortest = w
		}
	}
	if shortest <= 0 {
		return time.Second
	}
	return max(shortest/6, time.Millisecond)
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
