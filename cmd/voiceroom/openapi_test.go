package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"voiceroom/authtoken"
	"voiceroom/docs"
	"voiceroom/gateway"
)

// TestOpenAPIMatchesServer keeps docs/openapi.yaml true. It runs `voiceroom
// serve` (its own database and JetStream), then:
//   - compares the routes the server logs at start (gateway.Server.Routes)
//     with the document's operations, both ways;
//   - drives every operation over HTTP, with a success and the typical error
//     answers, validating each request (unless it is meant to break the
//     document) and each response with kin-openapi's openapi3filter;
//   - fails when an answer's status is not one the operation documents, and
//     when a documented status of an operation was never answered.
func TestOpenAPIMatchesServer(t *testing.T) {
	if testing.Short() {
		t.Skip("server test")
	}
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.PlainBodyDecoder)
	openapi3.SchemaErrorDetailsDisabled = true // errors name the field, not the whole schema
	doc := loadOpenAPI(t)

	// An app whose keys are configured, for the platform routes' 409s. The
	// scenario calls as fast as the server answers, with the admin's token
	// above all: a limit the scenario cannot reach (the default's burst of
	// 100 ran out on a quick machine, answering 429).
	p, vars := startServe(t, "VOICEROOM_APP_KEYS=cfgapp:cfg-1:openapi-config-key-0123456789",
		"VOICEROOM_HTTP_RATE_PER_USER=1000", "VOICEROOM_HTTP_RATE_BURST=1000")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	a := &apiDriver{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"]), router: router, seen: map[string]map[int]bool{},
		dsn: vars["VOICEROOM_MYSQL_DSN"]}

	a.skipped = a.compareRoutes(doc, serverRoutes(t, p.logs.String()))
	a.authErrors(doc)
	a.scenario()
	a.activitySettlement(vars["VOICEROOM_MYSQL_DSN"])
	a.checkCoverage(doc)
	checkEmittedEvents(t, vars["VOICEROOM_MYSQL_DSN"])
}

// checkEmittedEvents checks every event the scenario's commands wrote to
// the outbox, as the stream carries it, against docs/asyncapi.yaml: the
// AsyncAPI document stays true to what the code emits, not only to the
// golden examples.
func checkEmittedEvents(t *testing.T, dsn string) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT envelope FROM room_outbox ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	for rows.Next() {
		var env []byte
		if err := rows.Scan(&env); err != nil {
			t.Fatal(err)
		}
		var head struct {
			EventType string `json:"event_type"`
		}
		_ = json.Unmarshal(env, &head)
		seen[head.EventType]++
		if err := docs.CheckEvent(env); err != nil {
			t.Errorf("an emitted event disagrees with docs/asyncapi.yaml: %v\n%s", err, env)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 10 {
		t.Fatalf("the scenario emitted only %v: the check saw too little", seen)
	}
	t.Logf("events checked against asyncapi.yaml, by type: %v", seen)
}

// loadOpenAPI parses and validates the embedded document.
func loadOpenAPI(tb testing.TB) *openapi3.T {
	tb.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		tb.Fatalf("load docs/openapi.yaml: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		tb.Fatalf("docs/openapi.yaml is not valid OpenAPI: %v", err)
	}
	return doc
}

var routeLine = regexp.MustCompile(`msg="http route".* method=(\S+) path=(\S+)`)

// serverRoutes reads the routes serve logs at debug level, in the
// document's notation: "GET /api/v1/rooms/{room_id}".
func serverRoutes(tb testing.TB, logs string) map[string]bool {
	tb.Helper()
	out := map[string]bool{}
	for _, m := range routeLine.FindAllStringSubmatch(logs, -1) {
		path := m[2]
		if strings.Contains(path, "*") {
			continue // static assets under a documented page (/docs/*)
		}
		out[m[1]+" "+fiberParam.ReplaceAllString(path, "{$1}")] = true
	}
	if len(out) == 0 {
		tb.Fatal("serve logged no http routes")
	}
	return out
}

var fiberParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// hidesPending are the documented routes another branch is adding (the
// hides). Until it is merged the server answers them "route not found",
// and only then are they skipped.
var hidesPending = map[string]bool{
	"POST /admin/v1/hides":             true,
	"GET /admin/v1/hides":              true,
	"DELETE /admin/v1/hides/{hide_id}": true,
}

// operations lists the document's operations as "METHOD /path".
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	out := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[method+" "+path] = op
		}
	}
	return out
}

type apiDriver struct {
	t      testing.TB
	base   string
	secret []byte
	router routers.Router
	// seen is the statuses answered per operation ("METHOD /path").
	seen map[string]map[int]bool
	// skipped are the documented operations the server does not serve yet.
	skipped map[string]bool
	// dsn is the server's database, for rows the API cannot write.
	dsn string
}

// untested are documented answers this test cannot provoke, with where
// they are tested instead.
var untested = map[string]string{
	"GET /readyz 503":                                    "draining: TestServeStartsReadyAndShutsDownInOrder",
	"POST /admin/v1/activities 409":                      "100 not ended: activity's TestOpenActivitiesPerAppAreBounded",
	"POST /admin/v1/activities/{activity_id}/cancel 409": "paying or settled: activity's TestStoreOpenAndCancel",
}

// compareRoutes fails for every route the server serves that the document
// lacks and for every documented route the server lacks. It returns the
// documented routes skipped because they are pending (hides).
func (a *apiDriver) compareRoutes(doc *openapi3.T, served map[string]bool) map[string]bool {
	a.t.Helper()
	ops := operations(doc)
	var undocumented, unserved []string
	skipped := map[string]bool{}
	for r := range served {
		if ops[r] == nil {
			undocumented = append(undocumented, r)
		}
	}
	for r := range ops {
		if served[r] {
			continue
		}
		if hidesPending[r] && a.routeNotFound(r) {
			a.t.Logf("SKIP %s: documented (hides) but not served yet: the hides branch adds it", r)
			skipped[r] = true
			continue
		}
		unserved = append(unserved, r)
	}
	sort.Strings(undocumented)
	sort.Strings(unserved)
	for _, r := range undocumented {
		a.t.Errorf("the server serves %s, which docs/openapi.yaml does not document", r)
	}
	for _, r := range unserved {
		a.t.Errorf("docs/openapi.yaml documents %s, which the server does not serve", r)
	}
	return skipped
}

// routeNotFound reports whether the server answers "route not found" to an
// admin's request on route.
func (a *apiDriver) routeNotFound(route string) bool {
	method, path, _ := strings.Cut(route, " ")
	req, _ := http.NewRequest(method, a.base+fillParams(path), nil)
	req.Header.Set("Authorization", "Bearer "+a.token("admin"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	var env gateway.Envelope
	json.NewDecoder(resp.Body).Decode(&env)
	return resp.StatusCode == 404 && env.Message == "route not found"
}

// fillParams puts harmless values in a path's parameters.
func fillParams(path string) string {
	r := strings.NewReplacer("{room_id}", "e2e_00000000-0000-0000-0000-000000000000", "{region_id}", "1", "{user_id}", "1",
		"{country_code}", "SG", "{pin_id}", "1", "{hide_id}", "1", "{webhook_id}", "1", "{app_code}", "e2e", "{key_id}", "k1", "{activity_id}", "1")
	return r.Replace(path)
}

// authErrors calls every secured operation without a token (401), every
// admin operation with a user's token and with a platform operator's (403),
// and every platform operation with an app's admin token (403).
func (a *apiDriver) authErrors(doc *openapi3.T) {
	for route, op := range operations(doc) {
		if a.skipped[route] || (op.Security != nil && len(*op.Security) == 0) {
			continue
		}
		method, path, _ := strings.Cut(route, " ")
		a.do(call{method: method, path: fillParams(path), as: "", breaks: true, want: 401, code: "UNAUTHENTICATED"})
		if strings.HasPrefix(path, "/admin/") {
			a.do(call{method: method, path: fillParams(path), as: "21", breaks: true, want: 403, code: "PERMISSION_DENIED"})
			a.do(call{method: method, path: fillParams(path), as: "platform", breaks: true, want: 403, code: "PERMISSION_DENIED"})
		}
		if strings.HasPrefix(path, "/platform/") {
			a.do(call{method: method, path: fillParams(path), as: "admin", breaks: true, want: 403, code: "PERMISSION_DENIED"})
		}
	}
}

// checkCoverage fails for every operation with a documented status that no
// call answered.
func (a *apiDriver) checkCoverage(doc *openapi3.T) {
	a.t.Helper()
	var gaps []string
	for route, op := range operations(doc) {
		if a.skipped[route] {
			continue
		}
		for status := range op.Responses.Map() {
			n, err := strconv.Atoi(status)
			if err != nil {
				continue // default: the statuses any route may answer (429, 500, 503)
			}
			if where, ok := untested[fmt.Sprintf("%s %d", route, n)]; ok {
				a.t.Logf("%s %d is tested elsewhere: %s", route, n, where)
				continue
			}
			if !a.seen[route][n] {
				gaps = append(gaps, fmt.Sprintf("%s %d", route, n))
			}
		}
	}
	sort.Strings(gaps)
	for _, g := range gaps {
		a.t.Errorf("no call answered the documented %s", g)
	}
}

// call is one request of the scenario.
type call struct {
	method, path string // path may hold a query
	// as is who calls: "" (no token), "admin", "admin:<app>" (another
	// app's admin), "platform" (a platform operator) or a user id of app
	// e2e.
	as     string
	body   string
	header map[string]string
	// breaks marks a request that deliberately breaks the document (a
	// value out of its limits, no token): it is not validated, its answer is.
	breaks bool
	want   int    // the expected HTTP status
	code   string // the expected envelope code, when want is not 200
}

func (a *apiDriver) token(as string) string {
	a.t.Helper()
	if as == "platform" {
		tok, err := authtoken.Key{ID: testPlatformKeyID, Secret: []byte(testPlatformKey)}.IssuePlatform(0, time.Hour, time.Now())
		if err != nil {
			a.t.Fatal(err)
		}
		return tok
	}
	app, user, role := "e2e", int64(0), ""
	switch {
	case as == "admin":
		role = authtoken.RoleAdmin
	case strings.HasPrefix(as, "admin:"):
		app, role = strings.TrimPrefix(as, "admin:"), authtoken.RoleAdmin
	default:
		u, err := strconv.ParseInt(as, 10, 64)
		if err != nil {
			a.t.Fatalf("caller %q", as)
		}
		user = u
	}
	tok, err := authtoken.Issue(a.secret, app, user, role, time.Hour, time.Now())
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

func (a *apiDriver) newRequest(c call) *http.Request {
	a.t.Helper()
	var body io.Reader = http.NoBody
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, a.base+c.path, body)
	if err != nil {
		a.t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.as != "" {
		req.Header.Set("Authorization", "Bearer "+a.token(c.as))
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	return req
}

// do sends c, validates the request and the answer against the document,
// checks the status and code, records the status, and returns the
// envelope's data.
func (a *apiDriver) do(c call) json.RawMessage {
	a.t.Helper()
	ctx := a.t.Context()
	name := c.method + " " + c.path
	req := a.newRequest(c)
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		a.t.Errorf("%s: not in docs/openapi.yaml: %v", name, err)
		return nil
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	if !c.breaks {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			a.t.Errorf("%s: request does not match the document: %v", name, err)
		}
	}
	resp, err := http.DefaultClient.Do(a.newRequest(c))
	if err != nil {
		a.t.Fatalf("%s: %v", name, err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		a.t.Fatalf("%s: read body: %v", name, err)
	}

	key := route.Method + " " + route.Path
	if a.seen[key] == nil {
		a.seen[key] = map[int]bool{}
	}
	a.seen[key][resp.StatusCode] = true
	if route.Operation.Responses.Status(resp.StatusCode) == nil {
		a.t.Errorf("%s: answered %d, which %s does not document: %s", name, resp.StatusCode, key, raw)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	out.SetBodyBytes(raw)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		a.t.Errorf("%s: answer %d does not match the document: %v\n%s", name, resp.StatusCode, err, raw)
	}

	if resp.StatusCode != c.want {
		a.t.Errorf("%s as %q: status %d, want %d: %s", name, c.as, resp.StatusCode, c.want, raw)
		return nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		return nil
	}
	var env struct {
		Code string          `json:"code"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		a.t.Errorf("%s: not JSON: %s", name, raw)
		return nil
	}
	if c.code != "" && env.Code != c.code {
		a.t.Errorf("%s: code %s, want %s: %s", name, env.Code, c.code, raw)
	}
	return env.Data
}

// ok is do for a call that must succeed, decoding the data into out.
func (a *apiDriver) ok(method, path, as, body string, out any) {
	a.t.Helper()
	data := a.do(call{method: method, path: path, as: as, body: body, want: 200})
	if out != nil && data != nil {
		if err := json.Unmarshal(data, out); err != nil {
			a.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// fail is do for a call that must answer want with code; breaks says the
// request is outside the document on purpose.
func (a *apiDriver) fail(method, path, as, body string, want int, code string, breaks bool) {
	a.t.Helper()
	a.do(call{method: method, path: path, as: as, body: body, want: want, code: code, breaks: breaks})
}

// scenario drives every route through success and its typical errors.
func (a *apiDriver) scenario() {
	const (
		bad      = 400
		notFound = 404
		conflict = 409
		denied   = 403
	)

	// Health and the reference itself.
	a.ok("GET", "/healthz", "", "", nil)
	a.ok("GET", "/readyz", "", "", nil)
	a.do(call{method: "GET", path: "/openapi.yaml", want: 200})
	a.docsPage()

	// Regions and countries.
	var region struct {
		RegionID int64 `json:"region_id"`
	}
	a.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"South-East Asia"}`, &region)
	a.fail("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"Again"}`, conflict, "ALREADY_EXISTS", false)
	a.fail("POST", "/admin/v1/regions", "admin", `{"region_code":"9x","name":"Bad"}`, bad, "INVALID_ARGUMENT", true)
	rid := strconv.FormatInt(region.RegionID, 10)
	a.ok("PATCH", "/admin/v1/regions/"+rid, "admin", `{"name":"SE Asia"}`, nil)
	a.fail("PATCH", "/admin/v1/regions/999999", "admin", `{"name":"Nowhere"}`, notFound, "NOT_FOUND", false)
	a.fail("PATCH", "/admin/v1/regions/"+rid, "admin:other", `{"name":"Elsewhere"}`, notFound, "NOT_FOUND", false)
	a.fail("PATCH", "/admin/v1/regions/"+rid, "admin", `{}`, bad, "INVALID_ARGUMENT", true)
	a.ok("GET", "/admin/v1/regions", "admin", "", nil)
	a.ok("POST", "/admin/v1/countries", "admin", `{"country_code":"SG","name":"Singapore","region_id":`+rid+`}`, nil)
	a.fail("POST", "/admin/v1/countries", "admin", `{"country_code":"SG","name":"Singapore"}`, conflict, "ALREADY_EXISTS", false)
	a.fail("POST", "/admin/v1/countries", "admin", `{"country_code":"S1"}`, bad, "INVALID_ARGUMENT", true)
	a.ok("PATCH", "/admin/v1/countries/SG", "admin", `{"name":"Republic of Singapore"}`, nil)
	a.fail("PATCH", "/admin/v1/countries/ZZ", "admin", `{"name":"Nowhere"}`, notFound, "NOT_FOUND", false)
	a.fail("PATCH", "/admin/v1/countries/SG", "admin", `{}`, bad, "INVALID_ARGUMENT", true)

	// Profiles.
	a.fail("GET", "/api/v1/users/me", "21", "", notFound, "NOT_FOUND", false)
	for _, u := range []string{"21", "22", "23", "24"} {
		a.ok("PUT", "/api/v1/users/me", u, `{"display_user_id":"oas_user`+u+`","country":"SG"}`, nil)
	}
	a.ok("GET", "/api/v1/users/me", "21", "", nil)
	a.fail("PUT", "/api/v1/users/me", "25", `{"display_user_id":"OAS_USER21"}`, conflict, "ALREADY_EXISTS", false)
	a.fail("PUT", "/api/v1/users/me", "25", `{"display_user_id":"x"}`, bad, "INVALID_ARGUMENT", true)

	// Operators on users' regions.
	a.ok("POST", "/admin/v1/users/region-rebuild", "admin", "", nil)
	a.ok("GET", "/admin/v1/users/21/region", "admin", "", nil)
	a.fail("GET", "/admin/v1/users/999/region", "admin", "", notFound, "NOT_FOUND", false)
	a.fail("GET", "/admin/v1/users/0/region", "admin", "", bad, "INVALID_ARGUMENT", true)
	a.ok("PUT", "/admin/v1/users/24/region", "admin", `{"region_id":0,"reason":"openapi test"}`, nil)
	a.fail("PUT", "/admin/v1/users/24/region", "admin", `{"reason":"no region"}`, bad, "INVALID_ARGUMENT", true)
	a.fail("PUT", "/admin/v1/users/999/region", "admin", `{"region_id":0,"reason":"nobody"}`, notFound, "NOT_FOUND", false)
	a.ok("DELETE", "/admin/v1/users/24/region", "admin", `{"reason":"release"}`, nil)
	a.fail("DELETE", "/admin/v1/users/999/region", "admin", `{"reason":"nobody"}`, notFound, "NOT_FOUND", false)
	a.fail("DELETE", "/admin/v1/users/0/region", "admin", `{"reason":"nobody"}`, bad, "INVALID_ARGUMENT", true)

	// Gifts and coins.
	a.ok("POST", "/admin/v1/gifts", "admin", `{"gift_id":7,"name":"Rocket","price":100,"heat":40}`, nil)
	a.fail("POST", "/admin/v1/gifts", "admin", `{"gift_id":0,"name":"Nothing","price":1}`, bad, "INVALID_ARGUMENT", true)
	a.ok("POST", "/admin/v1/wallets/23/credit", "admin", `{"amount":1000,"idempotency_key":"oas-1"}`, nil)
	a.ok("POST", "/admin/v1/wallets/23/credit", "admin", `{"amount":1000,"idempotency_key":"oas-1"}`, nil)
	a.fail("POST", "/admin/v1/wallets/23/credit", "admin", `{"amount":5,"idempotency_key":"oas-1"}`, conflict, "ALREADY_EXISTS", false)
	a.fail("POST", "/admin/v1/wallets/23/credit", "admin", `{"amount":0,"idempotency_key":"oas-2"}`, bad, "INVALID_ARGUMENT", true)
	a.ok("GET", "/api/v1/wallet", "23", "", nil)

	board, task, elsewhere := a.insertActivities()
	a.rooms()
	a.activityBoards(board, task, elsewhere)
	a.operations()
	a.webhooks()
	a.activities()
	a.platform()
	a.pk()
}

// rooms drives the room commands, the room list and the operators' room
// routes. Room A is user 21's; room B is user 22's and ends closed, so that
// every command on it answers FAILED_PRECONDITION.
func (a *apiDriver) rooms() {
	const (
		bad, denied, notFound, conflict = 400, 403, 404, 409
		fp                              = "FAILED_PRECONDITION"
		inv                             = "INVALID_ARGUMENT"
	)
	var room struct {
		RoomID string `json:"room_id"`
	}
	key := map[string]string{"Idempotency-Key": "oas-create-a"}
	data := a.do(call{method: "POST", path: "/api/v1/rooms/create", as: "21", body: `{"room_name":"Night owls","seat_count":8}`, header: key, want: 200})
	json.Unmarshal(data, &room)
	a.do(call{method: "POST", path: "/api/v1/rooms/create", as: "21", body: `{"room_name":"Night owls","seat_count":8}`, header: key, want: 200})
	a.fail("POST", "/api/v1/rooms/create", "21", `{"room_name":"Second"}`, conflict, "ALREADY_EXISTS", false)
	a.fail("POST", "/api/v1/rooms/create", "22", `{"room_name":""}`, bad, inv, true)
	a.fail("POST", "/api/v1/rooms/create", "29", `{"room_name":"No profile"}`, conflict, fp, false)
	A := "/api/v1/rooms/" + room.RoomID
	admA := "/admin/v1/rooms/" + room.RoomID
	a.ok("POST", "/api/v1/rooms/create", "22", `{"room_name":"Early birds","room_description":"mornings","mode":"chat"}`, &room)
	B := "/api/v1/rooms/" + room.RoomID
	admB := "/admin/v1/rooms/" + room.RoomID
	nope := "/api/v1/rooms/e2e_00000000-0000-0000-0000-000000000000"
	admNope := "/admin/v1/rooms/e2e_00000000-0000-0000-0000-000000000000"

	a.ok("GET", A, "22", "", nil)
	a.fail("GET", nope, "22", "", notFound, "NOT_FOUND", false)

	for _, u := range []string{"21", "22", "23"} {
		a.ok("POST", A+"/join", u, "", nil)
	}
	a.fail("POST", nope+"/join", "22", "", notFound, "NOT_FOUND", false)
	a.do(call{method: "POST", path: A + "/join", as: "22", header: map[string]string{"Idempotency-Key": "has space"}, breaks: true, want: bad, code: inv})
	a.ok("POST", A+"/heartbeat", "22", "", nil)
	a.fail("POST", A+"/heartbeat", "24", "", conflict, fp, false)
	a.fail("POST", nope+"/heartbeat", "22", "", notFound, "NOT_FOUND", false)

	a.ok("POST", A+"/mic/up", "22", `{"seat_index":3}`, nil)
	a.fail("POST", A+"/mic/up", "23", `{"seat_index":3}`, conflict, fp, false)
	a.fail("POST", A+"/mic/up", "23", `{}`, bad, inv, true)
	a.fail("POST", nope+"/mic/up", "23", `{"seat_index":1}`, notFound, "NOT_FOUND", false)
	a.ok("POST", A+"/mic/change", "22", `{"seat_index":4}`, nil)
	a.fail("POST", A+"/mic/change", "22", `{}`, bad, inv, true)
	a.fail("POST", A+"/mic/change", "23", `{"seat_index":5}`, conflict, fp, false)
	a.fail("POST", nope+"/mic/change", "23", `{"seat_index":5}`, notFound, "NOT_FOUND", false)
	a.ok("POST", A+"/mic/down", "22", "", nil)
	a.fail("POST", A+"/mic/down", "22", "", conflict, fp, false)
	a.fail("POST", nope+"/mic/down", "22", "", notFound, "NOT_FOUND", false)
	a.ok("POST", A+"/mic/lock", "21", `{"seat_index":5,"locked":true}`, nil)
	a.fail("POST", A+"/mic/lock", "23", `{"seat_index":5,"locked":false}`, denied, "PERMISSION_DENIED", false)
	a.fail("POST", A+"/mic/lock", "21", `{"seat_index":5}`, bad, inv, true)
	a.fail("POST", nope+"/mic/lock", "21", `{"seat_index":5,"locked":true}`, notFound, "NOT_FOUND", false)

	a.ok("POST", A+"/gift", "23", `{"gift_id":7,"count":3,"receiver_user_id":22}`, nil)
	a.fail("POST", A+"/gift", "23", `{"gift_id":7,"count":10,"receiver_user_id":22}`, 402, "INSUFFICIENT_BALANCE", false)
	a.fail("POST", A+"/gift", "23", `{"gift_id":0,"count":1,"receiver_user_id":22}`, bad, inv, true)
	a.fail("POST", A+"/gift", "23", `{"gift_id":7,"count":1,"receiver_user_id":24}`, conflict, fp, false)
	a.fail("POST", nope+"/gift", "23", `{"gift_id":7,"count":1,"receiver_user_id":22}`, notFound, "NOT_FOUND", false)
	a.ranks(A, nope)

	a.ok("POST", A+"/password", "21", `{"password":"open sesame"}`, nil)
	a.fail("POST", A+"/password", "23", `{"password":""}`, denied, "PERMISSION_DENIED", false)
	a.fail("POST", A+"/password", "21", `{}`, bad, inv, true)
	a.fail("POST", nope+"/password", "21", `{"password":""}`, notFound, "NOT_FOUND", false)
	a.fail("POST", A+"/join", "24", "", denied, "PERMISSION_DENIED", false)
	a.ok("POST", A+"/join", "24", `{"password":"open sesame"}`, nil)
	a.ok("POST", A+"/password", "21", `{"password":""}`, nil)

	a.ok("POST", A+"/host/transfer", "21", `{"user_id":22}`, nil)
	a.fail("POST", A+"/host/transfer", "23", `{"user_id":23}`, denied, "PERMISSION_DENIED", false)
	a.fail("POST", A+"/host/transfer", "21", `{"user_id":0}`, bad, inv, true)
	a.fail("POST", A+"/host/transfer", "21", `{"user_id":25}`, conflict, fp, false)
	a.fail("POST", nope+"/host/transfer", "21", `{"user_id":22}`, notFound, "NOT_FOUND", false)

	a.ok("POST", A+"/kick", "22", `{"user_id":24,"ban_seconds":600}`, nil)
	a.fail("POST", A+"/join", "24", "", conflict, fp, false)
	a.fail("POST", A+"/kick", "23", `{"user_id":22}`, denied, "PERMISSION_DENIED", false)
	a.fail("POST", A+"/kick", "21", `{"user_id":0}`, bad, inv, true)
	a.fail("POST", A+"/kick", "21", `{"user_id":25}`, conflict, fp, false)
	a.fail("POST", nope+"/kick", "21", `{"user_id":22}`, notFound, "NOT_FOUND", false)

	a.hostsTools(A, nope)

	a.ok("POST", A+"/leave", "23", "", nil)
	a.fail("POST", nope+"/leave", "23", "", notFound, "NOT_FOUND", false)

	// The list: the projection fills it a moment after the events.
	a.ok("GET", "/api/v1/rooms?tab=new&limit=10", "21", "", nil)
	a.ok("GET", "/api/v1/rooms?query=oas_user21", "21", "", nil)
	a.fail("GET", "/api/v1/rooms?tab=cold", "21", "", bad, inv, true)
	a.fail("GET", "/api/v1/rooms?limit=x", "21", "", bad, inv, true)
	a.fail("GET", "/api/v1/rooms", "29", "", notFound, "NOT_FOUND", false)

	// Operators on rooms.
	a.ok("POST", admA+"/region", "admin", `{"visible_region_id":0,"reason":"openapi test"}`, nil)
	a.fail("POST", admA+"/region", "admin", `{"reason":"no region"}`, bad, inv, true)
	a.fail("POST", admNope+"/region", "admin", `{"visible_region_id":0,"reason":"x"}`, notFound, "NOT_FOUND", false)
	a.ok("POST", admA+"/ban", "admin", `{"reason":"spam"}`, nil)
	a.fail("POST", admA+"/ban", "admin", `{}`, bad, inv, true)
	a.fail("POST", A+"/join", "23", "", conflict, fp, false)
	a.fail("POST", admNope+"/ban", "admin", `{"reason":"spam"}`, notFound, "NOT_FOUND", false)
	a.ok("POST", admA+"/restore", "admin", `{"reason":"appeal"}`, nil)
	a.fail("POST", admA+"/restore", "admin", `{}`, bad, inv, true)
	a.fail("POST", admNope+"/restore", "admin", `{"reason":"appeal"}`, notFound, "NOT_FOUND", false)
	a.ok("GET", admA+"/audit?limit=2", "admin", "", nil)
	a.fail("GET", admA+"/audit?limit=0", "admin", "", bad, inv, true)
	a.fail("GET", "/admin/v1/rooms/other_1/audit", "admin", "", notFound, "NOT_FOUND", false)
	a.fail("GET", admA+"/audit", "admin:other", "", notFound, "NOT_FOUND", false) // another app's admin

	// Pins on room A, now in GLOBAL.
	var pin struct {
		PinID int64 `json:"pin_id"`
	}
	expires := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	a.ok("POST", "/admin/v1/pins", "admin", `{"room_id":"`+strings.TrimPrefix(A, "/api/v1/rooms/")+`","visible_region_id":0,"weight":10,"expires_at_ms":`+expires+`}`, &pin)
	a.fail("POST", "/admin/v1/pins", "admin", `{"room_id":"`+strings.TrimPrefix(A, "/api/v1/rooms/")+`","visible_region_id":0,"weight":-1,"expires_at_ms":`+expires+`}`, bad, inv, true)
	a.fail("POST", "/admin/v1/pins", "admin", `{"room_id":"e2e_nope","visible_region_id":0,"expires_at_ms":`+expires+`}`, notFound, "NOT_FOUND", false)
	a.fail("POST", "/admin/v1/pins", "admin", `{"room_id":"`+strings.TrimPrefix(A, "/api/v1/rooms/")+`","visible_region_id":1,"expires_at_ms":`+expires+`}`, conflict, fp, false)
	a.ok("GET", "/admin/v1/pins?visible_region_id=0", "admin", "", nil)
	a.ok("GET", "/admin/v1/pins?visible_region_id=77", "admin", "", nil)
	a.fail("GET", "/admin/v1/pins?visible_region_id=x", "admin", "", bad, inv, true)
	a.ok("DELETE", "/admin/v1/pins/"+strconv.FormatInt(pin.PinID, 10)+"?reason=done", "admin", "", nil)
	a.fail("DELETE", "/admin/v1/pins/999999", "admin", "", notFound, "NOT_FOUND", false)
	a.fail("DELETE", "/admin/v1/pins/x", "admin", "", bad, inv, true)
	a.hides(strings.TrimPrefix(A, "/api/v1/rooms/"))
	a.operatorsRooms(admA)

	// Room B: closed by its owner, then every command is refused.
	a.fail("POST", B+"/close", "21", "", denied, "PERMISSION_DENIED", false)
	a.fail("POST", nope+"/close", "22", "", notFound, "NOT_FOUND", false)
	a.ok("POST", B+"/close", "22", "", nil)
	for _, c := range []struct{ path, body string }{
		{"/close", ""}, {"/leave", ""}, {"/heartbeat", ""}, {"/mic/up", `{"seat_index":1}`}, {"/mic/down", ""},
		{"/mic/change", `{"seat_index":1}`}, {"/mic/lock", `{"seat_index":1,"locked":true}`},
		{"/host/transfer", `{"user_id":21}`}, {"/gift", `{"gift_id":7,"count":1,"receiver_user_id":21}`},
		{"/password", `{"password":""}`}, {"/kick", `{"user_id":21}`}, {"/join", ""},
	} {
		a.fail("POST", B+c.path, "22", c.body, conflict, fp, false)
	}
	a.hostsToolsClosed(B)
	for _, c := range []struct{ path, body string }{
		{"/region", `{"visible_region_id":0,"reason":"closed"}`}, {"/ban", `{"reason":"closed"}`},
		{"/restore", `{"reason":"closed"}`}, {"/close", `{"reason":"closed"}`},
	} {
		a.fail("POST", admB+c.path, "admin", c.body, conflict, fp, false)
	}
	a.ok("POST", admA+"/close", "admin", `{"reason":"end of test"}`, nil)
	a.fail("POST", admA+"/close", "admin", `{"reason":"`+strings.Repeat("x", 300)+`"}`, bad, inv, true)
	a.fail("POST", admNope+"/close", "admin", `{}`, notFound, "NOT_FOUND", false)
}

var assetRef = regexp.MustCompile(`(?:src|href)="([^"]+)"`)

// docsPage checks that /docs and /console answer pages whose scripts and
// styles the server itself serves: no CDN.
func (a *apiDriver) docsPage() {
	a.t.Helper()
	for _, page := range []string{"/docs", "/console"} {
		a.do(call{method: "GET", path: page, want: 200})
		resp, err := http.Get(a.base + page)
		if err != nil {
			a.t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		refs := assetRef.FindAllStringSubmatch(string(body), -1)
		if len(refs) == 0 {
			a.t.Errorf("%s references no scripts or styles:\n%s", page, body)
		}
		for _, m := range refs {
			ref := m[1]
			if !strings.HasPrefix(ref, page+"/") {
				a.t.Errorf("%s loads %s, not from the server itself", page, ref)
				continue
			}
			r, err := http.Get(a.base + ref)
			if err != nil {
				a.t.Fatal(err)
			}
			r.Body.Close()
			if r.StatusCode != 200 {
				a.t.Errorf("%s asset %s: status %d", page, ref, r.StatusCode)
			}
		}
	}
}

// hides drives the hide routes on the active room roomID, visible in
// GLOBAL, once the server serves them.
func (a *apiDriver) hides(roomID string) {
	if a.skipped["POST /admin/v1/hides"] || a.skipped["GET /admin/v1/hides"] || a.skipped["DELETE /admin/v1/hides/{hide_id}"] {
		return
	}
	var hide struct {
		HideID int64 `json:"hide_id"`
	}
	a.ok("POST", "/admin/v1/hides", "admin", `{"room_id":"`+roomID+`","visible_region_id":0,"reason":"openapi test"}`, &hide)
	a.fail("POST", "/admin/v1/hides", "admin", `{"room_id":"`+roomID+`","visible_region_id":0}`, 400, "INVALID_ARGUMENT", true)
	a.fail("POST", "/admin/v1/hides", "admin", `{"room_id":"e2e_nope","visible_region_id":0,"reason":"x"}`, 404, "NOT_FOUND", false)
	a.fail("POST", "/admin/v1/hides", "admin", `{"room_id":"`+roomID+`","visible_region_id":0,"reason":"again"}`, 409, "ALREADY_EXISTS", false)
	a.ok("GET", "/admin/v1/hides?visible_region_id=0", "admin", "", nil)
	a.ok("GET", "/admin/v1/hides?visible_region_id=77", "admin", "", nil)
	a.fail("GET", "/admin/v1/hides?visible_region_id=x", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.ok("DELETE", "/admin/v1/hides/"+strconv.FormatInt(hide.HideID, 10), "admin", `{"reason":"openapi test done"}`, nil)
	a.fail("DELETE", "/admin/v1/hides/999999", "admin", "", 404, "NOT_FOUND", false)
	a.fail("DELETE", "/admin/v1/hides/x", "admin", "", 400, "INVALID_ARGUMENT", true)
}

// operatorsRooms reads the active room at admin path room, and the
// region lists, as an operator.
func (a *apiDriver) operatorsRooms(room string) {
	a.ok("GET", room, "admin", "", nil)
	a.fail("GET", "/admin/v1/rooms/e2e_nope", "admin", "", 404, "NOT_FOUND", false)
	a.fail("GET", room, "admin:other", "", 404, "NOT_FOUND", false) // another app's admin
	a.ok("GET", "/admin/v1/rooms?visible_region_id=0&tab=new&limit=5", "admin", "", nil)
	a.ok("GET", "/admin/v1/rooms?visible_region_id=77&query=x", "admin", "", nil)
	a.fail("GET", "/admin/v1/rooms?visible_region_id=x", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", "/admin/v1/rooms?tab=cold", "admin", "", 400, "INVALID_ARGUMENT", true)
}

// operations drives the operators' outbox, sinks, dead-letter and IM
// routes.
func (a *apiDriver) operations() {
	a.ok("GET", "/admin/v1/outbox", "admin", "", nil)
	a.ok("GET", "/admin/v1/sinks", "admin", "", nil)
	a.ok("GET", "/admin/v1/dlq?sink=imbridge&limit=10", "admin", "", nil)
	a.ok("GET", "/admin/v1/dlq?sink=roomranks", "admin", "", nil)
	a.fail("GET", "/admin/v1/dlq?sink=nope", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.ok("POST", "/admin/v1/dlq/replay", "admin", `{"sink":"listprojector"}`, nil)
	a.ok("POST", "/admin/v1/dlq/replay", "admin", `{"sink":"imbridge","seqs":[1,2]}`, nil)
	a.fail("POST", "/admin/v1/dlq/replay", "admin", `{"sink":"nope"}`, 400, "INVALID_ARGUMENT", true)
	a.do(call{method: "POST", path: "/im/callback?SdkAppid=1400000000&CallbackCommand=Group.CallbackBeforeApplyJoinGroup&Sign=x&RequestTime=1",
		body: `{"CallbackCommand":"Group.CallbackBeforeApplyJoinGroup","GroupId":"g","Requestor_Account":"21"}`, want: 200})
}

// ranks reads room's ranks after user 23's gift of 300 coins to user 22
// (the caller's place, the receiver's side, the default limit) and the
// errors: bad parameters and a room that does not exist.
func (a *apiDriver) ranks(room, nope string) {
	a.t.Helper()
	var rank struct {
		Items []struct {
			UserID int64 `json:"user_id"`
			Value  int64 `json:"value"`
			Rank   int   `json:"rank"`
		} `json:"items"`
		Me *struct {
			Rank  int   `json:"rank"`
			Value int64 `json:"value"`
		} `json:"me"`
		TimeZone string `json:"time_zone"`
	}
	a.ok("GET", room+"/ranks?by=sender&period=week&limit=10", "23", "", &rank)
	if len(rank.Items) != 1 || rank.Items[0].UserID != 23 || rank.Items[0].Value != 300 || rank.Me == nil || rank.Me.Rank != 1 || rank.TimeZone != "UTC" {
		a.t.Errorf("sender week rank after a gift of 300: %+v", rank)
	}
	a.ok("GET", room+"/ranks?by=receiver&period=day", "22", "", &rank)
	if len(rank.Items) != 1 || rank.Items[0].UserID != 22 || rank.Me == nil || rank.Me.Value != 300 {
		a.t.Errorf("receiver day rank after a gift of 300: %+v", rank)
	}
	a.ok("GET", room+"/ranks?by=sender&period=day", "21", "", &rank)
	if rank.Me != nil {
		a.t.Errorf("user 21 sent nothing, yet has a place: %+v", rank.Me)
	}
	for _, q := range []string{"by=both&period=day", "by=sender&period=month", "by=sender&period=day&limit=0",
		"by=sender&period=day&limit=101", "period=day"} {
		a.fail("GET", room+"/ranks?"+q, "23", "", 400, "INVALID_ARGUMENT", true)
	}
	a.fail("GET", nope+"/ranks?by=sender&period=day", "23", "", 404, "NOT_FOUND", false)
}

// activitySettlement drives the operators' settlement routes on an
// activity of app e2e written straight into MySQL (dsn), as the
// definitions would: running, with one band and nobody scored.
func (a *apiDriver) activitySettlement(dsn string) {
	a.t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		a.t.Fatal(err)
	}
	defer db.Close()
	now := time.Now().UnixMilli()
	res, err := db.Exec(`INSERT INTO activities (app_code, name, kind, metric, starts_at_ms, ends_at_ms, rewards, created_at_ms, updated_at_ms)
		VALUES ('e2e', 'openapi', 'leaderboard', 'gift_value_sent', ?, ?, '[{"from_rank":1,"to_rank":1,"coins":10}]', ?, ?)`,
		now-60_000, now+3_600_000, now, now)
	if err != nil {
		a.t.Fatal(err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		a.t.Fatal(err)
	}
	act := "/admin/v1/activities/" + strconv.FormatInt(id, 10)
	a.ok("GET", act+"/payouts", "admin", "", nil)
	a.ok("GET", act+"/payouts?limit=5&cursor=rank.0.0", "admin", "", nil)
	a.fail("GET", act+"/payouts?limit=201", "admin", "", 400, "INVALID_ARGUMENT", true)
	a.fail("GET", act+"/payouts?cursor=nope", "admin", "", 400, "INVALID_ARGUMENT", false)
	a.fail("GET", act+"/payouts", "admin:other", "", 404, "NOT_FOUND", false)
	a.fail("POST", act+"/settlement/rerun", "admin", "", 409, "FAILED_PRECONDITION", false) // still open
	a.ok("POST", act+"/settle", "admin", "", nil)
	a.ok("POST", act+"/settle", "admin", "", nil) // ended already: as it is
	if _, err := db.Exec(`UPDATE activities SET settle_state = 'paying' WHERE activity_id = ?`, id); err != nil {
		a.t.Fatal(err)
	}
	a.ok("POST", act+"/settlement/rerun", "admin", "", nil)
	if _, err := db.Exec(`UPDATE activities SET settle_state = 'cancelled', status = 'cancelled' WHERE activity_id = ?`, id); err != nil {
		a.t.Fatal(err)
	}
	a.fail("POST", act+"/settle", "admin", "", 409, "FAILED_PRECONDITION", false)
	for _, p := range []string{"/settle", "/settlement/rerun"} {
		a.fail("POST", "/admin/v1/activities/999999"+p, "admin", "", 404, "NOT_FOUND", false)
		a.fail("POST", "/admin/v1/activities/x"+p, "admin", "", 400, "INVALID_ARGUMENT", true)
	}
	a.fail("GET", "/admin/v1/activities/0/payouts", "admin", "", 400, "INVALID_ARGUMENT", true)
}
