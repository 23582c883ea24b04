// Package outboxrelay moves room events from the MySQL room_outbox table
// into the JetStream stream ROOM_EVENTS (docs/operating.md, "The outbox"). A row
// is pending until the stream has stored its event, then published; status
// says nothing about what any consumer did. A row is pending when its
// status says so or when it lies in an in-flight group (below).
//
// The package owns the SQL of the table (rows.go): AddRows and InsertRows
// write a command's rows (the rooms package calls AddRows inside the
// command's own transaction), PendingCond, InFlightCovers and InFlightJoin
// say which rows are pending for every reader. The row itself,
// voiceroom.OutboxRow, is the root package's.
//
// Two components do it:
//
//   - [FastPath] is the synchronous publish. The rooms package hands
//     it the outbox messages of each group commit right after the commit;
//     it publishes them at once. Whatever it cannot do quickly (a failed
//     or slow publish, a full queue, a down connection) it leaves to the
//     relay. It never fails a command and never touches retry_count.
//
// # In-flight groups
//
// While the fast path takes events (FastPath.Taking), a group commit
// writes its outbox rows in flight: status 'published' with no
// published_at_ms, and one room_outbox_inflight row covering their ids
// (consecutive: one multi-row INSERT under innodb_autoinc_lock_mode 0 or
// 1, which Run checks). Every reader counts them as pending
// (PendingCond). When the stream has acked every event
// of the group, the fast path deletes the in-flight row, in batches: two
// rows written per group instead of one UPDATE per event. When it leaves
// one of the group's events to the relay it sets the group's rows back to
// pending at once; a group nobody settles (its process died after the
// commit) is set back to pending by a relay pass once it is older than
// Config.InFlightGrace. Rows written pending (no fast path, or it was not
// taking) are marked by event_id in batches, as before.
//   - [Relay] is the compensation worker. Every PollInterval it makes a
//     pass over the pending rows, oldest first, and publishes them.
//
// # Claiming and pipelining
//
// A pass claims rows in batches of BatchSize with SELECT ... FOR UPDATE
// SKIP LOCKED through idx_room_outbox_pending (status, id), in a READ
// COMMITTED transaction so that no gap is locked and commands keep
// inserting. The transaction stays open while its batch is published and
// commits with the batch's marks, so no two relays (in one process or
// many) ever publish a row at the same moment, and a crash at any point
// rolls back to pending. Of several relays on one database one drains at
// a time, the one holding a MySQL named lock; the others stand by (see
// drainLock). Up to Pipeline batches are in flight at once, in
// three stages: one goroutine claims (the only serial stage, so each
// batch's transaction is begun ahead of its claim), one decodes and
// publishes, and Pipeline/2 record results and commit; so MySQL and
// JetStream work at the same time, and commits share fsyncs. Each batch
// is published asynchronously in one PublishBatch call, in id order
// (bounded in-flight messages, PublishTimeout on the batch); a row is
// marked published (published_at_ms set, last_error cleared) only after
// the stream's ack. A failed row gets retry_count + 1 and a short,
// sanitized last_error and stays pending; it never holds back the other
// rows. A pass ends when a claim comes back short, when it has run for a
// poll interval (the next starts again from the oldest row, so failed rows
// are retried once per interval: a fixed interval, no backoff, forever, as
// docs/operating.md's "The outbox" promises), when a whole batch failed
// (JetStream is most likely down; the next tick tries again), or when
// Run's ctx ends. A failure to claim or mark is logged and retried next tick; rows whose marks failed
// stay pending and are published again, which the stream de-duplicates.
//
// A row whose envelope cannot be decoded, or does not agree with its
// row's columns, is never published nor deleted: it stays pending with
// retry_count + 1 and last_error "undecodable envelope: ...", is counted
// (voiceroom_outbox_undecodable_total), logged once per process with its
// event_id, and listed by GET /admin/v1/outbox (the [Report] of an [Inspector]). It costs one
// row of a batch per pass and never blocks the rows behind it.
//
// # Order in the stream
//
// Rows of one room are written in room_version order, so id order is
// room_version order within a room.
//
// In normal running (JetStream up, one relay or none busy) each room's
// events are stored in room_version order: the fast path publishes a
// room's events one at a time, each after the previous one's ack, and the
// relay publishes in id order over one connection. Once one of a room's
// events is left to the relay (failed, timed out, queue full,
// disconnected), the fast path leaves all of that room's later events to
// the relay as well, until the relay has published the newest of them;
// the relay publishes them oldest first. Within a batch the relay never
// has two messages of one room in flight: it publishes in waves, the
// first row of every room, then the next of each whose previous one was
// acked, so a later event is never stored while an earlier one of its
// room fails (a server restarting refuses some messages of a batch and
// accepts the next ones). Within a pass, once a row of a room fails or
// is held back, the relay publishes none of that room's later rows until
// the next pass, which starts again from the oldest pending row.
//
// Before it publishes a batch the relay reads, for each of its rooms whose
// rows do not follow on from what the pass already claimed of the room,
// the rows from the version before the batch's first of the room to its
// last,
// and holds a row back while an earlier row of its room is not in the
// stream and not this pass's to publish: one a fast path still has in
// flight, one set back to pending after the pass's claims went past it
// (it was in flight then), or one another relay has claimed. So a room's
// events keep their order when a fast path gives its in-flight events
// back in the middle of a pass (JetStream restarting), and while a relay
// taking over still overlaps the one it replaces.
//
// One failure can still break it, so consumers must not rely on it
// alone: an event whose ack was lost is stored once and published again
// later; inside the stream's duplicate window (2m by default) the repeat
// is dropped, after it a second copy is stored, after newer events of its
// room.
//
// So delivery is at least once and only nearly ordered: consumers
// de-duplicate by event_id and guard by room_version (apply an event only
// if it is newer than what they applied for its room; an older one is a
// late repeat or a straggler). Nothing committed is ever dropped: a row
// stays pending until the stream has stored it, however long that takes.
//
// # Retention and metrics
//
// The relay deletes published rows older than Retention, once per
// RetentionInterval: it walks the published rows in id order through
// idx_room_outbox_pending, RetentionBatch at a time, and deletes the old
// ones by id, so each statement is small. Pending rows are never deleted.
// (An index on published_at_ms would make the walk exact, but it costs
// every insert and every mark about a fifth more MySQL time; rows are
// published in nearly id order, so a row published late is only deleted
// a little late.)
//
// Metrics (see [NewMetrics]): voiceroom_outbox_pending_rows and
// voiceroom_outbox_oldest_pending_age_seconds (gauges refreshed every
// StatsInterval by each relay), voiceroom_outbox_publish_success_total,
// voiceroom_outbox_publish_failure_total and voiceroom_outbox_publish_latency_seconds
// (commit to stream ack, a histogram), each by path (fast or relay), plus
// counters of duplicates, undecodable rows, events the fast path left to
// the relay and why, held-back rows, failed statements and retention.
//
// The rows are voiceroom.OutboxRow, the type the rooms package writes.
// Statements are prepared on the pool before a pass's transactions begin,
// never while one holds a connection (store_mysql.go).
//
// Logs carry worker=room_outbox, path, and per event event_id,
// event_type, room_id, retry_count, status and error; node_id comes with
// the logger handed in.
package outboxrelay
