package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// readmeBlock is a shell block of a page (the README or a page of docs/)
// marked for this test: "<!-- readme-test: NAME -->" on the line above its
// ```sh fence.
var readmeBlock = regexp.MustCompile("(?s)<!-- readme-test: ([a-z0-9-]+) -->\n```sh\n(.*?)\n```")

// readmeBlocks are the blocks TestREADMEBlocks runs, in this order. A marked
// block missing from this list fails the test, and so does a listed one
// missing from every page. Not run, so not marked: the compose and Docker
// blocks (they need Docker), "Rooms on several nodes"'s change of P (it
// deletes the deployment's record) and its `nats kv watch` (it runs until
// Ctrl-C), and docs/backup.md's backup and restore (they need a second,
// empty database: TestBackupRestoreDrill runs them).
var readmeBlocks = []string{"token", "regions", "rooms", "moderation", "ranks", "webhooks", "activities", "campaign", "events", "console-token", "metrics",
	"nats-streams", "rooms-nodes", "dlq-api", "dlq-nats", "imemu"}

// docPages are the pages users copy from: the README and every page of
// docs/, relative to the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join("..", "..", "README.md")}, pages...)
}

// markedBlocks reads the marked blocks of every page, by name.
func markedBlocks(t *testing.T) map[string]string {
	t.Helper()
	blocks := map[string]string{}
	where := map[string]string{}
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range readmeBlock.FindAllStringSubmatch(string(raw), -1) {
			if first, dup := where[m[1]]; dup {
				t.Fatalf("%s and %s both mark a block %q", first, page, m[1])
			}
			blocks[m[1]], where[m[1]] = m[2], page
		}
	}
	return blocks
}

// blockLimit bounds one block's run. It is not a speed check: a block that
// has not ended by then never will (the nats CLI and the binary are built
// before any block runs).
const blockLimit = 5 * time.Minute

// TestREADMEBlocks runs the copy-paste shell blocks of the README and of
// the docs/ pages against a serve of the test's own (the pages'
// localhost:8080, 127.0.0.1:9090, localhost:18080 and ./bin/voiceroom
// replaced by the test's), from the repository root as the pages say,
// after the demo has run, as a newcomer runs them (the demo makes and
// deletes rooms, pins, hides and a webhook endpoint, so no block may
// assume the first id of anything): each must end, and no answer may be
// INTERNAL, UNAVAILABLE, UNAUTHENTICATED or "route not found". The
// dead-letter blocks run with no letter (the normal state) and with one,
// made by a permanent Tencent IM error in the emulator, and leave none
// behind.
func TestREADMEBlocks(t *testing.T) {
	blocks := markedBlocks(t)
	for name := range blocks {
		if !strings.Contains(" "+strings.Join(readmeBlocks, " ")+" ", " "+name+" ") {
			t.Errorf("block %q is marked but this test does not run it", name)
		}
	}
	for _, name := range readmeBlocks {
		if blocks[name] == "" {
			t.Errorf("no page marks a block %q", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	emu, emuEnv, haveEmu := startEmulator(t)
	if !haveEmu {
		t.Fatal("this build has no IM emulator: the dead-letter blocks need one")
	}
	// As task run: the demo's webhook receiver is on http://127.0.0.1.
	p, vars := startServe(t, append(emuEnv, "VOICEROOM_WEBHOOKS_ALLOW_HTTP=true", "VOICEROOM_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES=true",
		"VOICEROOM_ACTIVITY_SETTLE_GRACE=2s")...) // as task run
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	if code, out := runCommand(t, vars, "seed", "--app", "demo"); code != 0 {
		t.Fatalf("seed: exit %d\n%s", code, out)
	}
	if code, out := runCommand(t, vars, "demo", "--url", base, "--ops-url", opsURL(vars), "--imemu", emu, "--wait", "60s"); code != 0 ||
		!strings.Contains(out, "demo finished") {
		t.Fatalf("demo: exit %d\n%s", code, out)
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The nats CLI's first build takes minutes: not inside a block's limit.
	tool := exec.Command("go", "tool", "-modfile=tools.mod", "nats", "--version")
	tool.Dir = root
	if out, err := tool.CombinedOutput(); err != nil {
		t.Fatalf("go tool nats: %v\n%s", err, out)
	}
	env := append(os.Environ(),
		"VOICEROOM_JWT_SECRET="+vars["VOICEROOM_JWT_SECRET"],
		"VOICEROOM_DATA_DIR="+vars["VOICEROOM_DATA_DIR"],
		"VOICEROOM_NATS_LISTEN="+vars["VOICEROOM_NATS_LISTEN"],
		"VOICEROOM_NATS_URL=nats://"+vars["VOICEROOM_NATS_LISTEN"],
		"VOICEROOM_MYSQL_DSN="+vars["VOICEROOM_MYSQL_DSN"], // voiceroom ranks rebuild; token reads app demo's key
		"VOICEROOM_APPS_SECRET_KEY="+vars["VOICEROOM_APPS_SECRET_KEY"],
		"VOICEROOM_REDIS_ADDR="+vars["VOICEROOM_REDIS_ADDR"],
	)
	run := func(name string) string {
		t.Helper()
		script := blockScript(blocks[name], base, bin)
		script = strings.ReplaceAll(script, "127.0.0.1:9090", vars["VOICEROOM_OPS_ADDR"])
		script = strings.ReplaceAll(script, "localhost:18080", strings.TrimPrefix(emu, "http://"))
		out, err := runBlock(root, env, script)
		if err != nil {
			t.Fatalf("block %q: %v\n%s", name, err, out)
		}
		for _, bad := range []string{`"code":"INTERNAL"`, `"code":"UNAVAILABLE"`, `"code":"UNAUTHENTICATED"`, "route not found"} {
			if strings.Contains(out, bad) {
				t.Errorf("block %q answered %s:\n%s", name, bad, out)
			}
		}
		t.Logf("block %q:\n%s", name, out)
		return out
	}
	admin := []byte(vars["VOICEROOM_JWT_SECRET"])
	letters := func() int {
		t.Helper()
		var page deadLetterPage
		if code := adminOf(t, base, admin, "demo", "GET", "/admin/v1/dlq?sink=imbridge", "", &page); code != http.StatusOK {
			t.Fatalf("GET /admin/v1/dlq: %d", code)
		}
		return len(page.Items)
	}

	// The statuses the comments promise are shown.
	statuses := map[string][]string{
		"regions":    {`"code":"INVALID_ARGUMENT"`, "} 400\n", `"code":"ALREADY_EXISTS"`, "} 409\n", "} 403\n", "} 404\n"},
		"rooms":      {"} 409\n", `"code":"INSUFFICIENT_BALANCE"`, "} 402\n", "} 403\n"},
		"moderation": {"} 409\n"},
	}
	for _, name := range []string{"token", "regions", "rooms", "moderation", "nats-streams"} {
		out := run(name)
		if !strings.Contains(out, `"code":"OK"`) && name != "nats-streams" {
			t.Errorf("README block %q: no OK answer", name)
		}
		for _, want := range statuses[name] {
			if !strings.Contains(out, want) {
				t.Errorf("README block %q does not show %q:\n%s", name, want, out)
			}
		}
	}
	// A gift, its retry, and the ranks: counted once, on both sides; the
	// room closed at the end.
	out := run("ranks")
	for _, want := range []string{`"items":[{"user_id":`, `"value":30,"rank":1}]`, `"me":{"rank":1,"value":30}`, `"me":null`,
		`"code":"INVALID_ARGUMENT"`, "} 400\n", `"rooms":1,"sets":4,"behind":0`, `"status":"closed"`} {
		if !strings.Contains(out, want) {
			t.Errorf("README block ranks lacks %q:\n%s", want, out)
		}
	}
	// The webhooks walk-through works on the endpoint it made (the demo
	// made and deleted the first), and deletes it.
	out = run("webhooks")
	if strings.Contains(out, "NOT_FOUND") || strings.Contains(out, "endpoint 1\n") || strings.Count(out, `"code":"OK"`) < 8 {
		t.Errorf("README block webhooks:\n%s", out)
	}
	var endpoints struct {
		Webhooks []map[string]any `json:"webhooks"`
	}
	if code := adminOf(t, base, []byte(vars["VOICEROOM_JWT_SECRET"]), "demo", "GET", "/admin/v1/webhooks", "", &endpoints); code != http.StatusOK || len(endpoints.Webhooks) != 0 {
		t.Errorf("after the webhooks block: %d, endpoints %v; want none left", code, endpoints.Webhooks)
	}
	// The activities walk-through: made, refused (400), listed, seen by
	// a user of SEA, cancelled.
	out = run("activities")
	for _, want := range []string{`"status":"scheduled"`, "} 400\n", "rewards[0].to_rank: ", `"activities":[{"activity_id":`, `"status":"cancelled"`} {
		if !strings.Contains(out, want) {
			t.Errorf("README block activities lacks %q:\n%s", want, out)
		}
	}
	// The campaign: ranked, ended, paid into both wallets once.
	out = run("campaign")
	for _, want := range []string{`"score":30}`, `"score":10}`, `"me":{"rank":1,"score":30}`, `"status":"settled"`, `"paid_at_ms":`,
		`"balance":570,`, `"balance":190,`} {
		if !strings.Contains(out, want) {
			t.Errorf("README block campaign lacks %q:\n%s", want, out)
		}
	}
	// Your own consumer: made, read (the demo's and the blocks' gifts),
	// removed.
	out = run("events")
	if !strings.Contains(out, "RoomGiftSent") {
		t.Errorf("README block events read no gift:\n%s", out)
	}
	js := mustJetStream(t, vars)
	if _, err := js.Consumer(t.Context(), bus.StreamName, "my-gifts"); err == nil {
		t.Errorf("README block events left its consumer my-gifts")
	}
	if out := run("console-token"); !strings.HasPrefix(out, "eyJ") {
		t.Errorf("README block console-token:\n%s", out)
	}
	// "A few" series: the outbox's, not every bucket of its histograms.
	out = run("metrics")
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n > 10 || !strings.Contains(out, "voiceroom_outbox_pending_rows") {
		t.Errorf("README block metrics shows %d lines:\n%s", n, out)
	}
	// serve's one rooms node holds every partition, and each command shows it.
	out = run("rooms-nodes")
	for _, want := range []string{
		"256 partitions, lease ttl 5s: 1 node holds 256, 0 free", // voiceroom nodes
		"\n256\n",                    // P
		`{"node":"test-node-`,        // a member record and a lease
		"Maximum Age: 5.00s",         // kv status
		"voiceroom.rooms.test-node-", // micro info: the node's endpoints
	} {
		if !strings.Contains(out, want) {
			t.Errorf("README block rooms-nodes lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^255 +test-node-[0-9a-f]{8}$`).MatchString(out) {
		t.Errorf("README block rooms-nodes: nodes --partitions shows no holder of partition 255")
	}

	// No dead letters: every command ends and says there are none.
	if n := letters(); n != 0 {
		t.Fatalf("%d dead letters before the dead-letter blocks", n)
	}
	if out := run("dlq-api"); !strings.Contains(out, `"items":[]`) || strings.Contains(out, `"replayed":1`) {
		t.Errorf("dlq-api with no letters:\n%s", out)
	}
	// ...and reads as empty: no error, no failed task.
	if out := run("dlq-nats"); !strings.Contains(out, "{}") || !strings.Contains(out, "no dead letters of app demo in sink imbridge") ||
		strings.Contains(out, "Received JetStream message") || strings.Contains(out, "error") || strings.Contains(out, "Failed") {
		t.Errorf("dlq-nats with no letters:\n%s", out)
	}

	// One letter: the nats block shows it and deletes it by the sequence it read.
	mustDeadLetter(t, emu, base, vars)
	out = run("dlq-nats")
	for _, want := range []string{"Received JetStream message", "Voiceroom-Dlq-Reason: tencent im", "injected fault", "stream rmm ROOM_EVENTS_DLQ"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlq-nats with one letter lacks %q:\n%s", want, out)
		}
	}
	if n := letters(); n != 0 {
		t.Errorf("%d dead letters after dlq-nats, want it to have deleted the one", n)
	}

	// One letter: the API block replays it by the seq it read; the sink handles it.
	mustDeadLetter(t, emu, base, vars)
	if out := run("dlq-api"); !strings.Contains(out, `"replayed":1`) {
		t.Errorf("dlq-api with one letter did not replay it:\n%s", out)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if n := letters(); n != 0 {
			return fmt.Errorf("%d dead letters after the replay", n)
		}
		return nil
	})

	// Last, as it fails IM calls for 10 s: the emulator's counters, a fault.
	if out := run("imemu"); !strings.Contains(out, `"calls":`) || !strings.Contains(out, `"http500"`) {
		t.Errorf("README block imemu:\n%s", out)
	}
}

// runBlock runs script with bash from dir, in a process group of its own
// that is killed if it outlives blockLimit, and answers its output.
func runBlock(dir string, env []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), blockLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = dir, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("did not end within %v", blockLimit)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		err = nil // a block's last command may fail (none to show); its answers are checked instead
	}
	return out.String(), err
}

// mustDeadLetter makes one dead letter of the IM bridge in app demo: the
// emulator refuses group creation with a permanent error (10004) while a
// room is created, then is healthy again.
func mustDeadLetter(t *testing.T, emu, base string, vars map[string]string) {
	t.Helper()
	send := func(method, url, token, body string) {
		t.Helper()
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d", method, url, resp.StatusCode)
		}
	}
	send("POST", emu+"/_emu/faults", "", `{"mode":"error","error_code":10004,"api":"group_open_http_svc/create_group"}`)
	owner := time.Now().UnixNano()%1_000_000_000 + 100_000
	code, token := runCommand(t, vars, "token", "--app", "demo", "--user", fmt.Sprint(owner))
	if code != 0 {
		t.Fatalf("token: exit %d: %s", code, token)
	}
	token = strings.TrimSpace(token)
	send("PUT", base+"/api/v1/users/me", token, fmt.Sprintf(`{"display_user_id":"dlq_%d","country":"SG"}`, owner))
	send("POST", base+"/api/v1/rooms/create", token, `{"room_name":"dead letter"}`)
	secret := []byte(vars["VOICEROOM_JWT_SECRET"])
	testenv.Eventually(t, time.Minute, func() error {
		var page deadLetterPage
		if code := adminOf(t, base, secret, "demo", "GET", "/admin/v1/dlq?sink=imbridge", "", &page); code != http.StatusOK {
			return fmt.Errorf("GET /admin/v1/dlq: %d", code)
		}
		if len(page.Items) != 1 {
			return fmt.Errorf("%d dead letters, want 1", len(page.Items))
		}
		return nil
	})
	send("DELETE", emu+"/_emu/faults", "", "")
}
