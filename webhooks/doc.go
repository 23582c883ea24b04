// Package webhooks delivers room events to each app's own backends: signed
// HTTP POSTs, in order per room, never dropped for a retry count. Admins
// manage the endpoints ([Endpoints], /admin/v1/webhooks); the [Sink] reads
// the durable consumer "webhooks" on ROOM_EVENTS and delivers.
//
// # Guarantees
//
//   - At least once. An event is acked on the durable only once every
//     endpoint of its app that wants it has had a 2xx for it, has refused
//     it (dead-lettered), or has its backlog cursor stored in MySQL at or
//     before it (see below). A receiver may see an event again (after a
//     restart, a lease change, a move to backlog mode): each delivery has
//     a webhook-id that stays the same across its retries, and each event
//     its event_id, so receivers drop repeats.
//   - Order per endpoint and room: one delivery in flight, the next only
//     after a 2xx (or a rejection); a failed delivery is sent again
//     unchanged (same id, same events, same body), the room's later
//     events waiting. Rooms are delivered concurrently, at most
//     Config.Concurrency deliveries per endpoint. A replayed dead letter
//     is an old event arriving late, after the room's later ones; events
//     carry room_version for receivers that order by it.
//   - Failures: a 5xx, 408, 429, a redirect (never followed), a timeout or
//     a connection error fails the attempt, and the same delivery goes
//     again after Config.RetryDelays (1 s, fixed, forever: the outbox
//     spec's policy), or after a 429's Retry-After (up to MaxRetryAfter).
//     Any other 4xx rejects it: a batch is split and its events sent one
//     by one, and the one refused goes to the sink's dead letters
//     (dlq.webhooks.…, reason "webhook <id>: HTTP <status>: <body's
//     start>"), listed and replayed with /admin/v1/dlq?sink=webhooks; the
//     room carries on. A replay goes to the app's endpoints that want the
//     event, including those that had it.
//   - From its answer: a new endpoint gets every event it wants that is
//     committed after POST /admin/v1/webhooks answered, and an endpoint
//     whose event types a PATCH widened gets every event of the added
//     types committed after the PATCH answered; whichever process
//     delivers, and however late it reads the change (see "Starts").
//     Events stored before are not sent to a new endpoint.
//   - An endpoint with no 2xx for Config.PauseAfter (15 min) since its
//     first failed attempt is paused, the reason stored; its backlog stays
//     in the stream and is delivered first, in order, once an admin
//     resumes it (PATCH enabled true).
//   - Signature: Standard Webhooks 1.0. Headers webhook-id,
//     webhook-timestamp (the attempt's Unix seconds) and
//     webhook-signature: "v1,<base64 HMAC-SHA256 of id.timestamp.body>",
//     one per secret that signs (the previous one too during a rotation),
//     separated by spaces; Voiceroom-Event-Ids lists the events. A
//     receiver checks a signature and refuses a timestamp far from its
//     clock (a replay).
//   - Safety: an URL is https unless Policy.AllowHTTP; its host may not
//     be or resolve to a loopback, private, link-local or otherwise
//     internal address unless Policy.AllowPrivate, checked at creation
//     and again on every connection, on the address being dialled (no DNS
//     rebinding, no proxy); at most Config.ResponseBytes of an answer are
//     read. Signing secrets are sealed in MySQL (see [Sealer]).
//
// # One durable, many endpoints
//
// One durable serves every endpoint of every app: the stream is read
// once, and a new sink costs the server one consumer, not one per
// endpoint (whose filtered reads would cost a subject-tree intersection
// per message each, see bus.ConsumerConfig). The durable's ack is one per
// event, though, and endpoints progress apart: one may be down for hours
// while the others deliver. Holding its events unacked would stall every
// endpoint once the durable's MaxAckPending is reached; acking them would
// lose them. So each endpoint is, at any time, in one of two modes:
//
//   - live: the consumer's handler hands it the events of its app, and
//     each event stays unacked until every live endpoint that took it
//     has settled it. This is the normal mode, and costs MySQL nothing.
//   - backlog: its events are read back from ROOM_EVENTS by a reader of
//     its own (an ordered consumer on its app's subjects) from its
//     cursor, a stream sequence stored in webhook_endpoints.cursor_seq.
//     The handler leaves it every event from the cursor on (acked without
//     it) and only hands it stragglers below the cursor (redeliveries)
//     and replayed dead letters: a reader reads the app's room events
//     (one subject filter), never replays, so a replay always comes
//     through the handler and stays in the endpoint's lanes, even paused.
//
// An endpoint moves to backlog mode when it is paused (by an admin or
// automatically), and when it holds Config.MaxHeld events (or, when all
// endpoints together hold three quarters of what the consumer may hold,
// the one holding most): so a slow or failing endpoint holds at most
// MaxHeld of the durable's events and never stalls the others. The move
// first stores the cursor, the oldest event it holds (or the first the
// handler has not been handed; the consumer's workers hand events over in
// order per room, not across rooms, so that is the lowest it fetched and
// has not handed over yet, see bus.Consumer.OldestQueued), in MySQL;
// only then are its events released,
// each acked once the other endpoints are done with it. If storing fails,
// nothing is released. A paused endpoint's reader does not run: the
// backlog waits in the stream (within its MaxAge, 7 days by default).
//
// A reader puts at most MaxHeld undelivered events in the endpoint's
// lanes. The endpoint goes live again once its reader has read past
// every event the handler left to it (the highest sequence skipped, or
// the stream's end when it read everything) and it keeps up (at most a
// quarter of MaxHeld undelivered); the handler then skips the range the
// reader covered. While it reads, the cursor stored follows the oldest
// event read back and not yet delivered, and becomes NULL once a live
// endpoint holds none: after a crash, an endpoint with a cursor reads
// back from it (and further than any event an earlier process may have
// acked), one without gets its unacked events again from the durable.
//
// # One process delivers
//
// The durable's pull consumer spreads a room's events over the
// instances that pull, which would break the order per room, and the
// cursors are written by one process. So the processes running the
// webhooks role take the delivery lease, a key in the JetStream key-value
// bucket VOICEROOM_WEBHOOKS_LEASE (created if absent, renewed at its
// revision, TTL Config.LeaseTTL): the holder delivers, the others stand
// by and take over once it stops renewing. The holder stops delivering
// when half the TTL has passed since its last renewal, before anyone else
// can take it. A holder that stops gracefully gives back what it held
// (nakked) and releases the lease; one that dies leaves its events
// unacked until the durable's ack wait passes. Either way the durable
// would hand those events out after later ones of the same rooms, so a
// tenure that finds events unsettled starts every endpoint in backlog
// mode from the durable's first unsettled event (its ack floor + 1,
// stored as the cursor first) and reads them back in stream order: each
// room's events stay in order, and come without waiting for the ack
// wait. Events the earlier tenure had delivered in that range, and a
// delivery in flight when the lease changed hands, may be repeated. A
// tenure whose connection to NATS is lost and made again (JetStream
// restarted, say) ends the same way: the durable may have sent it events
// that never arrived, so it hands nothing more over, and the next tenure
// reads back from the first unsettled event. The bus consumer would keep
// each room's order across the reconnect by itself (it reads back what
// never arrived before anything newer, see package bus); the tenure still
// ends, because the same rewind also covers the readers' cursors and
// the events held in lanes, and it is the path a crash takes anyway. The
// price is a repeat of what the tenure delivered above the ack floor.
//
// # Starts
//
// The process delivering reads the endpoints from MySQL every
// Config.RefreshInterval (and at the start of a tenure); its handler
// meanwhile acks the events of an endpoint it does not know yet, or with
// the event types it knew. So the admin side stores a start with the
// change: the ROOM_EVENTS sequence after the stream's last one, read
// before it answers, in webhook_endpoints.start_seq (a widening keeps a
// lower start not yet made sure of). When the delivering process reads
// a start, it makes sure of it: if its handler has been handed nothing
// from the start on (nor a reader read it) the endpoint simply takes what
// comes; otherwise the endpoint moves to backlog mode from the start and
// reads the events back (a new endpoint met at the start of a tenure
// begins there). It then clears start_seq, in the statement that stores
// the cursor, and only if the row still has that start and those event
// types, so an admin's change meanwhile is made sure of in turn. Until it
// is cleared, any tenure makes sure of it again. Events of the old types
// delivered in the range read back may be delivered again.
//
// # History and metrics
//
// Every failed or rejected attempt (id, room, events, attempt, outcome,
// HTTP status, latency, error) goes to the stream WEBHOOK_DELIVERIES, and
// a delivered one at most once per Config.HistoryInterval per endpoint;
// the last MaxDeliveriesKept per endpoint are kept
// (GET /admin/v1/webhooks/{id}/deliveries). The metrics count them all.
// Metrics: voiceroom_webhooks_deliveries_total{outcome},
// voiceroom_webhooks_delivery_duration_seconds{outcome},
// voiceroom_webhooks_events_total{outcome},
// voiceroom_webhooks_commit_to_delivery_seconds,
// voiceroom_webhooks_pending_events{webhook_id},
// voiceroom_webhooks_endpoints{state}, voiceroom_webhooks_lease_held.
package webhooks
