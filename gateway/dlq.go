package gateway

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/apperr"
	"voiceroom/bus"
)

// DeadLetters lists and replays one sink's dead letters of one app, and
// reads each sink's backlog; *bus.DLQ is one. Errors wrapping
// bus.ErrUnknownSink or bus.ErrInvalidQuery are the client's.
type DeadLetters interface {
	List(ctx context.Context, sink, appCode string, after uint64, limit int) (bus.LetterPage, error)
	Replay(ctx context.Context, sink, appCode string, seqs []uint64) (bus.ReplayResult, error)
	Backlog(ctx context.Context, sink string) (bus.Backlog, error)
	Sinks() []string
}

var _ DeadLetters = (*bus.DLQ)(nil)

// Bounds of the dead-letter routes. A replay of all of a sink's letters
// re-delivers at most bus.DLQConfig.MaxReplay of them (the answer's more
// says when some are left), well within dlqReplayTimeout at the measured
// rate.
const (
	dlqListTimeout   = 5 * time.Second
	dlqReplayTimeout = 8 * time.Second // below the server's write timeout
)

// DeadLetter is one item of GET /admin/v1/dlq.
type DeadLetter struct {
	Seq        uint64 `json:"seq"`
	Sink       string `json:"sink"`
	Subject    string `json:"subject"`
	EventID    string `json:"event_id"`
	EventType  string `json:"event_type"`
	RoomID     string `json:"room_id"`
	Reason     string `json:"reason"`
	Deliveries uint64 `json:"deliveries"`
	FailedAtMs int64  `json:"failed_at_ms"`
}

// DeadLetterPage is the data of GET /admin/v1/dlq. Next is the after of
// the next page, absent on the last one.
type DeadLetterPage struct {
	Items []DeadLetter `json:"items"`
	Next  *uint64      `json:"next"`
}

// ReplayRequest is the body of POST /admin/v1/dlq/replay. No seqs means
// every letter of the sink in the token's app.
type ReplayRequest struct {
	Sink string   `json:"sink"`
	Seqs []uint64 `json:"seqs"`
}

// ReplayResponse is the data of POST /admin/v1/dlq/replay: letters
// re-delivered, named or already replayed ones skipped, and whether a
// replay of all left some for the next call.
type ReplayResponse struct {
	Replayed int  `json:"replayed"`
	Skipped  int  `json:"skipped"`
	More     bool `json:"more"`
}

// SinkBacklog is one item of GET /admin/v1/sinks.
type SinkBacklog struct {
	Sink       string `json:"sink"`
	Pending    uint64 `json:"pending"`
	AckPending uint64 `json:"ack_pending"`
}

// DLQRoutes returns the Mount of the dead-letter routes, within the admin
// token's app only:
//
//   - GET /admin/v1/dlq?sink=&limit=&after= lists one sink's dead letters,
//     oldest first, paged by sequence;
//   - POST /admin/v1/dlq/replay {sink, seqs?} re-delivers them to that sink
//     alone;
//   - GET /admin/v1/sinks answers each sink's pending and ack-pending
//     counts. These are the shared durables' (every app's events together:
//     counts only, never an event), the figures the bus_consumer_* gauges
//     carry, read from the server now; a sink whose durable does not
//     exist (its role never ran) is left out.
//
// An unknown sink, a limit or after that is not a number, and a bad body
// are INVALID_ARGUMENT.
func DLQRoutes(q DeadLetters) Mount {
	return func(rt Routers) {
		rt.Admin.Get("/v1/dlq", func(c *fiber.Ctx) error {
			limit, err := queryUint(c, "limit", 1<<16)
			if err != nil {
				return err
			}
			// int64's bound: the API documents after as int64 (1<<63 was one past it).
			after, err := queryUint(c, "after", math.MaxInt64)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.UserContext(), dlqListTimeout)
			defer cancel()
			sink := c.Query("sink")
			page, err := q.List(ctx, sink, PrincipalOf(c).AppCode, after, int(limit))
			if err != nil {
				return dlqError(q, err)
			}
			out := DeadLetterPage{Items: make([]DeadLetter, 0, len(page.Letters))}
			for _, l := range page.Letters {
				_, room, typ, id := l.Event()
				out.Items = append(out.Items, DeadLetter{
					Seq: l.Sequence, Sink: sink, Subject: l.OriginalSubject, EventID: id, EventType: typ, RoomID: room,
					Reason: l.Reason, Deliveries: l.Deliveries, FailedAtMs: l.Time.UnixMilli(),
				})
			}
			if page.Next > 0 {
				out.Next = &page.Next
			}
			return OK(c, out)
		})
		rt.Admin.Get("/v1/sinks", func(c *fiber.Ctx) error {
			ctx, cancel := context.WithTimeout(c.UserContext(), dlqListTimeout)
			defer cancel()
			sinks := q.Sinks()
			out := make([]SinkBacklog, 0, len(sinks))
			for _, sink := range sinks {
				b, err := q.Backlog(ctx, sink)
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					continue // its role has never run here
				}
				if err != nil {
					return apperr.Wrap(apperr.Unavailable, "sink backlog unavailable", err)
				}
				out = append(out, SinkBacklog{Sink: sink, Pending: b.Pending, AckPending: b.AckPending})
			}
			return OK(c, fiber.Map{"sinks": out})
		})
		rt.Admin.Post("/v1/dlq/replay", func(c *fiber.Ctx) error {
			var req ReplayRequest
			if err := Bind(c, &req); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(c.UserContext(), dlqReplayTimeout)
			defer cancel()
			res, err := q.Replay(ctx, req.Sink, PrincipalOf(c).AppCode, req.Seqs)
			if err != nil {
				return dlqError(q, err)
			}
			return OK(c, ReplayResponse{Replayed: res.Replayed, Skipped: res.Skipped, More: res.More})
		})
	}
}

// queryUint reads an optional non-negative integer query parameter no
// larger than max; absent is 0.
func queryUint(c *fiber.Ctx, name string, max uint64) (uint64, error) {
	s := c.Query(name)
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > max {
		return 0, apperr.Invalid(name, "must be a whole number from 0 to %d", max)
	}
	return v, nil
}

// dlqError sorts a DLQ error into the client's fault or unavailability.
func dlqError(q DeadLetters, err error) error {
	switch {
	case errors.Is(err, bus.ErrUnknownSink):
		return apperr.Invalid("sink", "must be one of %s", strings.Join(q.Sinks(), ", "))
	case errors.Is(err, bus.ErrInvalidQuery):
		return apperr.New(apperr.InvalidArgument, "%v", err)
	default:
		return apperr.Wrap(apperr.Unavailable, "dead letters unavailable", err)
	}
}
