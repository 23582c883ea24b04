package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
)

// PubAck is the stream's answer to a publish.
type PubAck struct {
	// Stream is the stream that stored the message.
	Stream string
	// Sequence is the message's stream sequence (of the first copy, for a
	// duplicate).
	Sequence uint64
	// Duplicate is true when the stream already held a message with this
	// event_id inside its duplicate window and dropped this one.
	Duplicate bool
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// MaxInFlight bounds the async publishes of one PublishBatch call that
	// wait for their ack. Default 256.
	MaxInFlight int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c PublisherConfig) WithDefaults() PublisherConfig {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = 256
	}
	return c
}

// Validate checks c after defaults are applied. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig.
func (c PublisherConfig) Validate() error {
	c = c.WithDefaults()
	if c.MaxInFlight < 1 {
		return apperr.BadConfig("MaxInFlight", "%w: publisher max in flight %d: must be at least 1", ErrInvalidConfig, c.MaxInFlight)
	}
	return nil
}

// Publisher publishes room events to ROOM_EVENTS with Nats-Msg-Id set to
// the event_id, so the stream drops repeats inside its duplicate window.
// It is safe for concurrent use.
type Publisher struct {
	js  jetstream.JetStream
	cfg PublisherConfig
}

// NewPublisher returns a Publisher on js.
func NewPublisher(js jetstream.JetStream, cfg PublisherConfig) (*Publisher, error) {
	if js == nil {
		return nil, fmt.Errorf("%w: publisher: nil jetstream", ErrInvalidConfig)
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{js: js, cfg: cfg}, nil
}

// Publish encodes env and publishes it, waiting for the stream's ack. An
// invalid envelope returns an error wrapping ErrInvalidEnvelope and sends
// nothing. A repeat of a stored event_id returns an ack with Duplicate set.
func (p *Publisher) Publish(ctx context.Context, env Envelope) (PubAck, error) {
	m, err := env.Message()
	if err != nil {
		return PubAck{}, err
	}
	return p.publish(ctx, m)
}

// PublishMessage publishes an encoded message and waits for the stream's
// ack. An invalid message returns an error wrapping ErrInvalidMessage and
// sends nothing.
func (p *Publisher) PublishMessage(ctx context.Context, m Message) (PubAck, error) {
	if err := m.Validate(); err != nil {
		return PubAck{}, err
	}
	return p.publish(ctx, m)
}

func (p *Publisher) publish(ctx context.Context, m Message) (PubAck, error) {
	ack, err := p.js.PublishMsg(ctx, m.natsMsg())
	if err != nil {
		return PubAck{}, fmt.Errorf("publish event %s to %s: %w", m.ID, m.Subject, err)
	}
	return PubAck{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// Result is the outcome of one message of a batch: an ack or an error.
type Result struct {
	Ack PubAck
	Err error
}

// pending is a sent message of a batch waiting for its ack.
type pending struct {
	i   int
	id  string
	paf jetstream.PubAckFuture
}

// PublishBatch publishes msgs asynchronously, with at most MaxInFlight
// unacknowledged at a time, and returns one Result per message in input
// order. An invalid message gets an error wrapping ErrInvalidMessage and
// is not sent. ctx bounds the whole call: a message not sent, or sent but
// unanswered, when ctx ends gets ctx's error (a sent one may still have
// been stored; publish it again, de-duplication makes that safe).
func (p *Publisher) PublishBatch(ctx context.Context, msgs []Message) []Result {
	results := make([]Result, len(msgs))
	if len(msgs) == 0 {
		return results
	}
	inflight := make(chan struct{}, p.cfg.MaxInFlight)
	sent := make(chan pending, p.cfg.MaxInFlight)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for s := range sent {
			results[s.i] = awaitAck(ctx, s)
			<-inflight
		}
	}()

	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		if err := ctx.Err(); err != nil {
			results[i].Err = fmt.Errorf("publish event %s: %w", m.ID, err)
			continue
		}
		select {
		case inflight <- struct{}{}:
		case <-ctx.Done():
			results[i].Err = fmt.Errorf("publish event %s: %w", m.ID, ctx.Err())
			continue
		}
		paf, err := p.js.PublishMsgAsync(m.natsMsg())
		if err != nil {
			<-inflight
			results[i].Err = fmt.Errorf("publish event %s to %s: %w", m.ID, m.Subject, err)
			continue
		}
		sent <- pending{i: i, id: m.ID, paf: paf}
	}
	close(sent)
	<-collected
	return results
}

// awaitAck waits for the answer to one async publish, preferring an answer
// that already arrived over ctx's end.
func awaitAck(ctx context.Context, s pending) Result {
	select {
	case ack := <-s.paf.Ok():
		return ackResult(ack)
	case err := <-s.paf.Err():
		return Result{Err: fmt.Errorf("publish event %s: %w", s.id, err)}
	case <-ctx.Done():
	}
	select {
	case ack := <-s.paf.Ok():
		return ackResult(ack)
	case err := <-s.paf.Err():
		return Result{Err: fmt.Errorf("publish event %s: %w", s.id, err)}
	default:
		return Result{Err: fmt.Errorf("publish event %s: no ack: %w", s.id, ctx.Err())}
	}
}

func ackResult(ack *jetstream.PubAck) Result {
	return Result{Ack: PubAck{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}}
}

// PublishEnvelopes encodes envs and publishes them like PublishBatch. An
// invalid envelope gets an error wrapping ErrInvalidEnvelope and is not
// sent.
func (p *Publisher) PublishEnvelopes(ctx context.Context, envs []Envelope) []Result {
	results := make([]Result, len(envs))
	msgs := make([]Message, 0, len(envs))
	index := make([]int, 0, len(envs))
	for i, env := range envs {
		m, err := env.Message()
		if err != nil {
			results[i].Err = err
			continue
		}
		msgs = append(msgs, m)
		index = append(index, i)
	}
	for j, r := range p.PublishBatch(ctx, msgs) {
		results[index[j]] = r
	}
	return results
}
