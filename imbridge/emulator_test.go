package imbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"voiceroom/imbridge"
)

// TestEmulatorChecksSigs: the emulator accepts a good sig and answers a
// wrong key, an expired sig and a wrong identifier with their 700xx codes.
func TestEmulatorChecksSigs(t *testing.T) {
	_, url := newTestEmulator(t)
	good := imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey, Domain: url}
	create := map[string]any{"Type": "AVChatRoom", "GroupId": "g1", "Name": "n"}
	for _, tc := range []struct {
		name string
		app  imbridge.Application
		now  time.Time
		want int
	}{
		{"good", good, time.Now(), 0},
		{"wrong key", imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: "other", Domain: url}, time.Now(), imbridge.CodeSigBadKey},
		{"expired", good, time.Now().Add(-48 * time.Hour), imbridge.CodeSigExpired},
		{"wrong identifier", imbridge.Application{SDKAppID: testSDKAppID, Admin: "someone", SecretKey: testKey, Domain: url}, time.Now(), imbridge.CodeSigIdentifier},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			c, err := imbridge.NewClient(tc.app, imbridge.ClientConfig{}, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			create["GroupId"] = "g-" + tc.name[:4]
			err = c.Call(context.Background(), imbridge.APICreateGroup, create, nil)
			var ae *imbridge.APIError
			switch {
			case tc.want == 0 && err != nil:
				t.Fatalf("call: %v", err)
			case tc.want != 0 && (!errors.As(err, &ae) || ae.Code != tc.want):
				t.Fatalf("call: %v, want code %d", err, tc.want)
			case tc.want != 0 && !imbridge.Permanent(err) && tc.want != imbridge.CodeSigExpired:
				t.Fatalf("%v should be permanent", err)
			}
		})
	}
}

func TestPermanentClassification(t *testing.T) {
	for code, want := range map[int]bool{
		10002: false, 10006: false, 60008: false, 91000: false, 70001: false, 12345: false,
		10003: true, 10004: true, 60002: true, 60006: true, 70009: true, 70020: true, 80001: true, 80002: true,
	} {
		if got := imbridge.Permanent(&imbridge.APIError{Code: code}); got != want {
			t.Errorf("code %d: permanent %v, want %v", code, got, want)
		}
	}
	if imbridge.Permanent(imbridge.ErrTransport) || imbridge.Permanent(imbridge.ErrMessageDropped) {
		t.Error("transport and dropped must be retryable")
	}
}

// TestEmulatorInspectionAPI pins the /_emu/ contract other tools code
// against: plain JSON with these keys.
func TestEmulatorInspectionAPI(t *testing.T) {
	_, url := newTestEmulator(t)
	c, err := imbridge.NewClient(imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey, Domain: url}, imbridge.ClientConfig{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Call(ctx, imbridge.APICreateGroup, map[string]any{"Type": "AVChatRoom", "GroupId": "g1", "Name": "n", "Owner_Account": "7"}, nil); err != nil {
		t.Fatal(err)
	}
	send := map[string]any{"GroupId": "g1", "Random": 42, "MsgPriority": "High", "From_Account": testAdmin,
		"MsgBody": []map[string]any{{"MsgType": "TIMCustomElem", "MsgContent": map[string]string{
			"Desc": imbridge.DescBatch, "Data": `{"events":[{"event_id":"e1"},{"event_id":"e2"}]}`}}}}
	for range 2 { // the second is a duplicate Random
		if err := c.Call(ctx, imbridge.APISendGroupMsg, send, nil); err != nil {
			t.Fatal(err)
		}
	}
	get := func(method, path, body string, wantStatus int) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %s: status %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}
	keys := func(v any, want ...string) {
		t.Helper()
		m, _ := v.(map[string]any)
		for _, k := range want {
			if _, ok := m[k]; !ok {
				t.Fatalf("missing %q in %v", k, v)
			}
		}
	}
	groups := get("GET", "/_emu/groups", "", 200)["groups"].([]any)
	keys(groups[0], "group_id", "name", "owner", "type", "created_at_ms", "destroyed", "message_count")
	msgs := get("GET", "/_emu/messages?group_id=g1&limit=10", "", 200)["messages"].([]any)
	if len(msgs) != 1 {
		t.Fatalf("messages %v", msgs)
	}
	keys(msgs[0], "group_id", "random", "msg_seq", "received_at_ms", "priority", "desc", "event_ids", "data")
	if ids := msgs[0].(map[string]any)["event_ids"].([]any); len(ids) != 2 || ids[1] != "e2" {
		t.Fatalf("event_ids %v", ids)
	}
	ev := get("GET", "/_emu/events/e2", "", 200)
	keys(ev, "event_id", "shown", "group_id", "first_received_at_ms")
	if ev["shown"] != 1.0 {
		t.Fatalf("event %v", ev)
	}
	get("GET", "/_emu/events/nope", "", 404)
	st := get("GET", "/_emu/stats", "", 200)
	keys(st, "calls", "errors", "messages", "events_shown", "duplicates_dropped", "rate_dropped")
	if st["duplicates_dropped"] != 1.0 || st["events_shown"] != 2.0 || st["calls"].(map[string]any)[imbridge.APISendGroupMsg] != 2.0 {
		t.Fatalf("stats %v", st)
	}
	get("POST", "/_emu/faults", `{"mode":"error","error_code":10002,"api":"`+imbridge.APISendGroupMsg+`"}`, 200)
	var ae *imbridge.APIError
	if err := c.Call(ctx, imbridge.APISendGroupMsg, send, nil); !errors.As(err, &ae) || ae.Code != 10002 {
		t.Fatalf("under fault: %v", err)
	}
	get("POST", "/_emu/faults", `{"mode":"sideways"}`, 400)
	get("DELETE", "/_emu/faults", "", 200)
	get("POST", "/_emu/reset", "", 200)
	if g := get("GET", "/_emu/groups", "", 200)["groups"].([]any); len(g) != 0 {
		t.Fatalf("after reset: %v", g)
	}
}
