// Package rooms is the heart of voiceroom: one in-memory Room Cell per loaded
// room owns that room's state (seats, presence, bans, password hash, heat,
// gift rank), and every room command goes through one pipeline.
//
// # Surface
//
// Rooms (surface.go) is the one declaration of what callers ask of rooms:
// Execute(ctx, Command) for every command, and the live reads. Service
// implements it; roomcluster.Router implements it by handing each call to
// the room's owner; the HTTP edge calls one or the other. A command carries
// all its caller's inputs (Args, and Password, which is never logged);
// Execute checks them and prepare resolves, per kind, what the caller
// cannot be trusted with (the creator's profile, a password's hash, a
// gift's price, a region) before the room is locked. The command log
// stores a projection: kind, actor, clock and the resolved arguments.
//
// # Pipeline
//
// A command takes its room's cell token, so one room's commands apply one at
// a time. It is applied to a copy of the state (rules.go: pure and
// deterministic, the clock being part of the command). A rejected command
// persists nothing. An accepted one becomes a mutation: its command-log row
// (the command and the answer, for idempotent replays by command_id), one
// room_outbox row per event (status pending, holding the bus.Envelope), the
// rooms row, the snapshot when due, the gift's wallet debit and the region
// audit row. The committer writes mutations of different rooms in shared
// transactions (group commit; see committer.go), each sent with its
// begin and commit in one query (one round trip; a group with gifts first
// reads and locks the payers' wallets), and answers each command only
// after its transaction commits; only then does the copy replace the cell's
// state, and the outbox messages go to the FastPath. If MySQL fails, the
// command fails with UNAVAILABLE and the state is unchanged; deadlocks are
// retried.
//
// Heartbeats, and joins by a user already present, change nothing durable:
// they only move the cell's record of when the user was last heard from.
// That record is soft state on purpose: heartbeats are the most frequent
// request of a voice room, and a durable write each would cost more than all
// other commands together. After a restart every present user gets one full
// PresenceTTL to beat again before the sweeper removes them.
//
// # Deadlines
//
// A command answers within Config.CommandTimeout (and the caller's context,
// if that ends first), whatever MySQL does: the timeout bounds the wait for
// the room's token, loading the room, the lookups before it, the commit
// queue, and the transaction with its deadlock retries, whose every query
// takes the command's context. Past it the command answers UNAVAILABLE at
// once, and its room's token is free for the next command.
//
// A group transaction serves commands of several rooms: it runs until the
// latest deadline of its members (never longer than CommandTimeout), so a
// stuck group holds one of the CommitWorkers that long while the others go
// on writing other rooms' commands. The query that carries the group's
// writes also carries its COMMIT, so a group cut at its deadline while
// that query is out ends in doubt for every member (the server notices
// the closed connection only once the query ends, so it may still commit
// it, after the lock it waited for): each member's cell is dropped as
// below. A member whose own deadline passes first does not
// wait for the group:
//   - if its mutation was still queued, it is never written and the room is
//     unchanged;
//   - if its group was already writing, the outcome is in doubt: the cell is
//     dropped, so the room's next command reloads it from what MySQL holds
//     (snapshot plus command log), and a retry with the same Idempotency-Key
//     answers the committed result if the write committed, or runs afresh if
//     it did not. A reloaded cell that is still behind a late commit is
//     fenced by the command log's key (see Recovery).
//
// The driver abandons a query whose context ended by closing its connection;
// the server rolls its transaction back, but only once it stops waiting for
// the lock it wanted, which mysqldb bounds with innodb_lock_wait_timeout
// (5s unless the DSN sets it). Until then the other rooms of that group stay
// locked in MySQL; rooms outside it are not affected.
//
// # Events and order
//
// Every event is a bus.Envelope whose payload holds the room's Card after
// the command (all a list projection needs) plus the event's own fields. The
// events of one command share its room_version; room_version grows by one per
// accepted command, so consumers order and de-duplicate by (room_version,
// event_id).
//
// # Recovery
//
// A room is its latest snapshot (room_snapshots, written every SnapshotEvery
// versions and at creation, closing, region changes, bans, restores and
// eviction) plus the command-log rows after it, replayed through the same
// rules. Replay has no side effects: the debits, outbox and audit rows of
// those commands were committed with them. The command log's primary key
// (app_code, room_id, room_version) fences a second writer of the same room:
// a cell whose state is stale fails its write, is dropped and reloads. Rooms load on their first command; at
// start the rooms role also loads every room whose last state lists users, so
// users who left while the process was down are swept. Idle rooms with nobody
// present are evicted from memory.
//
// # Several nodes
//
// With an Ownership (package roomcluster) a service serves only the rooms of
// the partitions its node holds: a command, a view or an IM membership check
// of another room answers ErrNotServing before anything runs, and a command
// that committed while the node's lease lapsed answers in doubt instead of
// OK. A write refused by the command log's key is reported (Fenced), so the
// node can stop serving a partition another node took. Release drops the
// cells of partitions handed over, after their commands in flight; Recover
// loads a taken partition's rooms that list users, with a fresh presence
// window. The sweeper visits only the rooms the node serves.
//
// # Moderation
//
// BanRoom and RestoreRoom (moderation.go) are room commands like the others,
// issued by admins only, each with a required reason (1..256 characters) and
// idempotent by Idempotency-Key. A ban removes everyone present (one
// RoomUserLeft each, reason banned), frees their seats (locks, password, host
// and per-user bans stay), sets the status banned and emits RoomBanned; every
// event carries the card, so a list drops the room on its status alone. A
// restore sets it active again (RoomRestored); nobody is brought back.
// Banning a banned room or restoring an active one changes nothing; neither
// applies to a closed room.
//
// A banned room refuses joins, heartbeats, seat, gift, password, host and
// kick commands with FAILED_PRECONDITION "room is banned", even from its
// owner or an admin. Leaves and presence sweeps find nobody and change
// nothing. An admin may still change its visible region, and close it.
//
// Decided: a banned room still is its owner's one active room, and keeps its
// short id (rooms.active_owner_user_id and active_short_id count banned), so
// a ban cannot be dodged by opening another room; a second create is
// ALREADY_EXISTS naming the banned room. For the same reason only an admin
// may close a banned room (the owner gets FAILED_PRECONDITION): closing is
// what frees the owner to open a new one.
//
// # Audit trail
//
// Every operator action on a room is one room_audit row (audit.go): operator
// (the admin token's sub, "admin:<sub>"), time, action, reason, and the
// values before and after as JSON. The operator's room commands (region
// change, ban, restore, close by an admin) write theirs in their own
// transaction, so an action is audited exactly when it takes effect; a
// command that changes nothing writes none. A region change is also still
// written to room_region_audit, and the migration copied the older ones into
// the trail. Actions outside the room commands (pin and unpin, hide and
// unhide) call InsertAudit with their own *sql.Tx (the change and its row
// commit together) and then Service.CountModeration, or
// Service.RecordAudit outside a transaction. Service.Audit reads a room's
// trail newest first (audit_id descending) in pages, within one app.
// voiceroom_rooms_moderation_actions_total{action} counts committed actions; every
// action's series exists from the start at 0.
//
// # Names
//
// View is the room as clients see it (docs/openapi.yaml's schema Room, "the
// room snapshot"); a snapshot
// here is only the stored state of recovery (room_snapshots). The
// room_outbox row is voiceroom.OutboxRow and a cell's key voiceroom.RoomKey,
// shared with the outbox relay.
//
// A loaded room with 50 present users holds about 4 KiB (BenchmarkRoomMemory).
package rooms
