package roomlist

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// frozenOrder is the order of a list (or of a search's results) as it was
// at one moment: the chains of pages that start from it walk it, so scores
// changing between pages move no room across a page boundary.
type frozenOrder struct {
	id       uint64
	app      string
	region   int64
	tab      string
	query    string // hash; "" for a list
	entries  []entry
	complete bool // every room of the list is in entries (not cut at ChainDepth)
	at       time.Time

	// saved, when not nil, is closed once the write of the order to Redis
	// ended (see freezer.current): a page does not hand out a cursor
	// naming the order before, so that any api process can read it.
	saved chan struct{}

	// cursors holds the signed cursors of its pages by the position they
	// continue at (a page's cursor is the same for every caller that walks
	// the order to that position: signed once, not per request); at most
	// maxCursors.
	mu      sync.Mutex
	cursors map[int]string
}

const maxCursors = 32

// cursorAt returns the cursor a page of f ending at pos carries, signing
// it with sign the first time.
func (f *frozenOrder) cursorAt(pos int, sign func() string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.cursors[pos]; ok {
		return s
	}
	s := sign()
	if f.cursors == nil {
		f.cursors = make(map[int]string, 2)
	}
	if len(f.cursors) < maxCursors {
		f.cursors[pos] = s
	}
	return s
}

// listID names a list: one region's tab of one app.
type listID struct {
	app    string
	region int64
	tab    string
}

// freezer keeps the frozen orders of this process, bounded in time
// (ChainTTL after freezing) and in size (MaxFrozenRooms rooms in all; the
// oldest orders go first). The lists share orders: a first page is served
// from the list's newest order while it is younger than FreezeEvery, so a
// busy list is frozen once per FreezeEvery, not once per request; older
// (up to twice FreezeEvery), it is still served while its successor is
// built (see current).
//
// With Redis (save set), every order is also written to Redis when it is
// frozen, for ChainTTL, and an order this process does not hold (frozen
// by another api process, or before a restart) is read from there once
// and then held here like one of its own (see load), within the same
// bounds: a chain continues exactly on whichever api process its next
// page reaches. A cursor whose order is in neither (expired; its write
// failed; Redis down or not configured) continues on the live order after
// the last room it returned, which may repeat or skip rooms whose scores
// changed meanwhile; see Lister.List.
//
// The write and the cursors: no page hands out a cursor naming an order
// before the order's write to Redis ended, so a next page sent at once to
// another process finds it there (unless the write failed). An order
// rebuilt in the background is written before it replaces its
// predecessor, so no request waits for that write; a list's first order
// (and a search's), which requests wait for anyway, is written while they
// read their page's cards, and each waits for the write only before it
// answers (frozenOrder.saved).
type freezer struct {
	ttl, every   time.Duration
	buildTimeout time.Duration // of a build in the background
	maxRooms     int
	now          func() time.Time
	// save writes an order to Redis, nil without Redis; it returns when
	// the write ended, whatever its result (it counts and logs failures).
	save func(context.Context, *frozenOrder)

	mu      sync.Mutex
	byID    map[uint64]*frozenOrder
	fifo    []*frozenOrder // by freezing time, oldest first
	rooms   int
	lists   map[listID]*listState
	loading map[uint64]*loadCall // reads of orders from Redis in flight
}

type listState struct {
	cur      *frozenOrder
	building chan struct{} // closed when the build in flight ends
	built    *frozenOrder  // of the last build, even if evicted since
	err      error         // of the last build
}

// loadCall is one read of an order from Redis; done closes when f and err
// are set.
type loadCall struct {
	done chan struct{}
	f    *frozenOrder
	err  error
}

func newFreezer(cfg Config) *freezer {
	return &freezer{
		ttl: cfg.ChainTTL, every: cfg.FreezeEvery, buildTimeout: cfg.WriteTimeout, maxRooms: cfg.MaxFrozenRooms, now: cfg.Now,
		byID: map[uint64]*frozenOrder{}, lists: map[listID]*listState{}, loading: map[uint64]*loadCall{},
	}
}

// newFrozenID returns a random order id, never 0 (a cursor's "no order"):
// ids name orders across api processes (in Redis, in cursors), so no
// process may derive them from a counter of its own. Two orders alive
// within ChainTTL share an id with a chance of 2^-64 a pair.
func newFrozenID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// get returns the order id if it is still held and unexpired.
func (z *freezer) get(id uint64) *frozenOrder {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.held(id)
}

// held is get with z.mu held.
func (z *freezer) held(id uint64) *frozenOrder {
	f := z.byID[id]
	if f == nil || z.now().Sub(f.at) > z.ttl {
		return nil
	}
	return f
}

// stamp dates f and gives it an id, once.
func stamp(f *frozenOrder, at time.Time) {
	f.at = at
	if f.id == 0 {
		f.id = newFrozenID()
	}
}

// add keeps f (stamped) and evicts what exceeds the bounds. z.mu held.
func (z *freezer) add(f *frozenOrder) {
	z.byID[f.id] = f
	// Orders come in freezing order but for one read from Redis (or a
	// build that took long): it goes to its place.
	i := len(z.fifo)
	for i > 0 && z.fifo[i-1].at.After(f.at) {
		i--
	}
	z.fifo = slices.Insert(z.fifo, i, f)
	z.rooms += len(f.entries)
	now := z.now()
	drop := 0
	for drop < len(z.fifo)-1 && (z.rooms > z.maxRooms || now.Sub(z.fifo[drop].at) > z.ttl) {
		old := z.fifo[drop]
		if z.byID[old.id] == old {
			delete(z.byID, old.id)
		}
		z.rooms -= len(old.entries)
		if st := z.lists[listID{old.app, old.region, old.tab}]; st != nil && st.cur == old && old.query == "" {
			st.cur = nil
		}
		z.fifo[drop] = nil
		drop++
	}
	z.fifo = z.fifo[drop:]
}

// keep adds a search's order, dated, and starts its write to Redis when
// share is set (no page hands out a cursor naming an order not shared).
func (z *freezer) keep(ctx context.Context, f *frozenOrder, share bool) *frozenOrder {
	stamp(f, f.at)
	if share {
		z.saveLater(ctx, f)
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	z.add(f)
	return f
}

// saveLater starts the write of f (stamped, not yet kept) to Redis; f.saved
// closes when it ended.
func (z *freezer) saveLater(ctx context.Context, f *frozenOrder) {
	if z.save == nil {
		return
	}
	f.saved = make(chan struct{})
	go func() {
		defer close(f.saved)
		z.save(context.WithoutCancel(ctx), f)
	}()
}

// current returns the list's newest order, freezing a new one with build
// when it is older than FreezeEvery, so the order returned is at most
// twice FreezeEvery old. One build per list runs at a time, and no
// request waits for one while the list has an order younger than twice
// FreezeEvery: the request that finds it older than FreezeEvery starts
// the build in the background (bounded by buildTimeout, not by the
// request) and gets that order, as do the requests that come while the
// build runs. Without such an order (the list's first, one nobody asked
// for meanwhile, or a build slower than FreezeEvery) requests wait for
// the build, sharing its result. An order built in the background is
// written to Redis before it becomes the list's newest; one requests wait
// for is written while they go on (see freezer).
func (z *freezer) current(ctx context.Context, l listID, build func(context.Context) (*frozenOrder, error)) (*frozenOrder, error) {
	z.mu.Lock()
	st := z.lists[l]
	if st == nil {
		st = &listState{}
		z.lists[l] = st
	}
	now := z.now()
	prev := st.cur
	if prev != nil && (now.Sub(prev.at) >= 2*z.every || now.Sub(prev.at) >= z.ttl) {
		prev = nil
	}
	if prev != nil && now.Sub(prev.at) < z.every {
		z.mu.Unlock()
		return prev, nil
	}
	ch := st.building
	if ch == nil {
		ch = make(chan struct{})
		st.building = ch
		z.mu.Unlock()
		if prev == nil {
			f, err := build(ctx)
			if err == nil {
				z.share(st, f)
				stamp(f, now)
				z.saveLater(ctx, f)
			}
			return z.built(st, ch, now, f, err)
		}
		go func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), z.buildTimeout)
			defer cancel()
			f, err := build(bctx)
			if err == nil {
				z.share(st, f)
			}
			if err == nil && z.save != nil {
				stamp(f, now)
				z.save(bctx, f)
			}
			z.built(st, ch, now, f, err)
		}()
		return prev, nil
	}
	if prev != nil {
		z.mu.Unlock()
		return prev, nil
	}
	z.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if st.err != nil {
		return nil, st.err
	}
	return st.built, nil
}

// built ends the build ch of st, begun at at: a built order is kept and
// becomes the list's newest; waiters get it or err.
func (z *freezer) built(st *listState, ch chan struct{}, at time.Time, f *frozenOrder, err error) (*frozenOrder, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	st.building, st.built, st.err = nil, f, err
	close(ch)
	if err != nil {
		return nil, err
	}
	if f.id == 0 { // not stamped before its write to Redis
		stamp(f, at)
	}
	z.add(f)
	st.cur = f
	return f, nil
}

// share makes f, st's new order, share its entries with st's order
// before (shareEntries). It runs before f is written to Redis or handed
// to anyone: the write reads f's entries in a goroutine of its own.
func (z *freezer) share(st *listState, f *frozenOrder) {
	z.mu.Lock()
	prev := st.built
	z.mu.Unlock()
	shareEntries(prev, f)
}

// shareEntries makes f, a list's new order, share what it has in common
// with prev, the list's order before: its entries when they are the same
// (a list nobody changed meanwhile), else the rooms' id strings. A list
// is frozen every FreezeEvery while it is read and each order is held
// for ChainTTL, so a read list holds about ChainTTL/FreezeEvery orders
// of mostly the same rooms, each of which would otherwise keep its own
// copy of every id. Orders are never changed once built.
func shareEntries(prev, f *frozenOrder) {
	if prev == nil || f == nil || len(prev.entries) == 0 {
		return
	}
	if slices.Equal(prev.entries, f.entries) {
		f.entries = prev.entries
		return
	}
	ids := make(map[string]string, len(prev.entries))
	for _, e := range prev.entries {
		ids[e.id] = e.id
	}
	for i := range f.entries {
		if id, ok := ids[f.entries[i].id]; ok {
			f.entries[i].id = id
		}
	}
}

// load returns the order id: the one held here, else the one fetch reads
// (from Redis; nil, nil when it has none), which is then held here like
// an order of this process, if it has not expired. One fetch per id runs
// at a time: requests for the same order meanwhile share its result.
func (z *freezer) load(ctx context.Context, id uint64, fetch func() (*frozenOrder, error)) (*frozenOrder, error) {
	z.mu.Lock()
	if f := z.held(id); f != nil {
		z.mu.Unlock()
		return f, nil
	}
	if c := z.loading[id]; c != nil {
		z.mu.Unlock()
		select {
		case <-c.done:
			return c.f, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c := &loadCall{done: make(chan struct{})}
	z.loading[id] = c
	z.mu.Unlock()

	f, err := fetch()
	z.mu.Lock()
	switch {
	case f == nil:
	case f.id != id || z.now().Sub(f.at) > z.ttl:
		f = nil
	case z.byID[id] != nil:
		f = z.byID[id] // another path kept it meanwhile
	default:
		z.add(f)
	}
	c.f, c.err = f, err
	delete(z.loading, id)
	z.mu.Unlock()
	close(c.done)
	return f, err
}
