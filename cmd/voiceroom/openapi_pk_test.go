package main

// pk drives the PK battles' routes (docs/pk.md) with rooms of users 25,
// 26 and 27 (profiles of their own): an invitation declined, one accepted,
// its score set by an admin and forfeited, and each route's refusals.
func (a *apiDriver) pk() {
	a.t.Helper()
	const (
		bad, denied, notFound, conflict = 400, 403, 404, 409
		fp, inv                         = "FAILED_PRECONDITION", "INVALID_ARGUMENT"
		nope                            = "/api/v1/pk/00000000-0000-7000-8000-000000000000"
	)
	roomOf := map[string]string{}
	for _, u := range []string{"25", "26", "27"} {
		a.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"oas_pk`+u+`","country":"SG"}`, nil)
		var room struct {
			RoomID string `json:"room_id"`
		}
		a.ok("POST", "/api/v1/rooms/create", u, `{"room_name":"PK `+u+`"}`, &room)
		roomOf[u] = room.RoomID
	}
	invite := `{"opponent_room_id":"` + roomOf["26"] + `","duration_seconds":60}`
	from := "/api/v1/rooms/" + roomOf["25"] + "/pk"
	var battle struct {
		BattleID string `json:"battle_id"`
	}

	// Declined.
	a.fail("POST", from, "25", `{"opponent_room_id":"`+roomOf["26"]+`","duration_seconds":10}`, bad, inv, true)
	a.fail("POST", from, "27", invite, denied, "PERMISSION_DENIED", false)
	a.fail("POST", from, "25", `{"opponent_room_id":"e2e_00000000-0000-0000-0000-000000000000","duration_seconds":60}`, notFound, "NOT_FOUND", false)
	a.ok("POST", from, "25", invite, &battle)
	a.fail("POST", "/api/v1/rooms/"+roomOf["27"]+"/pk", "27", `{"opponent_room_id":"`+roomOf["26"]+`","duration_seconds":60}`, conflict, fp, false)
	B := "/api/v1/pk/" + battle.BattleID
	a.fail("POST", B+"/decline", "25", "", denied, "PERMISSION_DENIED", false)
	a.fail("POST", "/api/v1/pk/x/decline", "26", "", bad, inv, false)
	a.fail("POST", nope+"/decline", "26", "", notFound, "NOT_FOUND", false)
	a.ok("POST", B+"/decline", "26", "", nil)
	a.fail("POST", B+"/decline", "26", "", conflict, fp, false)

	// Accepted, then forfeited.
	a.ok("POST", from, "25", invite, &battle)
	B = "/api/v1/pk/" + battle.BattleID
	a.fail("POST", B+"/accept", "25", "", denied, "PERMISSION_DENIED", false)
	a.fail("POST", "/api/v1/pk/x/accept", "26", "", bad, inv, false)
	a.fail("POST", nope+"/accept", "26", "", notFound, "NOT_FOUND", false)
	a.fail("POST", B+"/end", "25", "", conflict, fp, false) // pending, not running
	S, set := "/admin"+B[len("/api"):]+"/score", `{"room_id":"`+roomOf["25"]+`","score":500,"reason":"oas"}`
	a.fail("POST", S, "admin", set, conflict, fp, false) // pending, not running
	a.ok("POST", B+"/accept", "26", "", nil)
	a.fail("POST", S, "admin", `{"room_id":"`+roomOf["25"]+`","score":-1}`, bad, inv, true)
	a.fail("POST", S, "admin", `{"room_id":"`+roomOf["27"]+`","score":5}`, bad, inv, false) // not of the battle
	a.fail("POST", "/admin"+nope[len("/api"):]+"/score", "admin", set, notFound, "NOT_FOUND", false)
	a.ok("POST", S, "admin", set, nil)
	a.fail("POST", B+"/accept", "26", "", conflict, fp, false)
	a.ok("GET", "/api/v1/rooms/"+roomOf["25"], "26", "", nil) // the view's pk
	a.ok("GET", B, "27", "", nil)
	a.fail("GET", "/api/v1/pk/x", "27", "", bad, inv, false)
	a.fail("GET", nope, "27", "", notFound, "NOT_FOUND", false)
	a.fail("POST", B+"/end", "27", "", denied, "PERMISSION_DENIED", false)
	a.fail("POST", B+"/end", "26", `{"room_id":"`+roomOf["27"]+`"}`, bad, inv, false)
	a.fail("POST", nope+"/end", "26", "", notFound, "NOT_FOUND", false)
	a.ok("POST", B+"/end", "26", "", nil)
	a.fail("POST", B+"/end", "25", "", conflict, fp, false)
	for _, u := range []string{"25", "26", "27"} {
		a.ok("POST", "/api/v1/rooms/"+roomOf[u]+"/close", u, "", nil)
	}
}
