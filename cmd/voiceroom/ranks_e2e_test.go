package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestServeRanksFollowGifts: in a serve with every role, the ranks of a
// room follow its gifts through the whole pipeline (the command's ledger
// row, the outbox, ROOM_EVENTS, the durable roomranks, the Redis sets):
// a set filled before the gifts is kept current by the consumer, a gift
// retried with its Idempotency-Key counts once, and both sides agree.
func TestServeRanksFollowGifts(t *testing.T) {
	p, vars := startServe(t)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	c := &client{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"])}
	for _, u := range []string{"11", "12", "13"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"rank`+u+`"}`, nil)
	}
	var room roomView
	c.ok("POST", "/api/v1/rooms/create", "11", `{"room_name":"Ranks"}`, &room)
	rp := "/api/v1/rooms/" + room.RoomID
	for _, u := range []string{"11", "12", "13"} {
		c.ok("POST", rp+"/join", u, ``, nil)
	}
	c.ok("POST", "/admin/v1/gifts", "admin", `{"gift_id":7,"name":"Rocket","price":100,"heat":40}`, nil)
	c.ok("POST", "/admin/v1/wallets/13/credit", "admin", `{"amount":1000,"idempotency_key":"e2e-ranks-13"}`, nil)
	c.ok("POST", "/admin/v1/wallets/12/credit", "admin", `{"amount":1000,"idempotency_key":"e2e-ranks-12"}`, nil)

	type rank struct {
		Items []struct {
			UserID int64 `json:"user_id"`
			Value  int64 `json:"value"`
		} `json:"items"`
		Me *struct {
			Rank  int   `json:"rank"`
			Value int64 `json:"value"`
		} `json:"me"`
	}
	read := func(by string, as string) rank {
		var r rank
		c.ok("GET", rp+"/ranks?by="+by+"&period=week", as, ``, &r)
		return r
	}
	if r := read("sender", "13"); len(r.Items) != 0 || r.Me != nil { // fills the empty sets
		t.Fatalf("before any gift: %+v", r)
	}
	read("receiver", "11")
	gifted := applied(t, vars)

	for _, g := range []struct{ as, body, key string }{
		{"13", `{"gift_id":7,"count":3,"receiver_user_id":11}`, "g-13"},
		{"13", `{"gift_id":7,"count":3,"receiver_user_id":11}`, "g-13"}, // a retry
		{"12", `{"gift_id":7,"count":1,"receiver_user_id":13}`, "g-12"},
	} {
		if status, code := c.call("POST", rp+"/gift", g.as, g.body, nil, "Idempotency-Key", g.key); status != 200 {
			t.Fatalf("gift as %s: %d %s", g.as, status, code)
		}
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := applied(t, vars) - gifted; n != 2 {
			return fmt.Errorf("the durable applied %v gifts, want 2", n)
		}
		return nil
	})
	s := read("sender", "12")
	if len(s.Items) != 2 || s.Items[0].UserID != 13 || s.Items[0].Value != 300 || s.Items[1].UserID != 12 || s.Items[1].Value != 100 ||
		s.Me == nil || s.Me.Rank != 2 {
		t.Fatalf("senders: %+v me %+v", s.Items, s.Me)
	}
	r := read("receiver", "11")
	if len(r.Items) != 2 || r.Items[0].UserID != 11 || r.Items[0].Value != 300 || r.Items[1].UserID != 13 || r.Me == nil || r.Me.Rank != 1 {
		t.Fatalf("receivers: %+v me %+v", r.Items, r.Me)
	}
}

var appliedLine = regexp.MustCompile(`(?m)^voiceroom_ranks_events_total\{result="applied"\} (\S+)$`)

// applied is the durable's count of gifts applied to sets in Redis, read
// from the operators' /metrics.
func applied(tb testing.TB, vars map[string]string) float64 {
	tb.Helper()
	resp, err := http.Get("http://" + vars["VOICEROOM_OPS_ADDR"] + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	m := appliedLine.FindSubmatch(raw)
	if m == nil {
		tb.Fatal("no voiceroom_ranks_events_total{result=\"applied\"} in /metrics")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}
