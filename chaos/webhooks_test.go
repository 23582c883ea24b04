//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voiceroom/webhooks"
)

// hooks is the app's own backend in the suite: an HTTP receiver in the
// test process, registered as the chaos app's webhook endpoint for every
// event type. It verifies every delivery's signature and records, per
// event id, how many times it was accepted, and per room whether the
// events first arrived in room_version order (repeats are dropped by id,
// as a receiver is told to): the relay stores each room's events in that
// order and the sink delivers them in the order ROOM_EVENTS holds them.
type hooks struct {
	url    string
	srv    *http.Server
	id     int64
	secret string

	mu         sync.Mutex
	failing    bool             // answer 503 (the receiver is down)
	accepted   map[string]int   // event id -> deliveries accepted
	newest     map[string]int64 // room -> the highest room_version arrived
	outOfOrder []string         // events that first arrived after a higher room_version of their room
	unverified []string
}

// startHooks runs the receiver on a free loopback port until the test ends.
func startHooks(t *testing.T) *hooks {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hooks{url: "http://" + ln.Addr().String() + "/hooks", accepted: map[string]int{}, newest: map[string]int64{}}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go h.srv.Serve(ln)
	t.Cleanup(func() { h.srv.Close() })
	return h
}

// ServeHTTP takes one delivery: 503 while failing, 401 unless it verifies,
// else 204 and the events recorded.
func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing {
		http.Error(w, "receiver down", http.StatusServiceUnavailable)
		return
	}
	if err := webhooks.Verify(h.secret, r.Header, body, time.Now(), 5*time.Minute); err != nil {
		h.unverified = append(h.unverified, r.Header.Get("webhook-id")+": "+err.Error())
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var payload webhooks.Payload
	if err := json.Unmarshal(body, &payload); err != nil || len(payload.Events) == 0 {
		h.unverified = append(h.unverified, fmt.Sprintf("%s: body %.200s: %v", r.Header.Get("webhook-id"), body, err))
		http.Error(w, "not a delivery", http.StatusBadRequest)
		return
	}
	for _, e := range payload.Events {
		if h.accepted[e.EventID] == 0 {
			if newest := h.newest[e.RoomID]; e.RoomVersion < newest {
				h.outOfOrder = append(h.outOfOrder, fmt.Sprintf("%s: %s v%d after v%d", e.RoomID, e.EventID, e.RoomVersion, newest))
			}
			h.newest[e.RoomID] = max(h.newest[e.RoomID], e.RoomVersion)
		}
		h.accepted[e.EventID]++
	}
	w.WriteHeader(http.StatusNoContent)
}

// setFailing makes the receiver answer 503 (down) or accept again.
func (h *hooks) setFailing(on bool) {
	h.mu.Lock()
	h.failing = on
	h.mu.Unlock()
}

// register adds the receiver as the app's endpoint (every event type)
// and waits until the delivering process has it, so that every room
// event committed from then on is the receiver's.
func (h *hooks) register(t *testing.T, d *driver, deliverer *proc) {
	t.Helper()
	st, code, data := d.send(context.Background(), http.MethodPost, "/admin/v1/webhooks", d.admin, "", map[string]any{"url": h.url})
	if st != http.StatusOK {
		t.Fatalf("create the webhook endpoint: %d %s", st, code)
	}
	var created struct {
		ID     int64  `json:"webhook_id"`
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(data, &created); err != nil || created.Secret == "" {
		t.Fatalf("create the webhook endpoint: answer %s: %v", data, err)
	}
	h.mu.Lock()
	h.id, h.secret = created.ID, created.Secret
	h.mu.Unlock()
	series := `voiceroom_webhooks_pending_events{webhook_id="` + strconv.FormatInt(created.ID, 10) + `"}`
	if err := until(30*time.Second, func() error {
		_, err := deliverer.metric(series)
		return err
	}); err != nil {
		t.Fatalf("the webhooks process does not show endpoint %d: %v", created.ID, err)
	}
}

// hooksAccount is what reached the receiver.
type hooksAccount struct {
	committed  int // events of the app committed since the endpoint was registered
	delivered  int
	missing    []string
	repeats    int      // deliveries beyond the first of an event (dropped by id)
	outOfOrder []string // events that first arrived after a higher room_version of their room
	unverified []string
}

// check compares the receiver's record with every event of the app
// committed (the outbox). Events committed before the
// endpoint existed (the rooms' creation, before register) are not the
// receiver's: the suite registers it before any room exists.
func (h *hooks) check(ctx context.Context, c *cluster) (hooksAccount, error) {
	var a hooksAccount
	ids, err := strings1(ctx, c, "SELECT CONCAT(event_type, ' ', event_id) FROM room_outbox WHERE app_code = ?")
	if err != nil {
		return a, fmt.Errorf("read outbox: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range ids {
		typ, id, _ := strings.Cut(s, " ")
		a.committed++
		switch n := h.accepted[id]; {
		case n == 0:
			a.missing = append(a.missing, typ+" "+id)
		default:
			a.delivered++
			a.repeats += n - 1
		}
	}
	a.outOfOrder = append([]string(nil), h.outOfOrder...)
	a.unverified = append([]string(nil), h.unverified...)
	return a, nil
}

// webhooksDown is the receiver down for the fault's length, the webhooks
// process SIGKILLed while it holds events it cannot deliver, and started
// again: the new process must deliver the dead one's events before the
// later events of their rooms.
func webhooksDown(t *testing.T, c *cluster, r *row, fault time.Duration) {
	t.Helper()
	c.hooks.setFailing(true)
	time.Sleep(fault / 2)
	held, err := c.webhooks.metric("voiceroom_webhooks_pending_events{webhook_id=\"" + strconv.FormatInt(c.hooks.id, 10) + "\"}")
	if err != nil {
		r.problems = append(r.problems, fmt.Sprintf("read the webhooks process's pending events: %v", err))
	}
	c.webhooks.signal(t, syscall.SIGKILL)
	r.note = fmt.Sprintf("webhooks process killed holding %.0f undelivered events", held)
	if held == 0 {
		r.problems = append(r.problems, "the webhooks process held no undelivered event at the kill: it proves nothing")
	}
	time.Sleep(fault / 2)
	c.webhooks.start(t)
	c.hooks.setFailing(false)
}
