package imbridge

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

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
	log  *slog.Logger
	puts chan string
}

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
	return &sharedAccepted{kv: kv, log: log, puts: make(chan string, sharedPutQueue)}, nil
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

// run writes the queued records until ctx ends, then what is queued
// within drain.
func (s *sharedAccepted) run(ctx context.Context, drain time.Duration) {
	var warned time.Time
	put := func(ctx context.Context, key string) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := s.kv.Put(pctx, key, []byte{'1'}); err != nil && ctx.Err() == nil && time.Since(warned) > 10*time.Second {
			warned = time.Now()
			s.log.Warn("accepted-events bucket write failed (logged at most every 10s)", "error", err)
		}
	}
	for {
		select {
		case key := <-s.puts:
			// Not cancelled by ctx: a write under way when the bridge
			// stops is finished (within its own bound), not dropped.
			put(context.WithoutCancel(ctx), key)
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drain)
			defer cancel()
			for {
				select {
				case key := <-s.puts:
					put(dctx, key)
					if dctx.Err() != nil {
						return
					}
				default:
					return
				}
			}
		}
	}
}
