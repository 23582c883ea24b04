package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// When a message's last delivery is never answered, the server gives up
// on it by itself and only publishes a MAX_DELIVERIES advisory. Every
// running Consumer of the durable listens for it and turns it into a dead
// letter (reason ReasonMaxDeliveries).

// maxDeliveriesAdvisoryPrefix starts the subject of the server's
// MAX_DELIVERIES advisory; stream and consumer name follow.
const maxDeliveriesAdvisoryPrefix = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES."

// Handling of advisories.
const (
	advisoryRetryWait  = 500 * time.Millisecond // between dead-letter attempts of an advisory
	advisoryAttempts   = 3
	advisoryBufferSize = 256
)

// maxDeliveriesAdvisory is the part of the server's
// io.nats.jetstream.advisory.v1.max_deliver event that Run needs.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// advisories is a Consumer's subscription to its durable's
// MAX_DELIVERIES advisories.
type advisories struct {
	c      *Consumer
	stream jetstream.Stream // ROOM_EVENTS, to read the messages back
	ch     chan *nats.Msg
	sub    *nats.Subscription
}

// subscribeAdvisories subscribes to the durable's MAX_DELIVERIES
// advisories and waits until the server has the subscription, so that
// the loop fetches only once an advisory cannot be missed.
func (c *Consumer) subscribeAdvisories(stream jetstream.Stream) (*advisories, error) {
	nc := c.js.Conn()
	a := &advisories{c: c, stream: stream, ch: make(chan *nats.Msg, advisoryBufferSize)}
	subject := maxDeliveriesAdvisoryPrefix + StreamName + "." + c.cfg.Durable
	var err error
	if a.sub, err = nc.ChanSubscribe(subject, a.ch); err != nil {
		return nil, fmt.Errorf("consumer %s: subscribe %s: %w", c.cfg.Durable, subject, err)
	}
	if err := nc.FlushTimeout(dlqPublishTimeout); err != nil {
		a.close()
		return nil, fmt.Errorf("consumer %s: subscribe %s: %w", c.cfg.Durable, subject, err)
	}
	return a, nil
}

// close unsubscribes.
func (a *advisories) close() {
	if err := a.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		a.c.log.Warn("unsubscribe advisories", "error", err)
	}
}

// watch dead-letters the messages the server gave up on, until ctx ends.
func (a *advisories) watch(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-a.ch:
			a.handle(ctx, m)
		}
	}
}

// handle reads the message the server gave up on and dead-letters it with
// reason ReasonMaxDeliveries. The advisory is fire-and-forget: if this
// fails, or no instance was running when the server gave up, the message
// stays in ROOM_EVENTS without a dead letter and the error log names its
// sequence (the gap check finds it later).
func (a *advisories) handle(ctx context.Context, m *nats.Msg) {
	c := a.c
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
		err = a.deadLetter(ctx, adv)
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

// deadLetter stores the letter of the message adv names, then removes
// the letter it replayed and its mark.
func (a *advisories) deadLetter(ctx context.Context, adv maxDeliveriesAdvisory) error {
	c := a.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dlqPublishTimeout)
	defer cancel()
	raw, err := a.stream.GetMsg(ctx, adv.StreamSeq)
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
