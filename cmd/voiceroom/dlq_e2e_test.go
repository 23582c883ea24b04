package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/authtoken"
	"voiceroom/bus"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
)

type deadLetter struct {
	Seq       uint64 `json:"seq"`
	Sink      string `json:"sink"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	RoomID    string `json:"room_id"`
	Reason    string `json:"reason"`
}

type deadLetterPage struct {
	Items []deadLetter `json:"items"`
	Next  *uint64      `json:"next"`
}

// adminOf calls serve as app's admin and decodes the envelope's data.
func adminOf(t testing.TB, base string, secret []byte, app, method, path, body string, out any) int {
	t.Helper()
	tok, err := authtoken.Issue(secret, app, 0, authtoken.RoleAdmin, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(method, base+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s %s: %s", method, path, raw)
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(env.Data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, env.Data)
		}
	}
	return resp.StatusCode
}

// TestServeDeadLettersOfAPermanentIMError runs serve against the IM
// emulator answering a permanent error (10004): the IM bridge's letters are
// listed and paged over HTTP for their app only; a replay (IM healthy
// again) reaches the IM sink alone, not the list projector; each event
// shows in IM once, and a handled letter is not offered again.
func TestServeDeadLettersOfAPermanentIMError(t *testing.T) {
	emu, err := imemu.New(imemu.Config{Apps: []imbridge.Application{{SDKAppID: 1400000001, Admin: "administrator", SecretKey: "e2e-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	defer srv.Close()
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: imbridge.CodeInvalidRequest}); err != nil {
		t.Fatal(err)
	}
	p, vars := startServe(t, "VOICEROOM_TIM_DOMAIN="+srv.URL, "VOICEROOM_TIM_SDKAPPID=1400000001",
		"VOICEROOM_TIM_SECRET_KEY=e2e-key", "VOICEROOM_TIM_CALLBACK_TOKEN=cb-token", "VOICEROOM_IMBRIDGE_BACKOFF=100ms,200ms")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	secret := []byte(vars["VOICEROOM_JWT_SECRET"])
	c := &client{t: t, base: base, secret: secret}
	for _, u := range []string{"31", "32", "33"} {
		c.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"dlquser`+u+`"}`, nil)
	}
	var r1, r2 struct {
		RoomID    string `json:"room_id"`
		IMGroupID string `json:"im_group_id"`
	}
	c.ok("POST", "/api/v1/rooms/create", "31", `{"room_name":"dead one"}`, &r1)
	c.ok("POST", "/api/v1/rooms/"+r1.RoomID+"/join", "32", ``, nil)
	c.ok("POST", "/api/v1/rooms/create", "33", `{"room_name":"dead two"}`, &r2)

	// Listed, for the app only: both rooms' RoomCreated and the join.
	var all []deadLetter
	testenv.Eventually(t, 30*time.Second, func() error {
		var page deadLetterPage
		if status := adminOf(t, base, secret, "e2e", "GET", "/admin/v1/dlq?sink=imbridge&limit=100", "", &page); status != 200 {
			return fmt.Errorf("list: %d", status)
		}
		all = page.Items
		var kinds []string
		for _, l := range all {
			kinds = append(kinds, l.RoomID+" "+l.EventType)
		}
		for _, want := range []string{r1.RoomID + " RoomCreated", r1.RoomID + " RoomUserJoined", r2.RoomID + " RoomCreated"} {
			if !slices.Contains(kinds, want) {
				return fmt.Errorf("letters %v lack %s", kinds, want)
			}
		}
		return nil
	})
	for _, l := range all {
		if l.Sink != "imbridge" || l.EventID == "" || l.Reason == "" {
			t.Errorf("letter %+v", l)
		}
	}
	// Paged one by one, the same letters in the same order.
	var paged []deadLetter
	after := ""
	for range len(all) + 2 {
		var page deadLetterPage
		if status := adminOf(t, base, secret, "e2e", "GET", "/admin/v1/dlq?sink=imbridge&limit=1"+after, "", &page); status != 200 {
			t.Fatalf("page after %q: %d", after, status)
		}
		paged = append(paged, page.Items...)
		if page.Next == nil {
			break
		}
		after = fmt.Sprintf("&after=%d", *page.Next)
	}
	if len(paged) != len(all) {
		t.Fatalf("paged %d letters, listed %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i].Seq != all[i].Seq {
			t.Fatalf("page order %v, list %v", paged, all)
		}
	}
	var foreign deadLetterPage
	if status := adminOf(t, base, secret, "e2e2", "GET", "/admin/v1/dlq?sink=imbridge&limit=100", "", &foreign); status != 200 || len(foreign.Items) != 0 {
		t.Fatalf("another app's admin: %d %+v", status, foreign.Items)
	}
	var none struct{ Replayed int }
	if status := adminOf(t, base, secret, "e2e2", "POST", "/admin/v1/dlq/replay", `{"sink":"imbridge"}`, &none); status != 200 || none.Replayed != 0 {
		t.Fatalf("another app's replay: %d %+v", status, none)
	}

	// The list projector has handled everything. Its durable reads the whole
	// stream, so it is given the replays too, but it must ack them without
	// handling them: its handled (acked) count must not move.
	js := mustJetStream(t, vars)
	settled := func(durable string) (*jetstream.ConsumerInfo, error) {
		return consumerSettled(t.Context(), js, durable)
	}
	testenv.Eventually(t, 20*time.Second, func() (err error) {
		_, err = settled(bus.DurableListProjector)
		return err
	})
	const handledByProjector = `voiceroom_bus_messages_acked_total{consumer="listprojector"}`
	const skippedByProjector = `voiceroom_bus_other_sinks_replays_total{consumer="listprojector"}`
	ops := opsURL(vars)
	handledBefore, skippedBefore := scrape(t, ops, handledByProjector), scrape(t, ops, skippedByProjector)

	emu.ClearFault()
	var res struct {
		Replayed int  `json:"replayed"`
		Skipped  int  `json:"skipped"`
		More     bool `json:"more"`
	}
	if status := adminOf(t, base, secret, "e2e", "POST", "/admin/v1/dlq/replay", `{"sink":"imbridge"}`, &res); status != 200 || res.Replayed != len(all) {
		t.Fatalf("replay: %d %+v, want %d replayed", status, res, len(all))
	}
	// IM gets both groups and the join; the letters are handled and gone.
	testenv.Eventually(t, 30*time.Second, func() error {
		groups := map[string]bool{}
		for _, g := range emu.Groups() {
			groups[g.GroupID] = true
		}
		if !groups[r1.IMGroupID] || !groups[r2.IMGroupID] {
			return fmt.Errorf("groups %+v", emu.Groups())
		}
		var page deadLetterPage
		adminOf(t, base, secret, "e2e", "GET", "/admin/v1/dlq?sink=imbridge&limit=100", "", &page)
		if len(page.Items) != 0 {
			return fmt.Errorf("%d letters left", len(page.Items))
		}
		_, err := settled(bus.DurableIMBridge)
		return err
	})
	// Offered once: a second replay finds nothing, and the join shows once.
	if status := adminOf(t, base, secret, "e2e", "POST", "/admin/v1/dlq/replay", `{"sink":"imbridge"}`, &res); status != 200 || res.Replayed != 0 {
		t.Fatalf("second replay: %d %+v", status, res)
	}
	if _, err := settled(bus.DurableIMBridge); err != nil {
		t.Fatal(err)
	}
	for _, l := range all {
		if l.EventType != "RoomUserJoined" {
			continue
		}
		if ev, ok := emu.Event(l.EventID); !ok || ev.Shown != 1 {
			t.Errorf("replayed join %s in IM: %+v %v, want shown once", l.EventID, ev, ok)
		}
	}
	testenv.Eventually(t, 20*time.Second, func() error {
		if _, err := settled(bus.DurableListProjector); err != nil {
			return err
		}
		if got := scrape(t, ops, skippedByProjector) - skippedBefore; got != float64(len(all)) {
			return fmt.Errorf("the list projector skipped %v replays, want %d", got, len(all))
		}
		return nil
	})
	if after := scrape(t, ops, handledByProjector); after != handledBefore {
		t.Fatalf("the replay reached the list projector's handler: handled %v, then %v", handledBefore, after)
	}
}

// scrape reads one series of serve's /metrics on its operators' listener
// (ops), 0 when the series is absent.
func scrape(tb testing.TB, ops, series string) float64 {
	tb.Helper()
	resp, err := http.Get(ops + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s/metrics: %s", ops, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				tb.Fatalf("%s: %v", series, err)
			}
			return f
		}
	}
	return 0
}
