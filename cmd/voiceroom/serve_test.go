package main

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// buildBinary builds voiceroom once per test binary run.
var buildBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "voiceroom-bin")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "voiceroom")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// The keys startServe's processes verify tokens with.
const (
	testJWTSecret     = "serve-test-secret-0123456789"
	testPlatformKeyID = "test"
	testPlatformKey   = "serve-test-platform-key-0123456789"
)

type proc struct {
	cmd  *exec.Cmd
	logs *testenv.LogBuffer
	done chan error
}

// startServe runs `voiceroom serve` with a database (testenv's), data dir
// and ports of the test's own, plus extra environment. The HTTP, operators'
// and NATS ports are 0 (the process picks free ones); waitServing fills in
// the addresses it took. Tokens: the tests sign with testJWTSecret, which
// serve accepts for every app in development's single-secret mode, and
// with testPlatformKey for platform operators; per-app keys are the
// tests' own (apps_e2e_test.go).
func startServe(tb testing.TB, extraEnv ...string) (*proc, map[string]string) {
	tb.Helper()
	_, dsn := testenv.NewDBWithDSN(tb) // skips under -short
	vars := map[string]string{
		"VOICEROOM_HTTP_ADDR":   "127.0.0.1:0",
		"VOICEROOM_OPS_ADDR":    "127.0.0.1:0",
		"VOICEROOM_NATS_LISTEN": "127.0.0.1:0",
		"VOICEROOM_DATA_DIR":    tb.TempDir(),
		"VOICEROOM_MYSQL_DSN":   dsn,
		"VOICEROOM_REDIS_ADDR":  testenv.RedisAddr(),
		"VOICEROOM_LOG_FORMAT":  "text",
		"VOICEROOM_LOG_LEVEL":   "debug",
		"VOICEROOM_JWT_SECRET":  testJWTSecret,
		// Development's mode: one secret verifies every app's tokens.
		"VOICEROOM_DEV_SINGLE_SECRET": "true",
		"VOICEROOM_PLATFORM_KEYS":     testPlatformKeyID + ":" + testPlatformKey,
		"VOICEROOM_APPS_SECRET_KEY":   strings.Repeat("a5", 32),
		"VOICEROOM_NODE_ID":           "test-node",
		"VOICEROOM_STREAM_MAX_AGE":    "1h",
	}
	for _, kv := range extraEnv {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return startServeWith(tb, vars), vars
}

// startServeWith runs `voiceroom serve` with exactly vars (plus the test
// process's environment), e.g. again on the database and data dir of a
// process that was killed.
func startServeWith(tb testing.TB, vars map[string]string) *proc {
	tb.Helper()
	bin, err := buildBinary()
	if err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &proc{cmd: cmd, logs: &testenv.LogBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		if tb.Failed() {
			tb.Logf("voiceroom output:\n%s", p.logs.String())
		}
	})
	return p
}

var (
	httpServingLine = regexp.MustCompile(`msg="http serving".* addr=(\S+)`)
	opsServingLine  = regexp.MustCompile(`msg="ops http serving".* addr=(\S+)`)
	natsURLLine     = regexp.MustCompile(`msg="nats: connecting".* url=nats://(\S+)`)
)

// waitServing waits until p serves HTTP, sets vars' VOICEROOM_HTTP_ADDR,
// VOICEROOM_OPS_ADDR (when the operators' listener is on; serve logs it
// first) and (for the embedded server) VOICEROOM_NATS_LISTEN to the
// addresses it took, so that a restart with vars listens on the same ones,
// and returns the public base URL. opsURL(vars) is the operators' one.
func (p *proc) waitServing(tb testing.TB, vars map[string]string) string {
	tb.Helper()
	var addr string
	testenv.Eventually(tb, 60*time.Second, func() error {
		select {
		case err := <-p.done:
			tb.Fatalf("serve exited early: %v\n%s", err, p.logs.String())
		default:
		}
		m := httpServingLine.FindStringSubmatch(p.logs.String())
		if m == nil {
			return fmt.Errorf("not serving http yet")
		}
		addr = m[1]
		return nil
	})
	vars["VOICEROOM_HTTP_ADDR"] = addr
	if m := opsServingLine.FindStringSubmatch(p.logs.String()); m != nil {
		vars["VOICEROOM_OPS_ADDR"] = m[1]
	} else if vars["VOICEROOM_OPS_ADDR"] != "" {
		tb.Fatalf("serves http but logged no operators' listener:\n%s", p.logs.String())
	}
	if m := natsURLLine.FindStringSubmatch(p.logs.String()); m != nil && vars["VOICEROOM_NATS_URL"] == "" {
		vars["VOICEROOM_NATS_LISTEN"] = m[1]
	}
	return "http://" + addr
}

// secondServe returns the variables of another serve process beside the
// one started with vars (after its waitServing): the same database and
// JetStream (the first's embedded server), roles and node id of its own,
// its own ports and data dir.
func secondServe(tb testing.TB, vars map[string]string, roles, node string) map[string]string {
	tb.Helper()
	second := maps.Clone(vars)
	for k, v := range map[string]string{
		"VOICEROOM_ROLES": roles, "VOICEROOM_NODE_ID": node,
		"VOICEROOM_NATS_URL":  "nats://" + vars["VOICEROOM_NATS_LISTEN"],
		"VOICEROOM_HTTP_ADDR": "127.0.0.1:0", "VOICEROOM_OPS_ADDR": "127.0.0.1:0", "VOICEROOM_DATA_DIR": tb.TempDir(),
	} {
		second[k] = v
	}
	return second
}

// opsURL is the base URL of the operators' listener waitServing found.
func opsURL(vars map[string]string) string { return "http://" + vars["VOICEROOM_OPS_ADDR"] }

// wait returns the exit code, failing the test if the process runs past limit.
func (p *proc) wait(tb testing.TB, limit time.Duration) int {
	tb.Helper()
	select {
	case err := <-p.done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			tb.Fatal(err)
		}
		return 0
	case <-time.After(limit):
		tb.Fatalf("process still running after %v", limit)
		return -1
	}
}

func TestServeStartsReadyAndShutsDownInOrder(t *testing.T) {
	p, vars := startServe(t)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)

	// The embedded server is reachable from outside the process (the nats CLI
	// path) and holds both streams and both durables.
	js := mustJetStream(t, vars)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, name := range []string{bus.StreamName, bus.DLQStreamName} {
		if _, err := js.Stream(ctx, name); err != nil {
			t.Fatalf("stream %s: %v", name, err)
		}
	}
	for _, durable := range []string{"imbridge", "listprojector"} {
		if _, err := js.Consumer(ctx, bus.StreamName, durable); err != nil {
			t.Fatalf("consumer %s: %v", durable, err)
		}
	}

	resp, err := http.Get(opsURL(vars) + "/metrics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %v %v", err, resp)
	}
	resp.Body.Close()

	start := time.Now()
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 20*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGINT", code)
	}
	t.Logf("stopped in %v", time.Since(start))
	logs := p.logs.String()
	order := []string{
		"shutdown: signal received",
		"shutdown: draining",
		"shutdown: stopping workers",
		"shutdown: workers stopped",
		"shutdown: http",
		"shutdown: http stopped",
		"shutdown: closing nats connection",
		"shutdown: stopping embedded nats server",
		"shutdown: closing mysql",
		"shutdown: closing redis",
		"shutdown: complete",
	}
	mustLogInOrder(t, logs, order)
}

// TestServeRefusesTakenPorts: a port another process holds stops serve
// with exit code 2 and a message naming the variable and the address.
func TestServeRefusesTakenPorts(t *testing.T) {
	for _, name := range []string{"VOICEROOM_NATS_LISTEN", "VOICEROOM_HTTP_ADDR", "VOICEROOM_OPS_ADDR"} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			p, _ := startServe(t, name+"="+ln.Addr().String())
			if code := p.wait(t, 60*time.Second); code != 2 {
				t.Fatalf("exit code %d, want 2", code)
			}
			if logs := p.logs.String(); !strings.Contains(logs, name+": ") || !strings.Contains(logs, ln.Addr().String()) {
				t.Fatalf("message does not name %s and %s:\n%s", name, ln.Addr(), logs)
			}
		})
	}
}

func TestServeGivesUpOnUnreachableMySQL(t *testing.T) {
	p, _ := startServe(t, "VOICEROOM_MYSQL_DSN=root:@tcp("+testenv.ClosedAddr(t)+")/voiceroom", "VOICEROOM_MYSQL_CONNECT_TIMEOUT=1s")
	if code := p.wait(t, 30*time.Second); code == 0 {
		t.Fatal("exit code 0 with MySQL unreachable")
	}
	if !strings.Contains(p.logs.String(), "VOICEROOM_MYSQL_DSN") {
		t.Fatalf("message does not name VOICEROOM_MYSQL_DSN:\n%s", p.logs.String())
	}
}

func TestServeRejectsBadConfig(t *testing.T) {
	p, _ := startServe(t, "VOICEROOM_ROLES=api,chat")
	if code := p.wait(t, 30*time.Second); code != 2 {
		t.Fatalf("exit code %d, want 2", code)
	}
	if !strings.Contains(p.logs.String(), "VOICEROOM_ROLES") {
		t.Fatalf("message does not name VOICEROOM_ROLES:\n%s", p.logs.String())
	}
}

// TestServeRelayRoleOnly: VOICEROOM_ROLES=relay runs the relay and nothing
// else; it publishes pending rows, and at shutdown it stops before MySQL
// closes.
func TestServeRelayRoleOnly(t *testing.T) {
	p, vars := startServe(t, "VOICEROOM_ROLES=relay", "VOICEROOM_OUTBOX_POLL_INTERVAL=100ms")
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	db, err := sql.Open("mysql", vars["VOICEROOM_MYSQL_DSN"])
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	msgs := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes("app1", "room1", 1, 50)...)
	testenv.Eventually(t, 20*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	js := mustJetStream(t, vars)
	if n := testenv.StreamLen(t, js); n != uint64(len(msgs)) {
		t.Fatalf("stream holds %d, want %d", n, len(msgs))
	}
	js.Conn().Close()

	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("exit code %d after SIGINT", code)
	}
	logs := p.logs.String()
	if strings.Contains(logs, "outbox-fastpath") || strings.Contains(logs, "outbox fast path started") {
		t.Fatalf("the relay role started the fast path:\n%s", logs)
	}
	order := []string{
		`msg="worker starting" node_id=test-node worker=outbox-relay`,
		"outbox relay started",
		"shutdown: stopping workers",
		"outbox relay stopped",
		`msg="worker stopped" node_id=test-node worker=outbox-relay`,
		"shutdown: workers stopped",
		"shutdown: closing mysql",
	}
	mustLogInOrder(t, logs, order)
}

// mustJetStream connects to the embedded JetStream of a serve process
// started with vars (VOICEROOM_NATS_LISTEN, as waitServing set it); the
// connection is closed when the test ends.
func mustJetStream(tb testing.TB, vars map[string]string) jetstream.JetStream {
	tb.Helper()
	return testenv.ConnectJetStream(tb, "nats://"+vars["VOICEROOM_NATS_LISTEN"])
}

// consumerSettled returns the durable's info once it has been delivered
// every message of ROOM_EVENTS and has acknowledged each: nothing it
// acknowledged comes to it again. Before that it returns an error.
func consumerSettled(ctx context.Context, js jetstream.JetStream, durable string) (*jetstream.ConsumerInfo, error) {
	cons, err := js.Consumer(ctx, bus.StreamName, durable)
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		return nil, fmt.Errorf("%s: %d pending, %d ack pending", durable, info.NumPending, info.NumAckPending)
	}
	return info, nil
}

// mustLogInOrder fails the test unless every step appears in logs, each
// after the one before it.
func mustLogInOrder(tb testing.TB, logs string, steps []string) {
	tb.Helper()
	at := 0
	for _, step := range steps {
		i := strings.Index(logs[at:], step)
		if i < 0 {
			tb.Fatalf("log lacks %q after position %d:\n%s", step, at, logs)
		}
		at += i + len(step)
	}
}
