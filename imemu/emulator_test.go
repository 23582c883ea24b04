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
	"slices"
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
		{"short proof key", imemu.Config{Apps: []imbridge.Application{good}, ProofKey: []byte("15-bytes-is-few")}, "ProofKey"},
		{"proof key", imemu.Config{Apps: []imbridge.Application{good}, ProofKey: []byte("16-bytes-will-do")}, ""},
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
	if err := c.Call(ctx, imbridge.APIForbidSendMsg, map[string]any{"GroupId": "g1", "Members_Account": []string{"7"}, "MuteTime": 60}, nil); err != nil {
		t.Fatal(err)
	}
	mutes := get("GET", "/_emu/mutes?group_id=g1", "", 200)["mutes"].([]any)
	if len(mutes) != 1 {
		t.Fatalf("mutes %v", mutes)
	}
	keys(mutes[0], "group_id", "account", "mute_time", "set_at_ms", "until_ms", "muted")
	if m := mutes[0].(map[string]any); m["account"] != "7" || m["mute_time"] != 60.0 || m["muted"] != true {
		t.Fatalf("mute %v", m)
	}
	if none := get("GET", "/_emu/mutes?group_id=g2", "", 200)["mutes"].([]any); len(none) != 0 {
		t.Fatalf("mutes of another group: %v", none)
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

// restCaller posts to the emulator at base as the test application's
// admin, with a sig made on clk.
type restCaller struct {
	base   string
	caller url.Values
}

func newRESTCaller(tb testing.TB, base string, clk *testenv.Clock) *restCaller {
	tb.Helper()
	sig, err := imbridge.UserSig(testKey, testAdmin, testSDKAppID, clk.Now().Unix(), 86400)
	if err != nil {
		tb.Fatal(err)
	}
	return &restCaller{base: base, caller: url.Values{"sdkappid": {fmt.Sprint(testSDKAppID)}, "identifier": {testAdmin}, "usersig": {sig}}}
}

// call posts body to api as q and checks the answer's ErrorCode.
func (rc *restCaller) call(tb testing.TB, api string, q url.Values, body any, wantCode int) map[string]any {
	tb.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := http.Post(rc.base+"/v4/"+api+"?"+q.Encode(), "application/json", bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		tb.Fatalf("%s: %v", api, err)
	}
	wantStatus := "OK"
	if wantCode != 0 {
		wantStatus = "FAIL"
	}
	if resp.StatusCode != http.StatusOK || out["ErrorCode"] != float64(wantCode) || out["ActionStatus"] != wantStatus {
		tb.Fatalf("%s: status %d, answer %v; want ErrorCode %d", api, resp.StatusCode, out, wantCode)
	}
	return out
}

// TestRESTContract walks the answers of Tencent's REST contract that the
// bridge relies on: the caller's checks, the group rules, the 12 KB limit,
// the duplicate Random within 5 minutes and the 40 messages/s rule.
func TestRESTContract(t *testing.T) {
	clk := testenv.NewClock(time.Unix(1700000000, 0))
	emu, base := newTestEmulator(t, clk.Now)
	rc := newRESTCaller(t, base, clk)
	caller := rc.caller
	call := func(api string, q url.Values, body any, wantCode int) map[string]any {
		t.Helper()
		return rc.call(t, api, q, body, wantCode)
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

// TestForbidSendMsgContract walks forbid_send_msg as Tencent documents it:
// the request's checks and their codes, a mute recorded per account with
// its end, a lift, a mute for ever, a mute ending on the clock, a muted
// sender refused by send_group_msg (10017), and mutes going with their
// group.
func TestForbidSendMsgContract(t *testing.T) {
	clk := testenv.NewClock(time.Unix(1700000000, 0))
	emu, base := newTestEmulator(t, clk.Now)
	rc := newRESTCaller(t, base, clk)
	forbid := func(groupID string, accounts []string, muteTime int64) map[string]any {
		return map[string]any{"GroupId": groupID, "Members_Account": accounts, "MuteTime": muteTime}
	}
	send := func(from string, random uint32, wantCode int) {
		t.Helper()
		rc.call(t, imbridge.APISendGroupMsg, rc.caller, map[string]any{"GroupId": "g1", "Random": random, "From_Account": from,
			"MsgBody": []map[string]any{{"MsgType": "TIMCustomElem", "MsgContent": map[string]string{"Desc": "T", "Data": "{}"}}}}, wantCode)
	}
	createG1 := map[string]any{"Type": "AVChatRoom", "GroupId": "g1", "Name": "room"}
	rc.call(t, imbridge.APICreateGroup, rc.caller, createG1, 0)
	rc.call(t, imbridge.APICreateGroup, rc.caller, map[string]any{"Type": "Private", "GroupId": "p1", "Name": "work"}, 0)

	many := make([]string, imbridge.MaxMuteAccounts+1)
	for i := range many {
		many[i] = fmt.Sprint(i + 1)
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		want int
	}{
		{"no GroupId", forbid("", []string{"7"}, 60), imbridge.CodeInvalidRequest},
		{"GroupId longer than 48 bytes", forbid(strings.Repeat("g", 49), []string{"7"}, 60), imbridge.CodeInvalidGroupID},
		{"no such group", forbid("g2", []string{"7"}, 60), imbridge.CodeGroupNotFound},
		{"no account", forbid("g1", []string{}, 60), imbridge.CodeInvalidRequest},
		{"501 accounts", forbid("g1", many, 60), imbridge.CodeInvalidRequest},
		{"an empty account", forbid("g1", []string{"7", ""}, 60), imbridge.CodeInvalidRequest},
		{"accounts not a list", map[string]any{"GroupId": "g1", "Members_Account": "7", "MuteTime": 60}, imbridge.CodeInvalidRequest},
		{"no MuteTime", map[string]any{"GroupId": "g1", "Members_Account": []string{"7"}}, imbridge.CodeInvalidRequest},
		{"only the old ShutUpTime", map[string]any{"GroupId": "g1", "Members_Account": []string{"7"}, "ShutUpTime": 60}, imbridge.CodeInvalidRequest},
		{"negative MuteTime", forbid("g1", []string{"7"}, -1), imbridge.CodeInvalidRequest},
		{"MuteTime above 0xFFFFFFFF", forbid("g1", []string{"7"}, imbridge.MaxMuteTime+1), imbridge.CodeInvalidRequest},
		{"MuteTime not whole", map[string]any{"GroupId": "g1", "Members_Account": []string{"7"}, "MuteTime": 1.5}, imbridge.CodeInvalidRequest},
		{"MuteTime a string", map[string]any{"GroupId": "g1", "Members_Account": []string{"7"}, "MuteTime": "60"}, imbridge.CodeInvalidRequest},
		{"a Private group", forbid("p1", []string{"7"}, 60), imbridge.CodeNoPermission},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.call(t, imbridge.APIForbidSendMsg, rc.caller, tc.body, tc.want)
		})
	}
	if m := emu.Mutes(""); len(m) != 0 {
		t.Fatalf("refused calls recorded mutes: %+v", m)
	}

	setAt := clk.Now().UnixMilli()
	rc.call(t, imbridge.APIForbidSendMsg, rc.caller, forbid("g1", []string{"7", "8"}, 90), 0)
	rc.call(t, imbridge.APIForbidSendMsg, rc.caller, forbid("g1", []string{"9"}, imbridge.MaxMuteTime), 0)
	want := []imemu.Mute{
		{GroupID: "g1", Account: "7", MuteTime: 90, SetAtMs: setAt, UntilMs: setAt + 90_000, Muted: true},
		{GroupID: "g1", Account: "8", MuteTime: 90, SetAtMs: setAt, UntilMs: setAt + 90_000, Muted: true},
		{GroupID: "g1", Account: "9", MuteTime: imbridge.MaxMuteTime, SetAtMs: setAt, Muted: true},
	}
	if got := emu.Mutes("g1"); !slices.Equal(got, want) {
		t.Fatalf("mutes %+v, want %+v", got, want)
	}
	send("7", 1, imbridge.CodeSenderMuted)
	send(testAdmin, 2, 0)

	clk.Advance(10 * time.Second)
	rc.call(t, imbridge.APIForbidSendMsg, rc.caller, forbid("g1", []string{"8"}, 0), 0)
	want[1] = imemu.Mute{GroupID: "g1", Account: "8", SetAtMs: setAt + 10_000}
	if got := emu.Mutes("g1"); !slices.Equal(got, want) {
		t.Fatalf("after the lift: mutes %+v, want %+v", got, want)
	}
	send("8", 3, 0)

	clk.Advance(80 * time.Second) // 7's mute ends; 9's lasts
	want[0].Muted = false
	if got := emu.Mutes("g1"); !slices.Equal(got, want) {
		t.Fatalf("at the end: mutes %+v, want %+v", got, want)
	}
	send("7", 4, 0)
	send("9", 5, imbridge.CodeSenderMuted)

	rc.call(t, imbridge.APIDestroyGroup, rc.caller, map[string]string{"GroupId": "g1"}, 0)
	rc.call(t, imbridge.APIForbidSendMsg, rc.caller, forbid("g1", []string{"7"}, 60), imbridge.CodeGroupNotFound)
	rc.call(t, imbridge.APICreateGroup, rc.caller, createG1, 0)
	if got := emu.Mutes(""); len(got) != 0 {
		t.Fatalf("mutes of a destroyed group: %+v", got)
	}
	send("9", 6, 0)
}

// TestFaultCalls: a fault with Calls fails that many matching calls, then
// clears itself; calls to other APIs are not counted.
func TestFaultCalls(t *testing.T) {
	clk := testenv.NewClock(time.Unix(1700000000, 0))
	emu, base := newTestEmulator(t, clk.Now)
	rc := newRESTCaller(t, base, clk)
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 10002, API: imbridge.APISendGroupMsg, Calls: -1}); err == nil {
		t.Fatal("a negative calls was accepted")
	}
	if err := emu.SetFault(imemu.Fault{Mode: "error", ErrorCode: 10002, API: imbridge.APISendGroupMsg, Calls: 3}); err != nil {
		t.Fatal(err)
	}
	rc.call(t, imbridge.APICreateGroup, rc.caller, map[string]any{"Type": "AVChatRoom", "GroupId": "g1", "Name": "room"}, 0)
	send := func(random uint32) map[string]any {
		return map[string]any{"GroupId": "g1", "Random": random, "MsgBody": []map[string]any{
			{"MsgType": "TIMCustomElem", "MsgContent": map[string]string{"Desc": "T", "Data": fmt.Sprintf(`{"event_id":"e%d"}`, random)}}}}
	}
	for i := range 3 {
		rc.call(t, imbridge.APISendGroupMsg, rc.caller, send(uint32(i+1)), 10002)
	}
	rc.call(t, imbridge.APISendGroupMsg, rc.caller, send(4), 0)
}
