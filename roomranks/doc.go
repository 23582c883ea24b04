// Package roomranks keeps each room's daily and weekly contribution ranks:
// the coins of the gifts sent in the room, by sender and by receiver, over
// the current day and week of the app's calendar ([Calendar]: each app's
// time zone, UTC by default; a day starts at local midnight, a week on
// Monday at 00:00; a new period starts empty at its boundary).
//
// # Guarantees
//
// MySQL is the truth. A gift command writes its ledger row
// (wallet_ledger, kind 'gift': sender, receiver, coins, and created_at_ms
// = the command's time) in the command's own transaction, so a gift is in
// the ledger once if and only if it committed, whatever retries happened.
// A gift of price 0 writes no ledger row and counts in no rank.
//
// Redis holds one sorted set per room, side (sender or receiver), period
// and period start, which always holds its fill member: the version its
// MySQL sums were read at. A read answers from the set when it is there,
// else from MySQL ([Reader]), and then fills the set; with Redis down it
// reads MySQL (after one failed call, Redis is left alone for a second
// and then probed: package redisgate). Both answer the same: more coins
// first, then the smaller user id. Every api and projector process must
// have the same time zones (Config.TimeZones).
//
// Every gift is counted once in a set, never twice, never lost:
//
//   - The [Projector] reads the durable consumer roomranks (at least once,
//     nearly ordered) and applies each RoomGiftSent event in one Lua
//     script. The script keeps a journal per room: the latest
//     Config.JournalSize gift events by room_version, and the floor, the
//     highest version dropped from it. A version in the journal is a
//     repeat and changes nothing. A new version is journaled and added
//     to each of its four sets (sender and receiver, its day and its week,
//     by the event's occurred_at_ms) whose fill version is below it; a set
//     that is not in Redis is left to its next fill.
//   - A fill reads the sums and the room's latest command-log version V
//     in one MySQL statement (one consistent snapshot: a command's ledger
//     and log rows commit together, a room's commands in version order, so
//     the sums hold exactly the gifts up to V), then, in one script,
//     stores the sums plus the journaled gifts above V of the period, and
//     V as the set's fill version. The projector skips versions up to V
//     for that set: the gifts it handled while the set was missing are in
//     the journal, the others in the sums.
//   - A version at or below the floor (an event repeated or delivered
//     late after more than JournalSize newer gifts of its room) cannot be
//     told apart: a set filled at or above it counts it already; any other
//     of its sets is dropped (counted "invalidated") and filled again
//     from MySQL on its next read. A fill whose V is below the floor
//     (more than JournalSize gifts since its MySQL read) is not stored.
//
// A Redis failure makes the projector retry the event (its consumer never
// gives up by default), so a set that survives an outage misses nothing;
// a Redis that lost its data has no sets, and they are filled again from
// MySQL. A Redis restored from an older snapshot, or a gift event
// dead-lettered, leaves sets behind MySQL until they expire: `voiceroom
// ranks rebuild` ([Rebuild]) replaces them, safely while projectors run.
// Scores are float64 in Redis: exact up to 2^53 coins per user and period.
//
// # Redis keys
//
// All keys of a room share the hash tag {app:room} (one cluster slot per
// room): rank:{app:room}:<sender|receiver>:<day|week>:<start_ms> (ZSET
// of users by coins, members of 19 digits, MaxInt64 - user id, so that
// ties order by user id; and the fill member "fill:<version>" at score
// -inf), rank:{app:room}:journal (ZSET of gift entries by version) and
// rank:{app:room}:floor. A set expires Config.ExpireAfter after its
// period ends; the journal outlives every set of its room. Redis must not
// evict these keys on its own (run it with noeviction, or with room to
// spare): a journal evicted under its sets forgets which gifts they hold.
package roomranks
