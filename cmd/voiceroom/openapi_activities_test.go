package main

import (
	"fmt"
	"strconv"
	"time"
)

// activities drives the activities' definition routes: create (and its
// refusals), list, get, cancel, and a user's list. Gift 7 is in app e2e's
// catalog (scenario adds it).
func (a *apiDriver) activities() {
	now := time.Now().UnixMilli()
	lb := func(extra string) string {
		return fmt.Sprintf(`{"name":"OAS top senders","kind":"leaderboard","metric":"gift_value_sent","gift_ids":[7],
			"starts_at_ms":%d,"ends_at_ms":%d,"rewards":[{"from_rank":1,"to_rank":3,"coins":100}]%s}`, now+3_600_000, now+7_200_000, extra)
	}
	var created struct {
		ActivityID int64  `json:"activity_id"`
		Status     string `json:"status"`
	}
	a.ok("POST", "/admin/v1/activities", "admin", lb(""), &created)
	if created.ActivityID == 0 || created.Status != "scheduled" {
		a.t.Fatalf("create activity: answered %+v", created)
	}
	id := strconv.FormatInt(created.ActivityID, 10)
	a.ok("POST", "/admin/v1/activities", "admin", fmt.Sprintf(`{"name":"OAS daily gifts","kind":"task","metric":"gift_count",
		"starts_at_ms":%d,"ends_at_ms":%d,"target":5,"period":"day","reward_coins":10}`, now, now+86_400_000), nil)
	a.fail("POST", "/admin/v1/activities", "admin", lb(`,"target":5`), 400, "INVALID_ARGUMENT", false)
	a.fail("POST", "/admin/v1/activities", "admin", lb(`,"region_ids":[999999]`), 400, "INVALID_ARGUMENT", false)
	a.fail("POST", "/admin/v1/activities", "admin", `{"name":"x","kind":"lottery","metric":"gift_count","starts_at_ms":1,"ends_at_ms":2}`, 400, "INVALID_ARGUMENT", true)

	a.ok("GET", "/admin/v1/activities", "admin", "", nil)
	a.ok("GET", "/admin/v1/activities?limit=1&cursor="+id, "admin", "", nil)
	a.fail("GET", "/admin/v1/activities?cursor=x", "admin", "", 400, "INVALID_ARGUMENT", false)
	a.fail("GET", "/admin/v1/activities?limit=101", "admin", "", 400, "INVALID_ARGUMENT", true)

	p := "/admin/v1/activities/" + id
	a.ok("GET", p, "admin", "", nil)
	a.fail("GET", "/admin/v1/activities/0", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/activities/999999", "admin", "", 404, "NOT_FOUND", false)
	a.fail("GET", p, "admin:other", "", 404, "NOT_FOUND", false)

	a.ok("GET", "/api/v1/activities", "21", "", nil)
	a.fail("GET", "/api/v1/activities", "999", "", 404, "NOT_FOUND", false)

	a.ok("POST", p+"/cancel", "admin", "", nil)
	a.ok("POST", p+"/cancel", "admin", "", nil)
	a.fail("POST", "/admin/v1/activities/0/cancel", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("POST", "/admin/v1/activities/999999/cancel", "admin", "", 404, "NOT_FOUND", false)
}
