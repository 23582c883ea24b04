// Package regions owns the country and region rules of docs/api.md's
// "Regions" for every app_code: regions (list buckets; id 0 is
// GLOBAL and never stored), ISO 3166-1 alpha-2 countries mapped to them, and
// each user's profile (display_user_id, country) with the region_id the
// server computes from it. A client never chooses a region.
//
// MySQL is the truth and every statement carries app_code, so another app's
// ids are simply not found. A user's region changes only through these change
// sources, each in one transaction with its audit row:
//
//   - the user changes country (PutProfile);
//   - an operator moves, disables or enables a country, or disables a
//     region, then runs Rebuild, which recomputes every user of the app in
//     batches and reports how many moved;
//   - an operator sets one user's region (SetUserRegion, e.g. a BD leader),
//     pinning it until ClearUserRegion or until its region is disabled and
//     rebuilt.
//
// None of them moves a room: rooms keep the visible_region_id they were
// created with.
//
// # The user → region lookup and the profile read
//
// UserRegion serves room creation and room listing, and Profile serves GET
// /api/v1/users/me, so both are answered from one in-process cache: bounded
// (Config.CacheSize users, sharded, evicting the oldest of a small random
// sample), keyed by app_code and user_id, holding the user's profile
// (display_user_id, country, region_id and code, updated_at_ms). Hits take
// only a shard's read lock and cost MySQL nothing (a profile read per call
// had the database's CPU halve what /users/me served and its p99 ten times
// the room list's). It fails closed: a miss that cannot read MySQL is an
// error, never a stale or default region.
//
// Every change source invalidates the users it changed in this process's
// cache after its transaction commits, and a per-shard generation stops a
// lookup that read MySQL before the commit from storing the old value after
// the invalidation. Several processes may serve the api role, and a change
// made in one must reach the others' caches; for that every entry lives at
// most Config.CacheTTL (default 3s) after it was read. That TTL is the whole
// cross-process protocol, chosen over the alternatives because:
//
//   - it needs no other server and cannot be lost: the bound holds with
//     Redis down or absent, and MySQL stays the only truth;
//   - a version counter would cost a read on every lookup (or a poll), and
//     a per-app counter would be bumped by every user's country change, so
//     at 1,000 profile writes a second it would flush the app's whole cache
//     continuously; a per-user counter needs the read the cache exists to
//     avoid;
//   - a broadcast (Redis or NATS pub/sub) is at-most-once: a process that
//     misses a message while reconnecting serves the old region forever
//     unless a TTL backs it, so the TTL is needed anyway. It could be added
//     on top later to shorten the window, without changing the bound.
//
// The room list may be seconds behind (docs/api.md, "The room list"), and rooms never follow
// their owner's region afterwards, so a region seen up to CacheTTL late by
// another process is within the product's rules. The same bound holds for
// the profile: a PUT /api/v1/users/me is seen by the next GET of the api
// process that took it, and by every other api process's GET at most
// CacheTTL after it answered (its answer carries the new profile). The
// cost is one primary-key read per active user per process per CacheTTL. Redis plays no part here: a
// remote cache would be no faster than that MySQL read, and would need
// invalidating too.
package regions
