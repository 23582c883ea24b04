package gateway

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
	"voiceroom/regions"
)

// regionEnv is a gateway with the region routes on a database of the test's
// own. The service's clock is frozen, so a cached lookup never expires in
// these tests: any fresh value they see comes from an invalidation.
type regionEnv struct {
	tb  testing.TB
	srv *Server
	svc *regions.Service
	db  *sql.DB
}

func newRegionEnv(tb testing.TB) *regionEnv {
	tb.Helper()
	db := testenv.NewDB(tb)
	frozen := time.UnixMilli(1_800_000_000_000)
	svc, err := regions.New(context.Background(), db, testenv.Logger(tb), nil, regions.Config{Now: func() time.Time { return frozen }})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	reg := prometheus.NewRegistry()
	srv, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1e6, RateBurst: 1e6},
		testenv.Logger(tb), reg, reg, nil, RegionRoutes(svc))
	if err != nil {
		tb.Fatal(err)
	}
	return &regionEnv{tb: tb, srv: srv, svc: svc, db: db}
}

func (e *regionEnv) user(app string, id int64) string {
	return mustToken(e.tb, app, id, "", time.Hour)
}

func (e *regionEnv) admin(app string) string {
	return mustToken(e.tb, app, 7, authtoken.RoleAdmin, time.Hour)
}

// call makes a request and returns the status and envelope.
func (e *regionEnv) call(method, path, token, body string) (int, Envelope) {
	e.tb.Helper()
	status, env, _ := do(e.tb, e.srv, method, path, token, body)
	return status, env
}

// must makes a request that must succeed and decodes its data into out.
func (e *regionEnv) must(method, path, token, body string, out any) {
	e.tb.Helper()
	status, env := e.call(method, path, token, body)
	if status != 200 || env.Code != "OK" {
		e.tb.Fatalf("%s %s %s: %d %s %q", method, path, body, status, env.Code, env.Message)
	}
	if out != nil {
		raw, err := json.Marshal(env.Data)
		if err != nil {
			e.tb.Fatalf("%s %s: encode data: %v", method, path, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			e.tb.Fatalf("%s %s: data %s: %v", method, path, raw, err)
		}
	}
}

func (e *regionEnv) putMe(app string, user int64, body string) regions.Profile {
	e.tb.Helper()
	var p regions.Profile
	e.must("PUT", "/api/v1/users/me", e.user(app, user), body, &p)
	return p
}

func (e *regionEnv) rebuild(app string) regions.RebuildResult {
	e.tb.Helper()
	var res regions.RebuildResult
	e.must("POST", "/admin/v1/users/region-rebuild", e.admin(app), "", &res)
	return res
}

// regionFixture is an app set up through the admin routes: SEA (SG, MY),
// MENA (SA), US with no region and AQ disabled.
type regionFixture struct{ sea, mena int64 }

func (e *regionEnv) fixture(app string) regionFixture {
	e.tb.Helper()
	admin := e.admin(app)
	var sea, mena regions.Region
	e.must("POST", "/admin/v1/regions", admin, `{"region_code":"SEA","name":"Southeast Asia"}`, &sea)
	e.must("POST", "/admin/v1/regions", admin, `{"region_code":"mena","name":"Middle East and North Africa"}`, &mena)
	if sea.ID <= 0 || mena.Code != "MENA" || sea.Status != regions.StatusActive {
		e.tb.Fatalf("regions %+v %+v", sea, mena)
	}
	for _, c := range []struct {
		code   string
		region int64
	}{{"SG", sea.ID}, {"MY", sea.ID}, {"SA", mena.ID}, {"US", 0}, {"AQ", 0}} {
		e.must("POST", "/admin/v1/countries", admin, fmt.Sprintf(`{"country_code":%q,"region_id":%d}`, c.code, c.region), nil)
	}
	e.must("PATCH", "/admin/v1/countries/AQ", admin, `{"enabled":false}`, nil)
	return regionFixture{sea: sea.ID, mena: mena.ID}
}

func TestUsersMeResolvesRegions(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	sg := e.putMe("app1", 1, `{"display_user_id":"sg_user","country":"SG"}`)
	my := e.putMe("app1", 2, `{"display_user_id":"my_user","country":"MY"}`)
	sa := e.putMe("app1", 3, `{"display_user_id":"sa_user","country":"SA"}`)
	if sg.RegionID != f.sea || my.RegionID != sg.RegionID || sg.RegionCode != "SEA" || my.RegionCode != "SEA" {
		t.Fatalf("SG and MY differ: %+v %+v", sg, my)
	}
	if sa.RegionID != f.mena || sa.RegionID == sg.RegionID || sa.RegionCode != "MENA" {
		t.Fatalf("SA: %+v", sa)
	}
	// No country, or one mapped to no region, is GLOBAL.
	for i, body := range []string{`{"display_user_id":"nobody"}`, `{"display_user_id":"us_user","country":"US"}`, `{"display_user_id":"empty","country":""}`} {
		p := e.putMe("app1", int64(10+i), body)
		if p.RegionID != 0 || p.RegionCode != "GLOBAL" {
			t.Fatalf("%s: %+v", body, p)
		}
	}
	// A disabled country, one the app does not offer, and a code ISO does not
	// assign are refused, naming the field.
	for _, c := range []string{"AQ", "FR", "ZZ", "UK"} {
		status, env := e.call("PUT", "/api/v1/users/me", e.user("app1", 20), `{"display_user_id":"newbie","country":"`+c+`"}`)
		if status != 400 || env.Code != "INVALID_ARGUMENT" || !strings.HasPrefix(env.Message, "country:") {
			t.Fatalf("country %s: %d %s %q", c, status, env.Code, env.Message)
		}
	}
	// GET returns the stored profile; a user without one is NOT_FOUND.
	var got regions.Profile
	e.must("GET", "/api/v1/users/me", e.user("app1", 2), "", &got)
	if got != my {
		t.Fatalf("GET %+v, PUT returned %+v", got, my)
	}
	if status, env := e.call("GET", "/api/v1/users/me", e.user("app1", 20), ""); status != 404 || env.Code != "NOT_FOUND" {
		t.Fatalf("no profile: %d %s", status, env.Code)
	}
}

func TestUsersMeIgnoresForgedRegion(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	forged := fmt.Sprintf(`{"display_user_id":"sg_user","country":"SG","region_id":%d,"region_code":"MENA"}`, f.mena)
	if p := e.putMe("app1", 1, forged); p.RegionID != f.sea || p.RegionCode != "SEA" {
		t.Fatalf("forged region taken: %+v", p)
	}
	forged = fmt.Sprintf(`{"display_user_id":"us_user","country":"US","region_id":%d}`, f.sea)
	if p := e.putMe("app1", 2, forged); p.RegionID != 0 {
		t.Fatalf("forged region taken: %+v", p)
	}
	// A body with only a region changes nothing.
	e.putMe("app1", 1, fmt.Sprintf(`{"region_id":%d}`, f.mena))
	if stored := testenv.Scalar[int64](t, e.db, "SELECT region_id FROM users WHERE app_code = 'app1' AND user_id = 1"); stored != f.sea {
		t.Fatalf("stored region %d, want SEA %d", stored, f.sea)
	}
	if _, region, err := e.svc.UserRegion(context.Background(), "app1", 1); err != nil || region != f.sea {
		t.Fatalf("lookup %d %v", region, err)
	}
}

func TestDisabledRegionRebuiltMovesItsUsersToGlobal(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	e.putMe("app1", 1, `{"display_user_id":"sg_user","country":"SG"}`)
	e.putMe("app1", 2, `{"display_user_id":"my_user","country":"MY"}`)
	e.putMe("app1", 3, `{"display_user_id":"sa_user","country":"SA"}`)
	admin := e.admin("app1")

	var r regions.Region
	e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{"status":"disabled"}`, &r)
	if r.Status != regions.StatusDisabled || r.Code != "SEA" {
		t.Fatalf("patched %+v", r)
	}
	// Users move only when the rebuild runs.
	if p := e.putMe("app1", 1, `{}`); p.RegionID != f.sea {
		t.Fatalf("moved before the rebuild: %+v", p)
	}
	if res := e.rebuild("app1"); res.Scanned != 3 || res.Changed != 2 {
		t.Fatalf("rebuild %+v, want 3 scanned 2 changed", res)
	}
	for user, want := range map[int64]int64{1: 0, 2: 0, 3: f.mena} {
		var p regions.Profile
		e.must("GET", "/api/v1/users/me", e.user("app1", user), "", &p)
		if p.RegionID != want {
			t.Fatalf("user %d: %+v, want region %d", user, p, want)
		}
	}
	if res := e.rebuild("app1"); res.Changed != 0 {
		t.Fatalf("second rebuild changed %d", res.Changed)
	}
	// A country whose region is disabled gives GLOBAL to newcomers too.
	if p := e.putMe("app1", 4, `{"display_user_id":"late_sg","country":"SG"}`); p.RegionID != 0 || p.RegionCode != "GLOBAL" {
		t.Fatalf("newcomer in SG: %+v", p)
	}
	// Enabling it again and rebuilding brings them back.
	e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{"status":"active"}`, nil)
	if res := e.rebuild("app1"); res.Changed != 3 {
		t.Fatalf("rebuild after enabling changed %d, want 3", res.Changed)
	}
}

func TestMovedCountryRebuiltMovesItsUsers(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	e.putMe("app1", 1, `{"display_user_id":"sg_user","country":"SG"}`)
	e.putMe("app1", 2, `{"display_user_id":"my_user","country":"MY"}`)
	admin := e.admin("app1")
	var c regions.Country
	e.must("PATCH", "/admin/v1/countries/my", admin, fmt.Sprintf(`{"region_id":%d}`, f.mena), &c)
	if c.Code != "MY" || c.RegionID != f.mena || !c.Enabled {
		t.Fatalf("patched %+v", c)
	}
	if res := e.rebuild("app1"); res.Changed != 1 {
		t.Fatalf("rebuild %+v, want 1 changed", res)
	}
	if got := e.putMe("app1", 2, `{}`); got.RegionID != f.mena || got.RegionCode != "MENA" {
		t.Fatalf("MY user: %+v", got)
	}
	if got := e.putMe("app1", 1, `{}`); got.RegionID != f.sea {
		t.Fatalf("SG user moved: %+v", got)
	}
	// A disabled country, once rebuilt, puts its users in GLOBAL, and can no
	// longer be chosen.
	e.must("PATCH", "/admin/v1/countries/SG", admin, `{"enabled":false}`, nil)
	e.rebuild("app1")
	if got := e.putMe("app1", 1, `{}`); got.RegionID != 0 {
		t.Fatalf("user of disabled SG: %+v", got)
	}
	if status, env := e.call("PUT", "/api/v1/users/me", e.user("app1", 2), `{"country":"SG"}`); status != 400 || !strings.HasPrefix(env.Message, "country:") {
		t.Fatalf("choosing disabled SG: %d %q", status, env.Message)
	}
	// The listing shows the mapping.
	var list regions.RegionList
	e.must("GET", "/admin/v1/regions", admin, "", &list)
	if len(list.Regions) != 2 || len(list.Regions[1].Countries) != 2 || list.Regions[1].Countries[0].Code != "MY" ||
		len(list.Unassigned) != 2 || list.Unassigned[0].Code != "AQ" || list.Unassigned[0].Enabled {
		t.Fatalf("list %+v", list)
	}
}

func TestRegionsAreInvisibleAcrossApps(t *testing.T) {
	e := newRegionEnv(t)
	a := e.fixture("appA")
	e.putMe("appA", 1, `{"display_user_id":"ana","country":"SG"}`)
	adminB := e.admin("appB")

	var list regions.RegionList
	e.must("GET", "/admin/v1/regions", adminB, "", &list)
	if len(list.Regions) != 0 || len(list.Unassigned) != 0 {
		t.Fatalf("app B sees %+v", list)
	}
	notFound := []struct{ method, path, body string }{
		{"PATCH", fmt.Sprintf("/admin/v1/regions/%d", a.sea), `{"status":"disabled"}`},
		{"PATCH", "/admin/v1/countries/SG", `{"enabled":false}`},
		{"POST", "/admin/v1/countries", fmt.Sprintf(`{"country_code":"SG","region_id":%d}`, a.sea)},
		{"PUT", "/admin/v1/users/1/region", `{"region_id":0,"reason":"x"}`},
		{"GET", "/admin/v1/users/1/region", ``},
		{"DELETE", "/admin/v1/users/1/region", `{"reason":"x"}`},
	}
	for _, tt := range notFound {
		if status, env := e.call(tt.method, tt.path, adminB, tt.body); status != 404 || env.Code != "NOT_FOUND" {
			t.Errorf("%s %s as app B: %d %s %q", tt.method, tt.path, status, env.Code, env.Message)
		}
	}
	// App B's user with app A's user id has no profile, and cannot pick a
	// country only app A offers.
	if status, _ := e.call("GET", "/api/v1/users/me", e.user("appB", 1), ""); status != 404 {
		t.Fatalf("app B user 1 sees app A's profile: %d", status)
	}
	if status, env := e.call("PUT", "/api/v1/users/me", e.user("appB", 1), `{"display_user_id":"ana","country":"SG"}`); status != 400 || !strings.HasPrefix(env.Message, "country:") {
		t.Fatalf("app B user picks app A's country: %d %q", status, env.Message)
	}
	// The same codes and display ids are free in app B, and B's rebuild
	// leaves A alone.
	b := e.fixture("appB")
	if b.sea == a.sea {
		t.Fatal("two apps share a region id")
	}
	e.putMe("appB", 1, `{"display_user_id":"ana","country":"SG"}`)
	e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", b.sea), adminB, `{"status":"disabled"}`, nil)
	e.rebuild("appB")
	if got := e.putMe("appA", 1, `{}`); got.RegionID != a.sea {
		t.Fatalf("app B's rebuild moved app A's user: %+v", got)
	}
	// An app A user cannot be set to app B's region.
	if status, _ := e.call("PUT", "/admin/v1/users/1/region", e.admin("appA"), fmt.Sprintf(`{"region_id":%d,"reason":"x"}`, b.mena)); status != 404 {
		t.Fatalf("app A user set to app B's region: %d", status)
	}
}

func TestAdminRegionRoutesRefuseOtherTokens(t *testing.T) {
	e := newRegionEnv(t)
	user := e.user("app1", 1)
	routes := []struct{ method, path, body string }{
		{"POST", "/admin/v1/regions", `{"region_code":"SEA","name":"x"}`},
		{"PATCH", "/admin/v1/regions/1", `{"status":"disabled"}`},
		{"GET", "/admin/v1/regions", ``},
		{"POST", "/admin/v1/countries", `{"country_code":"SG","name":"x","region_id":0}`},
		{"PATCH", "/admin/v1/countries/SG", `{"enabled":false}`},
		{"POST", "/admin/v1/users/region-rebuild", ``},
		{"PUT", "/admin/v1/users/1/region", `{"region_id":0,"reason":"x"}`},
		{"GET", "/admin/v1/users/1/region", ``},
		{"DELETE", "/admin/v1/users/1/region", `{"reason":"x"}`},
	}
	for _, tt := range routes {
		if status, env := e.call(tt.method, tt.path, user, tt.body); status != 403 || env.Code != "PERMISSION_DENIED" {
			t.Errorf("%s %s with a user token: %d %s", tt.method, tt.path, status, env.Code)
		}
		if status, env := e.call(tt.method, tt.path, "", tt.body); status != 401 || env.Code != "UNAUTHENTICATED" {
			t.Errorf("%s %s without a token: %d %s", tt.method, tt.path, status, env.Code)
		}
	}
	if n := testenv.Scalar[int](t, e.db, "SELECT (SELECT COUNT(*) FROM regions) + (SELECT COUNT(*) FROM countries)"); n != 0 {
		t.Fatalf("refused requests wrote %d rows", n)
	}
}

func TestAdminSetUserRegionIsAudited(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	e.putMe("app1", 1, `{"display_user_id":"bd_leader","country":"SG"}`)
	admin := e.admin("app1")

	var p regions.Profile
	e.must("PUT", "/admin/v1/users/1/region", admin, fmt.Sprintf(`{"region_id":%d,"reason":"BD leader for MENA"}`, f.mena), &p)
	if p.RegionID != f.mena || p.RegionCode != "MENA" || p.Country != "SG" {
		t.Fatalf("set: %+v", p)
	}
	var (
		oldR, newR, at  int64
		source, op, why string
	)
	err := e.db.QueryRow(`SELECT old_region_id, new_region_id, source, operator, reason, created_at_ms
		FROM user_region_audit WHERE app_code = 'app1' AND user_id = 1 ORDER BY id DESC LIMIT 1`).
		Scan(&oldR, &newR, &source, &op, &why, &at)
	if err != nil {
		t.Fatal(err)
	}
	if oldR != f.sea || newR != f.mena || source != "admin" || op != "admin:7" || why != "BD leader for MENA" || at != 1_800_000_000_000 {
		t.Fatalf("audit row: %d -> %d %s %s %q at %d", oldR, newR, source, op, why, at)
	}
	// The pin survives a rebuild and the user's own country change.
	e.rebuild("app1")
	if got := e.putMe("app1", 1, `{"country":"MY"}`); got.RegionID != f.mena || got.Country != "MY" {
		t.Fatalf("pin lost: %+v", got)
	}
	// Operators see the source and the history, newest first.
	var info regions.UserRegionInfo
	e.must("GET", "/admin/v1/users/1/region", admin, "", &info)
	if info.RegionSource != regions.SourceAdmin || len(info.Audit) != 1 || info.Audit[0].Operator != "admin:7" {
		t.Fatalf("info %+v", info)
	}
	// An admin token without sub is audited as "admin"; setting the same
	// region again is an action and is audited too.
	anon := mustToken(t, "app1", 0, authtoken.RoleAdmin, time.Hour)
	e.must("PUT", "/admin/v1/users/1/region", anon, fmt.Sprintf(`{"region_id":%d,"reason":"confirm"}`, f.mena), nil)
	// Releasing the pin recomputes from the country (MY: SEA).
	e.must("DELETE", "/admin/v1/users/1/region", admin, `{"reason":"no longer BD"}`, &p)
	if p.RegionID != f.sea {
		t.Fatalf("released: %+v", p)
	}
	e.must("GET", "/admin/v1/users/1/region", admin, "", &info)
	if info.RegionSource != regions.SourceCountry || len(info.Audit) != 3 ||
		info.Audit[1].Operator != "admin" || info.Audit[1].Reason != "confirm" ||
		info.Audit[0].Reason != "no longer BD" || info.Audit[0].OldRegionID != f.mena || info.Audit[0].NewRegionID != f.sea {
		t.Fatalf("history %+v", info.Audit)
	}
	// A pin to a region that is then disabled is dropped by the rebuild.
	e.must("PUT", "/admin/v1/users/1/region", admin, fmt.Sprintf(`{"region_id":%d,"reason":"again"}`, f.mena), nil)
	e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.mena), admin, `{"status":"disabled"}`, nil)
	if res := e.rebuild("app1"); res.Changed != 1 {
		t.Fatalf("rebuild %+v", res)
	}
	e.must("GET", "/admin/v1/users/1/region", admin, "", &info)
	if info.RegionID != f.sea || info.RegionSource != regions.SourceCountry || info.Audit[0].Source != regions.AuditRebuild {
		t.Fatalf("after disabling the pinned region: %+v", info)
	}
}

func TestRegionRoutesBadInput(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	e.putMe("app1", 1, `{"display_user_id":"taken_id","country":"SG"}`)
	admin := e.admin("app1")
	user := e.user("app1", 2)
	long := strings.Repeat("n", regions.NameMax+1)
	tests := []struct {
		name, method, path, token, body string
		wantStatus                      int
		wantCode                        string
		wantField                       string
	}{
		{"display too short", "PUT", "/api/v1/users/me", user, `{"display_user_id":"ab"}`, 400, "INVALID_ARGUMENT", "display_user_id"},
		{"display too long", "PUT", "/api/v1/users/me", user, `{"display_user_id":"` + strings.Repeat("a", 21) + `"}`, 400, "INVALID_ARGUMENT", "display_user_id"},
		{"display charset", "PUT", "/api/v1/users/me", user, `{"display_user_id":"a b<c>"}`, 400, "INVALID_ARGUMENT", "display_user_id"},
		{"display taken", "PUT", "/api/v1/users/me", user, `{"display_user_id":"TAKEN_ID"}`, 409, "ALREADY_EXISTS", "display_user_id"},
		{"display missing", "PUT", "/api/v1/users/me", user, `{"country":"SG"}`, 400, "INVALID_ARGUMENT", "display_user_id"},
		{"display wrong type", "PUT", "/api/v1/users/me", user, `{"display_user_id":5}`, 400, "INVALID_ARGUMENT", "display_user_id"},
		{"country unknown", "PUT", "/api/v1/users/me", user, `{"display_user_id":"abc","country":"XX"}`, 400, "INVALID_ARGUMENT", "country"},
		{"country huge", "PUT", "/api/v1/users/me", user, `{"display_user_id":"abc","country":"` + long + `"}`, 400, "INVALID_ARGUMENT", "country"},

		{"region code taken", "POST", "/admin/v1/regions", admin, `{"region_code":"sea","name":"again"}`, 409, "ALREADY_EXISTS", "region_code"},
		{"region code reserved", "POST", "/admin/v1/regions", admin, `{"region_code":"GLOBAL","name":"x"}`, 400, "INVALID_ARGUMENT", "region_code"},
		{"region code charset", "POST", "/admin/v1/regions", admin, `{"region_code":"S E A","name":"x"}`, 400, "INVALID_ARGUMENT", "region_code"},
		{"region code too long", "POST", "/admin/v1/regions", admin, `{"region_code":"` + strings.Repeat("A", 17) + `","name":"x"}`, 400, "INVALID_ARGUMENT", "region_code"},
		{"region name too long", "POST", "/admin/v1/regions", admin, `{"region_code":"EU","name":"` + long + `"}`, 400, "INVALID_ARGUMENT", "name"},
		{"region name missing", "POST", "/admin/v1/regions", admin, `{"region_code":"EU"}`, 400, "INVALID_ARGUMENT", "name"},
		{"region name control", "POST", "/admin/v1/regions", admin, `{"region_code":"EU","name":"a\u0007b"}`, 400, "INVALID_ARGUMENT", "name"},
		{"region bad status", "PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{"status":"paused"}`, 400, "INVALID_ARGUMENT", "status"},
		{"region status wrong type", "PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{"status":1}`, 400, "INVALID_ARGUMENT", "status"},
		{"region rename too long", "PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{"name":"` + long + `"}`, 400, "INVALID_ARGUMENT", "name"},
		{"region patch empty", "PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.sea), admin, `{}`, 400, "INVALID_ARGUMENT", ""},
		{"region id not a number", "PATCH", "/admin/v1/regions/sea", admin, `{"status":"active"}`, 400, "INVALID_ARGUMENT", "region_id"},
		{"region unknown", "PATCH", "/admin/v1/regions/999999", admin, `{"status":"active"}`, 404, "NOT_FOUND", ""},

		{"country code unknown", "POST", "/admin/v1/countries", admin, `{"country_code":"XX","region_id":0}`, 400, "INVALID_ARGUMENT", "country_code"},
		{"country code alpha-3", "POST", "/admin/v1/countries", admin, `{"country_code":"SGP","region_id":0}`, 400, "INVALID_ARGUMENT", "country_code"},
		{"country taken", "POST", "/admin/v1/countries", admin, `{"country_code":"sg","region_id":0}`, 409, "ALREADY_EXISTS", "country_code"},
		{"country name too long", "POST", "/admin/v1/countries", admin, `{"country_code":"FR","name":"` + long + `"}`, 400, "INVALID_ARGUMENT", "name"},
		{"country region negative", "POST", "/admin/v1/countries", admin, `{"country_code":"FR","region_id":-1}`, 400, "INVALID_ARGUMENT", "region_id"},
		{"country region unknown", "POST", "/admin/v1/countries", admin, `{"country_code":"FR","region_id":999999}`, 404, "NOT_FOUND", ""},
		{"country region wrong type", "POST", "/admin/v1/countries", admin, `{"country_code":"FR","region_id":"SEA"}`, 400, "INVALID_ARGUMENT", "region_id"},
		{"country patch empty", "PATCH", "/admin/v1/countries/SG", admin, `{}`, 400, "INVALID_ARGUMENT", ""},
		{"country patch unknown", "PATCH", "/admin/v1/countries/FR", admin, `{"enabled":true}`, 404, "NOT_FOUND", ""},
		{"country patch not iso", "PATCH", "/admin/v1/countries/XYZ", admin, `{"enabled":true}`, 404, "NOT_FOUND", ""},

		{"set region missing", "PUT", "/admin/v1/users/1/region", admin, `{"reason":"x"}`, 400, "INVALID_ARGUMENT", "region_id"},
		{"set reason missing", "PUT", "/admin/v1/users/1/region", admin, `{"region_id":0}`, 400, "INVALID_ARGUMENT", "reason"},
		{"set reason too long", "PUT", "/admin/v1/users/1/region", admin, `{"region_id":0,"reason":"` + strings.Repeat("r", 256) + `"}`, 400, "INVALID_ARGUMENT", "reason"},
		{"set region unknown", "PUT", "/admin/v1/users/1/region", admin, `{"region_id":999999,"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"set user unknown", "PUT", "/admin/v1/users/999/region", admin, `{"region_id":0,"reason":"x"}`, 404, "NOT_FOUND", ""},
		{"set user id bad", "PUT", "/admin/v1/users/-1/region", admin, `{"region_id":0,"reason":"x"}`, 400, "INVALID_ARGUMENT", "user_id"},
		{"clear reason missing", "DELETE", "/admin/v1/users/1/region", admin, ``, 400, "INVALID_ARGUMENT", "reason"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, env := e.call(tt.method, tt.path, tt.token, tt.body)
			if status != tt.wantStatus || env.Code != tt.wantCode {
				t.Fatalf("got %d %s %q, want %d %s", status, env.Code, env.Message, tt.wantStatus, tt.wantCode)
			}
			if tt.wantField != "" && !strings.HasPrefix(env.Message, tt.wantField+":") && !strings.Contains(env.Message, `"`+tt.wantField+`"`) {
				t.Fatalf("message %q does not name %s", env.Message, tt.wantField)
			}
		})
	}
	// A disabled region cannot be given to a user.
	e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.mena), admin, `{"status":"disabled"}`, nil)
	status, env := e.call("PUT", "/admin/v1/users/1/region", admin, fmt.Sprintf(`{"region_id":%d,"reason":"x"}`, f.mena))
	if status != 400 || !strings.HasPrefix(env.Message, "region_id:") {
		t.Fatalf("disabled region: %d %q", status, env.Message)
	}
	// None of the refused requests changed the user.
	var got regions.Profile
	e.must("GET", "/api/v1/users/me", e.user("app1", 1), "", &got)
	if got.RegionID != f.sea || got.DisplayUserID != "taken_id" {
		t.Fatalf("user changed: %+v", got)
	}
}

// TestUserRegionCacheFollowsEveryChangeSource changes one user's region
// through every change source in turn, over HTTP, and reads it back right
// after each through the cached lookup and GET /api/v1/users/me (served
// from the same cache), the latter compared with the operators' uncached
// view of the profile. The service's clock is frozen, so a missing
// invalidation would serve the previous value forever.
func TestUserRegionCacheFollowsEveryChangeSource(t *testing.T) {
	e := newRegionEnv(t)
	f := e.fixture("app1")
	admin := e.admin("app1")
	ctx := context.Background()
	lookup := func() (string, int64) {
		t.Helper()
		display, region, err := e.svc.UserRegion(ctx, "app1", 1)
		if err != nil {
			t.Fatal(err)
		}
		return display, region
	}
	getMe := func(user int64) regions.Profile {
		t.Helper()
		var p regions.Profile
		e.must("GET", "/api/v1/users/me", e.user("app1", user), "", &p)
		return p
	}
	stored := func(user int64) regions.Profile {
		t.Helper()
		var info regions.UserRegionInfo
		e.must("GET", fmt.Sprintf("/admin/v1/users/%d/region", user), admin, "", &info)
		return info.Profile
	}

	// First, the lookup and the profile really are cached: a change made
	// behind the service's back (user 2) is not seen.
	e.putMe("app1", 2, `{"display_user_id":"other","country":"SG"}`)
	if _, _, err := e.svc.UserRegion(ctx, "app1", 2); err != nil {
		t.Fatal(err)
	}
	before := getMe(2)
	if _, err := e.db.Exec("UPDATE users SET region_id = ?, country = 'SA' WHERE app_code = 'app1' AND user_id = 2", f.mena); err != nil {
		t.Fatal(err)
	}
	if _, region, err := e.svc.UserRegion(ctx, "app1", 2); err != nil || region != f.sea {
		t.Fatalf("the lookup read MySQL (%d, %v): this test would prove nothing", region, err)
	}
	if got := getMe(2); got != before || stored(2) == before {
		t.Fatalf("GET /users/me gives %+v, MySQL %+v: want the cached %+v, or this test would prove nothing", got, stored(2), before)
	}

	e.putMe("app1", 1, `{"display_user_id":"ana","country":"MY"}`)
	steps := []struct {
		source      string
		do          func()
		wantDisplay string
		wantRegion  int64
	}{
		{"user changes country", func() { e.putMe("app1", 1, `{"country":"SA"}`) }, "ana", f.mena},
		{"user changes display id", func() { e.putMe("app1", 1, `{"display_user_id":"ana2"}`) }, "ana2", f.mena},
		{"user changes country back", func() { e.putMe("app1", 1, `{"country":"MY"}`) }, "ana2", f.sea},
		{"admin moves country, rebuild", func() {
			e.must("PATCH", "/admin/v1/countries/MY", admin, fmt.Sprintf(`{"region_id":%d}`, f.mena), nil)
			e.rebuild("app1")
		}, "ana2", f.mena},
		{"admin disables country, rebuild", func() {
			e.must("PATCH", "/admin/v1/countries/MY", admin, `{"enabled":false}`, nil)
			e.rebuild("app1")
		}, "ana2", 0},
		{"admin enables country, rebuild", func() {
			e.must("PATCH", "/admin/v1/countries/MY", admin, `{"enabled":true}`, nil)
			e.rebuild("app1")
		}, "ana2", f.mena},
		{"admin disables region, rebuild", func() {
			e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.mena), admin, `{"status":"disabled"}`, nil)
			e.rebuild("app1")
		}, "ana2", 0},
		{"admin enables region, rebuild", func() {
			e.must("PATCH", fmt.Sprintf("/admin/v1/regions/%d", f.mena), admin, `{"status":"active"}`, nil)
			e.rebuild("app1")
		}, "ana2", f.mena},
		{"admin sets user region", func() {
			e.must("PUT", "/admin/v1/users/1/region", admin, fmt.Sprintf(`{"region_id":%d,"reason":"BD"}`, f.sea), nil)
		}, "ana2", f.sea},
		{"admin releases user region", func() {
			e.must("DELETE", "/admin/v1/users/1/region", admin, `{"reason":"done"}`, nil)
		}, "ana2", f.mena},
	}
	for _, st := range steps {
		lookup() // make sure the previous value is cached
		getMe(1)
		st.do()
		if display, region := lookup(); display != st.wantDisplay || region != st.wantRegion {
			t.Fatalf("after %q: lookup gives %q %d, want %q %d", st.source, display, region, st.wantDisplay, st.wantRegion)
		}
		if got, want := getMe(1), stored(1); got != want {
			t.Fatalf("after %q: GET /users/me gives %+v, MySQL holds %+v", st.source, got, want)
		}
	}
}
