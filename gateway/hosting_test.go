package gateway

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/rooms"
)

// hostStep is one request of a hosts' tools scenario and its expected
// answer.
type hostStep struct {
	name, method, path, as, body string
	status                       int
	code                         string
}

// view reads the room at base as its owner (who may read it from
// anywhere).
func (a *roomAPI) view(base string) rooms.View {
	a.t.Helper()
	var v rooms.View
	a.mustOK("GET", base, "1", "", &v)
	return v
}

// run sends each step in turn: the answer must be the step's, and a
// refused step must leave the room's version as it was.
func (a *roomAPI) run(base string, steps []hostStep) {
	a.t.Helper()
	for _, s := range steps {
		before := int64(-1)
		if s.status != 200 {
			before = a.view(base).RoomVersion
		}
		status, env := a.call(s.method, s.path, s.as, s.body, nil)
		if status != s.status || env.Code != s.code {
			a.t.Fatalf("%s: %s %s as %s: %d %s %q, want %d %s", s.name, s.method, s.path, s.as, status, env.Code, env.Message, s.status, s.code)
		}
		if before >= 0 {
			if after := a.view(base).RoomVersion; after != before {
				a.t.Fatalf("%s: refused (%s), yet room_version went from %d to %d", s.name, env.Code, before, after)
			}
		}
	}
}

// newHostedRoom creates user 1's room of seatCount seats and joins users
// 1..n in turn.
func (a *roomAPI) newHostedRoom(seatCount, n int, clock *testenv.Clock) string {
	a.t.Helper()
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", fmt.Sprintf(`{"room_name":"Hosts","seat_count":%d}`, seatCount), &room)
	base := "/api/v1/rooms/" + room.RoomID
	for u := 1; u <= n; u++ {
		if clock != nil {
			clock.Advance(time.Second) // distinct join times
		}
		a.mustOK("POST", base+"/join", strconv.Itoa(u), "", nil)
	}
	return base
}

const (
	ok, bad, denied, notFound, conflict = 200, 400, 403, 404, 409
	cOK, cInv, cDenied, cFP             = "OK", "INVALID_ARGUMENT", "PERMISSION_DENIED", "FAILED_PRECONDITION"
)

// TestHostsToolsPermissions drives every hosts' tool through HTTP as the
// owner (1), the host (2), a room admin (3), plain members and another
// app's user: who may, the 403 of who may not, the 404 of another app and
// the 400 of bad input, none of which changes the room.
func TestHostsToolsPermissions(t *testing.T) {
	a := newRoomAPI(t)
	b := a.newHostedRoom(6, 8, nil)
	a.mustOK("POST", b+"/host/transfer", "1", `{"user_id":2}`, nil)

	a.run(b, []hostStep{
		// Room admins: named and removed by the owner (or an operator).
		{"host names an admin", "POST", b + "/admins", "2", `{"user_id":3}`, denied, cDenied},
		{"no user", "POST", b + "/admins", "1", `{}`, bad, cInv},
		{"user 0", "POST", b + "/admins", "1", `{"user_id":0}`, bad, cInv},
		{"user of the wrong type", "POST", b + "/admins", "1", `{"user_id":"3"}`, bad, cInv},
		{"malformed body", "POST", b + "/admins", "1", `{"user_id":`, bad, cInv},
		{"the owner as admin", "POST", b + "/admins", "1", `{"user_id":1}`, bad, cInv},
		{"an absent user as admin", "POST", b + "/admins", "1", `{"user_id":9}`, conflict, cFP},
		{"owner names 3", "POST", b + "/admins", "1", `{"user_id":3}`, ok, cOK},
		{"owner names 4", "POST", b + "/admins", "1", `{"user_id":4}`, ok, cOK},
		{"an admin names an admin", "POST", b + "/admins", "3", `{"user_id":5}`, denied, cDenied},
		{"a member names an admin", "POST", b + "/admins", "5", `{"user_id":5}`, denied, cDenied},
		{"the owner names 5", "POST", b + "/admins", "1", `{"user_id":5}`, ok, cOK},
		{"the host removes an admin", "DELETE", b + "/admins/5", "2", ``, denied, cDenied},
		{"an admin removes an admin", "DELETE", b + "/admins/5", "3", ``, denied, cDenied},
		{"remove user x", "DELETE", b + "/admins/x", "1", ``, bad, cInv},
		{"remove user 0", "DELETE", b + "/admins/0", "1", ``, bad, cInv},
		{"owner removes 5", "DELETE", b + "/admins/5", "1", ``, ok, cOK},

		// Seat mute: the host's powers; a speaker cannot lift it.
		{"5 takes seat 1", "POST", b + "/mic/up", "5", `{"seat_index":1}`, ok, cOK},
		{"a member mutes a seat", "POST", b + "/mic/mute", "6", `{"seat_index":1,"muted":true}`, denied, cDenied},
		{"mute without muted", "POST", b + "/mic/mute", "2", `{"seat_index":1}`, bad, cInv},
		{"mute without a seat", "POST", b + "/mic/mute", "2", `{"muted":true}`, bad, cInv},
		{"mute seat -1", "POST", b + "/mic/mute", "2", `{"seat_index":-1,"muted":true}`, bad, cInv},
		{"mute a seat past the room's", "POST", b + "/mic/mute", "2", `{"seat_index":6,"muted":true}`, bad, cInv},
		{"muted of the wrong type", "POST", b + "/mic/mute", "2", `{"seat_index":1,"muted":"yes"}`, bad, cInv},
		{"an admin mutes seat 1", "POST", b + "/mic/mute", "3", `{"seat_index":1,"muted":true}`, ok, cOK},
		{"the speaker lifts the host's mute", "POST", b + "/mic/mute", "5", `{"seat_index":1,"muted":false}`, denied, cDenied},
		{"the speaker mutes themself", "POST", b + "/mic/self-mute", "5", `{"muted":true}`, ok, cOK},
		{"the speaker unmutes themself", "POST", b + "/mic/self-mute", "5", `{"muted":false}`, ok, cOK},
		{"self-mute off a seat", "POST", b + "/mic/self-mute", "6", `{"muted":true}`, conflict, cFP},
		{"self-mute without muted", "POST", b + "/mic/self-mute", "5", `{}`, bad, cInv},
	})
	if v := a.view(b); !v.Seats[1].Muted || v.Seats[1].SelfMuted || v.Seats[1].UserID != 5 {
		t.Fatalf("seat 1 after the speaker unmuted themself: %+v, want still muted by the host", v.Seats[1])
	}
	a.run(b, []hostStep{
		{"the host lifts the mute", "POST", b + "/mic/mute", "2", `{"seat_index":1,"muted":false}`, ok, cOK},
		{"the owner mutes free seat 2", "POST", b + "/mic/mute", "1", `{"seat_index":2,"muted":true}`, ok, cOK},

		// Seat mode: owner or host.
		{"an admin sets the mode", "POST", b + "/mic/mode", "3", `{"seat_mode":"apply"}`, denied, cDenied},
		{"a member sets the mode", "POST", b + "/mic/mode", "6", `{"seat_mode":"apply"}`, denied, cDenied},
		{"an unknown mode", "POST", b + "/mic/mode", "2", `{"seat_mode":"open"}`, bad, cInv},
		{"no mode", "POST", b + "/mic/mode", "2", `{}`, bad, cInv},
		{"the host sets apply", "POST", b + "/mic/mode", "2", `{"seat_mode":"apply"}`, ok, cOK},
		{"a member's mic/up in apply mode", "POST", b + "/mic/up", "6", `{"seat_index":3}`, conflict, cFP},
		{"an admin's mic/up in apply mode", "POST", b + "/mic/up", "3", `{"seat_index":4}`, ok, cOK},
		{"an admin mutes another admin's seat", "POST", b + "/mic/mute", "4", `{"seat_index":4,"muted":true}`, denied, cDenied},
		{"an admin mutes their own seat", "POST", b + "/mic/mute", "3", `{"seat_index":4,"muted":true}`, ok, cOK},
		{"the host lifts the admin's seat mute", "POST", b + "/mic/mute", "2", `{"seat_index":4,"muted":false}`, ok, cOK},
		{"the host takes seat 0", "POST", b + "/mic/up", "2", `{"seat_index":0}`, ok, cOK},
		{"an admin mutes the host's seat", "POST", b + "/mic/mute", "3", `{"seat_index":0,"muted":true}`, denied, cDenied},
		{"the owner mutes the host's seat", "POST", b + "/mic/mute", "1", `{"seat_index":0,"muted":true}`, ok, cOK},

		// Requests to speak: anyone present asks; the host's powers list,
		// approve and reject.
		{"request seat -1", "POST", b + "/mic/requests", "6", `{"seat_index":-1}`, bad, cInv},
		{"request seat 20", "POST", b + "/mic/requests", "6", `{"seat_index":20}`, bad, cInv},
		{"request a seat past the room's", "POST", b + "/mic/requests", "6", `{"seat_index":6}`, bad, cInv},
		{"request while seated", "POST", b + "/mic/requests", "5", ``, conflict, cFP},
		{"request while absent", "POST", b + "/mic/requests", "9", ``, conflict, cFP},
		{"6 asks for seat 3", "POST", b + "/mic/requests", "6", `{"seat_index":3}`, ok, cOK},
		{"7 asks for any seat", "POST", b + "/mic/requests", "7", ``, ok, cOK},
		{"8 asks, then cancels", "POST", b + "/mic/requests", "8", `{}`, ok, cOK},
		{"8 cancels", "DELETE", b + "/mic/requests", "8", ``, ok, cOK},
		{"a member reads the queue", "GET", b + "/mic/requests", "8", ``, denied, cDenied},
		{"a member approves", "POST", b + "/mic/requests/6/approve", "8", ``, denied, cDenied},
		{"a member rejects", "POST", b + "/mic/requests/6/reject", "8", ``, denied, cDenied},
		{"approve user x", "POST", b + "/mic/requests/x/approve", "3", ``, bad, cInv},
		{"approve onto seat 50", "POST", b + "/mic/requests/6/approve", "3", `{"seat_index":50}`, bad, cInv},
		{"approve without a request", "POST", b + "/mic/requests/8/approve", "3", ``, conflict, cFP},
	})
	for _, who := range []string{"1", "2", "3"} {
		var q struct {
			Requests []rooms.MicRequest `json:"requests"`
		}
		a.mustOK("GET", b+"/mic/requests", who, "", &q)
		if len(q.Requests) != 2 || q.Requests[0].UserID != 6 || q.Requests[0].SeatIndex != 3 || q.Requests[1].UserID != 7 ||
			q.Requests[1].SeatIndex != rooms.AnySeat {
			t.Fatalf("queue read by %s: %+v, want 6 (seat 3) then 7 (any)", who, q.Requests)
		}
	}
	a.run(b, []hostStep{
		{"an admin approves 6", "POST", b + "/mic/requests/6/approve", "3", ``, ok, cOK},
		{"the host rejects 7", "POST", b + "/mic/requests/7/reject", "2", ``, ok, cOK},
		{"reject again", "POST", b + "/mic/requests/7/reject", "2", ``, conflict, cFP},

		// Invitations: the host's powers invite a present user off the
		// seats; the user accepts (whatever the mode) or declines.
		{"a member invites", "POST", b + "/mic/invitations", "8", `{"user_id":7}`, denied, cDenied},
		{"invite nobody", "POST", b + "/mic/invitations", "3", `{}`, bad, cInv},
		{"invite to seat 20", "POST", b + "/mic/invitations", "3", `{"user_id":7,"seat_index":20}`, bad, cInv},
		{"invite a seated user", "POST", b + "/mic/invitations", "3", `{"user_id":6}`, conflict, cFP},
		{"invite an absent user", "POST", b + "/mic/invitations", "3", `{"user_id":9}`, conflict, cFP},
		{"an admin invites 7 to seat 5", "POST", b + "/mic/invitations", "3", `{"user_id":7,"seat_index":5}`, ok, cOK},
		{"accept without an invitation", "POST", b + "/mic/invitations/accept", "8", ``, conflict, cFP},
		{"7 accepts", "POST", b + "/mic/invitations/accept", "7", ``, ok, cOK},
		{"the owner invites 8", "POST", b + "/mic/invitations", "1", `{"user_id":8}`, ok, cOK},
		{"8 declines", "POST", b + "/mic/invitations/decline", "8", ``, ok, cOK},
		{"8 accepts after declining", "POST", b + "/mic/invitations/accept", "8", ``, conflict, cFP},

		// The room's information: the host's powers.
		{"a member sets the notice", "PATCH", b, "8", `{"notice":"mine"}`, denied, cDenied},
		{"nothing to change", "PATCH", b, "3", `{}`, bad, cInv},
		{"no body", "PATCH", b, "3", ``, bad, cInv},
		{"an empty name", "PATCH", b, "3", `{"room_name":"  "}`, bad, cInv},
		{"a long name", "PATCH", b, "3", `{"room_name":"` + strings.Repeat("n", 65) + `"}`, bad, cInv},
		{"a long notice", "PATCH", b, "3", `{"notice":"` + strings.Repeat("n", rooms.MaxNotice+1) + `"}`, bad, cInv},
		{"a cover that is no URL", "PATCH", b, "3", `{"room_avatar":"ftp://x/c.png"}`, bad, cInv},
		{"a notice of the wrong type", "PATCH", b, "3", `{"notice":5}`, bad, cInv},
		{"an admin sets name and notice", "PATCH", b, "3", `{"room_name":"Hosts' night","notice":"Be kind"}`, ok, cOK},
		{"the host sets cover and description", "PATCH", b, "2", `{"room_avatar":"https://cdn.example/c.png","room_description":"late talk"}`, ok, cOK},

		// Chat mute: the host's powers; an admin may not mute the owner,
		// the host or another admin.
		{"a member mutes chat", "POST", b + "/chat/mute", "8", `{"user_id":7,"seconds":60}`, denied, cDenied},
		{"no seconds", "POST", b + "/chat/mute", "3", `{"user_id":7}`, bad, cInv},
		{"negative seconds", "POST", b + "/chat/mute", "3", `{"user_id":7,"seconds":-1}`, bad, cInv},
		{"seconds past 30 days", "POST", b + "/chat/mute", "3", fmt.Sprintf(`{"user_id":7,"seconds":%d}`, rooms.MaxMuteSeconds+1), bad, cInv},
		{"no user", "POST", b + "/chat/mute", "3", `{"seconds":60}`, bad, cInv},
		{"an admin mutes themself", "POST", b + "/chat/mute", "3", `{"user_id":3,"seconds":60}`, bad, cInv},
		{"an admin mutes the owner", "POST", b + "/chat/mute", "3", `{"user_id":1,"seconds":60}`, denied, cDenied},
		{"the host mutes the owner", "POST", b + "/chat/mute", "2", `{"user_id":1,"seconds":60}`, denied, cDenied},
		{"an admin mutes the host", "POST", b + "/chat/mute", "3", `{"user_id":2,"seconds":60}`, denied, cDenied},
		{"an admin mutes an admin", "POST", b + "/chat/mute", "3", `{"user_id":4,"seconds":60}`, denied, cDenied},
		{"an admin mutes 7", "POST", b + "/chat/mute", "3", `{"user_id":7,"seconds":600}`, ok, cOK},
		{"the host mutes admin 4", "POST", b + "/chat/mute", "2", `{"user_id":4,"seconds":60}`, ok, cOK},
		{"the host lifts it", "POST", b + "/chat/mute", "2", `{"user_id":4,"seconds":0}`, ok, cOK},

		// Kicks by a room admin.
		{"an admin kicks the host", "POST", b + "/kick", "3", `{"user_id":2}`, denied, cDenied},
		{"an admin kicks an admin", "POST", b + "/kick", "3", `{"user_id":4}`, denied, cDenied},
		{"an admin kicks 8", "POST", b + "/kick", "3", `{"user_id":8}`, ok, cOK},
	})

	// Another app's user finds no such room on any of the routes.
	for _, r := range [][2]string{
		{"POST", "/admins"}, {"DELETE", "/admins/3"}, {"POST", "/mic/mute"}, {"POST", "/mic/self-mute"}, {"POST", "/mic/mode"},
		{"GET", "/mic/requests"}, {"POST", "/mic/requests"}, {"DELETE", "/mic/requests"}, {"POST", "/mic/requests/6/approve"},
		{"POST", "/mic/requests/6/reject"}, {"POST", "/mic/invitations"}, {"POST", "/mic/invitations/accept"},
		{"POST", "/mic/invitations/decline"}, {"PATCH", ""}, {"POST", "/chat/mute"}, {"GET", "/members"},
	} {
		body := map[string]string{"/admins": `{"user_id":3}`, "/mic/mute": `{"seat_index":1,"muted":true}`, "/mic/self-mute": `{"muted":true}`,
			"/mic/mode": `{"seat_mode":"free"}`, "/mic/invitations": `{"user_id":3}`, "": `{"notice":"x"}`, "/chat/mute": `{"user_id":3,"seconds":1}`}[r[1]]
		a.run(b, []hostStep{{"another app: " + r[0] + " " + r[1], r[0], b + r[1], "app2:1", body, notFound, "NOT_FOUND"}})
	}

	v := a.view(b)
	switch {
	case v.Title != "Hosts' night" || v.Notice != "Be kind" || v.CoverURL != "https://cdn.example/c.png" || v.Description != "late talk":
		t.Fatalf("room info: %q %q %q %q", v.Title, v.Notice, v.CoverURL, v.Description)
	case v.SeatMode != "apply" || !slices.Equal(v.AdminUserIDs, []int64{3, 4}):
		t.Fatalf("seat mode %s, admins %v", v.SeatMode, v.AdminUserIDs)
	case v.Seats[1].Muted || !v.Seats[2].Muted || v.Seats[3].UserID != 6 || v.Seats[4].UserID != 3 || v.Seats[5].UserID != 7:
		t.Fatalf("seats %+v", v.Seats)
	case v.MicRequestCount != 0 || len(v.MicInvitations) != 0:
		t.Fatalf("requests %d, invitations %+v: want none", v.MicRequestCount, v.MicInvitations)
	case len(v.ChatMutes) != 1 || v.ChatMutes[0].UserID != 7:
		t.Fatalf("chat mutes %+v, want 7's", v.ChatMutes)
	}
}

// TestRoomAdminActsOnlyInTheRoom: a room admin who left, or was kicked by
// the owner, keeps the role but is refused until back in; the owner and
// the host act from anywhere.
func TestRoomAdminActsOnlyInTheRoom(t *testing.T) {
	a := newRoomAPI(t)
	b := a.newHostedRoom(4, 5, nil)
	a.mustOK("POST", b+"/host/transfer", "1", `{"user_id":2}`, nil)
	a.mustOK("POST", b+"/admins", "1", `{"user_id":3}`, nil)
	a.mustOK("POST", b+"/mic/requests", "5", "", nil)
	mute := `{"seat_index":0,"muted":true}`
	a.run(b, []hostStep{
		{"3 leaves", "POST", b + "/leave", "3", ``, ok, cOK},
		{"an absent admin mutes a seat", "POST", b + "/mic/mute", "3", mute, denied, cDenied},
		{"an absent admin reads the queue", "GET", b + "/mic/requests", "3", ``, denied, cDenied},
		{"an absent admin sets the notice", "PATCH", b, "3", `{"notice":"x"}`, denied, cDenied},
		{"the owner locks the room", "POST", b + "/password", "1", `{"password":"sesame"}`, ok, cOK},
		{"3 comes back (an admin needs no password)", "POST", b + "/join", "3", ``, ok, cOK},
		{"the admin mutes seat 0", "POST", b + "/mic/mute", "3", mute, ok, cOK},
		{"the owner kicks the admin", "POST", b + "/kick", "1", `{"user_id":3}`, ok, cOK},
		{"a kicked admin unmutes", "POST", b + "/mic/mute", "3", `{"seat_index":0,"muted":false}`, denied, cDenied},
		{"a kicked admin approves", "POST", b + "/mic/requests/5/approve", "3", ``, denied, cDenied},
		{"the host leaves", "POST", b + "/leave", "2", ``, ok, cOK},
		{"an absent host unmutes", "POST", b + "/mic/mute", "2", `{"seat_index":0,"muted":false}`, ok, cOK},
		{"the owner leaves", "POST", b + "/leave", "1", ``, ok, cOK},
		{"an absent owner reads the queue", "GET", b + "/mic/requests", "1", ``, ok, cOK},
		{"3 comes back once more", "POST", b + "/join", "3", ``, ok, cOK},
		{"the admin approves 5", "POST", b + "/mic/requests/5/approve", "3", ``, ok, cOK},
	})
	if v := a.view(b); !slices.Equal(v.AdminUserIDs, []int64{3}) || v.Seats[0].UserID != 5 {
		t.Fatalf("admins %v, seat 0 %+v: want 3 still an admin and 5 seated", v.AdminUserIDs, v.Seats[0])
	}
}

// TestHostsToolsInterplay: a host mute stays on its seat through a change
// of speaker; an approval onto a seat just taken fails and the request
// stays; an invitation ends when its user leaves; requests lapse after
// the configured time and invitations after 60 s (the rooms service's
// clock moved by hand).
func TestHostsToolsInterplay(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	a := newRoomAPIClock(t, rooms.Config{MicRequestTTL: 10 * time.Second}, clock.Now)
	b := a.newHostedRoom(4, 9, clock)

	// A muted seat whose user leaves stays muted for the next.
	a.run(b, []hostStep{
		{"4 takes seat 0", "POST", b + "/mic/up", "4", `{"seat_index":0}`, ok, cOK},
		{"the owner mutes seat 0", "POST", b + "/mic/mute", "1", `{"seat_index":0,"muted":true}`, ok, cOK},
		{"4 mutes themself", "POST", b + "/mic/self-mute", "4", `{"muted":true}`, ok, cOK},
		{"4 leaves", "POST", b + "/leave", "4", ``, ok, cOK},
	})
	if s := a.view(b).Seats[0]; s.UserID != 0 || !s.Muted || s.SelfMuted {
		t.Fatalf("seat 0 after its speaker left: %+v, want free and still muted by the host (the self-mute gone)", s)
	}
	a.mustOK("POST", b+"/mic/up", "5", `{"seat_index":0}`, nil)
	var page rooms.MemberPage
	a.mustOK("GET", b+"/members", "5", "", &page)
	if m := page.Members[0]; m.UserID != 5 || m.SeatIndex != 0 || !m.SeatMuted || m.SelfMuted {
		t.Fatalf("the next speaker on seat 0: %+v, want seat_muted", m)
	}

	// An approval onto a seat just taken fails; the request stays.
	a.run(b, []hostStep{
		{"6 asks for seat 1", "POST", b + "/mic/requests", "6", `{"seat_index":1}`, ok, cOK},
		{"7 takes seat 1 first", "POST", b + "/mic/up", "7", `{"seat_index":1}`, ok, cOK},
		{"the owner approves 6 onto the taken seat", "POST", b + "/mic/requests/6/approve", "1", ``, conflict, cFP},
	})
	var q struct {
		Requests []rooms.MicRequest `json:"requests"`
	}
	a.mustOK("GET", b+"/mic/requests", "1", "", &q)
	if len(q.Requests) != 1 || q.Requests[0].UserID != 6 {
		t.Fatalf("queue after the failed approval: %+v, want 6's request", q.Requests)
	}
	a.run(b, []hostStep{{"the owner approves 6 onto seat 2", "POST", b + "/mic/requests/6/approve", "1", `{"seat_index":2}`, ok, cOK}})
	if v := a.view(b); v.Seats[2].UserID != 6 || v.MicRequestCount != 0 {
		t.Fatalf("seat 2 %+v, %d requests: want 6 seated and the queue empty", v.Seats[2], v.MicRequestCount)
	}

	// An invitation to a user who left is gone, also once they are back.
	a.run(b, []hostStep{
		{"the owner invites 8", "POST", b + "/mic/invitations", "1", `{"user_id":8}`, ok, cOK},
		{"8 leaves", "POST", b + "/leave", "8", ``, ok, cOK},
		{"8 accepts while away", "POST", b + "/mic/invitations/accept", "8", ``, conflict, cFP},
		{"8 comes back", "POST", b + "/join", "8", ``, ok, cOK},
		{"8 accepts the old invitation", "POST", b + "/mic/invitations/accept", "8", ``, conflict, cFP},
	})

	// Requests lapse after MicRequestTTL (10 s here).
	a.mustOK("POST", b+"/mic/requests", "9", "", nil)
	clock.Advance(9 * time.Second)
	a.mustOK("GET", b+"/mic/requests", "1", "", &q)
	if len(q.Requests) != 1 {
		t.Fatalf("a request 9 s old: %+v, want it standing", q.Requests)
	}
	clock.Advance(2 * time.Second)
	a.mustOK("GET", b+"/mic/requests", "1", "", &q)
	if len(q.Requests) != 0 {
		t.Fatalf("a request 11 s old (TTL 10 s): %+v, want it lapsed", q.Requests)
	}
	a.run(b, []hostStep{
		{"approve a lapsed request", "POST", b + "/mic/requests/9/approve", "1", ``, conflict, cFP},
		{"9 asks again", "POST", b + "/mic/requests", "9", ``, ok, cOK},
	})

	// Invitations lapse after 60 s.
	a.mustOK("POST", b+"/mic/invitations", "1", `{"user_id":8}`, nil)
	clock.Advance(59 * time.Second)
	a.run(b, []hostStep{{"8 accepts at 59 s", "POST", b + "/mic/invitations/accept", "8", ``, ok, cOK}})
	a.mustOK("POST", b+"/mic/down", "8", "", nil)
	a.mustOK("POST", b+"/mic/invitations", "1", `{"user_id":8}`, nil)
	clock.Advance(61 * time.Second)
	a.run(b, []hostStep{
		{"8 accepts at 61 s", "POST", b + "/mic/invitations/accept", "8", ``, conflict, cFP},
		{"the owner approves 9 after the TTL", "POST", b + "/mic/requests/9/approve", "1", ``, conflict, cFP},
	})
}

// TestMemberListOverHTTP: the member list's order, roles and pages
// through the cursor while users come and go, its bounds and its 400s.
func TestMemberListOverHTTP(t *testing.T) {
	clock := testenv.NewClock(time.Now())
	a := newRoomAPIClock(t, rooms.Config{}, clock.Now)
	b := a.newHostedRoom(4, 8, clock) // joined in the order 1..8
	a.mustOK("POST", b+"/host/transfer", "1", `{"user_id":7}`, nil)
	a.mustOK("POST", b+"/admins", "1", `{"user_id":5}`, nil)
	a.mustOK("POST", b+"/mic/up", "6", `{"seat_index":0}`, nil)
	a.mustOK("POST", b+"/mic/up", "3", `{"seat_index":2}`, nil)
	a.mustOK("POST", b+"/chat/mute", "1", `{"user_id":8,"seconds":3600}`, nil)

	ids := func(p rooms.MemberPage) []int64 {
		var out []int64
		for _, m := range p.Members {
			out = append(out, m.UserID)
		}
		return out
	}
	var all rooms.MemberPage
	a.mustOK("GET", b+"/members", "2", "", &all)
	if want := []int64{6, 3, 1, 5, 7, 2, 4, 8}; !slices.Equal(ids(all), want) || all.OnlineCount != 8 || all.NextCursor != "" {
		t.Fatalf("members %v (online %d, next %q), want %v: seated, then owner, admin and host by join time, then the rest", ids(all),
			all.OnlineCount, all.NextCursor, want)
	}
	roles := map[int64]string{}
	for _, m := range all.Members {
		roles[m.UserID] = m.Role
		if (m.UserID == 8) != (m.ChatMutedUntilMs > 0) || (m.SeatIndex >= 0) != (m.UserID == 6 || m.UserID == 3) || m.JoinedAtMs == 0 {
			t.Fatalf("member %+v", m)
		}
	}
	if roles[1] != rooms.RoleOwner || roles[7] != rooms.RoleHost || roles[5] != rooms.RoleAdmin || roles[2] != rooms.RoleMember {
		t.Fatalf("roles %v", roles)
	}

	// Pages of 3 while 2 (already listed) and 4 (not yet) leave and 9 joins.
	var p rooms.MemberPage
	a.mustOK("GET", b+"/members?limit=3", "2", "", &p)
	got := ids(p)
	a.mustOK("POST", b+"/leave", "2", "", nil)
	a.mustOK("POST", b+"/leave", "4", "", nil)
	clock.Advance(time.Second)
	a.mustOK("POST", b+"/join", "9", "", nil)
	for pages := 0; p.NextCursor != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		cursor := p.NextCursor
		p = rooms.MemberPage{}
		a.mustOK("GET", b+"/members?limit=3&cursor="+cursor, "5", "", &p)
		got = append(got, ids(p)...)
	}
	if want := []int64{6, 3, 1, 5, 7, 8, 9}; !slices.Equal(got, want) {
		t.Fatalf("paged %v, want %v: none twice, none skipped", got, want)
	}

	forged := base64.RawURLEncoding.EncodeToString([]byte("7.1.1"))
	a.run(b, []hostStep{
		{"limit 0", "GET", b + "/members?limit=0", "5", ``, bad, cInv},
		{"limit 201", "GET", b + "/members?limit=201", "5", ``, bad, cInv},
		{"limit x", "GET", b + "/members?limit=x", "5", ``, bad, cInv},
		{"a cursor that is none", "GET", b + "/members?cursor=%21%21", "5", ``, bad, cInv},
		{"a forged cursor", "GET", b + "/members?cursor=" + forged, "5", ``, bad, cInv},
		{"a huge cursor", "GET", b + "/members?cursor=" + strings.Repeat("A", 200), "5", ``, bad, cInv},
		{"an unknown room", "GET", "/api/v1/rooms/app1_nope/members", "5", ``, notFound, "NOT_FOUND"},
		{"limit 200", "GET", b + "/members?limit=200", "5", ``, ok, cOK},
	})
}

// TestHostsToolsIdempotencyAndCreateSeatMode: a repeated Idempotency-Key
// answers the first result and changes nothing; a room may be created in
// apply mode.
func TestHostsToolsIdempotencyAndCreateSeatMode(t *testing.T) {
	a := newRoomAPI(t)
	var room rooms.View
	a.mustOK("POST", "/api/v1/rooms/create", "1", `{"room_name":"Apply","seat_mode":"apply"}`, &room)
	if room.SeatMode != "apply" {
		t.Fatalf("created with seat mode %q, want apply", room.SeatMode)
	}
	if status, env := a.call("POST", "/api/v1/rooms/create", "2", `{"room_name":"Bad","seat_mode":"open"}`, nil); status != bad || env.Code != cInv ||
		!strings.HasPrefix(env.Message, "seat_mode") {
		t.Fatalf("create in an unknown mode: %d %s %q", status, env.Code, env.Message)
	}
	b := "/api/v1/rooms/" + room.RoomID
	a.mustOK("POST", b+"/join", "1", "", nil)
	a.mustOK("POST", b+"/join", "2", "", nil)
	var first, other, again rooms.View
	key := []string{"Idempotency-Key", "notice-1"}
	a.mustOK("PATCH", b, "1", `{"notice":"first"}`, &first, key...)
	a.mustOK("PATCH", b, "1", `{"notice":"second"}`, &other)
	a.mustOK("PATCH", b, "1", `{"notice":"first"}`, &again, key...)
	if again.RoomVersion != first.RoomVersion || again.Notice != "first" || a.view(b).Notice != "second" || a.view(b).RoomVersion != other.RoomVersion {
		t.Fatalf("replayed key: version %d (first %d), notice %q; room now %q: want the first answer and no change", again.RoomVersion,
			first.RoomVersion, again.Notice, a.view(b).Notice)
	}
	var req1, req2 rooms.View
	a.mustOK("POST", b+"/mic/requests", "2", "", &req1, "Idempotency-Key", "ask-1")
	a.mustOK("DELETE", b+"/mic/requests", "2", "", nil)
	a.mustOK("POST", b+"/mic/requests", "2", "", &req2, "Idempotency-Key", "ask-1")
	if req2.RoomVersion != req1.RoomVersion || a.view(b).MicRequestCount != 0 {
		t.Fatalf("a repeated request to speak: version %d (first %d), %d requests now; want the first answer and no new request",
			req2.RoomVersion, req1.RoomVersion, a.view(b).MicRequestCount)
	}
}
