package imbridge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
)

// AcceptedBucket is the JetStream key-value bucket in which every bridge
// process records the events Tencent accepted, so that a process that
// did not send an event (another instance, or this one after a restart)
// still knows it was shown. Keys are <SDKAppID>.<event id, base64url>;
// the bucket's TTL is Config.AcceptedWindow.
const AcceptedBucket = "IMBRIDGE_ACCEPTED"

// sharedAccepted is the bucket, behind each process's own record (see
// accepted): a redelivered event (NumDelivered > 1) that this process's
// record lacks is looked up here before it is sent, and every accepted
// event is written here in the background. Both are best effort: a failed
// lookup sends the event (at least once still holds), and a write lost to a
// full queue, a failure, or a crash in the milliseconds after Tencent
// accepted leaves only this process's own record.
type sharedAccepted struct {
	kv   jetstream.KeyValue
	nc   *nats.Conn
	log  *slog.Logger
	puts chan string
}

// sharedPutSubject is the subject a key of the bucket is written on: the
// bucket's stream captures it (JetStream's default API prefix).
func sharedPutSubject(key string) string { return "$KV." + AcceptedBucket + "." + key }

// sharedPutQueue bounds the writes waiting for the bucket.
const sharedPutQueue = 8192

// openSharedAccepted creates or binds the bucket, with the replicas of
// ROOM_EVENTS and a TTL of window.
func openSharedAccepted(ctx context.Context, js jetstream.JetStream, window time.Duration, log *slog.Logger) (*sharedAccepted, error) {
	replicas := 1
	if s, err := js.Stream(ctx, bus.StreamName); err == nil {
		if info, err := s.Info(ctx); err == nil && info.Config.Replicas > 0 {
			replicas = info.Config.Replicas
		}
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      AcceptedBucket,
		Description: "voiceroom imbridge: events Tencent IM accepted, <SDKAppID>.<event id>",
		History:     1,
		TTL:         window,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s: %w", AcceptedBucket, err)
	}
	return &sharedAccepted{kv: kv, nc: js.Conn(), log: log, puts: make(chan string, sharedPutQueue)}, nil
}

func sharedKey(sdkAppID int64, eventID string) string {
	return strconv.FormatInt(sdkAppID, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(eventID))
}

// has reports whether the bucket holds eventID as accepted; a failed
// lookup (bounded by a second) is false.
func (s *sharedAccepted) has(ctx context.Context, sdkAppID int64, eventID string) bool {
	if s == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := s.kv.Get(ctx, sharedKey(sdkAppID, eventID))
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		s.log.Warn("accepted-events bucket lookup failed; sending the event", "event_id", eventID, "error", err)
	}
	return err == nil
}

// record queues the events Tencent accepted for writing; when the queue is
// full they are left to this process's own record.
func (s *sharedAccepted) record(sdkAppID int64, eventIDs []string) {
	if s == nil {
		return
	}
	for _, id := range eventIDs {
		select {
		case s.puts <- sharedKey(sdkAppID, id):
		default:
		}
	}
}

// run writes the queued records until ctx ends, then what is queued,
// and waits up to drain for the server to have them. A record is a plain publish on the key's subject, which
// the bucket's stream stores, without waiting for its ack: the write is
// best effort anyway, and a put that waited for each ack (a JetStream
// publish round trip per accepted event, one at a time) cost the bridge
// a reply subscription, a timer and an ack to decode per event. A stop
// flushes the connection, so that what was queued reached the server.
func (s *sharedAccepted) run(ctx context.Context, drain time.Duration) {
	var warned time.Time
	put := func(key string) {
		if err := s.nc.Publish(sharedPutSubject(key), sharedValue); err != nil && time.Since(warned) > 10*time.Second {
			warned = time.Now()
			s.log.Warn("accepted-events bucket write failed (logged at most every 10s)", "error", err)
		}
	}
	for {
		select {
		case key := <-s.puts:
			put(key)
		case <-ctx.Done():
			for n := len(s.puts); n > 0; n-- {
				put(<-s.puts)
			}
			if err := s.nc.FlushTimeout(drain); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				s.log.Warn("accepted-events bucket writes not confirmed at stop", "error", err)
			}
			return
		}
	}
}

// sharedValue is the value of every key: the key's presence is the record.
var sharedValue = []byte{'1'}
