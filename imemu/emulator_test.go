package imemu_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/imbridge"
	"voiceroom/imemu"
	"voiceroom/internal/testenv"
)

const (
	testSDKAppID = 1400000001
	testAdmin    = "administrator"
	testKey      = "test-secret-key"
)

// newTestEmulator serves an emulator accepting the test application on
// clock now (time.Now when nil) and returns it with its base URL.
func newTestEmulator(tb testing.TB, now func() time.Time) (*imemu.Emulator, string) {
	tb.Helper()
	emu, err := imemu.New(imemu.Config{Now: now, Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}}})
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(emu)
	tb.Cleanup(srv.Close)
	return emu, srv.URL
}

// TestConfigValidate: every refusal is an *apperr.ConfigError naming the
// field, as every component's Validate is.
func TestConfigValidate(t *testing.T) {
	good := imbridge.Application{SDKAppID: testSDKAppID, Admin: testAdmin, SecretKey: testKey}
	for _, tc := range []struct {
		name  string
		cfg   imemu.Config
		field string
	}{
		{"good", imemu.Config{Apps: []imbridge.Application{good}}, ""},
		{"no application", imemu.Config{}, "Apps"},
		{"application without key", imemu.Config{Apps: []imbridge.Application{{SDKAppID: testSDKAppID, Admin: testAdmin}}}, "Apps"},
		{"negative max messages", imemu.Config{Apps: []imbridge.Application{good}, MaxMessages: -1}, "MaxMessages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var ce *apperr.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("Validate = %v, want a *apperr.ConfigError for %s", err, tc.field)
			}
			if _, err := imemu.New(tc.cfg); !errors.As(err, &ce) {
				t.Fatalf("New = %v, want the same refusal", err)
			}
		})
	}
}

// TestEmulatorChecksSigs: the emulator accepts a good sig and answers a
// wrong key, an expired sig and a wrong identifier with their 700xx codes.
func TestEmulatorChecksSigs(t *testing.T) {
	_, url := newTestEmulator(t, nil)
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

// TestEmulatorInspectionAPI pins the /_emu/ contract other tools code
// against: plain JSON with these keys.
func TestEmulatorInspectionAPI(t *testing.T) {
	_, url := newTestEmulator(t, nil)
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

// TestRESTContract walks the answers of Tencent's REST contract that the
// bridge relies on: the caller's checks, the group rules, the 12 KB limit,
// the duplicate Random within 5 minutes and the 40 messages/s rule.
func TestRESTContract(t *testing.T) {
	clk := testenv.NewClock(time.Unix(1700000000, 0))
	emu, base := newTestEmulator(t, clk.Now)
	sig, err := imbridge.UserSig(testKey, testAdmin, testSDKAppID, clk.Now().Unix(), 86400)
	if err != nil {
		t.Fatal(err)
	}
	caller := url.Values{"sdkappid": {fmt.Sprint(testSDKAppID)}, "identifier": {testAdmin}, "usersig": {sig}}
	// call posts body to api as q and checks the answer's ErrorCode.
	call := func(api string, q url.Values, body any, wantCode int) map[string]any {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Post(base+"/v4/"+api+"?"+q.Encode(), "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		wantStatus := "OK"
		if wantCode != 0 {
			wantStatus = "FAIL"
		}
		if resp.StatusCode != http.StatusOK || out["ErrorCode"] != float64(wantCode) || out["ActionStatus"] != wantStatus {
			t.Fatalf("%s: status %d, answer %v; want ErrorCode %d", api, resp.StatusCode, out, wantCode)
		}
		return out
	}
	with := func(key, value string) url.Values {
		q := url.Values{}
		for k, v := range caller {
			q[k] = v
		}
		q.Set(key, value)
		return q
	}
	create := func(groupID, name, typ string) map[string]any {
		return map[string]any{"Type": typ, "GroupId": groupID, "Name": name}
	}
	send := func(groupID string, random uint32, data string) map[string]any {
		return map[string]any{"GroupId": groupID, "Random": random, "MsgBody": []map[string]any{
			{"MsgType": "TIMCustomElem", "MsgContent": map[string]string{"Desc": "T", "Data": data}}}}
	}
	ok := create("g1", "room", "AVChatRoom")

	call(imbridge.APICreateGroup, with("sdkappid", "1400000002"), ok, imbridge.CodeSigSDKAppID)
	call(imbridge.APICreateGroup, with("identifier", "someone"), ok, imbridge.CodeSigIdentifier)
	call(imbridge.APICreateGroup, with("usersig", ""), ok, imbridge.CodeSigEmpty)
	call(imbridge.APICreateGroup, with("usersig", "not-a-sig"), ok, imbridge.CodeSigInvalid)
	call("group_open_http_svc/get_group_info", caller, ok, imbridge.CodeUnknownAPI)
	call(imbridge.APICreateGroup, caller, create("@TGS#g", "room", "AVChatRoom"), imbridge.CodeInvalidRequest)
	call(imbridge.APICreateGroup, caller, create(strings.Repeat("g", 49), "room", "AVChatRoom"), imbridge.CodeInvalidRequest)
	call(imbridge.APICreateGroup, caller, create("g1", strings.Repeat("n", 31), "AVChatRoom"), imbridge.CodeInvalidRequest)
	call(imbridge.APICreateGroup, caller, create("g1", "room", "Lobby"), imbridge.CodeInvalidRequest)
	if got := call(imbridge.APICreateGroup, caller, ok, 0); got["GroupId"] != "g1" {
		t.Fatalf("create_group answer %v: want the GroupId back", got)
	}
	call(imbridge.APICreateGroup, caller, ok, imbridge.CodeGroupIDInUse)

	call(imbridge.APISendGroupMsg, caller, send("g2", 1, `{"event_id":"e0"}`), imbridge.CodeGroupNotFound)
	call(imbridge.APISendGroupMsg, caller, send("g1", 1, strings.Repeat("x", imbridge.MaxMessageBytes)), imbridge.CodeMessageTooLong)
	if got := call(imbridge.APISendGroupMsg, caller, send("g1", 1, `{"event_id":"e1"}`), 0); got["MsgSeq"] != 1.0 {
		t.Fatalf("first send: %v, want MsgSeq 1", got)
	}
	if got := call(imbridge.APISendGroupMsg, caller, send("g1", 1, `{"event_id":"e1"}`), 0); got["MsgSeq"] != 0.0 {
		t.Fatalf("same Random again: %v, want MsgSeq 0 (a duplicate)", got)
	}
	clk.Advance(5 * time.Minute)
	if got := call(imbridge.APISendGroupMsg, caller, send("g1", 1, `{"event_id":"e1"}`), 0); got["MsgSeq"] != 2.0 {
		t.Fatalf("same Random 5 minutes later: %v, want it shown (MsgSeq 2)", got)
	}
	if ev, _ := emu.Event("e1"); ev.Shown != 2 {
		t.Fatalf("event e1 shown %d times, want 2 (once, and once after the window)", ev.Shown)
	}

	clk.Advance(time.Second)
	for i := range 40 {
		if got := call(imbridge.APISendGroupMsg, caller, send("g1", uint32(100+i), `{}`), 0); got["MsgDropReason"] != nil {
			t.Fatalf("message %d of the second: %v", i+1, got)
		}
	}
	if got := call(imbridge.APISendGroupMsg, caller, send("g1", 200, `{}`), 0); got["MsgDropReason"] != "MsgFreqLimit" {
		t.Fatalf("message 41 of the second: %v, want MsgDropReason MsgFreqLimit", got)
	}
	clk.Advance(time.Second)
	if got := call(imbridge.APISendGroupMsg, caller, send("g1", 200, `{}`), 0); got["MsgDropReason"] != nil {
		t.Fatalf("the dropped message a second later: %v, want it shown", got)
	}
	if st := emu.Stats(); st.Messages != 43 || st.DuplicatesDropped != 1 || st.RateDropped != 1 {
		t.Fatalf("stats %+v: want 43 messages, 1 duplicate, 1 rate drop", st)
	}

	call(imbridge.APIDestroyGroup, caller, map[string]string{"GroupId": "g1"}, 0)
	call(imbridge.APIDestroyGroup, caller, map[string]string{"GroupId": "g1"}, imbridge.CodeGroupNotFound)
	call(imbridge.APISendGroupMsg, caller, send("g1", 300, `{}`), imbridge.CodeGroupNotFound)
}
