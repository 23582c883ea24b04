package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// LastDeliveryBucket is the JetStream key-value bucket in which consumers
// mark the messages they received on one of their last two deliveries, so
// that the gap check (see [GapChecker]) can find a message the server gave
// up on while nobody listened for its MAX_DELIVERIES advisory. Keys are
// <durable>.<stream seq>, values the delivery count.
const LastDeliveryBucket = "ROOM_EVENTS_LAST_DELIVERY"

// lastDeliveryBucket is the bucket's definition: one value per key, kept
// as long as ROOM_EVENTS keeps events (a mark outliving its message
// means nothing).
func (c StreamConfig) lastDeliveryBucket() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      LastDeliveryBucket,
		Description: "voiceroom: messages of ROOM_EVENTS on one of their last deliveries, <durable>.<seq>",
		History:     1,
		TTL:         c.MaxAge,
		Storage:     jetstream.FileStorage,
		Replicas:    c.Replicas,
	}
}

// marks are one durable's last-delivery marks.
type marks struct {
	kv      jetstream.KeyValue
	durable string
}

func openMarks(ctx context.Context, js jetstream.JetStream, durable string) (marks, error) {
	kv, err := js.KeyValue(ctx, LastDeliveryBucket)
	if err != nil {
		return marks{}, fmt.Errorf("bucket %s: %w", LastDeliveryBucket, err)
	}
	return marks{kv: kv, durable: durable}, nil
}

func (m marks) key(seq uint64) string {
	return m.durable + "." + strconv.FormatUint(seq, 10)
}

// marked reports whether a delivery numbered nd of a consumer whose server
// MaxDeliver is maxDeliver is one of the last two, which get a mark. With
// MaxDeliver 1 or 2 that is every delivery; unlimited deliveries get none.
func marked(nd uint64, maxDeliver int) bool {
	return maxDeliver > 0 && nd+1 >= uint64(maxDeliver)
}

// put marks seq as received on delivery nd.
func (m marks) put(ctx context.Context, seq, nd uint64) error {
	ctx, cancel := context.WithTimeout(ctx, dlqPublishTimeout)
	defer cancel()
	if _, err := m.kv.Put(ctx, m.key(seq), []byte(strconv.FormatUint(nd, 10))); err != nil {
		return fmt.Errorf("mark %s seq %d: %w", m.durable, seq, err)
	}
	return nil
}

// remove deletes the mark of seq; a missing mark is no error.
func (m marks) remove(ctx context.Context, seq uint64) error {
	ctx, cancel := context.WithTimeout(ctx, dlqPublishTimeout)
	defer cancel()
	if err := m.kv.Delete(ctx, m.key(seq)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("unmark %s seq %d: %w", m.durable, seq, err)
	}
	return nil
}

// mark is one mark read back.
type mark struct {
	seq        uint64
	deliveries uint64
	revision   uint64
	created    time.Time
}

// list returns the durable's marks with a sequence at or below maxSeq,
// at most limit of them.
func (m marks) list(ctx context.Context, maxSeq uint64, limit int) ([]mark, error) {
	lister, err := m.kv.ListKeysFiltered(ctx, m.durable+".*")
	if err != nil {
		return nil, fmt.Errorf("list marks of %s: %w", m.durable, err)
	}
	var keys []string
	for key := range lister.Keys() {
		seq, err := strconv.ParseUint(strings.TrimPrefix(key, m.durable+"."), 10, 64)
		if err != nil || seq > maxSeq || len(keys) >= limit {
			continue // keep draining: the lister stops only when read to its end
		}
		keys = append(keys, key)
	}
	if err := ctx.Err(); err != nil { // the lister closes early when ctx ends
		return nil, fmt.Errorf("list marks of %s: %w", m.durable, err)
	}
	out := make([]mark, 0, len(keys))
	for _, key := range keys {
		e, err := m.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // settled meanwhile
		}
		if err != nil {
			return out, fmt.Errorf("read mark %s: %w", key, err)
		}
		seq, _ := strconv.ParseUint(strings.TrimPrefix(key, m.durable+"."), 10, 64)
		nd, _ := strconv.ParseUint(string(e.Value()), 10, 64)
		out = append(out, mark{seq: seq, deliveries: nd, revision: e.Revision(), created: e.Created()})
	}
	return out, nil
}
