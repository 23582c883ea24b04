package roomlist_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomevent"
	"voiceroom/roomlist"
	"voiceroom/rooms"
)

// eventuallyList waits until as's first hot page (limit 50) satisfies ok.
func (s *stack) eventuallyList(as string, ok func([]roomlist.Item) error) []roomlist.Item {
	s.tb.Helper()
	var last []roomlist.Item
	testenv.Eventually(s.tb, 10*time.Second, func() error {
		status, p := s.list(as, url.Values{"limit": {"50"}})
		if status != 200 {
			return fmt.Errorf("status %d", status)
		}
		last = p.Rooms
		return ok(p.Rooms)
	})
	return last
}

func exactly(ids ...string) func([]roomlist.Item) error {
	return func(items []roomlist.Item) error {
		got := roomIDs(items)
		if !slices.Equal(got, ids) {
			return fmt.Errorf("list %v, want %v", got, ids)
		}
		return nil
	}
}

func find(items []roomlist.Item, id string) *roomlist.Item {
	for i := range items {
		if items[i].RoomID == id {
			return &items[i]
		}
	}
	return nil
}

// TestRegionIsolationOverHTTP: users of one region see one list, other
// regions and apps never show, GLOBAL works, forged parameters do nothing.
func TestRegionIsolationOverHTTP(t *testing.T) {
	s := newStack(t)
	sea := s.createRoom("demo:1001", "sg room")     // SG -> SEA
	mena := s.createRoom("demo:1003", "sa room")    // SA -> MENA
	global := s.createRoom("demo:1005", "us room")  // US -> GLOBAL
	foreign := s.createRoom("other:1001", "sg too") // app other, SG, same short id demo_sg

	sg := s.eventuallyList("demo:1001", exactly(sea))
	s.eventuallyList("demo:1002", exactly(sea)) // MY: same region, same list
	s.eventuallyList("demo:1003", exactly(mena))
	s.eventuallyList("demo:1006", exactly(global)) // no country: GLOBAL
	s.eventuallyList("demo:1005", exactly(global))
	s.eventuallyList("other:1002", exactly(foreign))

	it := sg[0]
	if it.IMGroupID != sea || it.RoomShortID != "demo_sg" || it.Title != "sg room" || it.VisibleRegionID != s.ids["SEA"] ||
		it.OwnerUserID != 1001 || it.HostUserID != 1001 || it.Status != "active" || it.Locked || it.Pinned || it.SeatCount == 0 {
		t.Errorf("item %+v", it)
	}

	forged := url.Values{"region_id": {fmt.Sprint(s.ids["MENA"])}, "visible_region_id": {fmt.Sprint(s.ids["MENA"])},
		"app_code": {"other"}, "limit": {"50"}}
	if status, p := s.list("demo:1001", forged); status != 200 || !slices.Equal(roomIDs(p.Rooms), []string{sea}) {
		t.Errorf("forged parameters: %d %v", status, roomIDs(p.Rooms))
	}
	// Search stays inside the region and the app.
	for _, q := range []string{"demo_sg", "sg", "SG ROOM"} {
		if status, p := s.list("demo:1001", url.Values{"query": {q}}); status != 200 || !slices.Equal(roomIDs(p.Rooms), []string{sea}) {
			t.Errorf("search %q as SG: %d %v", q, status, roomIDs(p.Rooms))
		}
		if status, p := s.list("demo:1003", url.Values{"query": {q}}); status != 200 || len(p.Rooms) != 0 {
			t.Errorf("search %q as SA: %d %v", q, status, roomIDs(p.Rooms))
		}
	}
	// A cursor works for another user of the region, and for no one else.
	sea2 := s.createRoom("demo:1002", "my room")
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 {
			return fmt.Errorf("%d rooms", len(items))
		}
		return nil
	})
	_, first := s.list("demo:1001", url.Values{"limit": {"1"}})
	if first.NextCursor == "" {
		t.Fatal("no cursor")
	}
	next := url.Values{"limit": {"1"}, "cursor": {first.NextCursor}}
	if status, p := s.list("demo:1002", next); status != 200 || len(p.Rooms) != 1 || p.Rooms[0].RoomID == first.Rooms[0].RoomID {
		t.Errorf("cursor in the same region: %d %v", status, roomIDs(p.Rooms))
	}
	for _, as := range []string{"demo:1003", "demo:1006", "other:1001"} {
		if status, p := s.list(as, next); status != 400 || len(p.Rooms) != 0 {
			t.Errorf("cursor used by %s: %d %v", as, status, roomIDs(p.Rooms))
		}
	}

	// Pins through the admin routes.
	var pin roomlist.Pin
	s.mustOK("POST", "/admin/v1/pins", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"weight":3,"expires_at_ms":%d}`,
		sea2, s.ids["SEA"], time.Now().Add(time.Hour).UnixMilli()), &pin)
	if pin.PinID == 0 || pin.Status != "active" || pin.CreatedBy != "admin" {
		t.Errorf("pin %+v", pin)
	}
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 || items[0].RoomID != sea2 || !items[0].Pinned || items[1].Pinned {
			return fmt.Errorf("%+v", items)
		}
		return nil
	})
	if status, code := s.call("POST", "/admin/v1/pins", "other:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"weight":3,"expires_at_ms":%d}`,
		sea2, s.ids["SEA"], time.Now().Add(time.Hour).UnixMilli()), nil); status != 404 {
		t.Errorf("pin of another app's room: %d %s", status, code)
	}
	var listed struct{ Pins []roomlist.Pin }
	s.mustOK("GET", fmt.Sprintf("/admin/v1/pins?visible_region_id=%d", s.ids["SEA"]), "demo:admin", "", &listed)
	if len(listed.Pins) != 1 || listed.Pins[0].PinID != pin.PinID {
		t.Errorf("pins %+v", listed.Pins)
	}
	if status, _ := s.call("DELETE", fmt.Sprintf("/admin/v1/pins/%d", pin.PinID), "other:admin", "", nil); status != 404 {
		t.Errorf("another app deletes the pin: %d", status)
	}
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/pins/%d", pin.PinID), "demo:admin", "", nil)
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 || items[0].Pinned {
			return fmt.Errorf("%+v", items)
		}
		return nil
	})

	// A user without a profile: the lookup fails, and so does the request.
	if status, _ := s.list("demo:4242", nil); status != 404 {
		t.Errorf("user without profile: %d", status)
	}
	for _, bad := range []url.Values{{"tab": {"cold"}}, {"limit": {"51"}}, {"limit": {"0x"}}, {"limit": {"-1"}},
		{"query": {string(make([]byte, 40))}}, {"cursor": {"garbage"}}} {
		if status, _ := s.list("demo:1001", bad); status != 400 {
			t.Errorf("%v: %d, want 400", bad, status)
		}
	}
}

// TestConvergenceOverHTTP: joins, leaves, gifts, passwords, closes and
// region changes reach the list.
func TestConvergenceOverHTTP(t *testing.T) {
	s := newStack(t)
	a := s.createRoom("demo:1001", "room a")
	b := s.createRoom("demo:1002", "room b")
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 {
			return fmt.Errorf("%d rooms", len(items))
		}
		return nil
	})

	s.mustOK("POST", "/api/v1/rooms/"+a+"/join", "demo:1002", "", nil)
	s.mustOK("POST", "/api/v1/rooms/"+a+"/mic/up", "demo:1002", `{"seat_index":1}`, nil)
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if it := find(items, a); it == nil || it.OnlineCount != 1 || it.OccupiedSeatCount != 1 {
			return fmt.Errorf("room a %+v", it)
		}
		return nil
	})
	s.mustOK("POST", "/api/v1/rooms/"+a+"/leave", "demo:1002", "", nil)
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if it := find(items, a); it == nil || it.OnlineCount != 0 || it.OccupiedSeatCount != 0 {
			return fmt.Errorf("room a %+v", it)
		}
		return nil
	})

	// A gift puts b above a in hot.
	s.mustOK("POST", "/admin/v1/gifts", "demo:admin", `{"gift_id":1,"name":"rose","price":1,"heat":10}`, nil)
	s.mustOK("POST", "/admin/v1/wallets/1001/credit", "demo:admin", `{"amount":100,"idempotency_key":"c1"}`, nil)
	s.mustOK("POST", "/api/v1/rooms/"+b+"/join", "demo:1001", "", nil)
	s.mustOK("POST", "/api/v1/rooms/"+b+"/join", "demo:1002", "", nil)
	s.mustOK("POST", "/api/v1/rooms/"+b+"/gift", "demo:1001", `{"gift_id":1,"count":3,"receiver_user_id":1002}`, nil)
	s.eventuallyList("demo:1002", func(items []roomlist.Item) error {
		if len(items) != 2 || items[0].RoomID != b || items[0].Heat != 30 {
			return fmt.Errorf("hot order %+v", items)
		}
		return nil
	})

	s.mustOK("POST", "/api/v1/rooms/"+a+"/password", "demo:1001", `{"password":"1234"}`, nil)
	s.eventuallyList("demo:1002", func(items []roomlist.Item) error {
		if it := find(items, a); it == nil || !it.Locked {
			return fmt.Errorf("room a %+v", it)
		}
		return nil
	})

	// b moves to MENA, a closes.
	s.mustOK("POST", "/admin/v1/rooms/"+b+"/region", "demo:admin", fmt.Sprintf(`{"visible_region_id":%d,"reason":"test"}`, s.ids["MENA"]), nil)
	s.mustOK("POST", "/api/v1/rooms/"+a+"/close", "demo:1001", "", nil)
	s.eventuallyList("demo:1002", exactly())
	s.eventuallyList("demo:1003", exactly(b))
}

// TestRebuildGivesTheSameList: regenerating an emptied read model (and an
// emptied cache) from MySQL alone gives the projector's answers.
func TestRebuildGivesTheSameList(t *testing.T) {
	s := newStack(t)
	a := s.createRoom("demo:1001", "room a")
	b := s.createRoom("demo:1002", "room b")
	c := s.createRoom("demo:1003", "room c")
	s.mustOK("POST", "/api/v1/rooms/"+a+"/join", "demo:1002", "", nil)
	s.mustOK("POST", "/api/v1/rooms/"+c+"/close", "demo:1003", "", nil)
	want := s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if it := find(items, a); it == nil || it.OnlineCount != 1 || find(items, b) == nil {
			return fmt.Errorf("%+v", items)
		}
		return nil
	})
	s.eventuallyList("demo:1003", exactly())

	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `DELETE FROM room_list_entries`); err != nil {
		t.Fatal(err)
	}
	deleteKeys(t, s)
	load := func(ctx context.Context, app, room string) (roomevent.Card, error) {
		return rooms.LoadCard(ctx, s.db, app, room)
	}
	res, err := listprojector.Rebuild(ctx, s.db, s.rdb, s.pcfg, "demo", load, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if res.Rooms != 3 || res.Written != 3 {
		t.Errorf("rebuild %+v, want 3 rooms written", res)
	}
	got := s.eventuallyList("demo:1001", func([]roomlist.Item) error { return nil })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after rebuild %+v\nwant %+v", got, want)
	}
	s.eventuallyList("demo:1003", exactly())
}

// deleteKeys deletes every Redis key of the test.
func deleteKeys(tb testing.TB, s *stack) {
	tb.Helper()
	testenv.DeleteRedisKeys(tb, s.rdb, s.prefix)
}
