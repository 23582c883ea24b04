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

	"voiceroom/internal/testenv"
)

// readmeBlock is a shell block of the README marked for this test:
// "<!-- readme-test: NAME -->" on the line above its ```sh fence.
var readmeBlock = regexp.MustCompile("(?s)<!-- readme-test: ([a-z0-9-]+) -->\n```sh\n(.*?)\n```")

// readmeBlocks are the blocks TestREADMEBlocks runs, in this order. A marked
// block missing from this list fails the test, and so does a listed one
// missing from the README. Not run, so not marked: the compose and Docker
// blocks (they need Docker), "Rooms on several nodes"'s change of P (it
// deletes the deployment's record) and its `nats kv watch` (it runs until
// Ctrl-C).
var readmeBlocks = []string{"token", "regions", "rooms", "moderation", "ranks", "nats-streams", "rooms-nodes", "dlq-api", "dlq-nats"}

// blockLimit bounds one block's run. It is not a speed check: a block that
// has not ended by then never will (the nats CLI and the binary are built
// before any block runs).
const blockLimit = 5 * time.Minute

// TestREADMEBlocks runs the README's copy-paste shell blocks against a serve
// of the test's own (the README's localhost:8080 and ./bin/voiceroom
// replaced by the test's), from the repository root as the README says: each
// must end, and no answer may be INTERNAL, UNAVAILABLE, UNAUTHENTICATED or
// "route not found". The dead-letter blocks run with no letter (the normal
// state) and with one, made by a permanent Tencent IM error in the
// emulator, and leave none behind.
func TestREADMEBlocks(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range readmeBlock.FindAllStringSubmatch(string(readme), -1) {
		if _, dup := blocks[m[1]]; dup {
			t.Fatalf("README marks two blocks %q", m[1])
		}
		blocks[m[1]] = m[2]
	}
	for name := range blocks {
		if !strings.Contains(" "+strings.Join(readmeBlocks, " ")+" ", " "+name+" ") {
			t.Errorf("README block %q is marked but this test does not run it", name)
		}
	}
	for _, name := range readmeBlocks {
		if blocks[name] == "" {
			t.Errorf("README has no block marked %q", name)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	emu, emuEnv, haveEmu := startEmulator(t)
	if !haveEmu {
		t.Fatal("this build has no IM emulator: the dead-letter blocks need one")
	}
	p, vars := startServe(t, emuEnv...)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	if code, out := runCommand(t, vars, "seed", "--app", "demo"); code != 0 {
		t.Fatalf("seed: exit %d\n%s", code, out)
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
		out, err := runBlock(root, env, blockScript(blocks[name], base, bin))
		if err != nil {
			t.Fatalf("README block %q: %v\n%s", name, err, out)
		}
		for _, bad := range []string{`"code":"INTERNAL"`, `"code":"UNAVAILABLE"`, `"code":"UNAUTHENTICATED"`, "route not found"} {
			if strings.Contains(out, bad) {
				t.Errorf("README block %q answered %s:\n%s", name, bad, out)
			}
		}
		t.Logf("README block %q:\n%s", name, out)
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

	for _, name := range []string{"token", "regions", "rooms", "moderation", "nats-streams"} {
		if out := run(name); !strings.Contains(out, `"code":"OK"`) && name != "nats-streams" {
			t.Errorf("README block %q: no OK answer", name)
		}
	}
	// A gift, its retry, and the ranks: counted once, on both sides.
	out := run("ranks")
	for _, want := range []string{`"items":[{"user_id":`, `"value":30,"rank":1}]`, `"me":{"rank":1,"value":30}`, `"me":null`,
		`"code":"INVALID_ARGUMENT"`, `"rooms":1,"sets":4,"behind":0`} {
		if !strings.Contains(out, want) {
			t.Errorf("README block ranks lacks %q:\n%s", want, out)
		}
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
	if out := run("dlq-nats"); !strings.Contains(out, "{}") || !strings.Contains(out, "no message found") ||
		strings.Contains(out, "Received JetStream message") {
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
