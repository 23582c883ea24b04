package listprojector

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// testCard is app's room card at version: title and the score and time
// the projector would give it.
func testCard(app, room string, version int64, title string, score, atMs int64) *Card {
	return &Card{AppCode: app, Card: roomevent.Card{Listing: roomevent.Listing{RoomID: room, RoomShortID: "s" + room,
		IMGroupID: room, OwnerUserID: 7, HostUserID: 7, VisibleRegionID: 1, Title: title, Mode: "voice",
		Status: roomevent.StatusActive, OnlineCount: int(version), SeatCount: 10, CreatedAtMs: 1_700_000_000_000},
		RoomVersion: version}, SortScore: score, UpdatedAtMs: atMs}
}

// mustStoredCard reads app's room from room_list_entries.
func mustStoredCard(tb testing.TB, db *sql.DB, app, room string) *Card {
	tb.Helper()
	rows, err := db.Query(`SELECT `+cardCols+` FROM room_list_entries WHERE app_code = ? AND room_id = ?`, app, room)
	if err != nil {
		tb.Fatalf("read %s: %v", room, err)
	}
	defer rows.Close()
	if !rows.Next() {
		tb.Fatalf("read %s: no row (%v)", room, rows.Err())
	}
	c, err := ScanCard(rows)
	if err != nil {
		tb.Fatalf("read %s: %v", room, err)
	}
	return c
}

// mustWriteCards writes cards with writeCards, stored saying which rooms
// have a row.
func mustWriteCards(tb testing.TB, db *sql.DB, stored func(roomKey) bool, cards ...*Card) {
	tb.Helper()
	if err := writeCards(context.Background(), db, cards, stored); err != nil {
		tb.Fatal(err)
	}
}

func storedAll(roomKey) bool  { return true }
func storedNone(roomKey) bool { return false }

// newTestSessionDB returns a test database whose pool holds one
// connection, so that SHOW SESSION STATUS sees every statement of the
// code under test.
func newTestSessionDB(tb testing.TB) *sql.DB {
	tb.Helper()
	db := testenv.NewDB(tb)
	db.SetMaxOpenConns(1)
	return db
}

// handlerCounts are the session's rows written by the statements run
// since the last call: Handler_write and Handler_update deltas.
type handlerCounts struct {
	db            *sql.DB
	conn          int64
	write, update int64
}

// newTestHandlerCounts starts counting the rows written on db's one
// connection (newTestSessionDB).
func newTestHandlerCounts(tb testing.TB, db *sql.DB) *handlerCounts {
	tb.Helper()
	h := &handlerCounts{db: db, conn: testenv.Scalar[int64](tb, db, `SELECT CONNECTION_ID()`)}
	h.write, h.update = h.read(tb)
	return h
}

func (h *handlerCounts) read(tb testing.TB) (write, update int64) {
	tb.Helper()
	if id := testenv.Scalar[int64](tb, h.db, `SELECT CONNECTION_ID()`); id != h.conn {
		tb.Fatalf("the pool changed connections (%d, then %d): session counters are lost", h.conn, id)
	}
	get := func(name string) int64 {
		var n string
		var v int64
		if err := h.db.QueryRow(`SHOW SESSION STATUS LIKE '`+name+`'`).Scan(&n, &v); err != nil {
			tb.Fatalf("session status %s: %v", name, err)
		}
		return v
	}
	return get("Handler_write"), get("Handler_update")
}

// delta returns the rows written since the last call.
func (h *handlerCounts) delta(tb testing.TB) (write, update int64) {
	tb.Helper()
	w, u := h.read(tb)
	write, update = w-h.write, u-h.update
	h.write, h.update = w, u
	return write, update
}

// TestWriteCardsVersionGuard: each way of writing a card (the UPDATE of
// rooms with a row, the upsert, and writeCards whichever the caller
// believes) writes it only over an older card; on an equal version only
// sort_score and updated_at_ms.
func TestWriteCardsVersionGuard(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	writers := map[string]func(c *Card) error{
		"update": func(c *Card) error { _, err := writeExisting(ctx, db, []*Card{c}); return err },
		"upsert": func(c *Card) error { return upsertCards(ctx, db, []*Card{c}) },
		"writeCards, row known": func(c *Card) error {
			return writeCards(ctx, db, []*Card{c}, storedAll)
		},
		"writeCards, row unknown": func(c *Card) error {
			return writeCards(ctx, db, []*Card{c}, storedNone)
		},
	}
	stored := func(room string) *Card { return testCard("a1", room, 5, "stored", 100, 100) }
	cases := []struct {
		name    string
		version int64
		want    func(room string, in *Card) *Card
	}{
		{"older", 4, func(room string, _ *Card) *Card { return stored(room) }},
		{"equal", 5, func(room string, in *Card) *Card {
			w := stored(room)
			w.SortScore, w.UpdatedAtMs = in.SortScore, in.UpdatedAtMs
			return w
		}},
		{"newer", 6, func(_ string, in *Card) *Card { return in }},
	}
	for wname, write := range writers {
		for _, tc := range cases {
			t.Run(wname+"/"+tc.name, func(t *testing.T) {
				room := fmt.Sprintf("r_%s_%s", wname, tc.name)
				if err := upsertCards(ctx, db, []*Card{stored(room)}); err != nil {
					t.Fatal(err)
				}
				in := testCard("a1", room, tc.version, "incoming", 200, 200)
				in.Status, in.VisibleRegionID, in.Heat = "closed", 2, 9
				if err := write(in); err != nil {
					t.Fatal(err)
				}
				if got, want := mustStoredCard(t, db, "a1", room), tc.want(room, in); *got != *want {
					t.Errorf("stored %+v\nwant   %+v", *got, *want)
				}
			})
		}
	}
}

// TestWriteExistingChangedRows: the UPDATE reports the rows it changed,
// which is how writeCards knows a card found no row.
func TestWriteExistingChangedRows(t *testing.T) {
	db := testenv.NewDB(t)
	ctx := context.Background()
	mustWriteCards(t, db, storedNone, testCard("a1", "r1", 5, "x", 1, 1), testCard("a1", "r2", 5, "x", 1, 1))
	n, err := writeExisting(ctx, db, byKey([]*Card{testCard("a1", "r1", 6, "y", 2, 2), testCard("a1", "r2", 4, "y", 2, 2),
		testCard("a1", "r3", 6, "y", 2, 2)}))
	if err != nil || n != 1 {
		t.Errorf("changed %d rows (%v), want 1: r1 newer, r2 older, r3 without a row", n, err)
	}
	if n := testenv.Scalar[int](t, db, `SELECT COUNT(*) FROM room_list_entries WHERE room_id = 'r3'`); n != 0 {
		t.Errorf("the UPDATE inserted r3")
	}
}

// TestWriteCardsInsertsRoomsWithoutRow: a card is inserted when its room
// has no row, whether or not the caller knows it (a row deleted, the
// table truncated, after the caller read it); a batch mixes both kinds.
func TestWriteCardsInsertsRoomsWithoutRow(t *testing.T) {
	db := testenv.NewDB(t)
	mustWriteCards(t, db, storedNone, testCard("a1", "r1", 1, "v1", 1, 1), testCard("a1", "r3", 1, "v1", 1, 1),
		testCard("a2", "r1", 1, "v1", 1, 1))
	if _, err := db.Exec(`DELETE FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'r3'`); err != nil {
		t.Fatal(err)
	}
	// r1 of a1 has a row; r2 has none, and the caller knows; r3 lost its
	// row after the caller read it; r1 of a2 has a row.
	known := map[roomKey]bool{{"a1", "r1"}: true, {"a1", "r3"}: true, {"a2", "r1"}: true}
	batch := []*Card{testCard("a2", "r1", 2, "v2", 2, 2), testCard("a1", "r3", 2, "v2", 2, 2),
		testCard("a1", "r2", 2, "v2", 2, 2), testCard("a1", "r1", 2, "v2", 2, 2)}
	mustWriteCards(t, db, func(k roomKey) bool { return known[k] }, batch...)
	for _, want := range batch {
		if got := mustStoredCard(t, db, want.AppCode, want.RoomID); *got != *want {
			t.Errorf("stored %+v\nwant   %+v", *got, *want)
		}
	}
}

// TestWriteCardsRowsWritten: N newer cards of rooms with a row cost N
// updated rows and no insert; new rooms cost one inserted row each; a
// mixed batch the sum.
func TestWriteCardsRowsWritten(t *testing.T) {
	db := newTestSessionDB(t)
	h := newTestHandlerCounts(t, db)
	var created, newer []*Card
	for i := range 5 {
		created = append(created, testCard("a1", fmt.Sprintf("r%d", i), 1, "v1", 1, 1))
		newer = append(newer, testCard("a1", fmt.Sprintf("r%d", i), 2, "v2", 2, 2))
	}
	mustWriteCards(t, db, storedNone, created...)
	if w, u := h.delta(t); w != 5 || u != 0 {
		t.Errorf("5 new rooms: Handler_write %d, Handler_update %d; want 5 and 0", w, u)
	}
	mustWriteCards(t, db, storedAll, newer...)
	if w, u := h.delta(t); w != 0 || u != 5 {
		t.Errorf("5 newer cards: Handler_write %d, Handler_update %d; want 0 and 5", w, u)
	}
	mixed := []*Card{testCard("a1", "r0", 3, "v3", 3, 3), testCard("a1", "r9", 1, "v1", 1, 1), testCard("a1", "r2", 3, "v3", 3, 3)}
	mustWriteCards(t, db, func(k roomKey) bool { return k.room != "r9" }, mixed...)
	if w, u := h.delta(t); w != 1 || u != 2 {
		t.Errorf("2 newer cards and a new room: Handler_write %d, Handler_update %d; want 1 and 2", w, u)
	}
	for _, want := range mixed {
		if got := mustStoredCard(t, db, want.AppCode, want.RoomID); *got != *want {
			t.Errorf("stored %+v\nwant   %+v", *got, *want)
		}
	}
}

// TestProjectorUpdatesExistingRooms: through the projector, a room's first
// card inserts its row and every later one updates it, one row written
// per card.
func TestProjectorUpdatesExistingRooms(t *testing.T) {
	db := newTestSessionDB(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := newProjector(db, Config{}.WithDefaults(), testenv.Logger(t), m, 10)
	batch := func(version int64, eventType string, rooms ...string) []bus.Delivery {
		var ds []bus.Delivery
		for _, room := range rooms {
			raw, err := json.Marshal(map[string]any{"room": testCard("a1", room, version, "v"+strconv.FormatInt(version, 10), 0, 0).Card})
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, bus.Delivery{Envelope: bus.Envelope{EventID: fmt.Sprint(room, version), AppCode: "a1", RoomID: room,
				RoomVersion: version, EventType: eventType, Payload: raw}})
		}
		return ds
	}
	apply := func(ds []bus.Delivery) {
		t.Helper()
		for i, err := range handled(p, context.Background(), ds) {
			if err != nil {
				t.Fatalf("delivery %d: %v", i, err)
			}
		}
		<-p.mirror
	}
	h := newTestHandlerCounts(t, db)
	apply(batch(1, roomevent.RoomCreated, "r1", "r2", "r3"))
	if w, u := h.delta(t); w != 3 || u != 0 {
		t.Errorf("3 rooms created: Handler_write %d, Handler_update %d; want 3 and 0", w, u)
	}
	apply(batch(2, roomevent.RoomUserJoined, "r3", "r1", "r2"))
	if w, u := h.delta(t); w != 0 || u != 3 {
		t.Errorf("3 rooms joined: Handler_write %d, Handler_update %d; want 0 and 3", w, u)
	}
	apply(append(batch(3, roomevent.RoomUserLeft, "r2"), batch(1, roomevent.RoomCreated, "r4")...))
	if w, u := h.delta(t); w != 1 || u != 1 {
		t.Errorf("a room left, one created: Handler_write %d, Handler_update %d; want 1 and 1", w, u)
	}
	for room, want := range map[string]int64{"r1": 2, "r2": 3, "r3": 2, "r4": 1} {
		if c := mustStoredCard(t, db, "a1", room); c.RoomVersion != want || c.Title != "v"+strconv.FormatInt(want, 10) {
			t.Errorf("%s: version %d, title %q; want %d", room, c.RoomVersion, c.Title, want)
		}
	}
}

// TestUpdateStatementPlan: the UPDATE reads the rows by primary key ranges
// first, so it locks them in key order and no other row, whatever the
// table holds (the optimizer would scan a table of a few rows without
// FORCE INDEX), and finds each row's card by key (not a scan of the cards
// for every row).
func TestUpdateStatementPlan(t *testing.T) {
	db := testenv.NewDB(t)
	few := byKey([]*Card{testCard("a1", "r1", 2, "x", 1, 1), testCard("a1", "r2", 2, "x", 1, 1), testCard("a2", "r1", 2, "x", 1, 1)})
	// The largest batch (Config.FetchBatch), should the range optimizer
	// give up on a long IN list.
	var most []*Card
	for i := range 5000 {
		most = append(most, testCard(fmt.Sprintf("a%d", i%3), fmt.Sprintf("r%d", i), 2, "x", 1, 1))
	}
	most = byKey(most)
	for _, rows := range []int{0, 1, 300} {
		for i := testenv.Scalar[int](t, db, `SELECT COUNT(*) FROM room_list_entries`); i < rows; i++ {
			mustWriteCards(t, db, storedNone, testCard("a1", fmt.Sprintf("r%d", i+1), 1, "x", 1, 1))
		}
		for _, cards := range [][]*Card{few, most} {
			q, args := updateStatement(cards)
			plan := testenv.Explain(t, db, q, args...)
			if len(plan) < 2 || plan[0]["table"] != "e" || plan[0]["type"] != "range" || plan[0]["key"] != "PRIMARY" ||
				plan[1]["table"] == "e" || (plan[1]["type"] != "ref" && plan[1]["type"] != "eq_ref") {
				t.Errorf("%d rows, %d cards: plan %v: want e by a range of PRIMARY, then the cards by key", rows, len(cards), plan)
			}
		}
	}
}

// TestRebuildOverExistingRows: a rebuild writes each recovered card with
// the projector's guard whatever the table holds: over an older card, the
// score alone over an equal one, nothing over a newer one, and a new row
// where there is none; rows that exist are updated, not upserted.
func TestRebuildOverExistingRows(t *testing.T) {
	db := newTestSessionDB(t)
	ctx := context.Background()
	for i, room := range []string{"r1", "r2", "r3", "r4"} {
		if _, err := db.Exec(`INSERT INTO rooms (app_code, room_id, owner_user_id, status, created_at_ms, updated_at_ms)
			VALUES ('a1', ?, ?, 'closed', 1, 1)`, room, i); err != nil {
			t.Fatal(err)
		}
	}
	mustWriteCards(t, db, storedNone, testCard("a1", "r1", 5, "stored", 1, 1), testCard("a1", "r2", 6, "stored", 1, 1),
		testCard("a1", "r3", 9, "stored", 1, 1))
	clk := testenv.NewClock(time.UnixMilli(1_700_000_000_000))
	load := func(_ context.Context, app, room string) (roomevent.Card, error) {
		return testCard(app, room, 6, "recovered", 0, 0).Card, nil
	}
	h := newTestHandlerCounts(t, db)
	res, err := Rebuild(ctx, db, nil, Config{Now: clk.Now}, "a1", load, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rooms != 4 || res.Written != 2 {
		t.Errorf("rebuild %+v, want 4 rooms, 2 written", res)
	}
	if w, u := h.delta(t); w != 1 || u != 2 {
		t.Errorf("Handler_write %d, Handler_update %d; want 1 (r4) and 2 (r1, r2)", w, u)
	}
	nowMs := clk.Now().UnixMilli()
	score := sortScore(testCard("a1", "r", 6, "", 0, 0), nowMs)
	for room, want := range map[string]struct {
		version     int64
		title       string
		score, atMs int64
	}{"r1": {6, "recovered", score, nowMs}, "r2": {6, "stored", score, nowMs}, "r3": {9, "stored", 1, 1}, "r4": {6, "recovered", score, nowMs}} {
		c := mustStoredCard(t, db, "a1", room)
		if c.RoomVersion != want.version || c.Title != want.title || c.SortScore != want.score || c.UpdatedAtMs != want.atMs {
			t.Errorf("%s: version %d %q score %d at %d; want %+v", room, c.RoomVersion, c.Title, c.SortScore, c.UpdatedAtMs, want)
		}
	}
}
