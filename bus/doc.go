// Package bus is everything voiceroom needs from NATS JetStream, behind a
// small API: the event envelope and its subjects, an embedded nats-server
// (the default deployment) or a connection to an external cluster, stream
// and consumer provisioning, publishing with de-duplication, the consume
// loop with ack/nak/term and dead-lettering, and the dead letters:
// listing and replaying them per sink, and finding the ones no advisory
// announced.
//
// # Streams and subjects
//
// Room events live in stream [StreamName] ("ROOM_EVENTS") on subjects
// room.events.<app_code>.<room_id>.<event_type> (see [Subject]). The stream
// uses limits retention, so every durable consumer (the sinks imbridge,
// listprojector, roomranks and webhooks: [DurableIMBridge] and friends)
// keeps its own offset and a new one starts from the oldest retained
// event. Publishes carry the event_id as
// Nats-Msg-Id, so the stream drops a repeat inside the duplicate window
// (two relays, or the fast path and the relay, publishing the same row).
//
// Dead letters live in [DLQStreamName] ("ROOM_EVENTS_DLQ") on subjects
// dlq.<durable>.<original subject>, with headers that say who gave up, why,
// after how many deliveries and where the original sits (see
// [HeaderDLQReason] and friends). [DLQ] lists them per sink and app and
// replays them; [ReadDeadLetters] reads them all.
//
// A replay is stored in ROOM_EVENTS on
// room.replay.<durable>.<app_code>.<room_id>.<event_type>. A sink's
// durable reads the whole stream, unfiltered (a filter narrower than the
// stream costs the server a subject-tree intersection per message, a
// tenth of the drain rate with many rooms), so it is given every sink's
// replays; the consume loop acks another sink's replay without handling
// it (voiceroom_bus_other_sinks_replays_total), and a handler only ever
// sees its own sink's. A durable with a narrower FilterSubject gets its
// own replays through a second filter.
//
// # Delivery guarantees
//
// Delivery is at least once. A handler may see an event again (after a
// nak, a restart, a redelivery of a message it held past the ack wait)
// and must de-duplicate by event_id; order across naks and restarts is
// not guaranteed, so sinks also compare room_version. Within what one
// [Consumer] has fetched, events of one room are handed to the handler in
// stream order and never concurrently: one at a time to a [Handler], in
// order inside one batch (and one batch of the room at a time) to a
// [BatchHandler] or a [HoldingBatchHandler] (which may keep deliveries
// past its return and settles each later), one hand-over at a time to an
// [AsyncHandler] (which may then hold several and settles each with its
// done).
//
// The sinks use three of the four kinds: imbridge and webhooks an
// AsyncHandler (each holds many rooms' deliveries while it sends them:
// batches under Tencent's rate limits, per-endpoint lanes), listprojector
// a HoldingBatchHandler (a batch of rooms in one write, counts held to be
// written together), roomranks a Handler.
//
// # Order per room across a reconnect
//
// The order holds across a lost connection (a JetStream restart, a
// network cut, a pull whose heartbeats stopped). The server counts what
// it sent into the dead connection as delivered and offers it again only
// after the ack wait, behind the rooms' later events; acks sent into it
// are lost and bring handled messages back. So a Consumer keeps a ledger
// of the stream sequences it was handed above the durable's ack floor
// and how it settled each, and after a broken pull, before it hands over
// anything newer, it resumes (resume.go): it holds back what the pull
// brought after the reconnect, reads the durable's ack floor and last
// delivered sequence, reads every sequence between them that the ledger
// does not know back from ROOM_EVENTS (GetMsg), queues those and what it
// held back in stream order, and sends its acks and terms above the ack
// floor again. A redelivery of a message read back is settled with the
// copy (its ack, nak or term go to the redelivery, or, once the copy is
// settled, the redelivery is settled the same way without a handler
// call); a redelivery of a message acked or termed is settled again
// without a handler call. voiceroom_bus_messages_read_back_total counts
// the copies. This assumes one Consumer per durable: a broken pull lost at
// most what it asked for and did not get, and when more sequences are
// unknown (another instance shares the durable) none is read back and
// they come after the ack wait, as before. The ledger costs a map entry
// per message until the ack floor passes it (read every 4096 entries;
// settled entries beyond 262144 are forgotten early). A copy read back
// says NumDelivered 1 (the real count is the server's), and until the
// durable delivers it again its heartbeats go nowhere.
//
// # The consume loop
//
// One loop serves the four kinds of handler. A fetcher pulls as many
// messages as there are free slots (FetchBatch, or (Concurrency+2) ×
// FetchBatch for batches), decodes them and queues each on the worker of
// its room (ConsumerRunConfig.Concurrency workers, by a hash of app and
// room). A worker cuts a turn from its queue (one message, or a batch
// gathered while messages keep coming) and calls the handler for one turn
// at a time; while the handler runs, the fetcher fetches and decodes the
// next. A message holds its slot until it is settled. The kinds are thin
// adapters over the loop, and what every message needs is a small wrapper
// around the handler, each tested alone (middleware.go): the call is
// wrapped by recoverer (a panic fails the turn's unsettled deliveries,
// retryably) and inProgress (the heartbeat below); the result goes
// through poisonQueue (dead letters) and retry (naks), which sort it with
// one function, and is acked last.
//
// At shutdown the loop stops fetching, naks what was fetched and not yet
// handed over (redelivered after a second, once the server has dropped
// this instance's pull request), lets the handler calls in flight (and an AsyncHandler's
// outstanding done calls) finish within ShutdownTimeout, then cancels the
// handlers' ctx and returns after a short grace.
//
// # Failures
//
// A handler's error is sorted by one function (with
// ConsumerRunConfig.Classify, default [IsPermanent]): retryable errors are
// nakked with a delay, permanent ones (and envelopes that cannot be
// decoded, and retryable ones on the last allowed delivery) are copied to
// the dead-letter stream and then terminated. A panic is a retryable
// error. Once Run's ctx has ended, a retryable error (and once the
// handlers' ctx is cancelled, any error) is shutdown's doing: nakked
// like the messages not handed over, never dead-lettered. A message is never terminated before its dead letter is
// stored; if storing fails it is nakked and comes again.
//
// Acks, naks and terms are fire-and-forget by default (a lost one only
// causes a redelivery, which handlers tolerate anyway); Run flushes them
// before it returns. ConsumerRunConfig.AckSync confirms each ack at the
// cost of a round trip per message (see BenchmarkConsume).
//
// While a handler has a message (for an AsyncHandler, until its done),
// the consumer sends "in progress" every third to half of the ack wait
// (one goroutine per consumer looks at the open turns every sixth of it),
// so a slow handler never sees its message redelivered to another
// instance. If the process dies (or hangs) on a message's last
// delivery, the server stops redelivering on its own and only publishes a
// MAX_DELIVERIES advisory; every running Consumer of that durable listens
// for it, reads the message back from the stream and dead-letters it with
// reason [ReasonMaxDeliveries] ("max_deliveries"). At shutdown the
// consumer naks without delay: the server reconsiders such a message only
// when an instance pulls again, which it does after subscribing to the
// advisory, so a restart does not lose a message on its last delivery.
//
// # Gaps: letters nobody heard of
//
// Advisories are not stored. If no instance of the durable is subscribed
// when the server gives up (all of them down, a reconnect, an advisory
// dropped), the message stays in ROOM_EVENTS but no dead letter points at
// it, and the server keeps nothing per message that says so. The gap
// check ([GapChecker], run by every sink process) closes that gap:
//
//   - A Consumer that receives a message on one of its last two
//     deliveries (delivery n with n+1 >= the durable's MaxDeliver: with the
//     default 10, only messages that already failed 8 times) first writes
//     a mark <durable>.<stream seq> into the key-value bucket
//     [LastDeliveryBucket]. It removes the mark when it settles the
//     message: after the handler succeeded and before the ack, or after
//     the dead letter is stored and before the term. A retryable failure
//     keeps it (the next delivery is the last).
//   - The check reads the durable's state (ack floor; delivered and ack
//     pending) and then the marks of messages that state shows settled.
//     Since a handled message loses its mark before its ack, a settled
//     mark is a message that was dead-lettered (the check finds its letter
//     on dlq.<durable>.<subject> by HeaderDLQStreamSeq and only removes
//     the mark) or one the server gave up on unheard (the check reads it
//     from ROOM_EVENTS and stores its letter with reason
//     ReasonMaxDeliveries, then removes the mark).
//
// The cost is bounded: one key-value write and delete per message on its
// last two deliveries (every message when MaxDeliver is 1 or 2, none when
// it is unlimited), and per check one consumer info, one listing of the
// durable's marks (at most GapCheckConfig.MaxPerCheck handled) and a few
// lookups per settled mark. What it does not cover: a process that dies
// between receiving a message and writing its mark, on the last delivery,
// right after the previous delivery also went unanswered without a mark
// (two silent failures in a row; with MaxDeliver 1, one). What it may over-cover: a mark it could not remove after the
// handler succeeded becomes a letter of a handled message, which is
// harmless to replay. nats-server does not always move the ack floor past
// a message it gave up on; the check then waits until nothing is pending
// or a later ack moves the floor. Letters stored before
// ReasonMaxDeliveries became "max_deliveries" say "max deliveries
// reached".
//
// # A dead letter's life
//
//  1. Stored: by the handler path (permanent error, undecodable envelope,
//     retryable error on the last delivery), the advisory path or the gap
//     check, with Nats-Msg-Id "<durable>:<stream seq>" so two paths store
//     one letter within the duplicate window.
//  2. Listed: [DLQ.List] reads only dlq.<sink>.room.events.<app_code>.>
//     from a sequence on, paged.
//  3. Replayed: [DLQ.Replay] stores a copy on the sink's replay subject,
//     with the original data (event_id included) and headers, Nats-Msg-Id
//     "replay:<sink>:<letter seq>" (so a repeated request within the
//     duplicate window stores nothing, while the event's own id is not
//     taken by the first publish) and [HeaderReplayOf] = the letter's
//     sequence. The letter stays listed until the copy is settled. A
//     replay is an old event arriving late: the sinks' room_version guard
//     decides what it may still change.
//  4. Handled: the sink's Consumer decodes the copy like any delivery
//     ([Delivery.Subject] is the room.events subject, [Delivery.ReplayOf]
//     the letter) and, once the handler succeeded, deletes the letter from
//     ROOM_EVENTS_DLQ before acking; if the delete fails the copy is
//     nakked and handled again, so a handled letter is never offered
//     again.
//  5. Failed again: the copy gets its own letter with the new reason
//     (HeaderReplayOf kept, so it says which letter it supersedes), and
//     then the old letter is deleted. If that delete fails, both are
//     listed; replaying both is harmless.
//
// Letters expire with the stream's MaxAge (StreamConfig.DLQMaxAge).
//
// With a consumer BackOff, nats-server delays a nak of delivery n by the
// requested delay plus BackOff[n-1] - AckWait; the consumer subtracts that
// excess so that ConsumerRunConfig.NakDelays hold as configured.
package bus
