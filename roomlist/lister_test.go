package roomlist_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/mysqldb"
	"voiceroom/roomlist"
)

// clock is a settable test clock.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(1_800_000_000_000)
	return c
}
func (c *clock) now() time.Time         { return time.UnixMilli(c.ms.Load()) }
func (c *clock) add(d time.Duration)    { c.ms.Add(d.Milliseconds()) }
func (c *clock) nowMs() int64           { return c.ms.Load() }
func roomName(app string, i int) string { return fmt.Sprintf("%s_room%04d", app, i) }

// seedRooms writes n active rooms of app in region straight into rooms and
// room_list_entries, room i with sort_score score(i).
func seedRooms(tb testing.TB, db *sql.DB, app string, region int64, from, n int, score func(i int) int64) []string {
	tb.Helper()
	var ids []string
	for i := from; i < from+n; i++ {
		id := roomName(app, i)
		ids = append(ids, id)
		if _, err := db.Exec(`INSERT INTO rooms (app_code, room_id, room_short_id, owner_user_id, status, visible_region_id,
			mode, room_version, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, 'active', ?, 'voice', 1, ?, ?)`,
			app, id, fmt.Sprintf("s%d", i), 10000+i, region, 1_700_000_000_000+int64(i), 1); err != nil {
			tb.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO room_list_entries (app_code, room_id, room_short_id, im_group_id, visible_region_id,
			owner_user_id, host_user_id, title, mode, status, sort_score, room_version, created_at_ms, updated_at_ms, seat_count)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'voice', 'active', ?, 1, ?, 1, 10)`,
			app, id, fmt.Sprintf("s%d", i), id, region, 10000+i, 10000+i, fmt.Sprintf("title %d", i), score(i), 1_700_000_000_000+int64(i)); err != nil {
			tb.Fatal(err)
		}
	}
	return ids
}

// newTestMirror returns the read model's Redis mirror on rdb under prefix
// (nil when rdb is nil).
func newTestMirror(tb testing.TB, db *sql.DB, rdb redis.UniversalClient, prefix string) *listprojector.Mirror {
	tb.Helper()
	m, err := listprojector.NewMirror(db, rdb, listprojector.Config{KeyPrefix: prefix}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// newTestLister returns a running Lister over db and rdb's keys under
// prefix; m may be nil.
func newTestLister(tb testing.TB, db *sql.DB, rdb redis.UniversalClient, prefix string, cfg roomlist.Config, m *roomlist.Metrics) *roomlist.Lister {
	tb.Helper()
	l, err := roomlist.NewLister(db, newTestMirror(tb, db, rdb, prefix), cfg, testenv.Logger(tb), m)
	if err != nil {
		tb.Fatal(err)
	}
	runLister(tb, l, rdb)
	return l
}

// refill rebuilds every region's Redis sets, cards and hide sets (hides
// as they apply at now; nil is the wall clock) from MySQL, as the
// projector's reconcile job does.
func refill(tb testing.TB, db *sql.DB, rdb redis.UniversalClient, prefix string, now func() time.Time) {
	tb.Helper()
	r, err := listprojector.NewReconciler(db, rdb, listprojector.Config{KeyPrefix: prefix, Now: now}, testenv.Logger(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := r.Pass(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// fixture is the list over real MySQL and Redis: a Lister on a read model
// the tests write straight into MySQL (seedRooms) and Redis (refill).
type fixture struct {
	tb     testing.TB
	db     *sql.DB
	rdb    redis.UniversalClient
	prefix string
	cfg    roomlist.Config
	lister *roomlist.Lister
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	db := testenv.NewDB(tb)
	rdb, prefix := testenv.NewRedis(tb)
	s := &fixture{tb: tb, db: db, rdb: rdb, prefix: prefix,
		cfg: roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond}}
	s.lister = newTestLister(tb, db, rdb, prefix, s.cfg, nil)
	return s
}

// walkLister lists every page of a chain, calling between after each page.
func walkLister(tb testing.TB, l *roomlist.Lister, req roomlist.ListRequest, between func()) []roomlist.Item {
	tb.Helper()
	var all []roomlist.Item
	for range 10000 {
		p, err := l.List(context.Background(), req)
		if err != nil {
			tb.Fatalf("list %+v: %v", req, err)
		}
		all = append(all, p.Rooms...)
		if p.NextCursor == "" {
			return all
		}
		req.Cursor = p.NextCursor
		if between != nil {
			between()
		}
	}
	tb.Fatal("chain does not end")
	return nil
}

func noRepeat(tb testing.TB, items []roomlist.Item) map[string]bool {
	tb.Helper()
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.RoomID] {
			tb.Fatalf("room %s returned twice", it.RoomID)
		}
		seen[it.RoomID] = true
	}
	return seen
}

// TestPinsFirstAndExpiry: active pins first in pin order, once, only in
// their region, until they expire or the room leaves the region.
func TestPinsFirstAndExpiry(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	clk := newClock()
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, Now: clk.now}
	ids := seedRooms(t, db, "a1", 1, 0, 30, func(i int) int64 { return int64(1000 - i) })
	seedRooms(t, db, "a1", 2, 30, 2, func(i int) int64 { return 5 })
	pins, err := roomlist.NewPins(db, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pin := func(room string, region, weight int64, ttl time.Duration) (roomlist.Pin, error) {
		return pins.Create(ctx, "a1", "admin:7", roomlist.NewPin{RoomID: room, VisibleRegionID: region, Weight: weight,
			ExpiresAtMs: clk.nowMs() + ttl.Milliseconds()})
	}
	mustPin := func(room string, weight int64, ttl time.Duration) roomlist.Pin {
		t.Helper()
		p, err := pin(room, 1, weight, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mustPin(ids[10], 5, time.Hour)
	mustPin(ids[20], 9, time.Hour)
	short := mustPin(ids[25], 9, time.Minute)
	p29 := mustPin(ids[29], 1, time.Hour)
	mustPin(ids[12], 1, time.Hour) // weight ties with 29, expires at the same time: room_id ASC
	// Rules of pin creation.
	for _, tc := range []struct {
		room   string
		region int64
		weight int64
		ttl    time.Duration
		want   apperr.Code
	}{
		{ids[1], 2, 1, time.Hour, apperr.FailedPrecondition}, // the room is not in region 2
		{"a1_nope", 1, 1, time.Hour, apperr.NotFound},
		{ids[1], 1, -1, time.Hour, apperr.InvalidArgument},
		{ids[1], 1, 1, -time.Minute, apperr.InvalidArgument},
		{ids[1], 1, 1, 400 * 24 * time.Hour, apperr.InvalidArgument},
	} {
		if _, err := pin(tc.room, tc.region, tc.weight, tc.ttl); apperr.CodeOf(err) != tc.want {
			t.Errorf("pin %s in %d weight %d ttl %v: %v, want %s", tc.room, tc.region, tc.weight, tc.ttl, err, tc.want)
		}
	}
	if _, err := pins.Create(ctx, "a2", "admin", roomlist.NewPin{RoomID: ids[1], VisibleRegionID: 1, Weight: 1,
		ExpiresAtMs: clk.nowMs() + 1000}); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("pin of another app's room: %v", err)
	}

	l := newTestLister(t, db, rdb, prefix, cfg, nil)
	walk := func() []roomlist.Item {
		clk.add(time.Second) // past FreezeEvery: a new frozen order
		return walkLister(t, l, roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 7}, nil)
	}
	got := walk()
	noRepeat(t, got)
	wantHead := []string{ids[20], ids[25], ids[10], ids[12], ids[29]}
	if head := roomIDs(got[:5]); !slices.Equal(head, wantHead) {
		t.Errorf("pinned section %v, want %v", head, wantHead)
	}
	for i, it := range got {
		if it.Pinned != (i < 5) {
			t.Errorf("item %d %s pinned=%v", i, it.RoomID, it.Pinned)
		}
	}
	if len(got) != 30 {
		t.Errorf("%d rooms, want 30", len(got))
	}
	if other, err := l.List(ctx, roomlist.ListRequest{AppCode: "a1", RegionID: 2}); err != nil || len(other.Rooms) != 2 || other.Rooms[0].Pinned {
		t.Errorf("region 2: %+v %v", other.Rooms, err)
	}

	clk.add(2 * time.Minute) // the short pin expires
	if err := pins.Delete(ctx, "a1", "admin:test", p29.PinID, ""); err != nil {
		t.Fatal(err)
	}
	if err := pins.Delete(ctx, "a2", "admin:test", short.PinID, ""); apperr.CodeOf(err) != apperr.NotFound {
		t.Errorf("delete another app's pin: %v", err)
	}
	// ids[10] leaves region 1: its pin there stops applying.
	if _, err := db.Exec(`UPDATE room_list_entries SET visible_region_id = 2 WHERE app_code = 'a1' AND room_id = ?`, ids[10]); err != nil {
		t.Fatal(err)
	}
	refill(t, db, rdb, prefix, clk.now) // as the projector would
	got = walk()
	noRepeat(t, got)
	if head := roomIDs(got[:2]); !slices.Equal(head, []string{ids[20], ids[12]}) || got[2].Pinned {
		t.Errorf("after expiry, removal and move: %v", roomIDs(got[:4]))
	}
	if len(got) != 29 {
		t.Errorf("%d rooms, want 29", len(got))
	}
	list, err := pins.List(ctx, "a1", 1)
	if err != nil || len(list) != 5 {
		t.Errorf("pins of region 1: %d %v", len(list), err)
	}
}

// TestChainWhileScoresChange: a chain walked while a writer keeps moving
// scores returns every room exactly once.
func TestChainWhileScoresChange(t *testing.T) {
	db := testenv.NewDB(t)
	rdb, prefix := testenv.NewRedis(t)
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond}
	ids := seedRooms(t, db, "a1", 1, 0, 300, func(i int) int64 { return int64(i % 40) }) // many ties
	l := newTestLister(t, db, rdb, prefix, cfg, nil)
	for _, tab := range []string{"hot", "new"} {
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Go(func() {
			r := rand.New(rand.NewPCG(1, 2))
			for !stop.Load() {
				id := ids[r.IntN(len(ids))]
				if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = ?, created_at_ms = created_at_ms WHERE app_code = 'a1' AND room_id = ?`,
					r.Int64N(1000), id); err != nil && !mysqldb.IsRetryable(err) {
					t.Error(err)
					return
				}
			}
		})
		// Between pages, also move the next unseen rooms to the top and the
		// top ones to the bottom, the worst case of a live keyset.
		moved := 0
		got := walkLister(t, l, roomlist.ListRequest{AppCode: "a1", RegionID: 1, Tab: tab, Limit: 20}, func() {
			moved++
			if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = IF(sort_score > 500, 0, sort_score + 10000) WHERE app_code = 'a1'`); err != nil {
				t.Fatal(err)
			}
			refill(t, db, rdb, prefix, nil)
		})
		stop.Store(true)
		wg.Wait()
		seen := noRepeat(t, got)
		if len(seen) != len(ids) || moved < 10 {
			t.Errorf("%s: %d of %d rooms over %d pages", tab, len(seen), len(ids), moved+1)
		}
	}
}

// TestChainPastDepth: past ChainDepth a chain continues on the live order.
func TestChainPastDepth(t *testing.T) {
	db := testenv.NewDB(t)
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond, ChainDepth: 50, SearchMaxResults: 50}
	seedRooms(t, db, "a1", 1, 0, 135, func(i int) int64 { return int64(i % 7) })
	l := newTestLister(t, db, nil, "", cfg, nil)
	for _, tab := range []string{"hot", "new"} {
		got := walkLister(t, l, roomlist.ListRequest{AppCode: "a1", RegionID: 1, Tab: tab, Limit: 15}, nil)
		if seen := noRepeat(t, got); len(seen) != 135 {
			t.Errorf("%s: %d rooms, want 135", tab, len(seen))
		}
	}
}

// TestCursorsBoundAndSigned: an edited cursor, or one used for another
// app, region, tab or query, is INVALID_ARGUMENT.
func TestCursorsBoundAndSigned(t *testing.T) {
	db := testenv.NewDB(t)
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Millisecond}
	seedRooms(t, db, "a1", 1, 0, 5, func(i int) int64 { return int64(i) })
	seedRooms(t, db, "a2", 1, 0, 5, func(i int) int64 { return int64(i) })
	l := newTestLister(t, db, nil, "", cfg, nil)
	ctx := context.Background()
	base := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Tab: "hot", Limit: 2}
	p, err := l.List(ctx, base)
	if err != nil || p.NextCursor == "" {
		t.Fatalf("%+v %v", p, err)
	}
	search := base
	search.Query = "title"
	sp, err := l.List(ctx, search)
	if err != nil || sp.NextCursor == "" || len(sp.Rooms) != 2 {
		t.Fatalf("search %+v %v", sp, err)
	}
	body, sig, _ := strings.Cut(p.NextCursor, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		b[i] ^= 1
		return string(b)
	}
	other, err := roomlist.NewLister(db, nil, roomlist.Config{CursorSecret: []byte("another-secret-0123456789")}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, err := other.List(ctx, base)
	if err != nil || op.NextCursor == "" {
		t.Fatalf("a page under another key: %+v %v", op, err)
	}
	for name, tc := range map[string]roomlist.ListRequest{
		"edited body":      {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: flip(body, 3) + "." + sig},
		"edited signature": {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: body + "." + flip(sig, 0)},
		"no signature":     {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: body},
		"other key":        {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: op.NextCursor},
		"other region":     {AppCode: "a1", RegionID: 2, Tab: "hot", Cursor: p.NextCursor},
		"other app":        {AppCode: "a2", RegionID: 1, Tab: "hot", Cursor: p.NextCursor},
		"other tab":        {AppCode: "a1", RegionID: 1, Tab: "new", Cursor: p.NextCursor},
		"with a query":     {AppCode: "a1", RegionID: 1, Tab: "hot", Query: "title", Cursor: p.NextCursor},
		"other query":      {AppCode: "a1", RegionID: 1, Tab: "hot", Query: "titl", Cursor: sp.NextCursor},
		"search dropped":   {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: sp.NextCursor},
		"too long":         {AppCode: "a1", RegionID: 1, Tab: "hot", Cursor: strings.Repeat("a", 600)},
	} {
		page, err := l.List(ctx, tc)
		if apperr.CodeOf(err) != apperr.InvalidArgument || len(page.Rooms) != 0 {
			t.Errorf("%s: %v, %d rooms", name, err, len(page.Rooms))
		}
	}
}

// TestRedisLossChangesNothing: deleting every key, or a Redis that is not
// there, gives the same pages.
func TestRedisLossChangesNothing(t *testing.T) {
	s := newFixture(t)
	seedRooms(t, s.db, "a1", 1, 0, 120, func(i int) int64 { return int64(i * 3 % 50) })
	refill(t, s.db, s.rdb, s.prefix, nil)
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 25}
	want := walkLister(t, s.lister, req, nil)
	if len(want) != 120 {
		t.Fatalf("%d rooms", len(want))
	}
	deleted := false
	got := walkLister(t, s.lister, req, func() {
		if !deleted {
			deleteKeysWithPrefix(t, s.rdb, s.prefix)
			deleted = true
		}
	})
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after deleting the keys mid-chain:\n%v\nwant\n%v", roomIDs(got), roomIDs(want))
	}
	deleteKeysWithPrefix(t, s.rdb, s.prefix)
	if got := walkLister(t, s.lister, req, nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("from emptied redis: %v", roomIDs(got))
	}

	// Redis stopped: a port nobody listens on.
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	dl := newTestLister(t, s.db, down, s.prefix, s.cfg, nil)
	if got := walkLister(t, dl, req, nil); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("redis stopped: %v", roomIDs(got))
	}
}

func deleteKeysWithPrefix(tb testing.TB, rdb redis.UniversalClient, prefix string) {
	tb.Helper()
	testenv.DeleteRedisKeys(tb, rdb, prefix)
}

// TestFrozenOrdersBounded: past MaxFrozenRooms the oldest order goes, and
// past ChainTTL an order expires; their cursors continue on the live order.
func TestFrozenOrdersBounded(t *testing.T) {
	db := testenv.NewDB(t)
	clk := newClock()
	cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Second, ChainTTL: time.Minute, ChainDepth: 50,
		MaxFrozenRooms: 50, SearchMaxResults: 50, Now: clk.now}
	seedRooms(t, db, "a1", 1, 0, 60, func(i int) int64 { return int64(1000 - i) })
	l := newTestLister(t, db, nil, "", cfg, nil)
	ctx := context.Background()
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 10}
	first, err := l.List(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(2 * time.Second)
	if _, err := l.List(ctx, req); err != nil { // freezes anew: the first order is evicted
		t.Fatal(err)
	}
	// Move a room of the second page to the top: a live continuation no
	// longer shows it, the frozen order would have.
	if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = 5000 WHERE room_id = ?`, roomName("a1", 12)); err != nil {
		t.Fatal(err)
	}
	next := req
	next.Cursor = first.NextCursor
	p, err := l.List(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{}
	for i := 10; i < 21; i++ {
		if i != 12 {
			want = append(want, roomName("a1", i))
		}
	}
	if got := roomIDs(p.Rooms); !slices.Equal(got, want) {
		t.Errorf("after eviction %v, want %v", got, want)
	}

	// Expiry: a cursor older than ChainTTL continues on the live order too.
	clk.add(2 * time.Second)
	fresh, err := l.List(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.Rooms[0].RoomID != roomName("a1", 12) {
		t.Fatalf("top %s", fresh.Rooms[0].RoomID)
	}
	if _, err := db.Exec(`UPDATE room_list_entries SET sort_score = 1 WHERE room_id = ?`, roomName("a1", 12)); err != nil {
		t.Fatal(err)
	}
	next.Cursor = fresh.NextCursor
	clk.add(2 * time.Minute)
	p, err = l.List(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rooms) != 10 || p.Rooms[0].RoomID != roomName("a1", 9) {
		t.Errorf("after expiry %v", roomIDs(p.Rooms))
	}
}
