package bus

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
)

// Durable consumer names of the product's sinks.
const (
	// DurableIMBridge delivers room events to Tencent IM.
	DurableIMBridge = "imbridge"
	// DurableListProjector projects room events into the room-list read model.
	DurableListProjector = "listprojector"
	// DurableRoomRanks keeps the rooms' contribution ranks in Redis.
	DurableRoomRanks = "roomranks"
	// DurableWebhooks delivers room events to the apps' webhook endpoints.
	DurableWebhooks = "webhooks"
	// DurableActivity scores the apps' activities (package activity).
	DurableActivity = "activity"
	// DurablePK scores the PK battles (package pk): RoomGiftSent only.
	DurablePK = "pk"
)

// PKFilterSubject is DurablePK's filter: the gifts, of every room.
const PKFilterSubject = SubjectPrefix + ".*.*.RoomGiftSent"

// StreamConfig holds the tunables of ROOM_EVENTS and ROOM_EVENTS_DLQ. Zero
// fields take their defaults (see WithDefaults).
type StreamConfig struct {
	// DuplicateWindow is how long the streams remember a Nats-Msg-Id to
	// drop a repeated publish. Default 2m.
	DuplicateWindow time.Duration
	// MaxAge is how long ROOM_EVENTS keeps an event, so a consumer that is
	// down for less than this loses nothing. Default 7 days.
	MaxAge time.Duration
	// Replicas is the replica count of both streams: 1 embedded, 3 on a
	// cluster. Default 1.
	Replicas int
	// DLQMaxAge is how long ROOM_EVENTS_DLQ keeps a dead letter (limits
	// retention, file storage, so letters can be read and replayed).
	// Default 30 days.
	DLQMaxAge time.Duration
}

// WithDefaults returns c with zero fields set to their defaults.
func (c StreamConfig) WithDefaults() StreamConfig {
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = 2 * time.Minute
	}
	if c.MaxAge == 0 {
		c.MaxAge = 7 * 24 * time.Hour
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.DLQMaxAge == 0 {
		c.DLQMaxAge = 30 * 24 * time.Hour
	}
	return c
}

// Validate checks c after defaults are applied: positive durations, a
// duplicate window no longer than either max age (the server's rule) and
// 1, 3 or 5 replicas (an even count tolerates no more failures than the
// odd count below it). Errors are *apperr.ConfigError naming the field and
// wrap ErrInvalidConfig.
func (c StreamConfig) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.DuplicateWindow < 0:
		return apperr.BadConfig("DuplicateWindow", "%w: stream duplicate window %s: must be positive", ErrInvalidConfig, c.DuplicateWindow)
	case c.MaxAge < 0:
		return apperr.BadConfig("MaxAge", "%w: stream max age %s: must be positive", ErrInvalidConfig, c.MaxAge)
	case c.DLQMaxAge < 0:
		return apperr.BadConfig("DLQMaxAge", "%w: dead-letter stream max age %s: must be positive", ErrInvalidConfig, c.DLQMaxAge)
	case c.DuplicateWindow > c.MaxAge:
		return apperr.BadConfig("MaxAge", "%w: stream max age %s: shorter than the duplicate window %s", ErrInvalidConfig, c.MaxAge, c.DuplicateWindow)
	case c.DuplicateWindow > c.DLQMaxAge:
		return apperr.BadConfig("DLQMaxAge", "%w: dead-letter stream max age %s: shorter than the duplicate window %s", ErrInvalidConfig, c.DLQMaxAge, c.DuplicateWindow)
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return apperr.BadConfig("Replicas", "%w: stream replicas %d: must be 1, 3 or 5", ErrInvalidConfig, c.Replicas)
	}
	return nil
}

// streams returns the JetStream definitions of ROOM_EVENTS and
// ROOM_EVENTS_DLQ.
func (c StreamConfig) streams() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:        StreamName,
			Description: "voiceroom room events; each sink reads with its own durable consumer, and its replays on room.replay.<durable>.>",
			Subjects:    []string{allEventsSubject, allReplaySubject},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Discard:     jetstream.DiscardOld,
			MaxAge:      c.MaxAge,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
		{
			Name:        DLQStreamName,
			Description: "voiceroom dead letters: dlq.<durable>.<original subject>",
			Subjects:    []string{allDLQSubject},
			Retention:   jetstream.LimitsPolicy,
			Storage:     jetstream.FileStorage,
			Discard:     jetstream.DiscardOld,
			MaxAge:      c.DLQMaxAge,
			Duplicates:  c.DuplicateWindow,
			Replicas:    c.Replicas,
		},
	}
}

// ConsumerConfig defines a durable pull consumer on ROOM_EVENTS. Zero
// fields take their defaults (see WithDefaults).
type ConsumerConfig struct {
	// Durable names the consumer, e.g. "imbridge". Required; a valid
	// subject token.
	Durable string
	// FilterSubject selects the events the consumer sees; it must lie
	// under room.events. Default "room.events.>".
	FilterSubject string
	// AckWait is how long the server waits for an ack before redelivering.
	// With BackOff set, the server uses BackOff[0] instead; AckWait may then
	// be left zero (it becomes BackOff[0]) but must not differ from it.
	// Default 30s.
	AckWait time.Duration
	// BackOff is the server's redelivery schedule for unacked messages:
	// delivery n waits BackOff[n-1] (the last value repeats). Optional.
	BackOff []time.Duration
	// MaxDeliver is how many times a message is delivered at most. It must
	// exceed len(BackOff) (the server allows equal, but then the last
	// BackOff value is never used as a wait before a redelivery).
	// -1 is unlimited (a sink that must never give up on a retryable
	// error). Default 10.
	MaxDeliver int
	// MaxAckPending bounds the unacked messages across all instances of
	// the consumer. Default 1000.
	MaxAckPending int
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ConsumerConfig) WithDefaults() ConsumerConfig {
	if c.FilterSubject == "" {
		c.FilterSubject = allEventsSubject
	}
	if c.AckWait == 0 {
		if len(c.BackOff) > 0 {
			c.AckWait = c.BackOff[0]
		} else {
			c.AckWait = 30 * time.Second
		}
	}
	if c.MaxDeliver == 0 {
		c.MaxDeliver = 10
	}
	if c.MaxAckPending == 0 {
		c.MaxAckPending = 1000
	}
	return c
}

// Limits of ConsumerConfig and ConsumerRunConfig.
const (
	MaxMaxDeliver    = 1000
	MaxMaxAckPending = 100000
	MaxConcurrency   = 256
)

// Validate checks c after defaults are applied. Errors are
// *apperr.ConfigError naming the field and wrap ErrInvalidConfig (and
// ErrInvalidSubjectToken for a bad durable name).
func (c ConsumerConfig) Validate() error {
	c = c.WithDefaults()
	if err := checkToken("durable", c.Durable); err != nil {
		return apperr.BadConfig("Durable", "%w: consumer: %w", ErrInvalidConfig, err)
	}
	if c.FilterSubject != allEventsSubject && !strings.HasPrefix(c.FilterSubject, SubjectPrefix+".") {
		return apperr.BadConfig("FilterSubject", "%w: consumer %s: filter subject %q: must lie under %s", ErrInvalidConfig, c.Durable, c.FilterSubject, SubjectPrefix)
	}
	if c.AckWait < 0 {
		return apperr.BadConfig("AckWait", "%w: consumer %s: ack wait %s: must be positive", ErrInvalidConfig, c.Durable, c.AckWait)
	}
	for i, d := range c.BackOff {
		if d <= 0 {
			return apperr.BadConfig("BackOff", "%w: consumer %s: backoff[%d] %s: must be positive", ErrInvalidConfig, c.Durable, i, d)
		}
	}
	if len(c.BackOff) > 0 && c.AckWait != c.BackOff[0] {
		return apperr.BadConfig("AckWait", "%w: consumer %s: ack wait %s differs from backoff[0] %s, which the server uses as ack wait", ErrInvalidConfig, c.Durable, c.AckWait, c.BackOff[0])
	}
	if (c.MaxDeliver < 1 && c.MaxDeliver != -1) || c.MaxDeliver > MaxMaxDeliver {
		return apperr.BadConfig("MaxDeliver", "%w: consumer %s: max deliver %d: want -1 (unlimited) or 1..%d", ErrInvalidConfig, c.Durable, c.MaxDeliver, MaxMaxDeliver)
	}
	if c.MaxDeliver != -1 && c.MaxDeliver <= len(c.BackOff) {
		return apperr.BadConfig("MaxDeliver", "%w: consumer %s: max deliver %d: must exceed the %d backoff values", ErrInvalidConfig, c.Durable, c.MaxDeliver, len(c.BackOff))
	}
	if c.MaxAckPending < 1 || c.MaxAckPending > MaxMaxAckPending {
		return apperr.BadConfig("MaxAckPending", "%w: consumer %s: max ack pending %d: want 1..%d", ErrInvalidConfig, c.Durable, c.MaxAckPending, MaxMaxAckPending)
	}
	return nil
}

// consumer returns the JetStream definition: a durable pull consumer that
// acks explicitly and starts at the oldest retained event. A consumer of
// every event (the default FilterSubject, room.events.>) has no filter: it
// reads the whole stream, its own replays (room.replay.<durable>.>) and the
// other sinks' too, which the consume loop acks unhandled (Delivery never
// shows them). A filter that is not the whole stream would cost the server
// a subject-tree intersection per message: with many room subjects a
// 200,000-event backlog drained at 2,300 events/s with the filters
// [room.events.>, room.replay.<durable>.>] and at 20,000 without. A
// narrower FilterSubject (tests) keeps its own replays through a second
// filter. A sink that needs one event type (roomranks) reads every event
// too: filtered to room.events.*.*.<type> it costs a third less CPU at the
// stream's tail, but drains a backlog 18 times slower
// (BenchmarkConsumeOneType).
func (c ConsumerConfig) consumer() jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		Durable:       c.Durable,
		Description:   "voiceroom sink " + c.Durable,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       c.AckWait,
		BackOff:       c.BackOff,
		MaxDeliver:    c.MaxDeliver,
		MaxAckPending: c.MaxAckPending,
		ReplayPolicy:  jetstream.ReplayInstantPolicy,
	}
	if c.FilterSubject != allEventsSubject {
		cc.FilterSubjects = []string{c.FilterSubject, durableReplaySubject(c.Durable)}
	}
	return cc
}

// DefaultConsumers returns the product's sinks with default settings:
// imbridge, listprojector, roomranks, webhooks, activity and pk (the last
// three never give up on an event for a retry count: MaxDeliver -1; pk
// reads the gifts alone, PKFilterSubject).
func DefaultConsumers() []ConsumerConfig {
	return []ConsumerConfig{
		ConsumerConfig{Durable: DurableIMBridge}.WithDefaults(),
		ConsumerConfig{Durable: DurableListProjector}.WithDefaults(),
		ConsumerConfig{Durable: DurableRoomRanks}.WithDefaults(),
		ConsumerConfig{Durable: DurableWebhooks, MaxDeliver: -1}.WithDefaults(),
		ConsumerConfig{Durable: DurableActivity, MaxDeliver: -1}.WithDefaults(),
		ConsumerConfig{Durable: DurablePK, FilterSubject: PKFilterSubject, MaxDeliver: -1}.WithDefaults(),
	}
}

// Provision creates or updates ROOM_EVENTS, ROOM_EVENTS_DLQ, the
// last-delivery bucket (see [LastDeliveryBucket]) and the given durable
// consumers, so it can run at every start: a second run changes nothing, a
// changed setting is applied. Deployments made before replays existed get
// the replay subjects added to ROOM_EVENTS and to each durable's filter. Every config is validated before
// anything is sent. Settings the server cannot change in place (storage
// type, deliver policy) come back as the server's error.
func Provision(ctx context.Context, js jetstream.JetStream, streams StreamConfig, consumers ...ConsumerConfig) error {
	streams = streams.WithDefaults()
	if err := streams.Validate(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(consumers))
	defs := make([]jetstream.ConsumerConfig, 0, len(consumers))
	for _, c := range consumers {
		c = c.WithDefaults()
		if err := c.Validate(); err != nil {
			return err
		}
		if seen[c.Durable] {
			return fmt.Errorf("%w: consumer %s: defined twice", ErrInvalidConfig, c.Durable)
		}
		seen[c.Durable] = true
		defs = append(defs, c.consumer())
	}
	for _, sc := range streams.streams() {
		if _, err := js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("provision stream %s: %w", sc.Name, err)
		}
	}
	if _, err := js.CreateOrUpdateKeyValue(ctx, streams.lastDeliveryBucket()); err != nil {
		return fmt.Errorf("provision bucket %s: %w", LastDeliveryBucket, err)
	}
	for _, c := range defs {
		if _, err := js.CreateOrUpdateConsumer(ctx, StreamName, c); err != nil {
			return fmt.Errorf("provision consumer %s on %s: %w", c.Durable, StreamName, err)
		}
	}
	return nil
}
