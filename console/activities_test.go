package console

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// stubAPI answers the console's calls with canned envelopes by "METHOD
// path" (the query left out), and records each call and its JSON body. A
// call it has no answer for fails the test.
type stubAPI struct {
	t       *testing.T
	mu      sync.Mutex
	answers map[string]stubAnswer
	calls   []string
	bodies  map[string]map[string]any
}

type stubAnswer struct {
	status  int
	code    string
	message string
	data    any
}

func newStubAPI(t *testing.T) *stubAPI {
	return &stubAPI{t: t, answers: map[string]stubAnswer{}, bodies: map[string]map[string]any{}}
}

func (s *stubAPI) on(route string, data any) {
	s.answers[route] = stubAnswer{status: 200, code: "OK", data: data}
}

func (s *stubAPI) fail(route string, status int, code, message string) {
	s.answers[route] = stubAnswer{status: status, code: code, message: message}
}

func (s *stubAPI) RoundTrip(r *http.Request) (*http.Response, error) {
	route := r.Method + " " + r.URL.Path
	s.mu.Lock()
	s.calls = append(s.calls, route+"?"+r.URL.RawQuery)
	if r.Body != nil {
		raw, _ := io.ReadAll(r.Body)
		if len(raw) > 0 {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				s.t.Errorf("%s: body %s is not a JSON object", route, raw)
			}
			s.bodies[route] = m
		}
	}
	a, ok := s.answers[route]
	s.mu.Unlock()
	if !ok {
		s.t.Errorf("unexpected call %s", route)
		a = stubAnswer{status: 404, code: "NOT_FOUND", message: "route not found"}
	}
	env, _ := json.Marshal(map[string]any{"code": a.code, "message": a.message, "request_id": "req_1", "data": a.data})
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(string(env))), Request: r}, nil
}

func (s *stubAPI) called(prefix string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// The admin token of app demo (claims {"app_code":"demo","sub":"7"}).
const demoToken = "x.eyJhcHBfY29kZSI6ImRlbW8iLCJzdWIiOiI3In0.y"

func newStubConsole(t *testing.T, api *stubAPI) *Console {
	t.Helper()
	now := func() time.Time { return time.Date(2026, 12, 4, 16, 20, 0, 0, time.UTC) }
	c, err := New(api, Config{Key: []byte("console-test-key-0123")}, slog.New(slog.DiscardHandler), now)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func asAdmin(c *Console, method, target string, form url.Values) (int, string) {
	body := ""
	if form != nil {
		body = form.Encode()
	}
	w := serve(c, method, target, body, "X-Console", "1", "Authorization", "Bearer "+demoToken)
	return w.Code, w.Body.String()
}

var stubRegions = map[string]any{"regions": []any{map[string]any{"region_id": 3, "region_code": "SEA", "name": "Southeast Asia", "status": "enabled"}}}

// TestActivitiesListAndForm: the list shows the app's activities (escaped,
// paged by the API's cursor) and the create form offers the regions and
// defaults to a window starting at the next whole hour.
func TestActivitiesListAndForm(t *testing.T) {
	api := newStubAPI(t)
	api.on("GET /admin/v1/regions", stubRegions)
	api.on("GET /admin/v1/activities", map[string]any{"next_cursor": "42", "items": []any{
		map[string]any{"activity_id": 41, "name": "<b>Top</b> senders", "kind": "leaderboard", "metric": "gift_value_sent",
			"starts_at_ms": 1796400000000, "ends_at_ms": 1796500000000, "status": "running", "created_by": "admin:7"}}})
	c := newStubConsole(t, api)
	status, body := asAdmin(c, "GET", "/console/activities", nil)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	for _, want := range []string{`<tr data-activity="41">`, `&lt;b&gt;Top&lt;/b&gt; senders`, `href="/console/activities?cursor=42"`,
		`<option value="3">SEA · Southeast Asia</option>`, `name="starts_at_ms" value="2026-12-04T17:00"`, `name="ends_at_ms" value="2026-12-11T17:00"`,
		`aria-current="page">Activities</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	if strings.Contains(body, "<b>Top</b>") {
		t.Error("an activity's name is not escaped")
	}
	if !api.called("GET /admin/v1/activities?limit=20") {
		t.Errorf("calls %v", api.calls)
	}
	asAdmin(c, "GET", "/console/activities?cursor=42", nil)
	if !api.called("GET /admin/v1/activities?cursor=42&limit=20") {
		t.Errorf("the cursor is not passed on: %v", api.calls)
	}
}

// TestActivityCreateSendsTheAPIsJSON: the form becomes the API's JSON, a
// leaderboard's bands (empty rows left out, no task fields) or a task's
// fields (no bands), times as UTC ms.
func TestActivityCreateSendsTheAPIsJSON(t *testing.T) {
	api := newStubAPI(t)
	api.on("GET /admin/v1/regions", stubRegions)
	api.on("GET /admin/v1/activities", map[string]any{"items": []any{}, "next_cursor": ""})
	api.on("POST /admin/v1/activities", map[string]any{"activity_id": 9, "name": "Weekend", "status": "scheduled"})
	c := newStubConsole(t, api)
	form := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities"}, "name": {" Weekend "}, "kind": {"leaderboard"},
		"metric": {"gift_value_sent"}, "starts_at_ms": {"2026-12-05T00:00"}, "ends_at_ms": {"2026-12-07T00:00:00"},
		"gift_ids": {"90001, 90002"}, "region_ids": {"3"}, "band_from": {"1", "2", "", "", ""}, "band_to": {"1", "10", "", "", ""},
		"band_coins": {"5000", "500", "", "", ""}, "target": {"5"}, "period": {"day"}, "reward_coins": {"10"}}
	status, body := asAdmin(c, "POST", "/console/activities", form)
	if status != 200 || !strings.Contains(body, "Activity 9 (Weekend) created: scheduled.") {
		t.Fatalf("%d %s", status, body)
	}
	got, _ := json.Marshal(api.bodies["POST /admin/v1/activities"])
	want := `{"ends_at_ms":1796601600000,"gift_ids":[90001,90002],"kind":"leaderboard","metric":"gift_value_sent","name":"Weekend",` +
		`"region_ids":[3],"rewards":[{"coins":5000,"from_rank":1,"to_rank":1},{"coins":500,"from_rank":2,"to_rank":10}],"starts_at_ms":1796428800000}`
	if string(got) != want {
		t.Fatalf("sent %s\nwant %s", got, want)
	}

	form.Set("kind", "task")
	form.Set("metric", "gift_count")
	form.Del("gift_ids")
	form.Del("region_ids")
	if status, body := asAdmin(c, "POST", "/console/activities", form); status != 200 || !strings.Contains(body, "created") {
		t.Fatalf("%d %s", status, body)
	}
	got, _ = json.Marshal(api.bodies["POST /admin/v1/activities"])
	want = `{"ends_at_ms":1796601600000,"kind":"task","metric":"gift_count","name":"Weekend","period":"day","reward_coins":10,` +
		`"starts_at_ms":1796428800000,"target":5}`
	if string(got) != want {
		t.Fatalf("sent %s\nwant %s", got, want)
	}
}

// TestActivityCreateShowsTheAPIsRefusal: the API's 400 is shown next to
// the form (escaped), which keeps what was entered; a value that is not a
// number is refused naming the API's field without a call.
func TestActivityCreateShowsTheAPIsRefusal(t *testing.T) {
	api := newStubAPI(t)
	api.on("GET /admin/v1/regions", stubRegions)
	api.on("GET /admin/v1/activities", map[string]any{"items": []any{}, "next_cursor": ""})
	api.fail("POST /admin/v1/activities", 400, "INVALID_ARGUMENT", "rewards[0].to_rank: at most 1000 ranks are rewarded <x>")
	c := newStubConsole(t, api)
	form := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities"}, "name": {`"><script>alert(1)</script>`},
		"kind": {"leaderboard"}, "metric": {"gift_count"}, "starts_at_ms": {"2026-12-05T00:00"}, "ends_at_ms": {"2026-12-06T00:00"},
		"region_ids": {"3"}, "band_from": {"1"}, "band_to": {"2000"}, "band_coins": {"1"}}
	status, body := asAdmin(c, "POST", "/console/activities", form)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	at := strings.Index(body, `<section id="create">`)
	if at < 0 {
		t.Fatalf("no create form:\n%s", body)
	}
	create := body[at:]
	for _, want := range []string{`rewards[0].to_rank: at most 1000 ranks are rewarded &lt;x&gt; (INVALID_ARGUMENT, request req_1)`,
		`value="&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`, `value="2000"`, `<option value="3" selected>`,
		`name="ends_at_ms" value="2026-12-06T00:00"`} {
		if !strings.Contains(create, want) {
			t.Errorf("the form lacks %s:\n%s", want, create)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Fatal("the entered name is not escaped")
	}

	calls := len(api.calls)
	for field, bad := range map[string]url.Values{
		"starts_at_ms":       {"starts_at_ms": {"tomorrow"}},
		"gift_ids":           {"gift_ids": {"1, rose"}},
		"rewards[0].coins":   {"band_from": {"1"}, "band_to": {"1"}, "band_coins": {"1e3"}},
		"rewards[1].to_rank": {"band_from": {"1", "2"}, "band_to": {"1", "x"}, "band_coins": {"1", "1"}},
	} {
		f := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities"}, "name": {"n"}, "kind": {"leaderboard"}}
		for k, v := range bad {
			f[k] = v
		}
		_, body := asAdmin(c, "POST", "/console/activities", f)
		if !strings.Contains(body, field+": ") {
			t.Errorf("%v: no refusal naming %s:\n%s", bad, field, body)
		}
	}
	f := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities"}, "kind": {"task"}, "target": {"five"}}
	if _, body := asAdmin(c, "POST", "/console/activities", f); !strings.Contains(body, "target: must be a whole number") {
		t.Errorf("a task's target that is no number:\n%s", body)
	}
	for _, call := range api.calls[calls:] {
		if strings.HasPrefix(call, "POST") {
			t.Fatalf("a form that is not numbers reached the API: %s", call)
		}
	}
	big := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities"}, "name": {strings.Repeat("x", maxFormBytes)}}
	if status, _ := asAdmin(c, "POST", "/console/activities", big); status != http.StatusBadRequest {
		t.Fatalf("a form over %d bytes: %d, want 400", maxFormBytes, status)
	}
}

// TestActivityPage: one activity's facts, settlement state machine,
// payout counts and page, its board and a task's completions; the actions
// fitting its state, each confirmed before it calls the API.
func TestActivityPage(t *testing.T) {
	api := newStubAPI(t)
	api.on("GET /admin/v1/activities/9", map[string]any{"activity_id": 9, "name": "Daily <gifts>", "kind": "task", "metric": "gift_count",
		"starts_at_ms": 1796400000000, "ends_at_ms": 1796500000000, "target": 5, "period": "day", "reward_coins": 10,
		"status": "settling", "created_by": "admin:7", "created_at_ms": 1796300000000})
	api.on("GET /admin/v1/activities/9/board", map[string]any{"activity_id": 9, "kind": "task", "metric": "gift_count",
		"period_start_ms": 1796400000000, "period_end_ms": 1796486400000, "me": nil, "next_cursor": "", "prev_cursor": "",
		"items": []any{map[string]any{"rank": 1, "user_id": 1001, "score": 7}, map[string]any{"rank": 2, "user_id": 1002, "score": 5}}})
	api.on("GET /admin/v1/activities/9/completions", map[string]any{"activity_id": 9, "metric": "gift_count", "period": "day",
		"target": 5, "reward_coins": 10, "periods": []any{map[string]any{"period_start_ms": 1796400000000, "period_end_ms": 1796486400000,
			"participants": 3, "reached": 2, "paid": 1, "coins_paid": 10}}})
	api.on("GET /admin/v1/activities/9/payouts", map[string]any{"next_cursor": "abc",
		"settlement": map[string]any{"activity_id": 9, "settle_state": "paying", "status": "settling", "owner": "node-1",
			"lease_until_ms": 1796500030000, "payouts": 2, "paid": 1, "unpaid": 1, "coins_owed": 20, "coins_paid": 10, "settled_at_ms": 0},
		"payouts": []any{map[string]any{"reason": "task", "period_start_ms": 1796400000000, "user_id": 1001, "subject": "1001", "rank": 0,
			"score": 7, "coins": 10, "entry_key": "activity:9:task:1796400000000:1001", "paid_at_ms": 1796400100000}}})
	c := newStubConsole(t, api)
	status, body := asAdmin(c, "GET", "/console/activities/9", nil)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	for _, want := range []string{"Daily &lt;gifts&gt;", `<li class="done">open</li>`, `<li class="done">frozen</li>`,
		`<li class=" current" aria-current="step">paying</li>`, `<span data-paid>1</span> paid, <span data-unpaid>1</span> unpaid, of 2`,
		`<td class="num">1</td><td>1001</td><td class="num">7</td>`, `<td class="num">3</td><td class="num">2</td><td class="num">1</td><td class="num">10</td>`,
		"activity:9:task:1796400000000:1001", `href="/console/activities/9?cursor=abc"`, `action="/console/activities/9/rerun"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s", want)
		}
	}
	// paying: neither cancel (the API refuses once paying) nor settle now.
	for _, not := range []string{`action="/console/activities/9/cancel"`, `action="/console/activities/9/settle"`} {
		if strings.Contains(body, not) {
			t.Errorf("a paying settlement offers %s", not)
		}
	}
	if !api.called("GET /admin/v1/activities/9/board?limit=20") {
		t.Errorf("the board is not the top 20: %v", api.calls)
	}
	// A period of the completions links to its board.
	if !strings.Contains(body, `href="/console/activities/9?period=1796400000000"`) {
		t.Error("the completions do not link to each period's board")
	}
	if _, body = asAdmin(c, "GET", "/console/activities/9?period=1796400000000", nil); !strings.Contains(body, "The period, ") ||
		!api.called("GET /admin/v1/activities/9/board?limit=20&period_start_ms=1796400000000") {
		t.Errorf("a past period's board: %v\n%s", api.calls, body)
	}

	// Each action asks first, then calls the API and says what it did.
	api.on("POST /admin/v1/activities/9/settlement/rerun", map[string]any{"activity_id": 9})
	form := url.Values{"csrf": {c.csrf(demoToken)}, "back": {"/console/activities/9"}}
	_, body = asAdmin(c, "POST", "/console/activities/9/rerun", form)
	if !strings.Contains(body, "Re-run the settlement of activity 9?") || api.called("POST") {
		t.Fatalf("no confirmation first:\n%s", body)
	}
	form.Set("confirm", "yes")
	if _, body = asAdmin(c, "POST", "/console/activities/9/rerun", form); !strings.Contains(body, "Activity 9 settlement re-run") {
		t.Fatalf("after the re-run:\n%s", body)
	}
	// The API's refusal is shown on the activity's page.
	api.fail("POST /admin/v1/activities/9/cancel", 409, "FAILED_PRECONDITION", "activity 9 is paying: it cannot be cancelled")
	_, body = asAdmin(c, "POST", "/console/activities/9/cancel", form)
	if !strings.Contains(body, `class="error"`) || !strings.Contains(body, "activity 9 is paying: it cannot be cancelled") {
		t.Fatalf("the refusal is not shown:\n%s", body)
	}
	if _, body = asAdmin(c, "POST", "/console/activities/9/delete", form); !strings.Contains(body, "action: must be cancel, settle or rerun") {
		t.Fatalf("an unknown action:\n%s", body)
	}
}

// TestActivityPageShowsEachFailure: a board that cannot be read is an
// error on the page, which still shows the settlement; an activity the
// API does not find is its message; a running leaderboard offers cancel
// and settle now.
func TestActivityPageShowsEachFailure(t *testing.T) {
	api := newStubAPI(t)
	api.on("GET /admin/v1/activities/5", map[string]any{"activity_id": 5, "name": "Top", "kind": "leaderboard", "metric": "gift_value_sent",
		"status": "running", "rewards": []any{map[string]any{"from_rank": 1, "to_rank": 3, "coins": 100}}})
	api.fail("GET /admin/v1/activities/5/board", 503, "UNAVAILABLE", "boards unavailable, try again")
	api.on("GET /admin/v1/activities/5/payouts", map[string]any{"next_cursor": "", "payouts": []any{},
		"settlement": map[string]any{"settle_state": "open", "status": "running", "payouts": 0, "paid": 0, "unpaid": 0}})
	api.fail("GET /admin/v1/activities/6", 404, "NOT_FOUND", "activity not found")
	c := newStubConsole(t, api)
	_, body := asAdmin(c, "GET", "/console/activities/5", nil)
	for _, want := range []string{"boards unavailable, try again (UNAVAILABLE, request req_1)", `<li class=" current" aria-current="step">open</li>`,
		"ranks 1–3: 100 coins each", `action="/console/activities/5/cancel"`, `action="/console/activities/5/settle"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, `id="completions"`) || strings.Contains(body, `/rerun"`) {
		t.Error("a running leaderboard shows completions or a re-run")
	}
	if _, body := asAdmin(c, "GET", "/console/activities/6", nil); !strings.Contains(body, "activity not found") {
		t.Errorf("an unknown activity:\n%s", body)
	}
	if _, body := asAdmin(c, "GET", "/console/activities/x", nil); !strings.Contains(body, "activity_id: must be a positive number") {
		t.Errorf("a path that is no id:\n%s", body)
	}
}

// TestActivityCatchupIncomplete: a read back that lost events to the
// stream's retention (catchup.incomplete, GET /admin/v1/activities/{id})
// is a warning on the activity's page naming the lost sequences, and a
// tag in the list; an activity whose read back lost nothing shows
// neither.
func TestActivityCatchupIncomplete(t *testing.T) {
	api := newStubAPI(t)
	lost := map[string]any{"state": "joined", "seq": 5000, "live_from_seq": 4900, "incomplete": true, "lost_from_seq": 101, "lost_to_seq": 152}
	whole := map[string]any{"state": "joined", "seq": 5000, "live_from_seq": 4900, "incomplete": false}
	api.on("GET /admin/v1/regions", stubRegions)
	api.on("GET /admin/v1/activities", map[string]any{"next_cursor": "", "items": []any{
		map[string]any{"activity_id": 7, "name": "Lost some", "kind": "leaderboard", "metric": "gift_value_sent", "status": "running", "catchup": lost},
		map[string]any{"activity_id": 8, "name": "Whole", "kind": "leaderboard", "metric": "gift_value_sent", "status": "running", "catchup": whole}}})
	for id, catchup := range map[string]any{"7": lost, "8": whole} {
		base := "GET /admin/v1/activities/" + id
		api.on(base, map[string]any{"activity_id": id, "name": "A", "kind": "leaderboard", "metric": "gift_value_sent",
			"status": "running", "catchup": catchup})
		api.on(base+"/board", map[string]any{"metric": "gift_value_sent", "items": []any{}, "period_start_ms": 1796400000000, "period_end_ms": 1796500000000})
		api.on(base+"/payouts", map[string]any{"next_cursor": "", "payouts": []any{},
			"settlement": map[string]any{"settle_state": "open", "status": "running", "payouts": 0, "paid": 0, "unpaid": 0}})
	}
	c := newStubConsole(t, api)

	_, body := asAdmin(c, "GET", "/console/activities", nil)
	row := func(id string) string {
		at := strings.Index(body, `<tr data-activity="`+id+`">`)
		if at < 0 {
			t.Fatalf("no row of activity %s:\n%s", id, body)
		}
		end := strings.Index(body[at:], "</tr>")
		return body[at : at+end]
	}
	if r := row("7"); !strings.Contains(r, `<span class="tag incomplete"`) || !strings.Contains(r, "sequences 101–152") {
		t.Errorf("the list does not mark activity 7's scores incomplete:\n%s", r)
	}
	if r := row("8"); strings.Contains(r, "incomplete") {
		t.Errorf("the list marks activity 8 incomplete:\n%s", r)
	}

	_, body = asAdmin(c, "GET", "/console/activities/7", nil)
	for _, want := range []string{`<div class="warning" role="alert" id="catchup-incomplete">`, "Scores incomplete",
		`<b data-lost-from>101</b> to <b data-lost-to>152</b>`, "each score is a lower bound", "<dt>Read back</dt>"} {
		if !strings.Contains(body, want) {
			t.Errorf("activity 7's page lacks %s:\n%s", want, body)
		}
	}
	// The warning comes before the board: what it says is about the scores.
	if w, b := strings.Index(body, `id="catchup-incomplete"`), strings.Index(body, `id="board"`); w < 0 || b < 0 || w > b {
		t.Errorf("the warning (at %d) is not above the board (at %d)", w, b)
	}
	_, body = asAdmin(c, "GET", "/console/activities/8", nil)
	if strings.Contains(body, "catchup-incomplete") || strings.Contains(body, "Scores incomplete") {
		t.Errorf("activity 8's page warns of lost events:\n%s", body)
	}
}
