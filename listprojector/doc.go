// Package listprojector keeps the read model of the region-isolated room
// list: a sink of the event bus that writes the MySQL table
// room_list_entries and its Redis mirror from room events ([Projector]),
// the reconcile job that keeps the time-dependent part and the mirror
// right ([Reconciler]), and the rebuild from MySQL alone ([Rebuild]). The
// list query and the operators' pins and hides that read it are package
// roomlist's.
//
// # Guarantees
//
// The read model may lag, never regress. The [Projector] reads the durable
// consumer listprojector (at least once, nearly ordered) and writes a
// room's card only over an older one (room_list_entries.room_version):
// duplicates, redeliveries and out-of-order events leave the newest card in
// place. Within one batch (the events that arrive together, see
// bus.NewHoldingBatchConsumer) it coalesces the events of a room into its
// newest card, skips a card whose listing (roomevent.Listing: everything a
// list shows) equals the stored one, as did every event of the room since
// (its row keeps the older room_version, still a sound guard, as every
// event between the two carried the same listing; counted "unchanged"),
// holds a card that changes only counts for up to Config.CountsDelay
// (hold.go), and writes the other rooms in at most two statements, MySQL
// first (one multi-row UPDATE of the rooms that have a row, one multi-row
// upsert of the others, each in key order); Redis second,
// whose failure never holds MySQL back or fails a delivery. A MySQL
// failure naks the batch (retried with the consumer's delays); an event
// of a known type without a readable card is dead-lettered; an event type
// the projector does not know is counted and its card, if it has one,
// applied.
//
// MySQL is the truth and can restore everything: [Rebuild] recovers each
// room from its snapshot and command log (a [CardLoader]: the rooms
// package's LoadCard, wired by cmd/voiceroom, so no sink imports rooms) and
// writes the cards with the same version guard, so it is safe while
// projectors run. Redis is a cache: the [Reconciler] rebuilds every
// region's sets, cards and hide sets from MySQL periodically, and losing
// Redis loses nothing.
//
// Every key of the Redis mirror is written by this package's code: by the
// projector, the reconcile job and the rebuild, and by a reader of the
// read model only through [Mirror] (a repair from MySQL after a miss, a
// hide set's invalidation after a hide or unhide).
//
// # The read model
//
// A room's row and cached card is a [Card]: the event's card, its app,
// its sort_score and when it was written. sort_score = heat*1000 +
// online_count*100 + occupied_seat_count*10 + a freshness boost (5000
// under 15 minutes of age, 2000 under an hour, 500 under three hours, then
// 0), computed here, never in room state; the reconcile job recomputes it
// as rooms age. A room is listed in its app's visible region while its
// status is "active" ([ListedSQL], [Card.ListedIn]).
//
// Redis keys ([Keys]): room:list:{app:<region>}:hot and :new (ZSETs by
// sort_score and created_at_ms), room:list:{app:<region>}:ready (the sets
// were filled from MySQL and may be read), room:card:{app:<room_id>} (the
// card as JSON, expiring after Config.CardTTL unless rewritten). A set
// without its ready key is never read. room:hides:{app:<region>} (ZSET of
// the applying hides by expiry, with the ready member [HideReady]) and
// room:hides:{app:<region>}:gen (bumped by every hide and unhide): see
// hides_redis.go for why a refill never leaves a state MySQL no longer has.
//
// # Why the model lives here
//
// Package roomlist imports this package, never the reverse: the read
// model's definition belongs to the package that writes it, and roomlist
// needs the rooms package (the audit rows of pins and hides), which a sink
// must never import. What roomlist reads through is exported and small:
// Card (ListedIn), CardColumns and ScanCard (its row), ListedSQL,
// ApplyingHides (the hides that apply, as MySQL holds them), Keys and
// HideReady (the Redis layout), and Mirror (the client, and the only
// writes a reader makes). Nothing of the query (orders, cursors, caches
// in memory) is here.
package listprojector
