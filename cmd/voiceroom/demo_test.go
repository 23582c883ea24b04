package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// runCommand runs the built binary with the test environment plus vars and
// answers its exit code and output.
func runCommand(tb testing.TB, vars map[string]string, args ...string) (int, string) {
	tb.Helper()
	bin, err := buildBinary()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return 0, string(out)
}

// startEmulator runs `voiceroom imemu` on a port of its own and answers its
// base URL and the environment that points serve at it; ok is false when
// this build has no emulator (the command is unknown).
func startEmulator(tb testing.TB) (base string, env []string, ok bool) {
	tb.Helper()
	bin, err := buildBinary()
	if err != nil {
		tb.Fatal(err)
	}
	addr := testenv.ClosedAddr(tb)
	cmd := exec.Command(bin, "imemu", "--listen", addr, "--sdkappid", "1400000001", "--admin", "administrator",
		"--secret-key", "demo-test-im-secret")
	logs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tb.Cleanup(func() { cmd.Process.Kill() })
	base = "http://" + addr
	exited := false
	testenv.Eventually(tb, 60*time.Second, func() error {
		select {
		case <-done:
			exited = true
			return nil
		default:
		}
		resp, err := http.Get(base + "/_emu/groups")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/_emu/groups: %d", resp.StatusCode)
		}
		return nil
	})
	if exited {
		if !strings.Contains(logs.String(), `unknown command "imemu"`) {
			tb.Fatalf("imemu exited:\n%s", logs.String())
		}
		return "http://" + testenv.ClosedAddr(tb), nil, false
	}
	return base, []string{"VOICEROOM_TIM_DOMAIN=" + base, "VOICEROOM_TIM_SDKAPPID=1400000001",
		"VOICEROOM_TIM_ADMIN=administrator", "VOICEROOM_TIM_SECRET_KEY=demo-test-im-secret"}, true
}

// TestDemoRunsAgainAndAgain runs `voiceroom demo` twice against a serve of
// its own (seeded like task run does), with the IM emulator when this build
// has one: both runs complete every step (a step whose feature this build
// lacks may say "skipped"), and they leave no room open.
func TestDemoRunsAgainAndAgain(t *testing.T) {
	emu, emuEnv, haveEmu := startEmulator(t)
	// As task run does: the demo's webhook receiver is on http://127.0.0.1.
	env := append(emuEnv, "VOICEROOM_WEBHOOKS_ALLOW_HTTP=true", "VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=true")
	p, vars := startServe(t, env...)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	if code, out := runCommand(t, vars, "seed", "--app", "demo"); code != 0 {
		t.Fatalf("seed: exit %d\n%s", code, out)
	}
	imStep := "skipped: no IM emulator at " + emu
	if haveEmu {
		imStep = "message(s) in the group of \"SG demo room"
	}
	for run := 1; run <= 2; run++ {
		code, out := runCommand(t, vars, "demo", "--url", base, "--ops-url", opsURL(vars), "--imemu", emu, "--wait", "60s")
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s", run, code, out)
		}
		steps := []string{"1. Users in SG, MY and SA", "2. Rooms, joins", "3. Gifts and coins", "4. Hosts' tools", "5. Region lists",
			"6. An operator pins", "7. An operator hides", "8. An operator bans", "9. The IM emulator",
			"10. The owners close", "11. The app's backend got each room's events", "12. Where to look next", "demo finished"}
		mustLogInOrder(t, out, steps)
		for _, want := range []string{
			"region SEA", "region MENA", // the server computed the regions
			"INSUFFICIENT_BALANCE", "replayed true", // coins
			"-> today's sender rank (UTC): [#1 user ", "-> today's receiver rank (UTC): [#1 user ", ": 30 coins]", // ranks
			// the hosts' tools
			`notice "Be kind. Ask for a seat, the hosts approve.", seat_mode apply`,
			"FAILED_PRECONDITION: seats in this room need the host's approval",
			"PERMISSION_DENIED", "2:demo_sa_", "(muted)",
			"-> page 1: demo_sg_", "(owner, seat 0), demo_my_", "(admin, seat 1); 3 online",
			"-> page 2: demo_sa_", "(member, seat 2, seat muted); 3 online",
			imStep,
			"-> battle ended: 20:0, winner $ROOM_SG (forfeit); the SG room's top sender", // the PK battle
			"every signature verified", "events in order, room_version 1..", // the webhooks
			"task nats -- stream info ROOM_EVENTS",
			opsURL(vars) + "/metrics", // read where the operators' listener is
		} {
			if !strings.Contains(out, want) {
				t.Fatalf("run %d: output lacks %q:\n%s", run, want, out)
			}
		}
		if strings.Contains(out, "cleanup:") {
			t.Fatalf("run %d: a completed run left something to clean up:\n%s", run, out)
		}
		// Step 5 shows the rooms with the counts their views show (the
		// list's counts lag up to 1 s; the demo waits for them): every
		// run's room has someone in it then.
		lists := out[strings.Index(out, "5. Region lists"):strings.Index(out, "6. An operator pins")]
		for _, line := range strings.Split(lists, "\n") {
			if strings.Contains(line, "<- this run") && strings.Contains(line, "online 0,") {
				t.Errorf("run %d: step 5 lists a room of this run as empty:\n%s", run, lists)
			}
		}
		// Audit lines end with their reason, or with the operator when
		// there is none (the pin and the unpin): never with a dangling
		// colon.
		audit := out[strings.Index(out, "every operator action on a room is audited:"):strings.Index(out, "9. The IM emulator")]
		if !strings.Contains(audit, "unpin    by ") {
			t.Errorf("run %d: the audit trail lacks the unpin:\n%s", run, audit)
		}
		for _, line := range strings.Split(audit, "\n") {
			if strings.Contains(line, " by ") && strings.HasSuffix(strings.TrimSpace(line), ":") {
				t.Errorf("run %d: an audit line ends in a colon: %q", run, line)
			}
		}
		t.Logf("run %d:\n%s", run, out)
	}

	db, err := sql.Open("mysql", vars["VOICEROOM_MYSQL_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var total, open int
	q := "SELECT COUNT(*), COALESCE(SUM(status <> 'closed'), 0) FROM rooms WHERE app_code = 'demo'"
	if err := db.QueryRow(q).Scan(&total, &open); err != nil {
		t.Fatal(err)
	}
	if total != 6 || open != 0 {
		t.Fatalf("after two runs: %d rooms, %d not closed; want 6 and 0", total, open)
	}
}

// TestDemoRefusesWithoutTheServersKey: with no key for the app (none
// stored, none configured, no single secret), the demo stops with a
// message that says how to get one (it never makes a key of its own);
// with another key it says the server refuses its tokens.
func TestDemoRefusesWithoutTheServersKey(t *testing.T) {
	p, vars := startServe(t)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	dsn := vars["VOICEROOM_MYSQL_DSN"]

	empty := t.TempDir()
	code, out := runCommand(t, map[string]string{"VOICEROOM_JWT_SECRET": "", "VOICEROOM_DATA_DIR": empty, "VOICEROOM_MYSQL_DSN": dsn}, "demo", "--url", base)
	if code != 2 || !strings.Contains(out, "voiceroom apps create demo") || !strings.Contains(out, "VOICEROOM_APP_KEYS") {
		t.Fatalf("no key: exit %d, want 2 and a message saying how to get one:\n%s", code, out)
	}
	if entries, err := os.ReadDir(empty); err != nil || len(entries) != 0 {
		t.Fatalf("the demo wrote %d files into the data dir (%v)", len(entries), err)
	}

	code, out = runCommand(t, map[string]string{"VOICEROOM_JWT_SECRET": "another-key-0123456789", "VOICEROOM_MYSQL_DSN": dsn}, "demo", "--url", base)
	if code != 1 || !strings.Contains(out, "refuses the demo's tokens") {
		t.Fatalf("wrong key: exit %d, want 1 and a hint:\n%s", code, out)
	}

	code, out = runCommand(t, map[string]string{"VOICEROOM_JWT_SECRET": "x-0123456789abcdef", "VOICEROOM_MYSQL_DSN": dsn}, "demo", "--url", "http://"+testenv.ClosedAddr(t))
	if code != 1 || !strings.Contains(out, "cannot reach voiceroom") {
		t.Fatalf("no server: exit %d, want 1 and a hint:\n%s", code, out)
	}
}

func TestDemoConfigValidate(t *testing.T) {
	ok := demoConfig{}.WithDefaults()
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*demoConfig)
		field string
	}{
		{"url not http", func(c *demoConfig) { c.URL = "ftp://x" }, "--url"},
		{"url without host", func(c *demoConfig) { c.URL = "http://" }, "--url"},
		{"imemu garbage", func(c *demoConfig) { c.IMEmuURL = "::" }, "--imemu"},
		{"ops url without host", func(c *demoConfig) { c.OpsURL = "http://" }, "--ops-url"},
		{"negative wait", func(c *demoConfig) { c.Wait = -time.Second }, "--wait"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}

// TestUndoStackNewestFirst: what is left is undone newest first, once; what
// a step undid itself is not undone again; the first failure is answered.
func TestUndoStackNewestFirst(t *testing.T) {
	var u undoStack
	var order []string
	for _, key := range []string{"room a", "pin 1", "hide 2", "ban a"} {
		u.push(key, func(context.Context) error {
			order = append(order, key)
			if key == "pin 1" {
				return errors.New("gone")
			}
			return nil
		})
	}
	u.done("hide 2")
	var out strings.Builder
	err := u.run(context.Background(), &out)
	if got := strings.Join(order, ","); got != "ban a,pin 1,room a" {
		t.Fatalf("undone %s, want ban a,pin 1,room a", got)
	}
	if err == nil || !strings.Contains(err.Error(), "cleanup of pin 1") {
		t.Fatalf("err = %v, want the pin's failure", err)
	}
	if err := u.run(context.Background(), &out); err != nil || len(order) != 3 {
		t.Fatalf("second run: %v, %d undone", err, len(order))
	}
}

// TestSameRegionRooms: a user's list must hold the run's rooms of the
// user's region and none of another region's.
func TestSameRegionRooms(t *testing.T) {
	user := func(room string, region int64) *demoUser {
		return &demoUser{regionID: region, regionCode: itoa(region), room: demoRoom{RoomID: room}}
	}
	d := &demoRun{sg: user("sg", 1), my: user("my", 1), sa: user("sa", 2)}
	list := func(ids ...string) []listItem {
		var items []listItem
		for _, id := range ids {
			items = append(items, listItem{RoomID: id})
		}
		return items
	}
	for _, tc := range []struct {
		name  string
		who   *demoUser
		items []listItem
		ok    bool
	}{
		{"SEA sees both of its rooms among others", d.sg, list("x", "my", "y", "sg"), true},
		{"SEA misses one", d.my, list("my"), false},
		{"SEA sees MENA's room", d.sg, list("sg", "my", "sa"), false},
		{"MENA sees its room only", d.sa, list("sa", "z"), true},
		{"MENA sees SEA's room", d.sa, list("sa", "sg"), false},
		{"empty list", d.sa, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := d.sameRegionRooms(tc.who)(tc.items)
			if (err == nil) != tc.ok {
				t.Fatalf("got %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestDemoFollowsTheRunVariables: without flags, the demo looks where
// task run put things when its variables moved them (the API, the
// operators' listener, the IM emulator); flags win.
func TestDemoFollowsTheRunVariables(t *testing.T) {
	t.Setenv("VOICEROOM_HTTP_ADDR", "0.0.0.0:8181")
	t.Setenv("VOICEROOM_OPS_ADDR", "127.0.0.1:9191")
	t.Setenv("VOICEROOM_IMEMU_LISTEN", "127.0.0.1:27080")
	cfg, err := loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	got, err := demoConfig{}.fromEnv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "http://127.0.0.1:8181" || got.OpsURL != "http://127.0.0.1:9191" || got.IMEmuURL != "http://127.0.0.1:27080" {
		t.Errorf("from the variables: url %s, ops %s, imemu %s", got.URL, got.OpsURL, got.IMEmuURL)
	}
	flags := demoConfig{URL: "http://10.0.0.1:1", IMEmuURL: "http://10.0.0.1:2", OpsURL: "http://10.0.0.1:3"}
	if got, err = flags.fromEnv(cfg); err != nil || got != flags {
		t.Errorf("flags: %+v, %v; want them kept", got, err)
	}
	t.Setenv("VOICEROOM_IMEMU_LISTEN", "27080")
	if _, err := (demoConfig{}).fromEnv(cfg); err == nil || !strings.Contains(err.Error(), "VOICEROOM_IMEMU_LISTEN") {
		t.Errorf("a bad VOICEROOM_IMEMU_LISTEN: %v, want an error naming it", err)
	}
}

// TestDemoHelpers: an audit entry without a reason has no colon; the
// list's counts must equal the rooms' views, for the caller's region only.
func TestDemoHelpers(t *testing.T) {
	if got := auditLine("unpin", "admin:7", ""); got != "unpin    by admin:7" {
		t.Errorf("no reason: %q", got)
	}
	if got := auditLine("ban", "admin:7", "spam"); got != "ban      by admin:7: spam" {
		t.Errorf("a reason: %q", got)
	}
	sg := &demoUser{regionID: 1, room: demoRoom{RoomID: "r1"}}
	sa := &demoUser{regionID: 2, room: demoRoom{RoomID: "r2"}}
	views := map[string]demoRoom{"r1": {OnlineCount: 3, Heat: 30}, "r2": {OnlineCount: 1}}
	check := countsAsRooms(sg, []*demoUser{sg, sa}, views)
	if err := check([]listItem{{RoomID: "r1", OnlineCount: 0, Heat: 0}}); err == nil {
		t.Error("a list behind the room's view was accepted")
	}
	if err := check([]listItem{{RoomID: "r1", OnlineCount: 3, Heat: 30}, {RoomID: "other"}}); err != nil {
		t.Errorf("a list as the view: %v", err)
	}
}
