package roomlist_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"voiceroom/roomlist"
)

// auditPage is a decoded GET /admin/v1/rooms/:room_id/audit.
type auditPage struct {
	Items []struct {
		Operator string          `json:"operator"`
		Action   string          `json:"action"`
		Reason   string          `json:"reason"`
		Before   json.RawMessage `json:"before"`
		After    json.RawMessage `json:"after"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// trail returns a room's whole audit trail as action:reason, newest first,
// walking pages of 2.
func (s *stack) trail(room, as string) []string {
	s.tb.Helper()
	var got []string
	cursor := ""
	for range 100 {
		var p auditPage
		path := "/admin/v1/rooms/" + room + "/audit?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		s.mustOK("GET", path, as, "", &p)
		for _, it := range p.Items {
			if it.Operator == "" {
				s.tb.Errorf("audit entry without operator: %+v", it)
			}
			got = append(got, it.Action+":"+it.Reason)
		}
		if cursor = p.NextCursor; cursor == "" {
			return got
		}
	}
	s.tb.Fatal("audit paging does not end")
	return nil
}

// moderationCount reads voiceroom_rooms_moderation_actions_total{action}.
func (s *stack) moderationCount(action string) float64 {
	s.tb.Helper()
	families, err := s.reg.Gather()
	if err != nil {
		s.tb.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "voiceroom_rooms_moderation_actions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == action {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	s.tb.Fatalf("no voiceroom_rooms_moderation_actions_total{action=%q}", action)
	return 0
}

// hot returns the first hot page as as, at once: a change must already
// show (it is seen by the next request).
func (s *stack) hot(as string) []string {
	s.tb.Helper()
	status, p := s.list(as, url.Values{"limit": {"50"}})
	if status != 200 {
		s.tb.Fatalf("list as %s: %d", as, status)
	}
	return roomIDs(p.Rooms)
}

func (s *stack) tabNew(as string) []string {
	s.tb.Helper()
	status, p := s.list(as, url.Values{"limit": {"50"}, "tab": {"new"}})
	if status != 200 {
		s.tb.Fatalf("new list as %s: %d", as, status)
	}
	return roomIDs(p.Rooms)
}

func (s *stack) search(as, q string) []string {
	s.tb.Helper()
	status, p := s.list(as, url.Values{"query": {q}})
	if status != 200 {
		s.tb.Fatalf("search %q as %s: %d", q, as, status)
	}
	return roomIDs(p.Rooms)
}

func (s *stack) hide(as, room string, region int64, reason string, expires int64) roomlist.Hide {
	s.tb.Helper()
	var h roomlist.Hide
	body := fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":%q`, room, region, reason)
	if expires != 0 {
		body += fmt.Sprintf(`,"expires_at_ms":%d`, expires)
	}
	s.mustOK("POST", "/admin/v1/hides", as, body+"}", &h)
	return h
}

func sorted(ids ...string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func sameSet(got []string, want ...string) bool {
	return slices.Equal(sorted(got...), sorted(want...))
}

// TestHidePerRegionOverHTTP: a hidden room leaves its region's hot and new
// lists, search and pin at the next request (Redis serving the list), also
// on the next page of a chain under way; it stays joinable by id; a hide
// in MENA leaves SEA and another app untouched; unhide and expiry bring it
// back at once; every pin and hide action is audited with its reason and
// counted.
func TestHidePerRegionOverHTTP(t *testing.T) {
	s := newStack(t)
	s.user("demo:2001", "demo_ae", "AE") // a second MENA user
	seaA := s.createRoom("demo:1001", "alpha sg")
	s.eventuallyList("demo:1001", exactly(seaA)) // seaB is created later: the new tab is seaB, seaA
	seaB := s.createRoom("demo:1002", "beta my")
	mena := s.createRoom("demo:1003", "gamma sa")
	foreign := s.createRoom("other:1001", "alpha other")
	sea, menaID := s.ids["SEA"], s.ids["MENA"]
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if !sameSet(roomIDs(items), seaA, seaB) {
			return fmt.Errorf("SEA list %v", roomIDs(items))
		}
		return nil
	})
	s.eventuallyList("demo:2001", exactly(mena))
	s.eventuallyList("other:1002", exactly(foreign))
	// Warm Redis: the sets and cards serve the pages below.
	s.hot("demo:1001")
	// A chain over the new tab, one room a page: seaA is on its next page
	// (of the frozen order).
	_, newFirst := s.list("demo:1001", url.Values{"limit": {"1"}, "tab": {"new"}})
	if len(newFirst.Rooms) != 1 || newFirst.Rooms[0].RoomID != seaB || newFirst.NextCursor == "" {
		t.Fatalf("first page of the new tab %+v", newFirst)
	}

	// A pin of seaA, then a chain of one room per page under way.
	var pin roomlist.Pin
	s.mustOK("POST", "/admin/v1/pins", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"weight":1,"expires_at_ms":%d,"reason":"featured"}`,
		seaA, sea, time.Now().Add(time.Hour).UnixMilli()), &pin)
	s.eventuallyList("demo:1001", exactly(seaA, seaB)) // pinned first
	_, first := s.list("demo:1001", url.Values{"limit": {"1"}})
	if len(first.Rooms) != 1 || first.Rooms[0].RoomID != seaA || first.NextCursor == "" {
		t.Fatalf("first page %+v", first)
	}

	// Refused hides change nothing.
	for _, tt := range []struct {
		name, as, body string
		status         int
	}{
		{"no reason", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d}`, seaA, sea), 400},
		{"blank reason", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":""}`, seaA, sea), 400},
		{"long reason", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":%q}`, seaA, sea, strings.Repeat("r", 257)), 400},
		{"expiry passed", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":"x","expires_at_ms":%d}`, seaA, sea, time.Now().Add(-time.Minute).UnixMilli()), 400},
		{"negative region", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":-1,"reason":"x"}`, seaA), 400},
		{"bad body", "demo:admin", `{"room_id":5}`, 400},
		{"unknown room", "demo:admin", fmt.Sprintf(`{"room_id":"demo_nope","visible_region_id":%d,"reason":"x"}`, sea), 404},
		{"another app's room", "other:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":"x"}`, seaA, sea), 404},
		{"by a user", "demo:1001", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":"x"}`, seaA, sea), 403},
	} {
		if status, code := s.call("POST", "/admin/v1/hides", tt.as, tt.body, nil); status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, status, code, tt.status)
		}
	}
	if got := s.hot("demo:1001"); !slices.Equal(got, []string{seaA, seaB}) {
		t.Fatalf("refused hides changed the list: %v", got)
	}

	// Hide seaA in SEA: gone from the next request of every kind.
	h := s.hide("demo:admin", seaA, sea, "spam title", 0)
	if h.HideID == 0 || h.Status != "active" || h.RoomID != seaA || h.VisibleRegionID != sea || h.Reason != "spam title" ||
		h.CreatedBy != "admin" || h.ExpiresAtMs != 0 || h.CreatedAtMs == 0 {
		t.Errorf("hide %+v", h)
	}
	if status, code := s.call("POST", "/admin/v1/hides", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"reason":"again"}`, seaA, sea), nil); status != 409 || code != "ALREADY_EXISTS" {
		t.Errorf("second hide of a hidden room: %d %s", status, code)
	}
	for _, as := range []string{"demo:1001", "demo:1002"} {
		if got := s.hot(as); !slices.Equal(got, []string{seaB}) {
			t.Errorf("hot list as %s after hide: %v", as, got)
		}
		if got := s.tabNew(as); !slices.Equal(got, []string{seaB}) {
			t.Errorf("new list as %s after hide: %v", as, got)
		}
		for _, q := range []string{"alpha", "demo_sg"} {
			if got := s.search(as, q); len(got) != 0 {
				t.Errorf("search %q as %s after hide: %v", q, as, got)
			}
		}
	}
	_, next := s.list("demo:1001", url.Values{"limit": {"1"}, "cursor": {first.NextCursor}})
	if slices.Contains(roomIDs(next.Rooms), seaA) {
		t.Errorf("chain under way shows the hidden room: %v", roomIDs(next.Rooms))
	}
	if status, n := s.list("demo:1001", url.Values{"limit": {"1"}, "tab": {"new"}, "cursor": {newFirst.NextCursor}}); status != 200 || len(n.Rooms) != 0 {
		t.Errorf("new-tab chain under way: %d %v, want the hidden room left out", status, roomIDs(n.Rooms))
	}
	// Still joinable by id, and readable.
	s.mustOK("POST", "/api/v1/rooms/"+seaA+"/join", "demo:1002", "", nil)
	s.mustOK("GET", "/api/v1/rooms/"+seaA, "demo:1002", "", nil)
	// Another app's admin neither sees nor removes it.
	var listed struct{ Hides []roomlist.Hide }
	s.mustOK("GET", fmt.Sprintf("/admin/v1/hides?visible_region_id=%d", sea), "other:admin", "", &listed)
	if len(listed.Hides) != 0 {
		t.Errorf("other app sees hides %+v", listed.Hides)
	}
	if status, _ := s.call("DELETE", fmt.Sprintf("/admin/v1/hides/%d", h.HideID), "other:admin", "", nil); status != 404 {
		t.Errorf("another app unhides: %d", status)
	}
	s.mustOK("GET", fmt.Sprintf("/admin/v1/hides?visible_region_id=%d", sea), "demo:admin", "", &listed)
	if len(listed.Hides) != 1 || listed.Hides[0].HideID != h.HideID || listed.Hides[0].Reason != "spam title" {
		t.Errorf("SEA hides %+v", listed.Hides)
	}

	// A hide in MENA: the MENA room leaves MENA; SEA and the other app
	// are untouched, and so is the SEA room hidden in MENA.
	hm := s.hide("demo:admin", mena, menaID, "mena only", 0)
	s.hide("demo:admin", seaB, menaID, "wrong region", 0)
	for _, as := range []string{"demo:1003", "demo:2001"} {
		if got := s.hot(as); len(got) != 0 {
			t.Errorf("MENA list as %s: %v", as, got)
		}
		if got := s.search(as, "gamma"); len(got) != 0 {
			t.Errorf("MENA search as %s: %v", as, got)
		}
	}
	if got := s.hot("demo:1001"); !slices.Equal(got, []string{seaB}) {
		t.Errorf("SEA list after MENA hides: %v", got)
	}
	if got := s.hot("other:1002"); !slices.Equal(got, []string{foreign}) {
		t.Errorf("other app's list after hides: %v", got)
	}
	if got := s.search("other:1002", "alpha"); !slices.Equal(got, []string{foreign}) {
		t.Errorf("other app's search after hides: %v", got)
	}

	// Unhide: back at the next request, pinned again.
	var un roomlist.Hide
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/hides/%d", h.HideID), "demo:admin", `{"reason":"appeal"}`, &un)
	if un.Status != "removed" {
		t.Errorf("unhide answered %+v", un)
	}
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/hides/%d", h.HideID), "demo:admin", "", nil) // again: no error, not audited
	_, p := s.list("demo:1001", url.Values{"limit": {"50"}})
	if got := roomIDs(p.Rooms); !slices.Equal(got, []string{seaA, seaB}) || !p.Rooms[0].Pinned {
		t.Errorf("list after unhide: %+v", p.Rooms)
	}
	if got := s.search("demo:1001", "alpha"); !slices.Equal(got, []string{seaA}) {
		t.Errorf("search after unhide: %v", got)
	}

	// An expired hide no longer applies: the list's clock moves past its
	// expiry (not past the pin's), with the region's hides served from Redis.
	s.hide("demo:admin", seaA, sea, "for a while", time.Now().Add(30*time.Minute).UnixMilli())
	if got := s.hot("demo:1001"); !slices.Equal(got, []string{seaB}) {
		t.Errorf("list under an expiring hide: %v", got)
	}
	s.eventuallyHidesCached("demo", sea)
	if got := s.hot("demo:1001"); !slices.Equal(got, []string{seaB}) {
		t.Errorf("list under an expiring hide, hides from redis: %v", got)
	}
	s.skew.Store(int64(31 * time.Minute))
	if got := s.hot("demo:1001"); !slices.Equal(got, []string{seaA, seaB}) {
		t.Errorf("list after the hide expired: %v", got)
	}
	// MENA's hide still holds; lift it and the room is back.
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/hides/%d?reason=%s", hm.HideID, url.QueryEscape("cleared")), "demo:admin", "", nil)
	if got := s.hot("demo:2001"); !slices.Equal(got, []string{mena}) {
		t.Errorf("MENA list after unhide: %v", got)
	}

	// Unpin with a reason.
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/pins/%d", pin.PinID), "demo:admin", `{"reason":"campaign over"}`, nil)
	if status, _ := s.call("DELETE", fmt.Sprintf("/admin/v1/pins/%d", pin.PinID), "demo:admin", `{"reason":"`+strings.Repeat("r", 257)+`"}`, nil); status != 400 {
		t.Errorf("unpin with a long reason: %d", status)
	}

	// The trail: every action with its reason, newest first; nothing for
	// another app.
	want := []string{"unpin:campaign over", "hide:for a while", "unhide:appeal", "hide:spam title", "pin:featured"}
	if got := s.trail(seaA, "demo:admin"); !slices.Equal(got, want) {
		t.Errorf("audit of seaA %v, want %v", got, want)
	}
	if got := s.trail(mena, "demo:admin"); !slices.Equal(got, []string{"unhide:cleared", "hide:mena only"}) {
		t.Errorf("audit of the MENA room %v", got)
	}
	if status, _ := s.call("GET", "/admin/v1/rooms/"+seaA+"/audit", "other:admin", "", nil); status != 404 {
		t.Errorf("another app's admin reads the audit: %d", status)
	}
	for action, n := range map[string]float64{"pin": 1, "unpin": 1, "hide": 4, "unhide": 2} {
		if got := s.moderationCount(action); got != n {
			t.Errorf("voiceroom_rooms_moderation_actions_total{action=%q} = %v, want %v", action, got, n)
		}
	}
}

// TestBanTakesTheRoomOutOfEveryListOverHTTP: a ban removes everyone,
// refuses joins and takes the room out of its region's lists, search and
// pin; a restore brings it back. The room's trail then holds every operator
// action (pin, ban, restore, hide, unhide, unpin, region change, close by
// an admin) with its reason, and another app's admin sees none of it.
func TestBanTakesTheRoomOutOfEveryListOverHTTP(t *testing.T) {
	s := newStack(t)
	room := s.createRoom("demo:1001", "delta sg")
	other := s.createRoom("demo:1002", "echo my")
	sea, mena := s.ids["SEA"], s.ids["MENA"]
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if !sameSet(roomIDs(items), room, other) {
			return fmt.Errorf("SEA list %v", roomIDs(items))
		}
		return nil
	})
	var pin roomlist.Pin
	s.mustOK("POST", "/admin/v1/pins", "demo:admin", fmt.Sprintf(`{"room_id":%q,"visible_region_id":%d,"weight":1,"expires_at_ms":%d,"reason":"editor pick"}`,
		room, sea, time.Now().Add(time.Hour).UnixMilli()), &pin)
	s.mustOK("POST", "/api/v1/rooms/"+room+"/join", "demo:1002", "", nil)
	s.mustOK("POST", "/api/v1/rooms/"+room+"/join", "demo:1003", "", nil)
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 || items[0].RoomID != room || !items[0].Pinned || items[0].OnlineCount != 2 {
			return fmt.Errorf("SEA list %+v", items)
		}
		return nil
	})

	if status, _ := s.call("POST", "/admin/v1/rooms/"+room+"/ban", "other:admin", `{"reason":"x"}`, nil); status != 404 {
		t.Errorf("another app's admin bans: %d", status)
	}
	s.mustOK("POST", "/admin/v1/rooms/"+room+"/ban", "demo:admin", `{"reason":"abuse report"}`, nil)
	var v struct {
		Status      string `json:"status"`
		OnlineCount int    `json:"online_count"`
	}
	s.mustOK("GET", "/api/v1/rooms/"+room, "demo:1002", "", &v)
	if v.Status != "banned" || v.OnlineCount != 0 {
		t.Errorf("banned room %+v", v)
	}
	if status, code := s.call("POST", "/api/v1/rooms/"+room+"/join", "demo:1002", "", nil); status != 409 || code != "FAILED_PRECONDITION" {
		t.Errorf("join of a banned room: %d %s", status, code)
	}
	// Out of every list of its region (and of none other, where it never was).
	for _, as := range []string{"demo:1001", "demo:1002"} {
		s.eventuallyList(as, exactly(other))
		if got := s.tabNew(as); !slices.Equal(got, []string{other}) {
			t.Errorf("new list as %s after ban: %v", as, got)
		}
		if got := s.search(as, "delta"); len(got) != 0 {
			t.Errorf("search as %s after ban: %v", as, got)
		}
	}
	if got := s.hot("demo:1003"); slices.Contains(got, room) {
		t.Errorf("MENA list shows the banned room: %v", got)
	}

	s.mustOK("POST", "/admin/v1/rooms/"+room+"/restore", "demo:admin", `{"reason":"appeal accepted"}`, nil)
	s.eventuallyList("demo:1001", func(items []roomlist.Item) error {
		if len(items) != 2 || items[0].RoomID != room || !items[0].Pinned {
			return fmt.Errorf("SEA list after restore %+v", items)
		}
		return nil
	})
	if got := s.search("demo:1001", "delta"); !slices.Equal(got, []string{room}) {
		t.Errorf("search after restore: %v", got)
	}
	s.mustOK("POST", "/api/v1/rooms/"+room+"/join", "demo:1002", "", nil)

	h := s.hide("demo:admin", room, sea, "title review", 0)
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/hides/%d", h.HideID), "demo:admin", `{"reason":"title fixed"}`, nil)
	s.mustOK("DELETE", fmt.Sprintf("/admin/v1/pins/%d", pin.PinID), "demo:admin", `{"reason":"pick rotated"}`, nil)
	s.mustOK("POST", "/admin/v1/rooms/"+room+"/region", "demo:admin", fmt.Sprintf(`{"visible_region_id":%d,"reason":"BD move"}`, mena), nil)
	s.eventuallyList("demo:1003", func(items []roomlist.Item) error {
		if find(items, room) == nil {
			return fmt.Errorf("MENA list %v", roomIDs(items))
		}
		return nil
	})
	s.mustOK("POST", "/admin/v1/rooms/"+room+"/close", "demo:admin", `{"reason":"owner request"}`, nil)
	s.eventuallyList("demo:1003", func(items []roomlist.Item) error {
		if find(items, room) != nil {
			return fmt.Errorf("MENA list still shows the closed room")
		}
		return nil
	})

	want := []string{"close:owner request", "region_change:BD move", "unpin:pick rotated", "unhide:title fixed",
		"hide:title review", "restore:appeal accepted", "ban:abuse report", "pin:editor pick"}
	if got := s.trail(room, "demo:admin"); !slices.Equal(got, want) {
		t.Errorf("audit %v, want %v", got, want)
	}
	if status, code := s.call("GET", "/admin/v1/rooms/"+room+"/audit", "other:admin", "", nil); status != 404 {
		t.Errorf("another app's admin reads the audit: %d %s", status, code)
	}
	for _, action := range []string{"pin", "unpin", "hide", "unhide", "ban", "restore", "region_change", "close"} {
		if got := s.moderationCount(action); got != 1 {
			t.Errorf("voiceroom_rooms_moderation_actions_total{action=%q} = %v, want 1", action, got)
		}
	}
}
