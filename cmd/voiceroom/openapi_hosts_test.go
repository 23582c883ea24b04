package main

// hostsTools drives the hosts' tools on the active room A: its owner is
// user 21, its host 22 (off the seats), 23 a plain member present; nope is
// a room that does not exist. Every documented answer of each route is
// provoked here, the 409 of a closed room in hostsToolsClosed.
func (a *apiDriver) hostsTools(A, nope string) {
	const (
		bad, denied, notFound, conflict = 400, 403, 404, 409
		fp, inv, dn, nf                 = "FAILED_PRECONDITION", "INVALID_ARGUMENT", "PERMISSION_DENIED", "NOT_FOUND"
	)
	// A plain member is refused the host's powers; bad bodies and unknown
	// rooms first.
	a.fail("POST", A+"/admins", "22", `{"user_id":23}`, denied, dn, false) // only the owner names admins
	a.fail("POST", A+"/admins", "21", `{}`, bad, inv, true)
	a.fail("POST", A+"/admins", "21", `{"user_id":29}`, conflict, fp, false) // not in the room
	a.fail("POST", nope+"/admins", "21", `{"user_id":23}`, notFound, nf, false)
	a.fail("PATCH", A, "23", `{"notice":"mine"}`, denied, dn, false)
	a.fail("PATCH", A, "22", `{}`, bad, inv, true)
	a.fail("PATCH", nope, "22", `{"notice":"x"}`, notFound, nf, false)
	a.fail("POST", A+"/mic/mute", "23", `{"seat_index":1,"muted":true}`, denied, dn, false)
	a.fail("POST", A+"/mic/mute", "22", `{"seat_index":1}`, bad, inv, true)
	a.fail("POST", nope+"/mic/mute", "22", `{"seat_index":1,"muted":true}`, notFound, nf, false)
	a.fail("POST", A+"/mic/mode", "23", `{"seat_mode":"apply"}`, denied, dn, false)
	a.fail("POST", A+"/mic/mode", "22", `{"seat_mode":"open"}`, bad, inv, true)
	a.fail("POST", nope+"/mic/mode", "22", `{"seat_mode":"apply"}`, notFound, nf, false)
	a.fail("POST", A+"/mic/invitations", "23", `{"user_id":21}`, denied, dn, false)
	a.fail("POST", A+"/mic/invitations", "22", `{}`, bad, inv, true)
	a.fail("POST", A+"/mic/invitations", "22", `{"user_id":29}`, conflict, fp, false)
	a.fail("POST", nope+"/mic/invitations", "22", `{"user_id":21}`, notFound, nf, false)
	a.fail("POST", A+"/chat/mute", "23", `{"user_id":22,"seconds":60}`, denied, dn, false)
	a.fail("POST", A+"/chat/mute", "22", `{"user_id":23,"seconds":-1}`, bad, inv, true)
	a.fail("POST", nope+"/chat/mute", "22", `{"user_id":23,"seconds":60}`, notFound, nf, false)
	a.fail("GET", A+"/mic/requests", "23", "", denied, dn, false)
	a.fail("GET", nope+"/mic/requests", "22", "", notFound, nf, false)

	// Seats: the host mutes a seat, its speaker mutes themself, the owner
	// sets apply mode and a member's mic/up is refused.
	a.ok("POST", A+"/mic/up", "22", `{"seat_index":1}`, nil)
	a.ok("POST", A+"/mic/mute", "22", `{"seat_index":1,"muted":true}`, nil)
	a.ok("POST", A+"/mic/self-mute", "22", `{"muted":true}`, nil)
	a.fail("POST", A+"/mic/self-mute", "23", `{"muted":true}`, conflict, fp, false) // not on a seat
	a.fail("POST", A+"/mic/self-mute", "22", `{}`, bad, inv, true)
	a.fail("POST", nope+"/mic/self-mute", "22", `{"muted":true}`, notFound, nf, false)
	a.ok("POST", A+"/mic/mode", "21", `{"seat_mode":"apply"}`, nil)
	a.fail("POST", A+"/mic/up", "23", `{"seat_index":2}`, conflict, fp, false)

	// Requests to speak: asked, rejected, asked and withdrawn, asked and
	// approved.
	a.fail("POST", A+"/mic/requests", "23", `{"seat_index":20}`, bad, inv, true)
	a.fail("POST", A+"/mic/requests", "22", "", conflict, fp, false) // on a seat
	a.fail("POST", nope+"/mic/requests", "23", "", notFound, nf, false)
	a.ok("POST", A+"/mic/requests", "23", `{"seat_index":2}`, nil)
	var queue struct {
		Requests []struct {
			UserID    int64 `json:"user_id"`
			SeatIndex int   `json:"seat_index"`
		} `json:"requests"`
	}
	a.ok("GET", A+"/mic/requests", "22", "", &queue)
	if len(queue.Requests) != 1 || queue.Requests[0].UserID != 23 || queue.Requests[0].SeatIndex != 2 {
		a.t.Errorf("queue %+v, want 23's request for seat 2", queue.Requests)
	}
	a.fail("POST", A+"/mic/requests/23/reject", "23", "", denied, dn, false)
	a.fail("POST", A+"/mic/requests/x/reject", "22", "", bad, inv, true)
	a.fail("POST", A+"/mic/requests/21/reject", "22", "", conflict, fp, false) // no request
	a.fail("POST", nope+"/mic/requests/23/reject", "22", "", notFound, nf, false)
	a.ok("POST", A+"/mic/requests/23/reject", "22", "", nil)
	a.ok("POST", A+"/mic/requests", "23", "", nil)
	a.ok("DELETE", A+"/mic/requests", "23", "", nil)
	a.fail("DELETE", nope+"/mic/requests", "23", "", notFound, nf, false)
	a.ok("POST", A+"/mic/requests", "23", "", nil)
	a.fail("POST", A+"/mic/requests/23/approve", "23", "", denied, dn, false)
	a.fail("POST", A+"/mic/requests/x/approve", "22", "", bad, inv, true)
	a.fail("POST", A+"/mic/requests/21/approve", "22", "", conflict, fp, false)
	a.fail("POST", nope+"/mic/requests/23/approve", "22", "", notFound, nf, false)
	a.ok("POST", A+"/mic/requests/23/approve", "22", `{"seat_index":2}`, nil)

	// Invitations: the host invites the owner, who declines, then accepts
	// the next (the lowest free seat, 0).
	a.ok("POST", A+"/mic/invitations", "22", `{"user_id":21,"seat_index":3}`, nil)
	a.ok("POST", A+"/mic/invitations/decline", "21", "", nil)
	a.fail("POST", A+"/mic/invitations/accept", "21", "", conflict, fp, false)
	a.fail("POST", nope+"/mic/invitations/accept", "21", "", notFound, nf, false)
	a.fail("POST", nope+"/mic/invitations/decline", "21", "", notFound, nf, false)
	a.ok("POST", A+"/mic/invitations", "22", `{"user_id":21}`, nil)
	a.ok("POST", A+"/mic/invitations/accept", "21", "", nil)

	// A room admin sets the notice; the host mutes and unmutes a chat.
	a.ok("POST", A+"/admins", "21", `{"user_id":23}`, nil)
	a.ok("PATCH", A, "23", `{"notice":"Welcome, night owls","room_description":"after midnight"}`, nil)
	a.fail("POST", A+"/chat/mute", "23", `{"user_id":22,"seconds":60}`, denied, dn, false) // an admin may not mute the host
	a.ok("POST", A+"/chat/mute", "22", `{"user_id":23,"seconds":60}`, nil)
	a.ok("POST", A+"/chat/mute", "22", `{"user_id":23,"seconds":0}`, nil)

	// The member list: seated 21 (seat 0), 22 (1), 23 (2), two a page.
	type memberPage struct {
		Members []struct {
			UserID int64  `json:"user_id"`
			Role   string `json:"role"`
		} `json:"members"`
		OnlineCount int    `json:"online_count"`
		NextCursor  string `json:"next_cursor"`
	}
	var first, second memberPage
	a.ok("GET", A+"/members?limit=2", "23", "", &first)
	a.ok("GET", A+"/members?limit=2&cursor="+first.NextCursor, "23", "", &second)
	if len(first.Members) != 2 || first.Members[0].UserID != 21 || first.Members[0].Role != "owner" || first.Members[1].UserID != 22 ||
		len(second.Members) != 1 || second.Members[0].UserID != 23 || second.Members[0].Role != "admin" || second.NextCursor != "" ||
		first.OnlineCount != 3 {
		a.t.Errorf("member pages %+v then %+v, want 21 (owner), 22, then 23 (admin), 3 online", first, second)
	}
	a.fail("GET", A+"/members?cursor=%21%21", "23", "", bad, inv, false)
	a.fail("GET", A+"/members?limit=0", "23", "", bad, inv, true)
	a.fail("GET", nope+"/members", "23", "", notFound, nf, false)

	a.fail("DELETE", A+"/admins/23", "22", "", denied, dn, false)
	a.fail("DELETE", A+"/admins/x", "21", "", bad, inv, true)
	a.fail("DELETE", nope+"/admins/23", "21", "", notFound, nf, false)
	a.ok("DELETE", A+"/admins/23", "21", "", nil)
}

// hostsToolsClosed: on the closed room B, of user 22, every hosts' tool
// answers 409.
func (a *apiDriver) hostsToolsClosed(B string) {
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/admins", `{"user_id":21}`}, {"DELETE", "/admins/21", ""}, {"PATCH", "", `{"notice":"closed"}`},
		{"POST", "/mic/mute", `{"seat_index":1,"muted":true}`}, {"POST", "/mic/self-mute", `{"muted":true}`},
		{"POST", "/mic/mode", `{"seat_mode":"apply"}`}, {"POST", "/mic/requests", ""}, {"DELETE", "/mic/requests", ""},
		{"POST", "/mic/requests/21/approve", ""}, {"POST", "/mic/requests/21/reject", ""},
		{"POST", "/mic/invitations", `{"user_id":21}`}, {"POST", "/mic/invitations/accept", ""},
		{"POST", "/mic/invitations/decline", ""}, {"POST", "/chat/mute", `{"user_id":21,"seconds":60}`},
	} {
		a.fail(c.method, B+c.path, "22", c.body, 409, "FAILED_PRECONDITION", false)
	}
}
