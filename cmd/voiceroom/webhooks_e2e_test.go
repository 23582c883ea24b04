package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// hookReceiver is an app's backend: it answers 204 and records the
// events it got, by type and room.
type hookReceiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	events []hookEvent
}

type hookEvent struct {
	EventType string `json:"event_type"`
	RoomID    string `json:"room_id"`
}

func newHookReceiver(t *testing.T) *hookReceiver {
	rc := &hookReceiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var payload struct {
			Events []hookEvent `json:"events"`
		}
		if err == nil {
			err = json.Unmarshal(body, &payload)
		}
		if err != nil {
			t.Errorf("receiver: %v in %q", err, body)
		}
		rc.mu.Lock()
		rc.events = append(rc.events, payload.Events...)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// waitFor waits until the receiver got an event of type typ of room.
func (rc *hookReceiver) waitFor(t *testing.T, typ, room string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if slices.Contains(rc.events, hookEvent{typ, room}) {
			return nil
		}
		return fmt.Errorf("no %s of %s among %d events", typ, room, len(rc.events))
	})
}

// TestServeWebhookEndpointGetsEventsFromItsAnswer runs the api, rooms and
// relay roles in one process and the webhooks role in another (on the
// first's JetStream): a room created a millisecond after POST
// /admin/v1/webhooks answered reaches the new endpoint, and so does a
// RoomUserJoined committed a millisecond after a PATCH that added the
// type, although the delivering process reads the endpoints' changes only
// every second and passes those events before it does.
func TestServeWebhookEndpointGetsEventsFromItsAnswer(t *testing.T) {
	// Both processes seal and open the endpoints' secrets with one key.
	p, vars := startServe(t, "VOICEROOM_ROLES=api,rooms,relay", "VOICEROOM_WEBHOOKS_SECRET_KEY="+strings.Repeat("5e", 32),
		"VOICEROOM_WEBHOOKS_ALLOW_HTTP=true", "VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=true")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	h := startServeWith(t, secondServe(t, vars, "webhooks", "test-webhooks"))
	testenv.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(h.logs.String(), "delivery lease taken: delivering") {
			return fmt.Errorf("the webhooks process does not deliver yet")
		}
		return nil
	})

	c := &client{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"])}
	var region struct {
		RegionID int64 `json:"region_id"`
	}
	c.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"South-East Asia"}`, &region)
	c.ok("POST", "/admin/v1/countries", "admin", fmt.Sprintf(`{"country_code":"SG","name":"Singapore","region_id":%d}`, region.RegionID), nil)
	for _, u := range []string{"11", "12"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"user`+u+`","country":"SG"}`, nil)
	}

	// Each command follows the admin's answer at once: within the
	// millisecond the issue measured, well before the webhooks process
	// reads the endpoints again (every second).
	rc := newHookReceiver(t)
	var hook struct {
		ID int64 `json:"webhook_id"`
	}
	c.ok("POST", "/admin/v1/webhooks", "admin", fmt.Sprintf(`{"url":%q,"event_types":["RoomCreated"]}`, rc.srv.URL+"/hook"), &hook)
	var room roomView
	c.ok("POST", "/api/v1/rooms/create", "11", `{"room_name":"First"}`, &room)
	rc.waitFor(t, "RoomCreated", room.RoomID)

	c.ok("PATCH", fmt.Sprintf("/admin/v1/webhooks/%d", hook.ID), "admin", `{"event_types":["RoomCreated","RoomUserJoined"]}`, nil)
	c.ok("POST", "/api/v1/rooms/"+room.RoomID+"/join", "12", ``, nil)
	rc.waitFor(t, "RoomUserJoined", room.RoomID)
}
