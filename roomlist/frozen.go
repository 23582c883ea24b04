package roomlist

import (
	"context"
	"crypto/rand"
	"encoding/binary"
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
// A cursor whose order is gone (expired, evicted, frozen by another
// process, or the process restarted) continues on the live order after
// the last room it returned, which may repeat or skip rooms whose scores
// changed meanwhile; see Lister.List.
type freezer struct {
	ttl, every   time.Duration
	buildTimeout time.Duration // of a build in the background
	maxRooms     int
	now          func() time.Time

	mu     sync.Mutex
	byID   map[uint64]*frozenOrder
	fifo   []*frozenOrder // in freezing order
	rooms  int
	lists  map[listID]*listState
	nextID uint64
}

type listState struct {
	cur      *frozenOrder
	building chan struct{} // closed when the build in flight ends
	built    *frozenOrder  // of the last build, even if evicted since
	err      error         // of the last build
}

func newFreezer(cfg Config) *freezer {
	var seed [8]byte
	rand.Read(seed[:])
	return &freezer{
		ttl: cfg.ChainTTL, every: cfg.FreezeEvery, buildTimeout: cfg.WriteTimeout, maxRooms: cfg.MaxFrozenRooms, now: cfg.Now,
		byID: map[uint64]*frozenOrder{}, lists: map[listID]*listState{},
		// Random high bits: ids of another process's orders do not match ours.
		nextID: binary.BigEndian.Uint64(seed[:]) &^ 0xffffffff,
	}
}

// get returns the order id if it is still held and unexpired.
func (z *freezer) get(id uint64) *frozenOrder {
	z.mu.Lock()
	defer z.mu.Unlock()
	f := z.byID[id]
	if f == nil || z.now().Sub(f.at) > z.ttl {
		return nil
	}
	return f
}

// add keeps f and evicts what exceeds the bounds. z.mu held.
func (z *freezer) add(f *frozenOrder) {
	z.nextID++
	f.id = z.nextID
	z.byID[f.id] = f
	z.fifo = append(z.fifo, f)
	z.rooms += len(f.entries)
	now := z.now()
	drop := 0
	for drop < len(z.fifo)-1 && (z.rooms > z.maxRooms || now.Sub(z.fifo[drop].at) > z.ttl) {
		old := z.fifo[drop]
		delete(z.byID, old.id)
		z.rooms -= len(old.entries)
		if st := z.lists[listID{old.app, old.region, old.tab}]; st != nil && st.cur == old && old.query == "" {
			st.cur = nil
		}
		z.fifo[drop] = nil
		drop++
	}
	z.fifo = z.fifo[drop:]
}

// keep adds a search's order.
func (z *freezer) keep(f *frozenOrder) *frozenOrder {
	z.mu.Lock()
	defer z.mu.Unlock()
	z.add(f)
	return f
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
// the build, sharing its result.
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
			return z.built(st, ch, now, f, err)
		}
		go func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), z.buildTimeout)
			defer cancel()
			f, err := build(bctx)
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
	f.at = at
	z.add(f)
	st.cur = f
	return f, nil
}
