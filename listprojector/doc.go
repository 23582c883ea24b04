// Package listprojector is the region-isolated room list: a sink of the
// event bus that keeps the MySQL read model room_list_entries (and its
// Redis mirror) from room events, the list and search query behind
// GET /api/v1/rooms, operators' region pins and hides, the reconcile job
// and the rebuild from MySQL alone.
//
// # Guarantees
//
// Isolation never fails: every query, row and key carries the app_code of
// the caller's token and the caller's own region (read by the HTTP edge
// from the regions service); every card shown, whatever it was read from
// (Redis, a frozen order, MySQL), is checked to be an active room of that
// app visible in that region. Only status "active" is listed, so closed
// and banned rooms leave every list.
//
// Hides never lag: a room hidden in a region ([Hides]) is left out of that
// region's lists, search and pins by the next request (one begun after
// the hide returned, in any api process), the next page of a chain under
// way included; an unhide or an expiry shows just as soon (see
// [Lister.List] for chains). Each page reads its rooms' hides from the
// region's Redis hide set in the same round trip as their cards, and from
// MySQL whenever that set may not hold MySQL's state: every hide and
// unhide deletes it after its commit, a refill never overwrites a newer
// change, and a process whose delete failed reads MySQL until it refilled
// the set (the argument for each failure order is on hideCache, with its
// one residual window). A hide touches
// no other region and no other app, and the room stays joinable by id.
// Every pin, unpin, hide and unhide is written to the room's audit trail
// (rooms.InsertAudit) in the transaction that makes it, then counted in
// rooms_moderation_actions_total.
//
// The list may lag. The [Projector] reads the durable consumer
// listprojector (at least once, nearly ordered) and writes a room's card
// only over an older one (room_list_entries.room_version): duplicates,
// redeliveries and out-of-order events leave the newest card in place.
// Within one batch (the events that arrive together, see
// bus.NewBatchConsumer) it coalesces the events of a room into its newest card
// and writes all rooms in one multi-row upsert, MySQL first; Redis second,
// whose failure never holds MySQL back or fails a delivery. A MySQL
// failure naks the batch (retried with the consumer's delays); an event
// of a known type without a readable card is dead-lettered; an event type
// the projector does not know is counted and its card, if it has one,
// applied.
//
// MySQL is the truth and can restore everything: [Rebuild] recovers each
// room from its snapshot and command log (rooms.LoadCard) and writes the
// cards with the same version guard, so it is safe while projectors run.
// Redis is a cache: [Lister] reads it first and falls back to MySQL on a
// miss, a partial miss or an error (then leaves Redis alone for a second),
// repairing what it missed; the [Reconciler] rebuilds every region's sets
// and cards from MySQL periodically. Losing Redis loses nothing. While
// [Lister.Run] runs, each api process also keeps the cards and hide sets
// it read in a near cache that Redis keeps current (client tracking; see
// nearCache): a page is then read from memory, as fresh as a Redis read
// made when its request arrived. Without Redis, cards read from MySQL are
// reused for at most FreezeEvery; hides are read per request.
//
// # Order and cursors
//
// hot is sort_score DESC, room_id ASC; new is created_at_ms DESC, room_id
// ASC. sort_score = heat*1000 + online_count*100 + occupied_seat_count*10
// + a freshness boost (5000 under 15 minutes of age, 2000 under an hour,
// 500 under three hours, then 0), computed here, never in room state; the
// reconcile job recomputes it as rooms age. Active, unexpired pins of the
// region come first (weight DESC, expires_at_ms DESC, room_id ASC), each
// room once, and are not repeated below; a pin applies only while its
// room is active in the pin's region.
//
// Cursors are opaque, signed (HMAC-SHA256) and bound to app, region, tab
// and query: anything else is INVALID_ARGUMENT. A chain of pages walks one
// frozen order of the list (see [Lister.List] for its bounds and what
// happens past them), so it neither repeats nor skips rooms while scores
// change between pages.
//
// # Redis keys
//
// room:list:{app}:<region>:hot and :new (ZSET), room:list:{app}:<region>:ready
// (the sets were filled from MySQL and may be read), room:card:{app}:<room_id>
// (the card as JSON, expiring after Config.CardTTL unless rewritten). A set
// without its ready key is never read. room:hides:{app}:<region> (ZSET of
// the applying hides by expiry, with the ready member "") and
// room:hides:{app}:<region>:gen (bumped by every hide and unhide): see
// hideCache.
package listprojector
