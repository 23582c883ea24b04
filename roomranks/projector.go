package roomranks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"voiceroom/bus"
	"voiceroom/roomevent"
)

// Projector is the sink that keeps the Redis sets current from the
// durable consumer roomranks: each RoomGiftSent event is applied once to
// the sender's and the receiver's day and week sets in Redis that are
// there (see doc.go). Other events are acked untouched.
type Projector struct {
	cache    *cache
	cal      *Calendar
	consumer *bus.Consumer
	cfg      Config
	log      *slog.Logger
	metrics  *Metrics
}

// NewProjector returns a Projector reading the durable run.Durable
// (normally bus.DurableRoomRanks) of js. rdb may be nil: without Redis
// there are no sets, and every event is acked (counted uncached).
// busMetrics and m may be nil.
func NewProjector(rdb redis.UniversalClient, js jetstream.JetStream, run bus.ConsumerRunConfig, busMetrics *bus.Metrics,
	cfg Config, log *slog.Logger, m *Metrics) (*Projector, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if js == nil {
		return nil, fmt.Errorf("%w: the ranks projector needs jetstream", ErrInvalidConfig)
	}
	cal, err := NewCalendar(cfg.TimeZones)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Projector{cache: newCache(rdb, cfg), cal: cal, cfg: cfg, log: log.With("component", "roomranks"), metrics: m}
	if p.consumer, err = bus.NewConsumer(js, run, p.handle, log, busMetrics); err != nil {
		return nil, err
	}
	return p, nil
}

// Running is closed once the projector consumes.
func (p *Projector) Running() <-chan struct{} { return p.consumer.Running() }

// Run consumes until ctx ends, then lets the events in flight finish
// within the consumer's ShutdownTimeout. It returns an error only when it
// cannot start.
func (p *Projector) Run(ctx context.Context) error { return p.consumer.Run(ctx) }

// handle applies one event and counts its outcome. A gift whose body
// cannot be read is permanent (dead-lettered); a Redis failure is
// retried, so that no set in Redis misses a gift while Redis comes back.
func (p *Projector) handle(ctx context.Context, d bus.Delivery) error {
	res, err := p.apply(ctx, d.Envelope)
	if err != nil {
		return err
	}
	if res != "" {
		p.metrics.event(res)
	}
	return nil
}

// apply applies env and returns its outcome: "" for an event that is not
// a gift, else one of the results counted in voiceroom_ranks_events_total.
func (p *Projector) apply(ctx context.Context, env bus.Envelope) (string, error) {
	if env.EventType != roomevent.RoomGiftSent {
		return "", nil
	}
	var body roomevent.GiftSent
	if err := json.Unmarshal(env.Payload, &body); err != nil {
		return "", bus.Permanent(fmt.Errorf("event %s (%s): decode gift: %w", env.EventID, env.EventType, err))
	}
	if body.SenderUserID <= 0 || body.ReceiverUserID <= 0 || body.Value < 0 || env.RoomVersion <= 0 {
		return "", bus.Permanent(fmt.Errorf("event %s (%s): a gift needs a sender, a receiver, a version and a value of 0 or more", env.EventID, env.EventType))
	}
	if body.Value == 0 {
		return resultZero, nil
	}
	if p.cache == nil {
		return resultUncached, nil
	}
	g := gift{app: env.AppCode, room: env.RoomID, version: env.RoomVersion, sender: body.SenderUserID,
		receiver: body.ReceiverUserID, value: body.Value, atMs: env.OccurredAtMs,
		day: p.cal.Window(env.AppCode, Day, env.OccurredAtMs), week: p.cal.Window(env.AppCode, Week, env.OccurredAtMs)}
	wctx, cancel := context.WithTimeout(ctx, p.cfg.WriteTimeout)
	defer cancel()
	res, err := p.cache.apply(wctx, g)
	if err != nil {
		p.metrics.redisFailed(opApply)
		p.log.Warn("ranks: redis write failed, retrying", "event_id", env.EventID, "error", err)
		return "", err
	}
	return res, nil
}
