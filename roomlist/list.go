package roomlist

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"voiceroom/apperr"
	"voiceroom/internal/redisgate"
	"voiceroom/listprojector"
	"voiceroom/roomevent"
)

// ListRequest is one GET /api/v1/rooms. AppCode and RegionID come from the
// caller's token and the regions service, never from the client.
type ListRequest struct {
	AppCode  string
	RegionID int64
	// Tab is hot (default) or new.
	Tab string
	// Limit is 1..MaxLimit; 0 means DefaultLimit.
	Limit int
	// Cursor is the previous page's NextCursor, or empty.
	Cursor string
	// Query, when not empty, searches the region's listed rooms:
	// room_short_id exactly, or title by prefix (case-insensitive, both).
	Query string
}

// Page is one page of a list.
type Page struct {
	Rooms      []Item `json:"rooms"`
	NextCursor string `json:"next_cursor"`
}

// Item is a room of a list page (docs/openapi.yaml, RoomListItem).
type Item struct {
	roomevent.Listing
	Pinned bool `json:"pinned"`
}

// itemOf is the list item of c.
func itemOf(c *listprojector.Card, pinned bool) Item {
	return Item{Listing: c.Listing, Pinned: pinned}
}

// Lister answers the list query from the read model: Redis first, MySQL
// when Redis misses or fails. It never reads room state, and writes Redis
// only through the Mirror (repairs, a hide set's invalidation).
type Lister struct {
	db *sql.DB
	// reads is where the MySQL path reads a list's order, its pins and
	// the recent cards: db unless SetReads gave replicas. What fills
	// Redis or decides a hide (cards, hides) reads db.
	reads   *sql.DB
	cache   *cache
	mirror  *listprojector.Mirror
	cfg     Config
	sign    signer
	frozen  *freezer
	log     *slog.Logger
	metrics *Metrics

	hides *hideCache
	near  *nearCache
	stmts *stmts // the page read's prepared statements
	// readStmts are stmts on reads: whether a region has hides, asked
	// while Redis is not read.
	readStmts *stmts
	// recent holds cards read from MySQL while Redis is not read.
	recent *recentCards
	// cursors remembers the cursors this process verified.
	cursors verifiedCursors
	// frozenLog keeps the warnings of frozen orders in Redis sparse.
	frozenLog sparse

	redis     *redisgate.Gate // whether a request may use Redis now (nil without Redis)
	repairing sync.Map        // "app\x00region" -> struct{}: region repairs in flight
}

// NewLister returns the list query service over the read model in db and
// its Redis mirror. mirror may be nil (MySQL only); m may be nil.
// cfg.CursorSecret is required.
func NewLister(db *sql.DB, mirror *listprojector.Mirror, cfg Config, log *slog.Logger, m *Metrics) (*Lister, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(cfg.CursorSecret) == 0 {
		return nil, fmt.Errorf("%w: CursorSecret: required by the list query", ErrInvalidConfig)
	}
	if db == nil {
		return nil, fmt.Errorf("%w: lister needs a database", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := newCache(mirror)
	log = log.With("component", "roomlist")
	l := &Lister{db: db, reads: db, cache: c, mirror: mirror, hides: &hideCache{}, near: newNearCache(c, cfg, log, m), stmts: newStmts(db),
		recent: newRecentCards(cfg.FreezeEvery, max(cfg.NearCacheCards, 10_000)), cfg: cfg,
		sign: signer{key: cfg.CursorSecret}, frozen: newFreezer(cfg), log: log, metrics: m}
	l.readStmts = l.stmts
	if c != nil {
		l.frozen.save = l.saveFrozen
		l.redis = redisgate.New(c.rdb, cfg.RedisTimeout, "the list", log, func() { l.count(func(m *Metrics) { m.cacheErr.Inc() }) })
	}
	return l, nil
}

// SetReads makes the MySQL path read a list's order, its pins, the
// recent cards and whether a region has hides (while Redis is not read)
// from reads, a pool of replicas that may lag (package
// readdb): a pin, a hide or a room's move shows there within the lag.
// What fills Redis (cards, a region's hide set) stays on the primary.
// Call it before the Lister serves.
func (l *Lister) SetReads(reads *sql.DB) {
	l.reads = reads
	if reads != l.db {
		l.readStmts = newStmts(reads)
	}
}

// Run keeps the near cache's Redis tracking connection until ctx ends
// (see nearCache); it returns nil then. Without Run, or with the near
// cache off, every page reads its cards and hides from Redis.
func (l *Lister) Run(ctx context.Context) error {
	if l.near != nil {
		l.near.run(ctx)
	}
	return nil
}

// List returns one page of the caller's region list (or search).
//
// A chain of pages (each request carrying the previous NextCursor) walks
// one frozen order: the list as it was when its first page was served
// (at most FreezeEvery earlier, or twice that while its successor is
// built: a first page does not wait for the rebuild it starts). Walked
// within ChainTTL, a chain never returns a room twice and never skips a
// room that stayed listed the whole time, whatever happens to scores
// between pages, for its first
// ChainDepth rooms (pinned ones included), whichever api process serves
// each page: with Redis, every order is written there when frozen, before
// a cursor naming it is handed out, and a process that does not hold a
// cursor's order reads it from there (once; see freezer). Past
// ChainDepth, or when the frozen order is gone (ChainTTL passed; or, in
// a process other than the one that froze it or after MaxFrozenRooms
// evicted it there, Redis does not have it: its write failed, Redis
// fails, or there is no Redis), the chain continues on the live order
// after the last room it returned: rooms whose scores crossed that point
// may then repeat or be missed. A search returns at most SearchMaxResults
// rooms over its whole chain. Cards are read fresh, so a room that closed
// or left the region since the freeze is left out of its page, with one
// bound instead: when Redis is not read (after an error, or none is
// configured) and the region has no active hide, the pages of a frozen
// order show cards read from MySQL at most FreezeEvery earlier (once per
// room per FreezeEvery: a room closed, moved or changed within that
// second may show as it was). Hides never come from there: see below.
//
// Hides apply to every request at its own time: each page reads the
// hides of its rooms as they are at the request (from Redis in the same
// round trip as the cards, else MySQL; see hideCache for why Redis never
// answers stale; a page served with such cards reads MySQL for whether
// the region has an active hide, and reads the page's hides when it has)
// and leaves the hidden ones out, pinned ones included,
// whether the page comes from a frozen order or the live one; a chain under way stops showing a room hidden after its first
// page. A frozen list order keeps hidden rooms in place, so a room unhidden
// while a chain walks it shows again on that chain's later pages if its
// place is still ahead (a place already passed is not revisited), and on
// every first page at once. A search's order is frozen without the rooms
// hidden at its first page: a room unhidden meanwhile shows in the next
// search, not in that search's later pages.
//
// Errors: INVALID_ARGUMENT for a bad tab, limit, query or cursor (a
// cursor issued for another app, region, tab or query included);
// UNAVAILABLE when MySQL fails.
func (l *Lister) List(ctx context.Context, req ListRequest) (Page, error) {
	start := time.Now()
	kind := "list"
	if req.Query != "" {
		kind = "search"
	}
	defer func() { l.metrics.observeQuery(kind, time.Since(start).Seconds()) }()

	if err := normalize(&req); err != nil {
		return Page{}, err
	}
	var cur cursor
	if req.Cursor != "" {
		c, err := l.cursors.decode(l.sign, req.Cursor)
		if err != nil {
			return Page{}, err
		}
		if c.App != req.AppCode || c.Region != req.RegionID || c.Tab != req.Tab || c.Query != queryHash(req.Query) {
			return Page{}, errBadCursor
		}
		cur = c
	}
	nowMs := l.cfg.nowMs()
	var page Page
	var err error
	switch {
	case req.Cursor == "":
		var f *frozenOrder
		if f, err = l.freeze(ctx, req, nowMs); err == nil {
			page, err = l.fromFrozen(ctx, req, f, 0, nowMs)
		}
	case cur.Frozen != 0:
		f := l.frozen.get(cur.Frozen)
		if f == nil {
			f = l.loadFrozen(ctx, cur)
		}
		if f != nil && f.app == req.AppCode && f.region == req.RegionID && f.tab == req.Tab && f.query == cur.Query {
			page, err = l.fromFrozen(ctx, req, f, cur.Off, nowMs)
		} else {
			page, err = l.fromLive(ctx, req, cur, nowMs)
		}
	default:
		page, err = l.fromLive(ctx, req, cur, nowMs)
	}
	if err != nil {
		return Page{}, storage(err)
	}
	return page, nil
}

// storage turns a store failure into UNAVAILABLE; apperr kinds pass through.
func storage(err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, errStorage, err)
}

// normalize checks and defaults the client's parameters.
func normalize(req *ListRequest) error {
	switch req.Tab {
	case "":
		req.Tab = listprojector.TabHot
	case listprojector.TabHot, listprojector.TabNew:
	default:
		return apperr.Invalid("tab", "must be hot or new")
	}
	switch {
	case req.Limit == 0:
		req.Limit = DefaultLimit
	case req.Limit < 1 || req.Limit > MaxLimit:
		return apperr.Invalid("limit", "must be 1..%d", MaxLimit)
	}
	req.Query = strings.TrimSpace(req.Query)
	if !utf8.ValidString(req.Query) || utf8.RuneCountInString(req.Query) > MaxQueryLen {
		return apperr.Invalid("query", "must be valid text of at most %d characters", MaxQueryLen)
	}
	if strings.ContainsFunc(req.Query, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return apperr.Invalid("query", "must not contain control characters")
	}
	if len(req.Cursor) > maxCursorBytes {
		return errBadCursor
	}
	return nil
}

// freeze returns the frozen order a first page starts: the list's shared
// newest order, or a search's own (without the rooms hidden at nowMs).
func (l *Lister) freeze(ctx context.Context, req ListRequest, nowMs int64) (*frozenOrder, error) {
	if req.Query != "" {
		es, err := listOrder(ctx, l.reads, req.AppCode, req.RegionID, req.Tab, req.Query, false, 0, "", l.cfg.SearchMaxResults, nowMs)
		if err != nil {
			return nil, err
		}
		// A search is frozen per request: written to Redis only when its
		// first page may hand out a cursor naming it.
		share := len(es) > req.Limit
		return l.frozen.keep(ctx, &frozenOrder{app: req.AppCode, region: req.RegionID, tab: req.Tab, query: queryHash(req.Query),
			entries: es, complete: true, at: l.cfg.Now()}, share), nil
	}
	id := listID{req.AppCode, req.RegionID, req.Tab}
	return l.frozen.current(ctx, id, func(ctx context.Context) (*frozenOrder, error) { return l.buildOrder(ctx, id) })
}

// buildOrder freezes a list: its pinned rooms (MySQL), then the others
// in the tab's order (Redis, else MySQL), ChainDepth rooms at most.
func (l *Lister) buildOrder(ctx context.Context, id listID) (*frozenOrder, error) {
	depth := l.cfg.ChainDepth
	pins, err := pinnedNow(ctx, l.reads, id.app, id.region, l.cfg.nowMs())
	if err != nil {
		return nil, err
	}
	want := depth + len(pins)
	normal, complete, err := l.order(ctx, id, want)
	if err != nil {
		return nil, err
	}
	pinned := make(map[string]bool, len(pins))
	es := make([]entry, 0, min(want, len(pins)+len(normal)))
	for _, p := range pins {
		pinned[p] = true
		es = append(es, entry{id: p, pinned: true})
	}
	for _, e := range normal {
		if !pinned[e.id] {
			es = append(es, e)
		}
	}
	if len(es) > depth {
		es, complete = es[:depth], false
	}
	return &frozenOrder{app: id.app, region: id.region, tab: id.tab, entries: es, complete: complete}, nil
}

// order reads the first n rooms of a list: Redis when its sets are ready,
// else MySQL (and the region's sets are repaired in the background).
func (l *Lister) order(ctx context.Context, id listID, n int) (es []entry, complete bool, err error) {
	if l.redisUp() {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
		es, complete, err := l.cache.order(rctx, id.app, id.region, id.tab, n)
		cancel()
		switch {
		case err == nil:
			l.count(func(m *Metrics) { m.hit.Inc() })
			return es, complete, nil
		case errors.Is(err, errNotReady):
			l.count(func(m *Metrics) { m.miss.Inc() })
			l.repairRegion(ctx, id.app, id.region)
		default:
			l.redisFailed(err)
		}
	}
	es, err = listOrder(ctx, l.reads, id.app, id.region, id.tab, "", false, 0, "", n, 0)
	return es, len(es) < n, err
}

func (l *Lister) count(f func(*Metrics)) {
	if l.metrics != nil {
		f(l.metrics)
	}
}

// redisUp reports whether a request may use Redis (see redisgate).
func (l *Lister) redisUp() bool { return l.redis.Up() }

// redisFailed notes a Redis error: requests leave Redis alone for a
// while, then probe it (see redisgate).
func (l *Lister) redisFailed(err error) { l.redis.Failed(err) }

// repairRegion fills a region's Redis sets from MySQL, once at a time per
// region, bounded by WriteTimeout, in the background: the request that
// found the miss does not wait for it.
func (l *Lister) repairRegion(ctx context.Context, app string, region int64) {
	key := fmt.Sprintf("%s\x00%d", app, region)
	if _, busy := l.repairing.LoadOrStore(key, struct{}{}); busy {
		return
	}
	go func() {
		defer l.repairing.Delete(key)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.WriteTimeout)
		defer cancel()
		if err := l.mirror.RepairRegion(rctx, app, region); err != nil {
			l.log.Warn("repair of a region's list in redis failed", "app_code", app, "region_id", region, "error", err)
		}
	}()
}

// cards returns the current cards of app's rooms ids: Redis first, the
// misses (all of them when Redis fails) from MySQL, repairing Redis.
func (l *Lister) cards(ctx context.Context, app string, ids []string) (map[string]*listprojector.Card, error) {
	cards, _, err := l.cardsHides(ctx, app, -1, ids, 0)
	return cards, err
}

// pageCards returns the current cards of app's rooms ids, as cards does,
// and which of them are hidden in region at nowMs: from the region's
// Redis hide set, read in the same round trip as the cards, when it is
// filled and not marked stale in this process; else from MySQL (and the
// set is refilled in the background). See hideCache.
func (l *Lister) pageCards(ctx context.Context, app string, region int64, ids []string, nowMs int64) (map[string]*listprojector.Card, map[string]bool, error) {
	return l.cardsHides(ctx, app, region, ids, nowMs)
}

// cardsHides is cards, and pageCards when region >= 0.
func (l *Lister) cardsHides(ctx context.Context, app string, region int64, ids []string, nowMs int64) (map[string]*listprojector.Card, map[string]bool, error) {
	found, missing := map[string]*listprojector.Card(nil), ids
	var hidden map[string]bool
	hidesKnown := region < 0
	if l.redisUp() {
		var err error
		var ready bool
		if l.near != nil {
			found, missing, hidden, ready, err = l.near.cardsAndHides(ctx, l.cfg.RedisTimeout, app, region, ids, nowMs)
		} else {
			found, missing, hidden, ready, err = l.cache.cardsAndHidesWithin(ctx, l.cfg.RedisTimeout, app, region, ids, nowMs)
		}
		switch {
		case err != nil:
			l.redisFailed(err)
		case len(missing) == 0:
			l.count(func(m *Metrics) { m.hit.Inc() })
		default:
			l.count(func(m *Metrics) { m.miss.Inc() })
		}
		if err == nil && region >= 0 {
			_, stale := l.hides.isStale(hideRegion{app, region})
			hidesKnown = ready && !stale
			if !hidesKnown {
				l.count(func(m *Metrics) { m.hideMiss.Inc() })
				l.fillHidesLater(ctx, app, region)
			}
		}
	}
	if !hidesKnown && len(missing) == len(ids) {
		// Nothing from Redis: cards and hides in one MySQL query.
		cards, hidden, err := readCardsHidden(ctx, l.stmts, app, region, ids, nowMs)
		if err != nil {
			return nil, nil, err
		}
		l.repairCards(ctx, cards)
		return cards, hidden, nil
	}
	if !hidesKnown {
		hs, err := listprojector.ApplyingHides(ctx, l.db, app, region, ids, nowMs)
		if err != nil {
			return nil, nil, err
		}
		hidden = nil
		for id := range hs {
			if hidden == nil {
				hidden = make(map[string]bool, len(hs))
			}
			hidden[id] = true
		}
	}
	if len(missing) == 0 && found != nil {
		return found, hidden, nil
	}
	if found == nil {
		found = make(map[string]*listprojector.Card, len(ids))
	}
	fromDB, err := readCards(ctx, l.db, app, missing)
	if err != nil {
		return nil, nil, err
	}
	for id, c := range fromDB {
		found[id] = c
	}
	l.repairCards(ctx, fromDB)
	return found, hidden, nil
}

// repairCards writes cards read from MySQL back to Redis, when it is up.
func (l *Lister) repairCards(ctx context.Context, cards map[string]*listprojector.Card) {
	repair := make([]*listprojector.Card, 0, len(cards))
	for _, c := range cards {
		repair = append(repair, c)
	}
	if l.redisUp() && len(repair) > 0 {
		rctx, cancel := context.WithTimeout(ctx, l.cfg.RedisTimeout)
		_ = l.mirror.RepairCards(rctx, repair) // counted; the next miss repairs again
		cancel()
	}
}

// fillHidesLater refills a region's Redis hide set from MySQL, once at a
// time per region, bounded by WriteTimeout, in the background. A fill
// that succeeds clears a stale mark set before it started.
func (l *Lister) fillHidesLater(ctx context.Context, app string, region int64) {
	r := hideRegion{app, region}
	if _, busy := l.hides.filling.LoadOrStore(r, struct{}{}); busy {
		return
	}
	seq, stale := l.hides.isStale(r)
	go func() {
		defer l.hides.filling.Delete(r)
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.WriteTimeout)
		defer cancel()
		filled, err := l.mirror.FillHides(fctx, app, region, l.cfg.nowMs())
		if err != nil {
			l.log.Warn("repair of a region's hides in redis failed", "app_code", app, "region_id", region, "error", err)
			return
		}
		// The fill replaced the set: this process's near copy goes now,
		// not when the invalidation arrives (the stale mark may clear
		// below, and the old copy must not serve then).
		l.near.dropHides(app, region)
		if filled && stale {
			l.hides.clearStale(r, seq)
		}
	}()
}

// hideChanged is called after a hide or unhide of app's region committed:
// it invalidates the region's Redis hide set, and marks it stale in this
// process when that failed (see hideCache).
func (l *Lister) hideChanged(ctx context.Context, app string, region int64) {
	if l == nil || l.cache == nil {
		return
	}
	// The near cache drops the set after Redis did: a fill that read the
	// old set before the DEL is marked by this drop and keeps nothing.
	defer l.near.dropHides(app, region)
	if err := l.mirror.InvalidateHides(ctx, app, region, 4*l.cfg.RedisTimeout); err != nil {
		l.hides.markStale(hideRegion{app, region})
		l.log.Warn("invalidating a region's hides in redis failed; this process reads them from MySQL until repaired",
			"app_code", app, "region_id", region, "error", err)
	}
}

// maxRounds bounds the card reads of one page: rooms that left the list
// since the freeze are dropped, and the page is refilled at most this often.
const maxRounds = 3

// fromFrozen serves the page at off of a frozen order, leaving out the
// rooms hidden at nowMs.
func (l *Lister) fromFrozen(ctx context.Context, req ListRequest, f *frozenOrder, off int, nowMs int64) (Page, error) {
	page := Page{Rooms: make([]Item, 0, req.Limit)}
	pos := min(off, len(f.entries))
	for round := 0; round < maxRounds && len(page.Rooms) < req.Limit && pos < len(f.entries); round++ {
		batch := f.entries[pos:min(pos+req.Limit-len(page.Rooms), len(f.entries))]
		ids := make([]string, len(batch))
		for i, e := range batch {
			ids[i] = e.id
		}
		cards, hidden, err := l.frozenCards(ctx, req, ids, nowMs)
		if err != nil {
			return Page{}, err
		}
		for _, e := range batch {
			if c := cards[e.id]; c != nil && c.ListedIn(req.AppCode, req.RegionID) && !hidden[e.id] {
				page.Rooms = append(page.Rooms, itemOf(c, e.pinned))
			}
		}
		pos += len(batch)
	}
	c := cursor{App: req.AppCode, Region: req.RegionID, Tab: req.Tab, Query: queryHash(req.Query)}
	switch {
	case pos < len(f.entries):
		if f.saved != nil {
			// The cursor names f: not before another process can read f.
			select {
			case <-f.saved:
			case <-ctx.Done():
				return Page{}, ctx.Err()
			}
		}
		last := f.entries[pos-1]
		c.Frozen, c.Off, c.Key, c.ID, c.Pinned = f.id, pos, last.key, last.id, last.pinned
		page.NextCursor = f.cursorAt(pos, func() string { return l.sign.encode(c) })
		return page, nil
	case !f.complete && len(f.entries) > 0:
		last := f.entries[len(f.entries)-1]
		c.Key, c.ID, c.Pinned = last.key, last.id, last.pinned
	default:
		return page, nil
	}
	page.NextCursor = l.sign.encode(c)
	return page, nil
}

// frozenCards is pageCards for the rooms ids of a frozen order, but,
// while Redis is not read (after an error, or none is configured) and the
// region has no active hide in MySQL (read now), answers with cards at
// most FreezeEvery old (see recentCards). Whenever the region has an
// active hide, expired or not, the page reads cards and hides from MySQL
// as pageCards does, so hides apply at once.
func (l *Lister) frozenCards(ctx context.Context, req ListRequest, ids []string, nowMs int64) (map[string]*listprojector.Card, map[string]bool, error) {
	if !l.redisUp() {
		hides, err := regionHasHides(ctx, l.readStmts, req.AppCode, req.RegionID)
		if err != nil {
			return nil, nil, err
		}
		if !hides {
			cards, err := l.recent.cards(ctx, l.reads, req.AppCode, ids, l.cfg.Now())
			return cards, nil, err
		}
	}
	return l.pageCards(ctx, req.AppCode, req.RegionID, ids, nowMs)
}

// fromLive serves the page after the cursor's last room on the live
// order, leaving out the rooms pinned now (the pinned section is not
// walked again). From a pinned last room it starts at the top of the
// normal section. Rooms hidden at nowMs are left out (by listOrder's
// query, which reads them with the order).
func (l *Lister) fromLive(ctx context.Context, req ListRequest, c cursor, nowMs int64) (Page, error) {
	var pins []string
	var err error
	if req.Query == "" {
		if pins, err = pinnedNow(ctx, l.reads, req.AppCode, req.RegionID, nowMs); err != nil {
			return Page{}, err
		}
	}
	pinned := make(map[string]bool, len(pins))
	for _, p := range pins {
		pinned[p] = true
	}
	es, err := listOrder(ctx, l.reads, req.AppCode, req.RegionID, req.Tab, req.Query, !c.Pinned, c.Key, c.ID, req.Limit+len(pins)+1, nowMs)
	if err != nil {
		return Page{}, err
	}
	more := len(es) == req.Limit+len(pins)+1
	kept := es[:0]
	for _, e := range es {
		if !pinned[e.id] {
			kept = append(kept, e)
		}
	}
	if len(kept) > req.Limit {
		kept, more = kept[:req.Limit], true
	}
	ids := make([]string, len(kept))
	for i, e := range kept {
		ids[i] = e.id
	}
	cards, err := l.cards(ctx, req.AppCode, ids)
	if err != nil {
		return Page{}, err
	}
	page := Page{Rooms: make([]Item, 0, len(kept))}
	for _, e := range kept {
		if card := cards[e.id]; card != nil && card.ListedIn(req.AppCode, req.RegionID) {
			page.Rooms = append(page.Rooms, itemOf(card, false))
		}
	}
	if more && len(kept) > 0 {
		last := kept[len(kept)-1]
		page.NextCursor = l.sign.encode(cursor{App: req.AppCode, Region: req.RegionID, Tab: req.Tab,
			Query: queryHash(req.Query), Key: last.key, ID: last.id})
	}
	return page, nil
}
