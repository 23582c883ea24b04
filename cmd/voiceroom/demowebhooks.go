package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"voiceroom/webhooks"
)

// demoReceiver is the app's own backend in the demo: a local HTTP server
// the webhooks sink POSTs the app's room events to. It checks every
// delivery's signature and records the events by room, in the order they
// arrive.
type demoReceiver struct {
	srv    *http.Server
	url    string
	id     int64
	secret string

	mu         sync.Mutex
	deliveries int
	unverified []string               // why deliveries did not verify
	rooms      map[string][]demoEvent // events by room id, as they arrived (repeats included)
}

// demoEvent is what the demo shows of a delivered event.
type demoEvent struct {
	ID      string `json:"event_id"`
	Type    string `json:"event_type"`
	Version int64  `json:"room_version"`
}

// ServeHTTP takes one delivery: 204 when it verifies, 401 otherwise.
func (rc *demoReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var payload webhooks.Payload
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := webhooks.Verify(rc.secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
		rc.unverified = append(rc.unverified, err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if err := json.Unmarshal(body, &payload); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.deliveries++
	for _, e := range payload.Events {
		rc.rooms[e.RoomID] = append(rc.rooms[e.RoomID], demoEvent{ID: e.EventID, Type: e.EventType, Version: e.RoomVersion})
	}
	w.WriteHeader(http.StatusNoContent)
}

// startReceiver runs the app's backend on a free local port and adds an
// endpoint for it to the app; when the server refuses it (an http or
// loopback URL where the operator does not allow them, five endpoints
// already, no such route) it says so and the demo goes on without.
func (d *demoRun) startReceiver(ctx context.Context) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.say("skipped: no local port for a webhook receiver (%v)", err)
		return nil
	}
	rc := &demoReceiver{url: "http://" + ln.Addr().String() + "/hooks/voiceroom", rooms: map[string][]demoEvent{}}
	rc.srv = &http.Server{Handler: rc, ReadHeaderTimeout: 5 * time.Second}
	go rc.srv.Serve(ln)
	var created struct {
		ID     int64  `json:"webhook_id"`
		Secret string `json:"secret"`
	}
	err = d.c.call(ctx, http.MethodPost, "/admin/v1/webhooks", d.admin, map[string]any{"url": rc.url}, &created)
	switch {
	case d.skipped(err, "webhooks (POST /admin/v1/webhooks)"):
	case isCode(err, "INVALID_ARGUMENT"):
		d.say("skipped: %s; VOICEROOM_WEBHOOKS_ALLOW_HTTP and VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES allow a local receiver (task run sets both)", refusal(err))
	case isCode(err, "FAILED_PRECONDITION"):
		d.say("skipped: %s", refusal(err))
	case err != nil:
		rc.srv.Close()
		return err
	}
	if err != nil {
		rc.srv.Close()
		return nil
	}
	rc.mu.Lock()
	rc.id, rc.secret = created.ID, created.Secret
	rc.mu.Unlock()
	d.receiver = rc
	d.undo.push("webhook", d.stopReceiver)
	d.say("-> webhook %d at %s; its signing secret %s... is shown this once", rc.id, rc.url, created.Secret[:min(12, len(created.Secret))])
	d.say("the app's backend now gets the app's room events as signed POSTs (webhook-id, webhook-timestamp, webhook-signature)")
	d.awaitPickedUp(ctx, rc.id)
	return nil
}

// awaitPickedUp waits (up to a few seconds) until the delivering process
// has read the new endpoint, which it does about once a second: its
// series voiceroom_webhooks_pending_events appears on the operators'
// listener. Without that listener it says the first events may be missed.
func (d *demoRun) awaitPickedUp(ctx context.Context, id int64) {
	series := `voiceroom_webhooks_pending_events{webhook_id="` + itoa(id) + `"}`
	deadline := time.Now().Add(min(d.cfg.Wait, 10*time.Second))
	for d.cfg.OpsURL != "" && time.Now().Before(deadline) {
		status, body, err := d.c.getPlain(ctx, d.cfg.OpsURL+"/metrics", 16<<20)
		if err == nil && status == http.StatusOK && strings.Contains(string(body), series) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	d.say("note: the webhooks sink has not shown the endpoint yet (%s on --ops-url): the rooms' first events may go before it does", series)
}

// stopReceiver deletes the demo's endpoint and stops its receiver.
func (d *demoRun) stopReceiver(ctx context.Context) error {
	rc := d.receiver
	d.receiver = nil
	err := d.c.call(ctx, http.MethodDelete, "/admin/v1/webhooks/"+itoa(rc.id), d.admin, nil, nil)
	if isCode(err, "NOT_FOUND") {
		err = nil
	}
	rc.srv.Close()
	return err
}

// stepWebhooks shows what the app's backend received: each demo room's
// events, every delivery verified, in room order up to RoomClosed.
func (d *demoRun) stepWebhooks(ctx context.Context) error {
	rc := d.receiver
	if rc == nil {
		d.say("skipped: no webhook receiver (see above)")
		return nil
	}
	deadline := time.Now().Add(d.cfg.Wait)
	for {
		if d.allClosed(rc) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	rc.mu.Lock()
	deliveries, unverified := rc.deliveries, rc.unverified
	rooms := map[string][]demoEvent{}
	for k, v := range rc.rooms {
		rooms[k] = append([]demoEvent(nil), v...)
	}
	rc.mu.Unlock()
	if len(unverified) > 0 {
		return fmt.Errorf("%d webhook deliveries did not verify: %s", len(unverified), unverified[0])
	}
	d.say("-> %d deliveries, every signature verified with the webhook's secret", deliveries)
	for _, u := range d.users() {
		evs := dropRepeats(rooms[u.room.RoomID])
		if len(evs) == 0 {
			d.say("-> %s: no events after %v: does serve run the webhooks role?", d.c.aliases[u.room.RoomID], d.cfg.Wait)
			continue
		}
		var types []string
		for i, e := range evs {
			// One command's events share its room_version.
			if i > 0 && e.Version < evs[i-1].Version {
				return fmt.Errorf("room %s: webhook events out of order: version %d after %d", u.room.RoomID, e.Version, evs[i-1].Version)
			}
			types = append(types, e.Type)
		}
		d.say("-> %s: %d events in order, room_version %d..%d: %s", d.c.aliases[u.room.RoomID], len(evs), evs[0].Version, evs[len(evs)-1].Version, shorten(types, 8))
	}
	var hist struct {
		Deliveries []webhooks.Delivery `json:"deliveries"`
	}
	if err := d.c.call(ctx, http.MethodGet, "/admin/v1/webhooks/"+itoa(rc.id)+"/deliveries?limit=3", d.admin, nil, &hist); err != nil {
		return err
	}
	for _, h := range hist.Deliveries {
		room := h.RoomID
		if a, ok := d.c.aliases[room]; ok {
			room = a
		}
		d.say("-> %s: %d event(s), attempt %d, %s (HTTP %d) in %d ms", room, len(h.EventIDs), h.Attempt, h.Outcome, h.Status, h.LatencyMs)
	}
	if err := d.stopReceiver(ctx); err != nil {
		return err
	}
	d.undo.done("webhook")
	return nil
}

// allClosed reports whether rc has the RoomClosed of every demo room.
func (d *demoRun) allClosed(rc *demoReceiver) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, u := range d.users() {
		evs := rc.rooms[u.room.RoomID]
		if len(evs) == 0 || evs[len(evs)-1].Type != "RoomClosed" {
			return false
		}
	}
	return true
}

// dropRepeats drops events seen before (a delivery sent again), as a
// receiver does by event_id.
func dropRepeats(evs []demoEvent) []demoEvent {
	seen := map[string]bool{}
	out := evs[:0:0]
	for _, e := range evs {
		if !seen[e.ID] {
			seen[e.ID] = true
			out = append(out, e)
		}
	}
	return out
}

// shorten joins the first n of s and says how many more there are.
func shorten(s []string, n int) string {
	if len(s) <= n {
		return strings.Join(s, " ")
	}
	return strings.Join(s[:n], " ") + fmt.Sprintf(" ... (%d more)", len(s)-n)
}
