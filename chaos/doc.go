// Package chaos is the fault-injection suite: it builds voiceroom, runs one
// process per role group (api+rooms, relay, imbridge, projector, webhooks,
// activity; a second activity process joins for scenario 13) and two
// rooms-only processes (rooms-2, rooms-3: the rooms role on three nodes,
// package roomcluster, with a 2 s lease TTL to keep the scenarios short)
// against a JetStream server hosted by the test, a Redis server of its own
// and a database of its own, waits until every rooms node serves
// partitions, drives continuous load over HTTP, and injects one fault at a
// time:
//
//  1. IM emulator errors, then timeouts (skipped until the emulator exists);
//  2. the JetStream server restarted (the embedded server's whole host);
//  3. the relay-only process SIGKILLed while it drains a backlog (committed
//     while it was stopped and JetStream away), mid-batch: it is started
//     behind a proxy to JetStream that lets 50 publish acks through and
//     holds the rest, and killed while it waits for a held one, its batch
//     claimed; the row says how many rows were pending at the kill, and the
//     scenario fails unless some were;
//  4. the api+rooms process SIGKILLed under load, then restarted;
//  5. the projector process SIGKILLed, then restarted;
//  6. Redis stopped, then started again;
//  7. every MySQL connection of the database KILLed;
//  8. (full mode) MySQL restarted: a MariaDB of the suite's own, installed
//     with mariadb-install-db into a temporary directory on a free port;
//  9. the rooms-only node rooms-2 SIGKILLed under load, then restarted after
//     the fault's length (or once the other nodes hold its partitions, if
//     later); the row says how many partitions and load rooms it held and
//     how long until the other nodes held them all (from the lease bucket),
//     and the longest gap between OKs on its rooms;
//  10. rooms-3 paused (SIGSTOP) for twice the lease TTL (at least the
//     fault's length, and until the other nodes hold its partitions), then
//     resumed (SIGCONT): besides the accounting, it must hand over (stop
//     serving) every partition it held, its
//     voiceroom_cluster_handovers_total{reason="expired"} must rise and its
//     log say "lease not renewed in time" or "lease renewal refused": it
//     noticed on its own clock that its leases lapsed;
//  11. the app's webhook receiver down (503) and, while it is, the
//     webhooks process SIGKILLed holding undelivered events, then
//     restarted (a 2 s delivery lease) and the receiver back: the new
//     deliverer must deliver the dead one's events before the later
//     events of their rooms;
//  12. the activity process SIGKILLed mid-window under load (gifts, mic
//     up, change and down), then restarted: four activities defined just
//     before (a gift_value_sent leaderboard, a gift_count task of target 3,
//     a mic_seconds leaderboard, a room_gift_value leaderboard) must, once
//     the load stops and the activity durable drains, equal a
//     recomputation from MySQL's record: the gifts from the command log's
//     SendGift rows and their wallet-ledger debits (each gift counted once:
//     the scores, reach times, the events in activity_seen, and one task
//     payout per user reaching the target); mic time by pairing each
//     speaker's committed RoomMicUp/RoomMicChanged with whatever ended the
//     seat (the outbox events the commands committed: a SweepStale row of the
//     log names no speaker). Mic time that differs from the exact pairing is
//     reported in the row, not failed: a seat's start redelivered after its
//     end (the killed process's unacknowledged events come back after the
//     room's later ones) opens a session the end no longer closes, a
//     documented limit of the scorer; every seat start must still be
//     counted;
//  13. the four activities settled now, and the process paying the
//     room_gift_value board (paid to the rooms' owners, who send no
//     command) SIGKILLed half-way: the test holds each owner's wallet row
//     locked and releases ranks 1..4 in rank order, so the payer pays
//     those and waits for rank 5's lock; it is killed then (its open
//     transaction rolls back once the lock is released), and the second
//     activity process must take the settlement over when the 2 s lease
//     lapses. Every payout must be paid exactly once (one ledger entry of
//     its key, the payout's user and coins; no other entry of the
//     activity), each announced by one ActivityRewarded and each activity
//     by one ActivitySettled, every one accepted by the webhook receiver;
//     a leaderboard's ranks are those of the recomputed board (for
//     mic_seconds, of the stored board).
//  14. PK battles under load through a SIGKILL of rooms-2: the load's
//     rooms paired into six 60 s battles before the load (rooms of rooms-2
//     against rooms of other nodes where they can be); every other battle
//     across rooms-2 forfeited by its surviving side while rooms-2 is
//     dead, the rest forfeited after the load (full mode: ended at time
//     up). Each battle must be settled once (one PKSettled, at the
//     webhook receiver; one RoomPKEnded per room, with its scores), its
//     scores equal the gifts of the command log and ledger committed in
//     its window (pk_seen exactly those events), no battle or slot left,
//     both rooms' views without a battle and GET /api/v1/pk/{battle_id}
//     the result.
//
// Scenarios 9 and 10 fail unless their node held partitions, some of them
// with rooms the load drives, when the fault hit ("proves nothing");
// placement hashes node ids, new at each start, so before its scenario a
// node holding none of those rooms is restarted for another placement.
//
// After each fault it waits until the system is quiet and checks, against
// MySQL's own record of what committed (command log and outbox), that
// nothing was lost: every command answered 200 is in the command log; no
// command answered with a rejection is, and every logged version has its
// outbox events and the room row its latest version; each room's logged
// versions are 1..max, each once; every committed event is in ROOM_EVENTS
// exactly once and no outbox row is pending; the DLQ holds
// none of the suite's events; every wallet balance equals its ledger and no
// gift was debited twice; every client-visible event reached the IM emulator
// once; every committed event reached the app's webhook receiver (a
// process of its own, role webhooks, and an HTTP server in the test that
// verifies each delivery's signature), each room's events first arriving
// in room_version order (repeats are counted, and dropped by id as a
// receiver is told to); ROOM_EVENTS holds each room's events in
// room_version order; and the list projection equals the rooms' state
// (both skipped, with the reason, while the build lacks them; a room list that answers anything
// but a missing route fails the suite). It prints a table with a row per
// scenario.
//
// Run it with go test -tags chaos ./chaos/ (or the chaos task).
// VOICEROOM_CHAOS=short (the default) keeps it to a few minutes on the
// shared MariaDB; VOICEROOM_CHAOS=full runs its own MariaDB and adds the
// MySQL restart. Without the chaos tag the package holds no tests.
package chaos
