package regions_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
	"voiceroom/regions"
)

const testTTL = 3 * time.Second

func newTestService(tb testing.TB, db *sql.DB, clock *testenv.Clock, cfg regions.Config) *regions.Service {
	tb.Helper()
	cfg.Now = clock.Now
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = testTTL
	}
	svc, err := regions.New(context.Background(), db, testenv.Logger(tb), nil, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	return svc
}

// fixture is an app with SEA (SG, MY), MENA (SA), an unmapped US and a
// disabled AQ.
type fixture struct {
	app       string
	sea, mena int64
}

func mustFixture(tb testing.TB, svc *regions.Service, app string) fixture {
	tb.Helper()
	ctx := context.Background()
	f := fixture{app: app}
	sea, err := svc.CreateRegion(ctx, app, "SEA", "Southeast Asia")
	if err != nil {
		tb.Fatal(err)
	}
	mena, err := svc.CreateRegion(ctx, app, "MENA", "Middle East and North Africa")
	if err != nil {
		tb.Fatal(err)
	}
	f.sea, f.mena = sea.ID, mena.ID
	for _, c := range []struct {
		code   string
		region int64
	}{{"SG", f.sea}, {"MY", f.sea}, {"SA", f.mena}, {"US", 0}, {"AQ", 0}} {
		if _, err := svc.CreateCountry(ctx, app, c.code, "", c.region); err != nil {
			tb.Fatal(err)
		}
	}
	off := false
	if _, err := svc.UpdateCountry(ctx, app, "AQ", regions.CountryPatch{Enabled: &off}); err != nil {
		tb.Fatal(err)
	}
	return f
}

func mustPut(tb testing.TB, svc *regions.Service, app string, user int64, display, country string) regions.Profile {
	tb.Helper()
	p, err := svc.PutProfile(context.Background(), app, user, regions.ProfileUpdate{DisplayUserID: &display, Country: &country})
	if err != nil {
		tb.Fatalf("put profile of user %d: %v", user, err)
	}
	return p
}

func mustRegion(tb testing.TB, svc *regions.Service, app string, user int64) int64 {
	tb.Helper()
	_, region, err := svc.UserRegion(context.Background(), app, user)
	if err != nil {
		tb.Fatalf("user region of %d: %v", user, err)
	}
	return region
}

func TestUserRegionLookup(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{})
	f := mustFixture(t, svc, "app1")
	mustPut(t, svc, "app1", 1, "sg_user", "SG")
	mustPut(t, svc, "app1", 2, "my_user", "MY")
	mustPut(t, svc, "app1", 3, "sa_user", "SA")
	mustPut(t, svc, "app1", 4, "us_user", "US")
	mustPut(t, svc, "app1", 5, "no_country", "")

	tests := []struct {
		user        int64
		wantRegion  int64
		wantDisplay string
	}{
		{1, f.sea, "sg_user"}, {2, f.sea, "my_user"}, {3, f.mena, "sa_user"}, {4, 0, "us_user"}, {5, 0, "no_country"},
	}
	for _, tt := range tests {
		for range 2 { // a miss, then a hit
			display, region, err := svc.UserRegion(context.Background(), "app1", tt.user)
			if err != nil || region != tt.wantRegion || display != tt.wantDisplay {
				t.Fatalf("user %d: got %q %d %v, want %q %d", tt.user, display, region, err, tt.wantDisplay, tt.wantRegion)
			}
		}
	}
	_, _, err := svc.UserRegion(context.Background(), "app1", 999)
	if !errors.Is(err, regions.ErrUserNotFound) || !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("unknown user: %v", err)
	}
	if _, _, err := svc.UserRegion(context.Background(), "app2", 1); !apperr.Is(err, apperr.NotFound) {
		t.Fatalf("app1's user seen by app2: %v", err)
	}
}

func TestCheckRegion(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{})
	f := mustFixture(t, svc, "app1")
	other := mustFixture(t, svc, "app2")
	disabled := regions.StatusDisabled
	if _, err := svc.UpdateRegion(context.Background(), "app1", f.mena, regions.RegionPatch{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		region    int64
		wantCode  apperr.Code
		wantField string
	}{
		{"global", 0, "", ""},
		{"active", f.sea, "", ""},
		{"disabled", f.mena, apperr.InvalidArgument, "region_id"},
		{"negative", -1, apperr.InvalidArgument, "region_id"},
		{"unknown", 1 << 40, apperr.NotFound, ""},
		{"another app's", other.sea, apperr.NotFound, ""},
	}
	for _, tt := range tests {
		err := svc.CheckRegion(context.Background(), "app1", tt.region)
		if apperr.CodeOf(err) != tt.wantCode || apperr.FieldOf(err) != tt.wantField {
			t.Errorf("%s: got %v (field %q), want %q %q", tt.name, err, apperr.FieldOf(err), tt.wantCode, tt.wantField)
		}
	}
}

// TestUserRegionIsCachedWithinTTL proves the lookup is served from the cache
// (a change made behind the service's back is not seen) and that an entry
// lives no longer than the TTL: this is the bound on how late another process
// sees a change.
func TestUserRegionIsCachedWithinTTL(t *testing.T) {
	db := testenv.NewDB(t)
	clock := testenv.NewClock(time.Time{})
	svc := newTestService(t, db, clock, regions.Config{})
	f := mustFixture(t, svc, "app1")
	mustPut(t, svc, "app1", 1, "sg_user", "SG")
	if got := mustRegion(t, svc, "app1", 1); got != f.sea {
		t.Fatalf("region %d", got)
	}
	if _, err := db.Exec("UPDATE users SET region_id = ? WHERE app_code = 'app1' AND user_id = 1", f.mena); err != nil {
		t.Fatal(err)
	}
	clock.Advance(testTTL - time.Millisecond)
	if got := mustRegion(t, svc, "app1", 1); got != f.sea {
		t.Fatalf("region %d within the TTL: the lookup did not use the cache", got)
	}
	clock.Advance(time.Millisecond)
	if got := mustRegion(t, svc, "app1", 1); got != f.mena {
		t.Fatalf("region %d after the TTL, want %d", got, f.mena)
	}
}

// TestCrossProcessCacheSeesChangeWithinTTL runs two services (two api
// processes) on one database: the one that makes a change sees it at once,
// the other within the TTL, in the region lookup and in the profile
// (GET /api/v1/users/me), which are served from one cache.
func TestCrossProcessCacheSeesChangeWithinTTL(t *testing.T) {
	db := testenv.NewDB(t)
	clock := testenv.NewClock(time.Time{})
	a := newTestService(t, db, clock, regions.Config{})
	b := newTestService(t, db, clock, regions.Config{})
	f := mustFixture(t, a, "app1")
	mustPut(t, a, "app1", 1, "sg_user", "SG")
	mustRegion(t, a, "app1", 1)
	mustProfile(t, a, "app1", 1)
	if got := mustRegion(t, b, "app1", 1); got != f.sea {
		t.Fatalf("b: %d", got)
	}
	old := mustProfile(t, b, "app1", 1)
	put := mustPut(t, a, "app1", 1, "sa_user", "SA")
	if got := mustRegion(t, a, "app1", 1); got != f.mena {
		t.Fatalf("a does not see its own change: %d", got)
	}
	if got := mustProfile(t, a, "app1", 1); got != put {
		t.Fatalf("a's profile %+v, want what its PUT answered, %+v", got, put)
	}
	clock.Advance(testTTL - time.Millisecond)
	if got := mustProfile(t, b, "app1", 1); got != old {
		t.Fatalf("b's profile within the TTL %+v, want the cached %+v (or the test proves nothing)", got, old)
	}
	clock.Advance(time.Millisecond)
	if got := mustRegion(t, b, "app1", 1); got != f.mena {
		t.Fatalf("b still sees %d after the TTL", got)
	}
	if got := mustProfile(t, b, "app1", 1); got != put {
		t.Fatalf("b's profile after the TTL %+v, want %+v", got, put)
	}
}

func mustProfile(tb testing.TB, svc *regions.Service, app string, user int64) regions.Profile {
	tb.Helper()
	p, err := svc.Profile(context.Background(), app, user)
	if err != nil {
		tb.Fatalf("profile of %d: %v", user, err)
	}
	return p
}

// TestUserRegionFailsClosed: with MySQL unreachable a lookup that misses the
// cache is UNAVAILABLE, and an expired entry is not served in its place.
func TestUserRegionFailsClosed(t *testing.T) {
	_, dsn := testenv.NewDBWithDSN(t)
	pool, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: dsn}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	clock := testenv.NewClock(time.Time{})
	svc := newTestService(t, pool, clock, regions.Config{})
	mustFixture(t, svc, "app1")
	mustPut(t, svc, "app1", 1, "sg_user", "SG")
	mustPut(t, svc, "app1", 2, "my_user", "MY")
	mustRegion(t, svc, "app1", 1)

	pool.Close() // the store is gone
	if _, _, err := svc.UserRegion(context.Background(), "app1", 2); !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("uncached user with the store down: %v, want UNAVAILABLE", err)
	}
	clock.Advance(testTTL)
	display, region, err := svc.UserRegion(context.Background(), "app1", 1)
	if !apperr.Is(err, apperr.Unavailable) || display != "" || region != 0 {
		t.Fatalf("expired user with the store down: %q %d %v, want UNAVAILABLE and nothing else", display, region, err)
	}
	if _, err := svc.PutProfile(context.Background(), "app1", 3, regions.ProfileUpdate{}); apperr.CodeOf(err) != apperr.Unavailable {
		t.Fatalf("write with the store down: %v", err)
	}
}

func TestPutProfileRules(t *testing.T) {
	db := testenv.NewDB(t)
	clock := testenv.NewClock(time.Time{})
	svc := newTestService(t, db, clock, regions.Config{})
	f := mustFixture(t, svc, "app1")
	ctx := context.Background()
	str := func(s string) *string { return &s }

	// Registration needs a display id; the country may be left out (GLOBAL).
	if _, err := svc.PutProfile(ctx, "app1", 1, regions.ProfileUpdate{Country: str("SG")}); apperr.FieldOf(err) != "display_user_id" {
		t.Fatalf("registration without display id: %v", err)
	}
	p, err := svc.PutProfile(ctx, "app1", 1, regions.ProfileUpdate{DisplayUserID: str("ana")})
	if err != nil || p.RegionID != 0 || p.RegionCode != "GLOBAL" || p.Country != "" {
		t.Fatalf("registration without country: %+v %v", p, err)
	}
	// A field left out is kept; the country is normalized.
	clock.Advance(time.Second)
	p, err = svc.PutProfile(ctx, "app1", 1, regions.ProfileUpdate{Country: str(" sg ")})
	if err != nil || p.DisplayUserID != "ana" || p.Country != "SG" || p.RegionID != f.sea || p.RegionCode != "SEA" {
		t.Fatalf("country change: %+v %v", p, err)
	}
	// The same values again write nothing.
	written := p.UpdatedAtMs
	clock.Advance(time.Second)
	p, err = svc.PutProfile(ctx, "app1", 1, regions.ProfileUpdate{DisplayUserID: str("ana"), Country: str("SG")})
	if err != nil || p.UpdatedAtMs != written {
		t.Fatalf("no-op put: %+v %v (updated_at was %d)", p, err, written)
	}
	// Display ids are unique per app, case-insensitively, and free across apps.
	mustFixture(t, svc, "app2")
	for _, taken := range []string{"ana", "ANA"} {
		_, err = svc.PutProfile(ctx, "app1", 2, regions.ProfileUpdate{DisplayUserID: str(taken)})
		if !apperr.Is(err, apperr.AlreadyExists) || apperr.FieldOf(err) != "display_user_id" {
			t.Fatalf("duplicate display id %q: %v", taken, err)
		}
	}
	mustPut(t, svc, "app2", 2, "ana", "SG")
	// Unknown, unoffered and disabled countries are refused, naming country.
	for _, c := range []string{"ZZ", "FR", "AQ", "SGP"} {
		_, err = svc.PutProfile(ctx, "app1", 1, regions.ProfileUpdate{Country: str(c)})
		if !apperr.Is(err, apperr.InvalidArgument) || apperr.FieldOf(err) != "country" {
			t.Fatalf("country %q: %v", c, err)
		}
	}
	// A region change is audited with its source.
	mustPut(t, svc, "app1", 1, "ana", "SA")
	info, err := svc.UserRegionInfo(ctx, "app1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(info.Audit) != 2 || info.Audit[0].Source != regions.AuditUser || info.Audit[0].OldRegionID != f.sea ||
		info.Audit[0].NewRegionID != f.mena || info.Audit[0].Operator != "user:1" {
		t.Fatalf("audit %+v", info.Audit)
	}
	// Clearing the country gives GLOBAL.
	if p = mustPut(t, svc, "app1", 1, "ana", ""); p.RegionID != 0 || p.Country != "" {
		t.Fatalf("country cleared: %+v", p)
	}
}

func TestRebuildBatchesAndIsIdempotent(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{RebuildBatch: 3})
	f := mustFixture(t, svc, "app1")
	mustFixture(t, svc, "app2")
	countries := []string{"SG", "MY", "SA", "US", ""}
	for i := int64(1); i <= 11; i++ {
		mustPut(t, svc, "app1", i, fmt.Sprintf("user_%d", i), countries[i%5])
		mustPut(t, svc, "app2", i, fmt.Sprintf("user_%d", i), "SG")
	}
	ctx := context.Background()
	disabled := regions.StatusDisabled
	if _, err := svc.UpdateRegion(ctx, "app1", f.sea, regions.RegionPatch{Status: &disabled}); err != nil {
		t.Fatal(err)
	}
	// Disabling SEA moves its users (SG: i%5 == 0, MY: i%5 == 1) to GLOBAL.
	wantChanged := 0
	for i := 1; i <= 11; i++ {
		if i%5 == 0 || i%5 == 1 {
			wantChanged++
		}
	}
	res, err := svc.Rebuild(ctx, "app1", "admin:7")
	if err != nil {
		t.Fatal(err)
	}
	if res.Scanned != 11 || res.Changed != wantChanged {
		t.Fatalf("rebuild %+v, want 11 scanned, %d changed", res, wantChanged)
	}
	for i := int64(1); i <= 11; i++ {
		want := int64(0)
		if i%5 == 2 {
			want = f.mena
		}
		if got := mustRegion(t, svc, "app1", i); got != want {
			t.Errorf("user %d (%q): region %d, want %d", i, countries[i%5], got, want)
		}
	}
	if res, err = svc.Rebuild(ctx, "app1", "admin:7"); err != nil || res.Changed != 0 || res.Scanned != 11 {
		t.Fatalf("second rebuild %+v %v, want nothing changed", res, err)
	}
	if audits := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM user_region_audit WHERE app_code = 'app1' AND source = 'rebuild' AND operator = 'admin:7'"); audits != wantChanged {
		t.Fatalf("%d rebuild audit rows, want %d", audits, wantChanged)
	}
	// The other app's users were not touched.
	if moved := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM users WHERE app_code = 'app2' AND region_id = 0"); moved != 0 {
		t.Fatalf("rebuild of app1 moved %d users of app2", moved)
	}
}

// TestRegionsStayConsistentUnderConcurrency changes users' countries while an
// operator moves a country back and forth and rebuilds each time. Once the
// rebuild after the last move is done, every user's region must be the one of
// their country, and no transaction may fail (deadlocks are retried). The
// exact interleaving that needs the mapping's shared locks is replayed
// deterministically by TestCountryChangeRacingOperator.
func TestRegionsStayConsistentUnderConcurrency(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{RebuildBatch: 7})
	f := mustFixture(t, svc, "app1")
	const users = 40
	countries := []string{"SG", "MY", "SA", "US", ""}
	for i := int64(1); i <= users; i++ {
		mustPut(t, svc, "app1", i, fmt.Sprintf("user_%d", i), countries[i%5])
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				c := countries[r.IntN(len(countries))]
				_, err := svc.PutProfile(context.Background(), "app1", 1+r.Int64N(users), regions.ProfileUpdate{Country: &c})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for round := range 6 {
		target := f.mena
		if round%2 == 1 {
			target = f.sea
		}
		if _, err := svc.UpdateCountry(context.Background(), "app1", "MY", regions.CountryPatch{RegionID: &target}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Rebuild(context.Background(), "app1", "admin"); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("country change failed: %v", err)
	}
	want := map[string]int64{"SG": f.sea, "MY": f.sea, "SA": f.mena, "US": 0, "": 0}
	rows, err := db.Query("SELECT user_id, country, region_id FROM users WHERE app_code = 'app1'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var id, region int64
		var country string
		if err := rows.Scan(&id, &country, &region); err != nil {
			t.Fatal(err)
		}
		seen++
		if region != want[country] {
			t.Errorf("user %d in %q has region %d, want %d", id, country, region, want[country])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen != users {
		t.Fatalf("checked %d users, want %d", seen, users)
	}
}

func TestSeedIsIdempotent(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{})
	ctx := context.Background()
	data := regions.DemoData()
	rep, err := svc.Seed(ctx, "demo", data)
	if err != nil {
		t.Fatal(err)
	}
	wantCountries := len(data.Unassigned) + len(data.Disabled)
	for _, r := range data.Regions {
		wantCountries += len(r.Countries)
	}
	if rep.Regions != len(data.Regions) || rep.Countries != wantCountries || rep.Users != len(data.Users) {
		t.Fatalf("first seed %+v", rep)
	}
	// An operator's later edit survives a re-run, which creates nothing.
	on := true
	if _, err := svc.UpdateCountry(ctx, "demo", "AQ", regions.CountryPatch{Enabled: &on}); err != nil {
		t.Fatal(err)
	}
	if rep, err = svc.Seed(ctx, "demo", data); err != nil || rep != (regions.SeedReport{}) {
		t.Fatalf("second seed %+v %v, want nothing created", rep, err)
	}
	list, err := svc.ListRegions(ctx, "demo")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Unassigned {
		if c.Code == "AQ" && !c.Enabled {
			t.Fatal("re-seeding disabled AQ again")
		}
	}
	// SG and MY share a region, SA is in another, US and no country are GLOBAL.
	sg, my, sa := mustRegion(t, svc, "demo", 1001), mustRegion(t, svc, "demo", 1002), mustRegion(t, svc, "demo", 1003)
	us, none := mustRegion(t, svc, "demo", 1005), mustRegion(t, svc, "demo", 1006)
	if sg == 0 || sg != my || sa == 0 || sa == sg || us != 0 || none != 0 {
		t.Fatalf("demo regions: SG %d MY %d SA %d US %d none %d", sg, my, sa, us, none)
	}
}

// TestConcurrentRegistrations signs up many users at once, and one user from
// several clients at once. Locking the absent row before inserting it made
// such sign-ups deadlock each other until the retries ran out.
func TestConcurrentRegistrations(t *testing.T) {
	db := testenv.NewDB(t)
	svc := newTestService(t, db, testenv.NewClock(time.Time{}), regions.Config{})
	f := mustFixture(t, svc, "app1")
	const workers, each = 64, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each+8)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				id := int64(w*each + i + 1)
				display, country := fmt.Sprintf("user_%d", id), "SG"
				if _, err := svc.PutProfile(context.Background(), "app1", id, regions.ProfileUpdate{DisplayUserID: &display, Country: &country}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for c := range 8 { // one new user, eight clients
		wg.Add(1)
		go func() {
			defer wg.Done()
			display, country := fmt.Sprintf("same_%d", c), "MY"
			if _, err := svc.PutProfile(context.Background(), "app1", 1_000_000, regions.ProfileUpdate{DisplayUserID: &display, Country: &country}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("sign-up failed: %v", err)
	}
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM users WHERE app_code = 'app1' AND region_id = ?", f.sea); n != workers*each+1 {
		t.Fatalf("%d users in SEA, want %d", n, workers*each+1)
	}
}

// TestBusyPoolDoesNotStarve runs more concurrent profile writes than the pool
// has connections, on a fresh Service. Preparing a statement on the pool from
// inside a transaction needs a second connection; with every connection held
// by such a transaction, none would ever get one.
func TestBusyPoolDoesNotStarve(t *testing.T) {
	_, dsn := testenv.NewDBWithDSN(t)
	pool, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: dsn, MaxOpenConns: 2}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	setup := newTestService(t, pool, testenv.NewClock(time.Time{}), regions.Config{})
	mustFixture(t, setup, "app1")
	for i := int64(1); i <= 16; i++ {
		mustPut(t, setup, "app1", i, fmt.Sprintf("user_%d", i), "SG")
	}
	svc := newTestService(t, pool, testenv.NewClock(time.Time{}), regions.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := int64(1); i <= 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			country := "SA"
			if _, err := svc.PutProfile(ctx, "app1", i, regions.ProfileUpdate{Country: &country}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("profile write on a busy pool: %v", err)
	}
}
