package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Headers of a dead letter. The original data is copied unchanged; these
// say who gave up on it, why, and where the original sits.
const (
	// HeaderDLQConsumer is the durable consumer that dead-lettered the message.
	HeaderDLQConsumer = "Voiceroom-Dlq-Consumer"
	// HeaderDLQReason is why, short (at most 256 bytes, one line).
	HeaderDLQReason = "Voiceroom-Dlq-Reason"
	// HeaderDLQDeliveries is how many times the message had been delivered.
	HeaderDLQDeliveries = "Voiceroom-Dlq-Deliveries"
	// HeaderDLQSubject is the original subject.
	HeaderDLQSubject = "Voiceroom-Dlq-Subject"
	// HeaderDLQStreamSeq is the original's sequence in ROOM_EVENTS.
	HeaderDLQStreamSeq = "Voiceroom-Dlq-Stream-Seq"
)

// ReasonMaxDeliveries is the reason of a dead letter made after the
// server itself stopped redelivering a message (MaxDeliver reached while
// no handler answered), whether the MAX_DELIVERIES advisory or the gap
// check found it. It is a stable token operators can match; letters
// stored before it was introduced say "max deliveries reached".
const ReasonMaxDeliveries = "max_deliveries"

// maxReasonLen caps the reason header.
const maxReasonLen = 256

// letter is a message to dead-letter.
type letter struct {
	durable    string
	subject    string // original subject
	streamSeq  uint64
	deliveries uint64
	reason     string
	data       []byte
	header     nats.Header // original headers
}

// msg builds the dead-letter message. Its Nats-Msg-Id is
// "<durable>:<stream seq>", so dead-lettering the same delivery twice (a
// lost term, the advisory path racing the handler path, two instances)
// stores one letter inside the duplicate window.
func (l letter) msg() *nats.Msg {
	h := nats.Header{}
	for k, v := range l.header {
		if strings.HasPrefix(k, "Nats-") {
			continue // the original's Nats-Msg-Id etc. mean nothing here
		}
		h[k] = v
	}
	h.Set(jetstream.MsgIDHeader, l.durable+":"+strconv.FormatUint(l.streamSeq, 10))
	h.Set(HeaderDLQConsumer, l.durable)
	h.Set(HeaderDLQReason, cleanReason(l.reason))
	h.Set(HeaderDLQDeliveries, strconv.FormatUint(l.deliveries, 10))
	h.Set(HeaderDLQSubject, l.subject)
	h.Set(HeaderDLQStreamSeq, strconv.FormatUint(l.streamSeq, 10))
	return &nats.Msg{Subject: dlqSubject(l.durable, l.subject), Data: l.data, Header: h}
}

// publish stores the letter and waits for the stream's ack.
func (l letter) publish(ctx context.Context, js jetstream.JetStream) error {
	if _, err := js.PublishMsg(ctx, l.msg()); err != nil {
		return fmt.Errorf("dead-letter %s seq %d: %w", l.subject, l.streamSeq, err)
	}
	return nil
}

// letterOfStored is the letter of a message read back from ROOM_EVENTS
// after the server gave up on it, with the DLQ sequence of the letter it
// replayed (0 if it is not a replay).
func letterOfStored(durable string, raw *jetstream.RawStreamMsg, deliveries uint64) (letter, uint64) {
	subject, replayFor := eventSubjectOf(raw.Subject)
	replay := replayFor != ""
	var replayOf uint64
	if replay {
		replayOf, _ = strconv.ParseUint(raw.Header.Get(HeaderReplayOf), 10, 64)
	}
	return letter{
		durable:    durable,
		subject:    subject,
		streamSeq:  raw.Sequence,
		deliveries: deliveries,
		reason:     ReasonMaxDeliveries,
		data:       raw.Data,
		header:     raw.Header,
	}, replayOf
}

// cleanReason makes reason a one-line header value of at most
// maxReasonLen bytes.
func cleanReason(reason string) string {
	reason = strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' || r == '\t' || r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(reason, "?"))
	reason = strings.TrimSpace(reason)
	if len(reason) <= maxReasonLen {
		return reason
	}
	cut := maxReasonLen - 3
	for cut > 0 && !utf8.RuneStart(reason[cut]) {
		cut--
	}
	return reason[:cut] + "..."
}

// DeadLetter is one message of ROOM_EVENTS_DLQ.
type DeadLetter struct {
	// Sequence is the letter's sequence in ROOM_EVENTS_DLQ.
	Sequence uint64
	// Subject is dlq.<consumer>.<original subject>.
	Subject string
	// Time is when the letter was stored.
	Time time.Time
	// Consumer is the durable that gave up.
	Consumer string
	// Reason says why, short.
	Reason string
	// Deliveries is how many times the original had been delivered.
	Deliveries uint64
	// OriginalSubject is the subject in ROOM_EVENTS.
	OriginalSubject string
	// OriginalStreamSeq is the sequence in ROOM_EVENTS.
	OriginalStreamSeq uint64
	// Header holds all headers of the letter.
	Header nats.Header
	// Data is the original message data, unchanged.
	Data []byte
}

// ReadDeadLetters returns up to limit dead letters, oldest first, with
// their headers parsed. limit must be at least 1.
func ReadDeadLetters(ctx context.Context, js jetstream.JetStream, limit int) ([]DeadLetter, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: read dead letters: limit %d: must be at least 1", ErrInvalidConfig, limit)
	}
	stream, err := js.Stream(ctx, DLQStreamName)
	if err != nil {
		return nil, fmt.Errorf("read dead letters: stream %s: %w", DLQStreamName, err)
	}
	state := stream.CachedInfo().State
	var out []DeadLetter
	// "Next message at or after seq on dlq.>" skips deleted sequences in
	// one round trip each.
	for seq := state.FirstSeq; len(out) < limit && seq <= state.LastSeq && seq > 0; {
		raw, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(allDLQSubject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return out, fmt.Errorf("read dead letter at %d: %w", seq, err)
		}
		out = append(out, deadLetterFrom(raw))
		seq = raw.Sequence + 1
	}
	return out, nil
}

func deadLetterFrom(raw *jetstream.RawStreamMsg) DeadLetter {
	return deadLetterOf(raw.Sequence, raw.Subject, raw.Time, raw.Header, raw.Data)
}

// StoreDeadLetter stores a dead letter of durable for the message at
// streamSeq in ROOM_EVENTS, with the subject, data and headers it was
// read with there (a replay's too: the letter names the original
// subject), for a sink that read it outside its consume loop (webhooks
// reads a paused endpoint's backlog back from the stream). The letter is
// the consume loop's: listed and replayed by DLQ as any other, with
// Nats-Msg-Id "<durable>:<stream seq>", so one of the loop's and one of
// this for the same message within the duplicate window store one letter.
func StoreDeadLetter(ctx context.Context, js jetstream.JetStream, durable, subject string, streamSeq, deliveries uint64, reason string, data []byte, header nats.Header) error {
	if err := checkToken("durable", durable); err != nil {
		return fmt.Errorf("%w: dead-letter: %w", ErrInvalidConfig, err)
	}
	original, _ := eventSubjectOf(subject)
	l := letter{durable: durable, subject: original, streamSeq: streamSeq, deliveries: deliveries, reason: reason, data: data, header: header}
	return l.publish(ctx, js)
}
