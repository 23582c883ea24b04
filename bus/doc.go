// Package bus is everything voiceroom needs from NATS JetStream, behind a
// small API: the event envelope and its subjects, an embedded nats-server
// (the default deployment) or a connection to an external cluster, stream
// and consumer provisioning, publishing with de-duplication, the consume
// loop with ack/nak/term and dead-lettering, and reading dead letters.
//
// # Streams and subjects
//
// Room events live in stream [StreamName] ("ROOM_EVENTS") on subjects
// room.events.<app_code>.<room_id>.<event_type> (see [Subject]). The stream
// uses limits retention, so every durable consumer (imbridge,
// listprojector, later activity/audit) keeps its own offset and a new one
// starts from the oldest retained event. Publishes carry the event_id as
// Nats-Msg-Id, so the stream drops a repeat inside the duplicate window
// (two relays, or the fast path and the relay, publishing the same row).
//
// Dead letters live in [DLQStreamName] ("ROOM_EVENTS_DLQ") on subjects
// dlq.<durable>.<original subject>, with headers that say who gave up, why,
// after how many deliveries and where the original sits (see
// [HeaderDLQReason] and friends). [ReadDeadLetters] lists them.
//
// # Delivery guarantees
//
// Delivery is at least once. A handler may see an event again (after a
// lost ack, a redelivery, a restart) and must de-duplicate by event_id;
// order across redeliveries is not guaranteed, so sinks also compare
// room_version. Within what one [Consumer] has fetched, events of one room
// are handled one at a time in stream order.
//
// # Failures
//
// A handler's error is sorted by one function (ConsumerRunConfig.Classify,
// default [IsPermanent]): retryable errors are nakked with a delay,
// permanent ones (and envelopes that cannot be decoded, and retryable ones
// on the last allowed delivery) are copied to the dead-letter stream and
// then terminated. A message is never terminated before its dead letter is
// stored; if storing fails it is nakked and comes again.
//
// Acks, naks and terms are fire-and-forget by default (a lost one only
// causes a redelivery, which handlers tolerate anyway); Run flushes them
// before it returns. ConsumerRunConfig.AckSync confirms each ack at the
// cost of a round trip per message (see BenchmarkConsume).
//
// While a handler runs, the consumer sends "in progress" every third of the
// ack wait, so a slow handler never sees its message redelivered to
// another instance. If the process dies (or hangs) on a message's last
// delivery, the server stops redelivering on its own and only publishes a
// MAX_DELIVERIES advisory; every running Consumer of that durable listens
// for it, reads the message back from the stream and dead-letters it with
// reason [ReasonMaxDeliveries]. Advisories are not stored: if no instance
// of the durable is subscribed at that moment, the message stays in
// ROOM_EVENTS (nothing is deleted) but no dead letter points at it; the
// consumer's ack floor has moved past it. At shutdown the
// consumer naks without delay: the server reconsiders such a message only
// when an instance pulls again, which it does after subscribing to the
// advisory, so a restart does not lose a message on its last delivery.
//
// With a consumer BackOff, nats-server delays a nak of delivery n by the
// requested delay plus BackOff[n-1] - AckWait; the consumer subtracts that
// excess so that ConsumerRunConfig.NakDelays hold as configured.
package bus
