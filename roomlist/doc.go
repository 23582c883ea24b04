// Package roomlist is the read side of the region-isolated room list: the
// list and search query behind GET /api/v1/rooms ([Lister]) and the
// operators' list controls, region pins ([Pins]) and hides ([Hides]). It
// reads the read model that package listprojector (the sink of the event
// bus) writes: room_list_entries and its Redis mirror.
//
// # Guarantees
//
// Isolation never fails: every query, row and key carries the app_code of
// the caller's token and the caller's own region (read by the HTTP edge
// from the regions service); every card shown, whatever it was read from
// (Redis, a frozen order, MySQL), is checked to be an active room of that
// app visible in that region (listprojector.Card.ListedIn). Only status
// "active" is listed, so closed and banned rooms leave every list.
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
// one residual window). A hide touches no other region and no other app,
// and the room stays joinable by id. Every pin, unpin, hide and unhide is
// written to the room's audit trail (rooms.InsertAudit, the rooms
// package's own write of its room_audit table) in the transaction that
// makes it, which also locks the room's row through rooms.LockStatus, then
// counted in voiceroom_rooms_moderation_actions_total.
//
// The list may lag the rooms: it shows what the projector has written
// (see listprojector). Redis is a cache: [Lister] reads it first and falls
// back to MySQL on a miss, a partial miss or an error (then leaves Redis
// alone for a second), repairing what it missed; losing Redis loses
// nothing. While [Lister.Run] runs, each api process also keeps the cards
// and hide sets it read in a near cache that Redis keeps current (client
// tracking; see nearCache): a page is then read from memory, as fresh as a
// Redis read made when its request arrived. Without Redis, cards read from
// MySQL are reused for at most FreezeEvery; hides are read per request.
//
// # Order and cursors
//
// hot is sort_score DESC, room_id ASC; new is created_at_ms DESC, room_id
// ASC (sort_score is the projector's, see listprojector). Active,
// unexpired pins of the region come first (weight DESC, expires_at_ms
// DESC, room_id ASC), each room once, and are not repeated below; a pin
// applies only while its room is active in the pin's region.
//
// Cursors are opaque, signed (HMAC-SHA256) and bound to app, region, tab
// and query: anything else is INVALID_ARGUMENT. A chain of pages walks one
// frozen order of the list (see [Lister.List] for its bounds and what
// happens past them), so it neither repeats nor skips rooms while scores
// change between pages, whichever api process serves each page: with
// Redis, every frozen order is also kept there for ChainTTL, written
// before any cursor naming it is handed out, and a process that does not
// hold a cursor's order reads it from Redis once (see freezer). The
// cursor carries only the order's id. Without Redis (none configured, or
// failing, or the order's write failed), a chain continues exactly only
// in the process that froze its order, until it restarts; on another it
// continues on the live order after its last room, as past ChainDepth.
// Redis failures never fail a list request: they are counted
// (voiceroom_list_frozen_orders_total) and the chain falls back.
//
// # What it owns, and what it does not
//
// It owns the tables room_region_pins and room_region_hides, and the
// frozen orders in Redis (room:frozen:{app:<id>}, under the read model's
// key prefix but no part of the read model). It never writes
// room_list_entries, and writes the Redis mirror only through
// listprojector.Mirror (repairs from MySQL after a miss, a hide set's
// invalidation after a hide or unhide), so that every key of the read
// model has one writer's code.
//
// Why roomlist imports listprojector and not the other way round: the
// read model's definition (the Card, its columns and scanner, which rooms
// are listed, the Redis key layout and the mirror's writes) belongs to the
// package that writes it, and roomlist needs the rooms package (the audit
// rows and row lock of pins and hides), which a sink must never import. So
// the model lives in listprojector and roomlist reads it through a small
// exported surface: Card, CardColumns, ScanCard, ListedSQL, ApplyingHides,
// Keys, HideReady and Mirror.
package roomlist
