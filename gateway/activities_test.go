package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/activity"
	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
	"voiceroom/regions"
)

// activityEnv is a server with the activity routes over a database of the
// test's own: app1 has the region SEA (user 1 lives there, user 2 in
// GLOBAL), app2 the region EU (user 3).
type activityEnv struct {
	tb    testing.TB
	srv   *Server
	sea   int64
	eu    int64
	nowMs int64
}

func newActivityEnv(tb testing.TB) *activityEnv {
	tb.Helper()
	ctx := context.Background()
	db := testenv.NewDB(tb)
	rs, err := regions.New(ctx, db, testenv.Logger(tb), nil, regions.Config{DisableCache: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(rs.Close)
	e := &activityEnv{tb: tb, nowMs: time.Now().UnixMilli()}
	for _, r := range []struct {
		app, code string
		id        *int64
	}{{"app1", "SEA", &e.sea}, {"app2", "EU", &e.eu}} {
		reg, err := rs.CreateRegion(ctx, r.app, r.code, r.code)
		if err != nil {
			tb.Fatal(err)
		}
		*r.id = reg.ID
	}
	for _, u := range []struct {
		app    string
		user   int64
		region int64
	}{{"app1", 1, e.sea}, {"app1", 2, 0}, {"app2", 3, e.eu}} {
		display := fmt.Sprint("user", u.user)
		if _, err := rs.PutProfile(ctx, u.app, u.user, regions.ProfileUpdate{DisplayUserID: &display}); err != nil {
			tb.Fatal(err)
		}
		if u.region != 0 {
			if _, err := rs.SetUserRegion(ctx, u.app, u.user, u.region, "op", "test"); err != nil {
				tb.Fatal(err)
			}
		}
	}
	d, err := activity.NewDefiner(activity.NewStore(db, nil), rs, testenv.NewJetStream(tb).JetStream(), activity.DefineConfig{})
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e.srv, err = New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1e6, RateBurst: 1e6},
		testenv.Logger(tb), reg, reg, nil, ActivityRoutes(d, rs))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func (e *activityEnv) call(method, path, token, body string) (int, Envelope) {
	e.tb.Helper()
	status, env, _ := do(e.tb, e.srv, method, path, token, body)
	return status, env
}

func (e *activityEnv) admin(app string) string {
	return mustToken(e.tb, app, 7, authtoken.RoleAdmin, time.Hour)
}

// create defines a leaderboard of app for regions (JSON, "" for none)
// and returns its id.
func (e *activityEnv) create(app, regions string) int64 {
	e.tb.Helper()
	body := fmt.Sprintf(`{"name":"top","kind":"leaderboard","metric":"gift_value_sent","starts_at_ms":%d,"ends_at_ms":%d,
		"rewards":[{"from_rank":1,"to_rank":3,"coins":100}]%s}`, e.nowMs+60_000, e.nowMs+3_600_000, regions)
	status, env := e.call("POST", "/admin/v1/activities", e.admin(app), body)
	if status != 200 {
		e.tb.Fatalf("create: %d %+v", status, env)
	}
	data := env.Data.(map[string]any)
	if data["status"] != "scheduled" {
		e.tb.Fatalf("created %+v, want status scheduled", data)
	}
	return int64(data["activity_id"].(float64))
}

func ids(tb testing.TB, list any) []int64 {
	tb.Helper()
	var out []int64
	for _, a := range list.([]any) {
		out = append(out, int64(a.(map[string]any)["activity_id"].(float64)))
	}
	return out
}

func TestActivityRoutes(t *testing.T) {
	e := newActivityEnv(t)
	everywhere := e.create("app1", "")
	seaOnly := e.create("app1", fmt.Sprintf(`,"region_ids":[%d]`, e.sea))
	euOnly := e.create("app2", fmt.Sprintf(`,"region_ids":[%d]`, e.eu))

	// A refusal is a 400 naming the field, and creates nothing.
	status, env := e.call("POST", "/admin/v1/activities", e.admin("app1"),
		fmt.Sprintf(`{"name":"x","kind":"leaderboard","metric":"gift_value_sent","starts_at_ms":%d,"ends_at_ms":%d,"rewards":[{"from_rank":1,"to_rank":3,"coins":1}],"region_ids":[%d]}`,
			e.nowMs+60_000, e.nowMs+120_000, e.eu))
	if status != 400 || env.Code != "INVALID_ARGUMENT" || !strings.HasPrefix(env.Message, "region_ids[0]: ") {
		t.Fatalf("app2's region: %d %+v", status, env)
	}
	status, env = e.call("POST", "/admin/v1/activities", e.admin("app1"), `{"name":"x","starts_at_ms":"soon"}`)
	if status != 400 || !strings.HasPrefix(env.Message, "starts_at_ms: ") {
		t.Fatalf("a string for a number: %d %+v", status, env)
	}

	// Admins: their app's only, paged.
	status, env = e.call("GET", "/admin/v1/activities?limit=1", e.admin("app1"), "")
	if status != 200 {
		t.Fatalf("list: %d %+v", status, env)
	}
	page := env.Data.(map[string]any)
	if got := ids(t, page["items"]); len(got) != 1 || got[0] != everywhere || page["next_cursor"] == "" {
		t.Fatalf("first page %+v", page)
	}
	status, env = e.call("GET", "/admin/v1/activities?limit=1&cursor="+page["next_cursor"].(string), e.admin("app1"), "")
	page = env.Data.(map[string]any)
	if got := ids(t, page["items"]); status != 200 || len(got) != 1 || got[0] != seaOnly {
		t.Fatalf("second page %d %+v", status, page)
	}
	for _, q := range []string{"limit=0", "limit=101", "limit=x", "cursor=abc", "cursor=" + strings.Repeat("1", 21)} {
		if status, env := e.call("GET", "/admin/v1/activities?"+q, e.admin("app1"), ""); status != 400 {
			t.Errorf("?%s: %d %+v, want 400", q, status, env)
		}
	}
	if status, env := e.call("GET", fmt.Sprintf("/admin/v1/activities/%d", euOnly), e.admin("app1"), ""); status != 404 {
		t.Fatalf("app1 reads app2's: %d %+v", status, env)
	}
	if status, env := e.call("GET", "/admin/v1/activities/0", e.admin("app1"), ""); status != 400 || env.Message != "activity_id: must be a positive integer" {
		t.Fatalf("id 0: %d %+v", status, env)
	}
	if status, _ := e.call("POST", "/admin/v1/activities", mustToken(t, "app1", 1, "", time.Hour), `{}`); status != 403 && status != 401 {
		t.Fatalf("a user's token on an admin route: %d", status)
	}

	// Users: their region's, scheduled or running.
	for _, tc := range []struct {
		app  string
		user int64
		want []int64
	}{
		{"app1", 1, []int64{everywhere, seaOnly}},
		{"app1", 2, []int64{everywhere}},
		{"app2", 3, []int64{euOnly}},
	} {
		status, env := e.call("GET", "/api/v1/activities", mustToken(t, tc.app, tc.user, "", time.Hour), "")
		if status != 200 {
			t.Fatalf("user %d: %d %+v", tc.user, status, env)
		}
		list := env.Data.(map[string]any)["activities"]
		got := ids(t, list)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("user %d of %s sees %v, want %v", tc.user, tc.app, got, tc.want)
		}
		for _, a := range list.([]any) {
			if _, ok := a.(map[string]any)["created_by"]; ok {
				t.Errorf("a user sees who made it: %+v", a)
			}
		}
	}
	if status, env := e.call("GET", "/api/v1/activities", mustToken(t, "app1", 99, "", time.Hour), ""); status != 404 {
		t.Fatalf("a user without a profile: %d %+v, want 404 as for the room list", status, env)
	}

	// Cancel: another app's is 404; cancelled, it leaves the users' list.
	if status, _ := e.call("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", seaOnly), e.admin("app2"), ""); status != 404 {
		t.Fatalf("app2 cancels app1's: %d", status)
	}
	status, env = e.call("POST", fmt.Sprintf("/admin/v1/activities/%d/cancel", seaOnly), e.admin("app1"), "")
	if status != 200 || env.Data.(map[string]any)["status"] != "cancelled" {
		t.Fatalf("cancel: %d %+v", status, env)
	}
	_, env = e.call("GET", "/api/v1/activities", mustToken(t, "app1", 1, "", time.Hour), "")
	if got := ids(t, env.Data.(map[string]any)["activities"]); len(got) != 1 || got[0] != everywhere {
		t.Fatalf("after cancel user 1 sees %v", got)
	}
	_, env = e.call("GET", fmt.Sprintf("/admin/v1/activities/%d", seaOnly), e.admin("app1"), "")
	raw, _ := json.Marshal(env.Data)
	if !strings.Contains(string(raw), `"status":"cancelled"`) {
		t.Fatalf("read after cancel: %s", raw)
	}
}
