package main

import (
	"fmt"
	"strconv"
)

// webhooks drives the admin webhook routes: success and the typical
// errors of each. The endpoints are deleted at the end, before any event
// goes to them (they want RoomClosed only, which nothing emits after).
func (a *apiDriver) webhooks() {
	const url = "https://192.0.2.10/hooks/voiceroom" // TEST-NET-1: public, never dialled here
	var created struct {
		WebhookID int64  `json:"webhook_id"`
		Secret    string `json:"secret"`
	}
	a.ok("POST", "/admin/v1/webhooks", "admin", `{"url":"`+url+`","event_types":["RoomClosed"]}`, &created)
	if created.WebhookID == 0 || created.Secret == "" {
		a.t.Fatalf("create webhook: answered %+v", created)
	}
	id := strconv.FormatInt(created.WebhookID, 10)
	a.fail("POST", "/admin/v1/webhooks", "admin", `{"url":"http://192.0.2.10/hook"}`, 400, "INVALID_ARGUMENT", false)
	a.fail("POST", "/admin/v1/webhooks", "admin", `{"url":"https://127.0.0.1/hook"}`, 400, "INVALID_ARGUMENT", false)
	a.fail("POST", "/admin/v1/webhooks", "admin", `{"url":"`+url+`","event_types":["RoomNope"]}`, 400, "INVALID_ARGUMENT", false)
	ids := []string{id}
	for i := range 4 {
		var more struct {
			WebhookID int64 `json:"webhook_id"`
		}
		a.ok("POST", "/admin/v1/webhooks", "admin", fmt.Sprintf(`{"url":"%s/%d","event_types":["RoomClosed"]}`, url, i), &more)
		ids = append(ids, strconv.FormatInt(more.WebhookID, 10))
	}
	a.fail("POST", "/admin/v1/webhooks", "admin", `{"url":"`+url+`"}`, 409, "FAILED_PRECONDITION", false)
	a.ok("GET", "/admin/v1/webhooks", "admin", "", nil)

	w := "/admin/v1/webhooks/" + id
	a.ok("GET", w, "admin", "", nil)
	a.fail("GET", "/admin/v1/webhooks/0", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/webhooks/999999", "admin", "", 404, "NOT_FOUND", false)
	a.fail("GET", w, "admin:other", "", 404, "NOT_FOUND", false)
	a.ok("PATCH", w, "admin", `{"enabled":false,"event_types":["RoomClosed","RoomBanned"]}`, nil)
	a.ok("PATCH", w, "admin", `{"enabled":true,"url":"`+url+`/v2"}`, nil)
	a.fail("PATCH", w, "admin", `{"url":"ftp://192.0.2.10/"}`, 400, "INVALID_ARGUMENT", false)
	a.fail("PATCH", "/admin/v1/webhooks/999999", "admin", `{"enabled":false}`, 404, "NOT_FOUND", false)

	a.ok("POST", w+"/rotate-secret", "admin", "", nil)
	a.ok("POST", w+"/rotate-secret", "admin", `{"previous_secret_ttl_seconds":0}`, nil)
	a.fail("POST", w+"/rotate-secret", "admin", `{"previous_secret_ttl_seconds":-1}`, 400, "INVALID_ARGUMENT", true)
	a.fail("POST", "/admin/v1/webhooks/999999/rotate-secret", "admin", "", 404, "NOT_FOUND", false)

	a.ok("GET", w+"/deliveries?limit=5", "admin", "", nil)
	a.fail("GET", w+"/deliveries?limit=101", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/webhooks/999999/deliveries", "admin", "", 404, "NOT_FOUND", false)

	for _, id := range ids {
		a.ok("DELETE", "/admin/v1/webhooks/"+id, "admin", "", nil)
	}
	a.fail("DELETE", w, "admin", "", 404, "NOT_FOUND", false)
	a.fail("DELETE", "/admin/v1/webhooks/0", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("PATCH", "/admin/v1/webhooks/0", "admin", `{}`, 400, "INVALID_ARGUMENT", true)
	a.fail("POST", "/admin/v1/webhooks/0/rotate-secret", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.ok("GET", "/admin/v1/dlq?sink=webhooks", "admin", "", nil)
}
