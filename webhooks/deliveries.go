package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
)

// DeliveryLogStream keeps the last deliveries of every endpoint, on
// webhooks.deliveries.<endpoint id>, MaxDeliveriesKept per endpoint: a
// history for admins (GET /admin/v1/webhooks/{id}/deliveries) that costs
// MySQL nothing and trims itself.
const DeliveryLogStream = "WEBHOOK_DELIVERIES"

// MaxDeliveriesKept is how many attempts the log keeps per endpoint.
const MaxDeliveriesKept = 100

const deliverySubjectPrefix = "webhooks.deliveries."

// Outcomes of an attempt: the Delivery's outcome and the "outcome" label
// of voiceroom_webhooks_deliveries_total.
const (
	// OutcomeDelivered: a 2xx answer.
	OutcomeDelivered = "delivered"
	// OutcomeFailed: a 5xx, 408, 429, a redirect, a timeout or a
	// connection error; the same delivery is tried again.
	OutcomeFailed = "failed"
	// OutcomeRejected: another 4xx; the events are dead-lettered (one by
	// one when a batch was refused) and the room carries on.
	OutcomeRejected = "rejected"
)

// Delivery is one attempt to deliver events to an endpoint.
type Delivery struct {
	// ID is the delivery's webhook-id, the same on every attempt.
	ID string `json:"id"`
	// AtMs is when the attempt started.
	AtMs int64 `json:"at_ms"`
	// RoomID is the room of the events.
	RoomID string `json:"room_id"`
	// EventIDs are the events it carried, in order.
	EventIDs []string `json:"event_ids"`
	// Attempt counts the attempts of this delivery, 1 the first.
	Attempt int `json:"attempt"`
	// Outcome is delivered, failed or rejected.
	Outcome string `json:"outcome"`
	// Status is the HTTP status answered, 0 when none came.
	Status int `json:"status"`
	// LatencyMs is from sending the request to the answer (or the error).
	LatencyMs int64 `json:"latency_ms"`
	// Error says what failed, empty when delivered.
	Error string `json:"error"`
}

// DeliveryLog records and reads the delivery history in
// DeliveryLogStream.
type DeliveryLog struct {
	js     jetstream.JetStream
	stream jetstream.Stream
}

// OpenDeliveryLog creates or updates DeliveryLogStream (file storage,
// replicas as the room event streams, a week's history at most) and
// returns its log.
func OpenDeliveryLog(ctx context.Context, js jetstream.JetStream, replicas int) (*DeliveryLog, error) {
	if replicas == 0 {
		replicas = 1
	}
	st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              DeliveryLogStream,
		Description:       "voiceroom webhook deliveries: the last attempts per endpoint, on webhooks.deliveries.<endpoint id>",
		Subjects:          []string{deliverySubjectPrefix + "*"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: MaxDeliveriesKept,
		MaxAge:            7 * 24 * time.Hour,
		Replicas:          replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("provision stream %s: %w", DeliveryLogStream, err)
	}
	return &DeliveryLog{js: js, stream: st}, nil
}

func deliverySubject(id int64) string { return deliverySubjectPrefix + strconv.FormatInt(id, 10) }

// record stores d in the background; a lost record only thins the
// history.
func (l *DeliveryLog) record(id int64, d Delivery) error {
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = l.js.PublishAsync(deliverySubject(id), data)
	return err
}

// last returns endpoint id's last deliveries, newest first, at most limit.
func (l *DeliveryLog) last(ctx context.Context, id int64, limit int) ([]Delivery, error) {
	if limit < 1 || limit > MaxDeliveriesKept {
		return nil, apperr.Invalid("limit", "must be 1 to %d", MaxDeliveriesKept)
	}
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{deliverySubject(id)},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, apperr.Wrap(apperr.Unavailable, "delivery history unavailable", err)
	}
	batch, err := cons.FetchNoWait(MaxDeliveriesKept)
	if err != nil {
		return nil, apperr.Wrap(apperr.Unavailable, "delivery history unavailable", err)
	}
	out := []Delivery{}
	for m := range batch.Messages() {
		var d Delivery
		if json.Unmarshal(m.Data(), &d) == nil {
			out = append(out, d)
		}
	}
	if err := batch.Error(); err != nil {
		return nil, apperr.Wrap(apperr.Unavailable, "delivery history unavailable", err)
	}
	slices.Reverse(out)
	return out[:min(limit, len(out))], nil
}

// forget drops endpoint id's history.
func (l *DeliveryLog) forget(ctx context.Context, id int64) {
	_ = l.stream.Purge(ctx, jetstream.WithPurgeSubject(deliverySubject(id)))
}
