package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"voiceroom/authtoken"
	"voiceroom/gateway"
	"voiceroom/internal/testenv"
)

func TestSeedCommandIsIdempotent(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MySQL; skipped with -short")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	db, dsn := testenv.NewDBWithDSN(t)
	seed := func(args ...string) (int, string) {
		cmd := exec.Command(bin, append([]string{"seed"}, args...)...)
		cmd.Env = append(os.Environ(), "VOICEROOM_MYSQL_DSN="+dsn, "VOICEROOM_LOG_FORMAT=text")
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	count := func() string {
		var regions, countries, users int
		q := "SELECT (SELECT COUNT(*) FROM regions WHERE app_code = 'demo'), (SELECT COUNT(*) FROM countries WHERE app_code = 'demo'), (SELECT COUNT(*) FROM users WHERE app_code = 'demo')"
		if err := db.QueryRow(q).Scan(&regions, &countries, &users); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d regions, %d countries, %d users", regions, countries, users)
	}
	if code, out := seed("--app", "demo"); code != 0 {
		t.Fatalf("first seed exit %d:\n%s", code, out)
	}
	first := count()
	if first != "4 regions, 28 countries, 6 users" {
		t.Fatalf("seeded %s", first)
	}
	if code, out := seed(); code != 0 { // --app defaults to demo
		t.Fatalf("second seed exit %d:\n%s", code, out)
	}
	if again := count(); again != first {
		t.Fatalf("second seed changed %s into %s", first, again)
	}
	if code, out := seed("--app", "bad app"); code != 2 {
		t.Fatalf("bad --app: exit %d:\n%s", code, out)
	}
}

// TestServeMountsRegionRoutes checks the api role's wiring: the profile route
// answers (a user without a profile, not an unknown route).
func TestServeMountsRegionRoutes(t *testing.T) {
	p, vars := startServe(t, "VOICEROOM_ROLES=api")
	base := p.waitServing(t, vars)
	tok, err := authtoken.Issue([]byte(vars["VOICEROOM_JWT_SECRET"]), "demo", 42, "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 60*time.Second, func() error {
		select {
		case err := <-p.done:
			t.Fatalf("serve exited early: %v", err)
		default:
		}
		req, err := http.NewRequest("GET", base+"/api/v1/users/me", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var env gateway.Envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
			return fmt.Errorf("answer %d is not the envelope: %v", resp.StatusCode, err)
		}
		if resp.StatusCode != 404 || env.Message != "user has no profile" {
			return fmt.Errorf("got %d %q", resp.StatusCode, env.Message)
		}
		return nil
	})
}
