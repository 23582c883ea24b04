package gateway

import (
	"strings"
	"testing"

	"voiceroom/rooms"
)

// auditPage is the data of GET /admin/v1/rooms/:room_id/audit.
type auditPage struct {
	Items []struct {
		Action      string `json:"action"`
		Reason      string `json:"reason"`
		Operator    string `json:"operator"`
		RoomVersion int64  `json:"room_version"`
		Before      map[string]any
		After       map[string]any
		CreatedAtMs int64 `json:"created_at_ms"`
	} `json:"items"`
	NextCursor string `json:"next_cursor"`
}

func TestRoomBanRestoreAndAuditOverHTTP(t *testing.T) {
	a := newRoomAPI(t)
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"Night talk"}`, &room)
	base := "/api/v1/rooms/" + room.RoomID
	admin := "/admin/v1/rooms/" + room.RoomID
	for _, u := range []string{"1", "2", "3"} {
		a.mustOK("POST", base+"/join", u, ``, nil)
	}
	a.mustOK("POST", base+"/mic/up", "2", `{"seat_index":0}`, nil)
	version := func() int64 {
		var s rooms.View
		a.mustOK("GET", base, "2", "", &s)
		return s.RoomVersion
	}
	v := version()

	// Refused bans change nothing.
	refused := []struct {
		name, method, path, as, body string
		status                       int
		code, field                  string
	}{
		{"ban by a user", "POST", admin + "/ban", "1", `{"reason":"x"}`, 403, "PERMISSION_DENIED", ""},
		{"ban by another app's admin", "POST", admin + "/ban", "app2:admin", `{"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"ban without reason", "POST", admin + "/ban", "admin", `{}`, 400, "INVALID_ARGUMENT", "reason"},
		{"ban with a blank reason", "POST", admin + "/ban", "admin", `{"reason":"  "}`, 400, "INVALID_ARGUMENT", "reason"},
		{"ban with a long reason", "POST", admin + "/ban", "admin", `{"reason":"` + strings.Repeat("r", 257) + `"}`, 400, "INVALID_ARGUMENT", "reason"},
		{"ban with a bad reason", "POST", admin + "/ban", "admin", `{"reason":5}`, 400, "INVALID_ARGUMENT", "reason"},
		{"ban an unknown room", "POST", "/admin/v1/rooms/app1_nope/ban", "admin", `{"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"restore by a user", "POST", admin + "/restore", "1", `{"reason":"x"}`, 403, "PERMISSION_DENIED", ""},
		{"restore by another app's admin", "POST", admin + "/restore", "app2:admin", `{"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"audit by a user", "GET", admin + "/audit", "1", ``, 403, "PERMISSION_DENIED", ""},
		{"audit by another app's admin", "GET", admin + "/audit", "app2:admin", ``, 404, "NOT_FOUND", ""},
		{"audit of an unknown room", "GET", "/admin/v1/rooms/app1_nope/audit", "admin", ``, 404, "NOT_FOUND", ""},
		{"audit bad limit", "GET", admin + "/audit?limit=0", "admin", ``, 400, "INVALID_ARGUMENT", "limit"},
		{"audit huge limit", "GET", admin + "/audit?limit=101", "admin", ``, 400, "INVALID_ARGUMENT", "limit"},
		{"audit bad cursor", "GET", admin + "/audit?cursor=abc", "admin", ``, 400, "INVALID_ARGUMENT", "cursor"},
		{"close with a long reason", "POST", admin + "/close", "admin", `{"reason":"` + strings.Repeat("r", 257) + `"}`, 400, "INVALID_ARGUMENT", "reason"},
	}
	for _, tt := range refused {
		status, env := a.call(tt.method, tt.path, tt.as, tt.body, nil)
		if status != tt.status || env.Code != tt.code {
			t.Fatalf("%s: %d %s %q, want %d %s", tt.name, status, env.Code, env.Message, tt.status, tt.code)
		}
		if tt.field != "" && !strings.HasPrefix(env.Message, tt.field) {
			t.Fatalf("%s: message %q does not name %s", tt.name, env.Message, tt.field)
		}
	}
	if got := version(); got != v {
		t.Fatalf("refused requests moved the room from version %d to %d", v, got)
	}

	// Ban, twice with one key.
	var banned, replayed rooms.View
	a.mustOK("POST", admin+"/ban", "admin", `{"reason":"spam"}`, &banned, "Idempotency-Key", "ban-1")
	if banned.Status != "banned" || banned.OnlineCount != 0 || banned.Seats[0].UserID != 0 || banned.RoomVersion != v+1 {
		t.Fatalf("banned %+v", banned)
	}
	a.mustOK("POST", admin+"/ban", "admin", `{"reason":"spam"}`, &replayed, "Idempotency-Key", "ban-1")
	if replayed.RoomVersion != banned.RoomVersion {
		t.Fatalf("repeated ban: version %d", replayed.RoomVersion)
	}
	for _, tt := range []struct{ name, path, as, body string }{
		{"join", base + "/join", "2", ``},
		{"owner joins", base + "/join", "1", ``},
		{"heartbeat", base + "/heartbeat", "3", ``},
		{"mic up", base + "/mic/up", "2", `{"seat_index":1}`},
		{"password", base + "/password", "1", `{"password":"abcd"}`},
		{"owner closes", base + "/close", "1", ``},
	} {
		status, env := a.call("POST", tt.path, tt.as, tt.body, nil)
		if status != 409 || env.Code != "FAILED_PRECONDITION" || !strings.Contains(env.Message, "banned") {
			t.Fatalf("%s on a banned room: %d %s %q", tt.name, status, env.Code, env.Message)
		}
	}
	if status, env := a.call("POST", "/api/v1/rooms/create", "1", `{"room_name":"dodge"}`, nil); status != 409 || env.Code != "ALREADY_EXISTS" {
		t.Fatalf("owner of a banned room creates another: %d %s", status, env.Code)
	}

	// Restore, twice with one key; the room is joinable again.
	var restored rooms.View
	a.mustOK("POST", admin+"/restore", "admin", `{"reason":"appeal accepted"}`, &restored, "Idempotency-Key", "restore-1")
	a.mustOK("POST", admin+"/restore", "admin", `{"reason":"appeal accepted"}`, &replayed, "Idempotency-Key", "restore-1")
	if restored.Status != "active" || replayed.RoomVersion != restored.RoomVersion {
		t.Fatalf("restored %+v, repeated at version %d", restored, replayed.RoomVersion)
	}
	a.mustOK("POST", base+"/join", "2", ``, nil)
	a.mustOK("POST", admin+"/region", "admin", `{"visible_region_id":4,"reason":"BD move"}`, nil)
	a.mustOK("POST", admin+"/close", "admin", `{"reason":"owner request"}`, nil)

	// The trail, newest first, two per page.
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		var page auditPage
		path := admin + "/audit?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		a.mustOK("GET", path, "admin", "", &page)
		if pages > 3 || len(page.Items) > 2 {
			t.Fatalf("paging does not end: %+v", page)
		}
		for _, it := range page.Items {
			if it.Operator != "admin" || it.RoomVersion == 0 || it.Before == nil || it.After == nil {
				t.Fatalf("entry %+v", it)
			}
			got = append(got, it.Action+":"+it.Reason)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	want := "close:owner request,region_change:BD move,restore:appeal accepted,ban:spam"
	if strings.Join(got, ",") != want {
		t.Fatalf("audit %v, want %s", got, want)
	}
}
