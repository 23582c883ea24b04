package roomlist_test

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/roomlist"
)

// node is one api process's list query, with its own metrics.
type node struct {
	*roomlist.Lister
	reg *prometheus.Registry
}

func newTestNode(tb testing.TB, db *sql.DB, rdb redis.UniversalClient, prefix string, cfg roomlist.Config) node {
	tb.Helper()
	reg := prometheus.NewRegistry()
	m, err := roomlist.NewMetrics(reg)
	if err != nil {
		tb.Fatal(err)
	}
	return node{Lister: newTestLister(tb, db, rdb, prefix, cfg, m), reg: reg}
}

// frozen returns the node's count of frozen orders by result
// (voiceroom_list_frozen_orders_total).
func (n node) frozen(tb testing.TB, result string) float64 {
	tb.Helper()
	return testenv.MustMetric(tb, n.reg, "voiceroom_list_frozen_orders_total", "result", result)
}

// wantFrozen checks the node's counts of frozen orders; results not named
// must be 0.
func (n node) wantFrozen(tb testing.TB, want map[string]float64) {
	tb.Helper()
	for _, r := range []string{"stored", "store_failed", "loaded", "load_failed", "gone"} {
		if got := n.frozen(tb, r); got != want[r] {
			tb.Errorf("frozen orders %s: %v, want %v", r, got, want[r])
		}
	}
}

func (n node) mustList(tb testing.TB, req roomlist.ListRequest) roomlist.Page {
	tb.Helper()
	p, err := n.List(context.Background(), req)
	if err != nil {
		tb.Fatalf("list %+v: %v", req, err)
	}
	return p
}

// frozenIDOf returns the frozen order a cursor names (0: none).
func frozenIDOf(tb testing.TB, cursor string) uint64 {
	tb.Helper()
	body, _, _ := strings.Cut(cursor, ".")
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		tb.Fatalf("cursor %q: %v", cursor, err)
	}
	var c struct {
		F uint64 `json:"f"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		tb.Fatalf("cursor %s: %v", raw, err)
	}
	return c.F
}

// noNearCache turns the near cache off where it plays no part: each
// Lister's tracking connection takes seconds to stop at the test's end.
const noNearCache = -1

func frozenRedisKey(prefix, app string, id uint64) string {
	return prefix + "room:frozen:{" + app + ":" + strconv.FormatUint(id, 16) + "}"
}

// TestChainContinuesOnAnotherNode: two api processes on one database and
// one Redis; page 1 from A, every later page from B, while every page
// moves the unseen rooms to the top and the seen ones down: B walks A's
// frozen order, so the chain returns every room exactly once (the live
// order would repeat the seen rooms and skip the others); a search's chain
// too. B reads each order from Redis once.
func TestChainContinuesOnAnotherNode(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond}
	ids := seedRooms(t, db, "a1", 1, 0, 300, func(i int) int64 { return int64(i % 40) }) // many ties
	refill(t, db, rdb, prefix, nil)
	a := newTestNode(t, db, rdb, prefix, cfg)
	b := newTestNode(t, db, rdb, prefix, cfg)
	for n, req := range []roomlist.ListRequest{
		{AppCode: "a1", RegionID: 1, Tab: "hot", Limit: 20},
		{AppCode: "a1", RegionID: 1, Tab: "new", Limit: 20},
		{AppCode: "a1", RegionID: 1, Tab: "hot", Limit: 20, Query: "title"},
	} {
		tab := req.Tab + " " + req.Query
		wantRooms := len(ids)
		if req.Query != "" {
			wantRooms = roomlist.Config.WithDefaults(cfg).SearchMaxResults
		}
		p := a.mustList(t, req)
		id := frozenIDOf(t, p.NextCursor)
		if id == 0 {
			t.Fatalf("%s: page 1's cursor names no frozen order", tab)
		}
		pttl, err := rdb.PTTL(context.Background(), frozenRedisKey(prefix, "a1", id)).Result()
		if err != nil || pttl <= 0 || pttl > roomlist.Config.WithDefaults(cfg).ChainTTL {
			t.Fatalf("%s: the order's key expires in %v (%v), want within ChainTTL", tab, pttl, err)
		}
		all, pages := p.Rooms, 1
		for p.NextCursor != "" {
			// The worst case of a live continuation: half the rooms not
			// seen yet go to the top, the seen ones to the bottom.
			seen := noRepeat(t, all)
			var up, down []any
			for i, id := range ids {
				switch {
				case seen[id]:
					down = append(down, id)
				case (i+pages)%2 == 0:
					up = append(up, id)
				}
			}
			for _, move := range []struct {
				by  int64
				ids []any
			}{{1_000_000_000, up}, {-1_000_000_000, down}} {
				if len(move.ids) == 0 {
					continue
				}
				if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = sort_score + ?, created_at_ms = created_at_ms + ?
					WHERE app_code = 'a1' AND room_id IN (?`+strings.Repeat(",?", len(move.ids)-1)+`)`,
					append([]any{move.by, move.by}, move.ids...)...); err != nil {
					t.Fatal(err)
				}
			}
			refill(t, db, rdb, prefix, nil)
			req.Cursor = p.NextCursor
			p = b.mustList(t, req)
			all = append(all, p.Rooms...)
			pages++
		}
		if seen := noRepeat(t, all); len(seen) != wantRooms || pages < 10 {
			t.Errorf("%s: %d of %d rooms over %d pages", tab, len(seen), wantRooms, pages)
		}
		b.wantFrozen(t, map[string]float64{"loaded": float64(n + 1)}) // once per chain
	}
	// A search that fits in one page hands out no cursor: its order is not
	// written.
	if p := a.mustList(t, roomlist.ListRequest{AppCode: "a1", RegionID: 1, Query: "s7", Limit: 20}); len(p.Rooms) != 1 || p.NextCursor != "" {
		t.Errorf("one-room search: %d rooms, cursor %q", len(p.Rooms), p.NextCursor)
	}
	a.wantFrozen(t, map[string]float64{"stored": 3})
}

// holdFrozenWrites holds a client's writes of frozen orders while its
// gate is set, until the gate closes; reached receives each one held, and
// written counts those done. cardsRead receives each read of a page's
// cards made while the gate is set.
type holdFrozenWrites struct {
	gate      atomic.Pointer[chan struct{}]
	reached   chan struct{}
	written   atomic.Int64
	cardsRead chan struct{}
}

func (h *holdFrozenWrites) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *holdFrozenWrites) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "set" || !strings.Contains(fmt.Sprint(cmd.Args()[1]), "room:frozen:") {
			return next(ctx, cmd)
		}
		if gate := h.gate.Load(); gate != nil {
			h.reached <- struct{}{}
			<-*gate
		}
		err := next(ctx, cmd)
		h.written.Add(1)
		return err
	}
}
func (h *holdFrozenWrites) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if h.gate.Load() != nil && slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "mget" }) {
			select {
			case h.cardsRead <- struct{}{}:
			default:
			}
		}
		return err
	}
}

// hold holds the frozen-order writes until the returned release is called.
func (h *holdFrozenWrites) hold() (release func()) {
	gate := make(chan struct{})
	h.gate.Store(&gate)
	return func() { h.gate.Store(nil); close(gate) }
}

// wait waits for a signal of ch (failing after a minute: a hang, not a
// time limit).
func wait(tb testing.TB, ch chan struct{}, what string) {
	tb.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		tb.Fatalf("no %s", what)
	}
}

// TestCursorReadableAtOnceOnAnotherNode: the race of a next page sent to
// another process at once. A list's first order (which the first pages
// wait for) is written while they read their cards, and no page hands
// out its cursor before the write ended; an order rebuilt in the
// background is written before first pages use it, and first pages do not
// wait for that write. So page 2 on B, asked the moment page 1 came from
// A, continues A's order.
func TestCursorReadableAtOnceOnAnotherNode(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	clk := newClock()
	seedRooms(t, db, "a1", 1, 0, 60, func(i int) int64 { return int64(1000 - i) })
	refill(t, db, rdb, prefix, nil)
	hooked := testenv.RedisClient(t)
	t.Cleanup(func() { hooked.Close() })
	h := &holdFrozenWrites{reached: make(chan struct{}, 1), cardsRead: make(chan struct{}, 1)}
	hooked.AddHook(h)
	// A held write must not time out: the test releases it. Cards are
	// read from Redis on every page (no near cache), so that the test
	// sees page 1's.
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Second, RedisTimeout: 10 * time.Second, Now: clk.now,
		NearCacheCards: noNearCache}
	a := newTestNode(t, db, hooked, prefix, cfg)
	b := newTestNode(t, db, rdb, prefix, cfg)
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 10}
	moveToTop := func(i int) {
		t.Helper()
		if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = sort_score + 100000 WHERE room_id = ?`, roomName("a1", i)); err != nil {
			t.Fatal(err)
		}
		refill(t, db, rdb, prefix, nil)
	}

	// The list's first order: page 1 reads its cards while the order's
	// write is held, and is not answered before the write ended.
	release := h.hold()
	done := make(chan roomlist.Page, 1)
	go func() {
		p, err := a.List(context.Background(), req)
		if err != nil {
			t.Error(err)
		}
		if h.written.Load() != 1 {
			t.Error("page 1 answered before its order's write ended")
		}
		done <- p
	}()
	wait(t, h.reached, "write of a frozen order held")
	wait(t, h.cardsRead, "read of page 1's cards while the write was held")
	release()
	first := <-done
	if got := roomIDs(first.Rooms); len(got) != 10 || got[0] != roomName("a1", 0) {
		t.Fatalf("page 1: %v", got)
	}
	o1 := frozenIDOf(t, first.NextCursor)
	moveToTop(12) // the live continuation would skip it
	next := req
	next.Cursor = first.NextCursor
	want := make([]string, 0, 10)
	for i := 10; i < 20; i++ {
		want = append(want, roomName("a1", i))
	}
	if got := roomIDs(b.mustList(t, next).Rooms); !slices.Equal(got, want) {
		t.Errorf("page 2 on B: %v, want %v", got, want)
	}

	// A rebuild in the background: its write is held, and first pages go
	// on with the previous order meanwhile, without waiting.
	clk.add(1500 * time.Millisecond)
	release = h.hold()
	if id := frozenIDOf(t, a.mustList(t, req).NextCursor); id != o1 {
		t.Fatalf("the request starting the rebuild got order %x, want the previous %x", id, o1)
	}
	wait(t, h.reached, "write of the rebuilt order held")
	if id := frozenIDOf(t, a.mustList(t, req).NextCursor); id != o1 {
		t.Errorf("a first page during the held write got order %x, want the previous %x", id, o1)
	}
	release()
	var p roomlist.Page
	testenv.Eventually(t, 10*time.Second, func() error {
		p = a.mustList(t, req)
		if frozenIDOf(t, p.NextCursor) == o1 {
			return errors.New("the rebuilt order is not in use yet")
		}
		return nil
	})
	if got := roomIDs(p.Rooms); len(got) != 10 || got[0] != roomName("a1", 12) {
		t.Fatalf("page 1 of the rebuilt order: %v", got)
	}
	moveToTop(15) // the live continuation would skip it
	next.Cursor = p.NextCursor
	want = want[:0]
	for i := 9; i < 20; i++ {
		if i != 12 {
			want = append(want, roomName("a1", i))
		}
	}
	if got := roomIDs(b.mustList(t, next).Rooms); !slices.Equal(got, want) {
		t.Errorf("page 2 of the rebuilt order on B: %v, want %v", got, want)
	}
	a.wantFrozen(t, map[string]float64{"stored": 2})
	b.wantFrozen(t, map[string]float64{"loaded": 2})
}

// TestChainAcrossNodesFallsBack: when B cannot read A's order (no Redis,
// Redis stopped for both or for B, the order gone from Redis), page 2 on B
// continues on the live order after page 1's last room, as before: no
// error, and a room moved across that point is missed.
func TestChainAcrossNodesFallsBack(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, NearCacheCards: noNearCache}
	for n, tc := range []struct {
		name        string
		ra, rb      redis.UniversalClient
		dropOrders  bool
		wantA, want map[string]float64
	}{
		{"no redis", nil, nil, false, nil, map[string]float64{"gone": 1}},
		{"redis stopped", down, down, false, map[string]float64{"store_failed": 1}, map[string]float64{"load_failed": 1}},
		{"redis stopped for B", rdb, down, false, map[string]float64{"stored": 1}, map[string]float64{"load_failed": 1}},
		{"order gone from redis", rdb, rdb, true, map[string]float64{"stored": 1}, map[string]float64{"gone": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := fmt.Sprintf("f%d", n)
			seedRooms(t, db, app, 1, 0, 40, func(i int) int64 { return int64(1000 - i) })
			refill(t, db, rdb, prefix, nil)
			a := newTestNode(t, db, tc.ra, prefix, cfg)
			b := newTestNode(t, db, tc.rb, prefix, cfg)
			req := roomlist.ListRequest{AppCode: app, RegionID: 1, Limit: 10}
			first := a.mustList(t, req)
			if frozenIDOf(t, first.NextCursor) == 0 {
				t.Fatal("page 1's cursor names no frozen order")
			}
			if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = 5000 WHERE room_id = ?`, roomName(app, 12)); err != nil {
				t.Fatal(err)
			}
			refill(t, db, rdb, prefix, nil)
			if tc.dropOrders {
				keys, err := testenv.RedisKeys(context.Background(), rdb, prefix+"room:frozen:{"+app+":*")
				if err != nil || len(keys) != 1 {
					t.Fatalf("frozen orders in redis: %v %v", keys, err)
				}
				if err := rdb.Del(context.Background(), keys...).Err(); err != nil {
					t.Fatal(err)
				}
			}
			next := req
			next.Cursor = first.NextCursor
			want := []string{}
			for i := 10; i < 21; i++ {
				if i != 12 {
					want = append(want, roomName(app, i))
				}
			}
			if got := roomIDs(b.mustList(t, next).Rooms); !slices.Equal(got, want) {
				t.Errorf("page 2 on B: %v, want the live continuation %v", got, want)
			}
			a.wantFrozen(t, tc.wantA)
			b.wantFrozen(t, tc.want)
		})
	}
}

// TestSharedCursorsStayBound: with orders in Redis, a cursor is still
// bound to its app, region, tab and query and to the deployment's key: one
// presented for another app (whose key space Redis also holds) or signed
// with another key is INVALID_ARGUMENT, and Redis is not read for it.
func TestSharedCursorsStayBound(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, NearCacheCards: noNearCache}
	seedRooms(t, db, "a1", 1, 0, 30, func(i int) int64 { return int64(i) })
	seedRooms(t, db, "a2", 1, 0, 30, func(i int) int64 { return int64(i) })
	refill(t, db, rdb, prefix, nil)
	a := newTestNode(t, db, rdb, prefix, cfg)
	b := newTestNode(t, db, rdb, prefix, cfg)
	other := cfg
	other.CursorSecret = []byte("another-secret-0123456789")
	c := newTestNode(t, db, rdb, prefix, other) // another deployment on the same Redis
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Tab: "hot", Limit: 5}
	p := a.mustList(t, req)
	a2 := a.mustList(t, roomlist.ListRequest{AppCode: "a2", RegionID: 1, Tab: "hot", Limit: 5})
	foreign := c.mustList(t, req)
	for _, cur := range []string{p.NextCursor, a2.NextCursor, foreign.NextCursor} {
		// One EXISTS a key: on a cluster the two may be in two slots.
		n1, err1 := rdb.Exists(context.Background(), frozenRedisKey(prefix, "a1", frozenIDOf(t, cur))).Result()
		n2, err2 := rdb.Exists(context.Background(), frozenRedisKey(prefix, "a2", frozenIDOf(t, cur))).Result()
		if err := errors.Join(err1, err2); err != nil || n1+n2 != 1 {
			t.Fatalf("order of cursor %s: %d keys in redis (%v), want 1", cur, n1+n2, err)
		}
	}
	body, sig, _ := strings.Cut(p.NextCursor, ".")
	flip := []byte(body)
	flip[4] ^= 1
	for name, tc := range map[string]roomlist.ListRequest{
		"other app":      {AppCode: "a2", RegionID: 1, Tab: "hot", Cursor: p.NextCursor},
		"other app's":    {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: a2.NextCursor},
		"other region":   {AppCode: "a1", RegionID: 2, Tab: "hot", Cursor: p.NextCursor},
		"other tab":      {AppCode: "a1", RegionID: 1, Tab: "new", Cursor: p.NextCursor},
		"with a query":   {AppCode: "a1", RegionID: 1, Tab: "hot", Query: "title", Cursor: p.NextCursor},
		"edited":         {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: string(flip) + "." + sig},
		"other key":      {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: foreign.NextCursor},
		"other key's a2": {AppCode: "a2", RegionID: 1, Tab: "hot", Cursor: foreign.NextCursor},
	} {
		page, err := b.List(context.Background(), tc)
		if apperr.CodeOf(err) != apperr.InvalidArgument || len(page.Rooms) != 0 {
			t.Errorf("%s: %v, %d rooms", name, err, len(page.Rooms))
		}
	}
	b.wantFrozen(t, nil)
	next := req
	next.Cursor = p.NextCursor
	if got := roomIDs(b.mustList(t, next).Rooms); len(got) != 5 || got[0] != roomName("a1", 24) {
		t.Errorf("page 2 on B: %v", got)
	}
	b.wantFrozen(t, map[string]float64{"loaded": 1})
}

// TestSharedOrderExpires: an order read from Redis serves for ChainTTL
// after its freeze and no longer, by the order's own time (another node's
// clock past it) and by Redis's expiry; the chain then continues on the
// live order.
func TestSharedOrderExpires(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	seedRooms(t, db, "a1", 1, 0, 40, func(i int) int64 { return int64(1000 - i) })
	refill(t, db, rdb, prefix, nil)
	liveAfter9 := func() []string {
		var want []string
		for i := 10; i < 21; i++ {
			if i != 12 {
				want = append(want, roomName("a1", i))
			}
		}
		return want
	}
	moveToTop := func(score int64) {
		t.Helper()
		if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = ? WHERE room_id = ?`, score, roomName("a1", 12)); err != nil {
			t.Fatal(err)
		}
		refill(t, db, rdb, prefix, nil)
	}
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 10}

	t.Run("by the order's time", func(t *testing.T) {
		clk := newClock()
		cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Second, ChainTTL: time.Minute, Now: clk.now,
			NearCacheCards: noNearCache}
		a := newTestNode(t, db, rdb, prefix, cfg)
		b := newTestNode(t, db, rdb, prefix, cfg)
		moveToTop(988)
		first := a.mustList(t, req)
		moveToTop(5000)
		clk.add(time.Minute + time.Second)
		next := req
		next.Cursor = first.NextCursor
		if got := roomIDs(b.mustList(t, next).Rooms); !slices.Equal(got, liveAfter9()) {
			t.Errorf("page 2 on B past ChainTTL: %v, want the live continuation", got)
		}
		b.wantFrozen(t, map[string]float64{"gone": 1})
	})
	t.Run("by redis", func(t *testing.T) {
		cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, ChainTTL: time.Second, NearCacheCards: noNearCache}
		a := newTestNode(t, db, rdb, prefix, cfg)
		b := newTestNode(t, db, rdb, prefix, cfg)
		moveToTop(988)
		first := a.mustList(t, req)
		key := frozenRedisKey(prefix, "a1", frozenIDOf(t, first.NextCursor))
		if pttl, err := rdb.PTTL(context.Background(), key).Result(); err != nil || pttl <= 0 || pttl > time.Second {
			t.Fatalf("the order expires in %v (%v), want within ChainTTL", pttl, err)
		}
		moveToTop(5000)
		testenv.Eventually(t, 10*time.Second, func() error {
			if n, err := rdb.Exists(context.Background(), key).Result(); err != nil || n != 0 {
				return fmt.Errorf("the order is still in redis (%v)", err)
			}
			return nil
		})
		next := req
		next.Cursor = first.NextCursor
		if got := roomIDs(b.mustList(t, next).Rooms); !slices.Equal(got, liveAfter9()) {
			t.Errorf("page 2 on B after the order expired: %v, want the live continuation", got)
		}
		b.wantFrozen(t, map[string]float64{"gone": 1})
	})
}
