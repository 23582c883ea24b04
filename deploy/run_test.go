package deploy_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// runLine is the Taskfile's command that starts deploy/run.sh in task run.
var runLine = regexp.MustCompile(`(?m)^\s+- (bash deploy/run\.sh .*\./bin/voiceroom)\s*$`)

// TestTaskRunStopsWhatItStarted runs the Taskfile's run.sh command under
// go-task (`go tool -modfile=tools.mod task`, as task run does), sends a
// signal to the `go tool` process alone, as a script or a supervisor does,
// and checks that the task ends and nothing it started (serve, the IM
// emulator, run.sh) outlives it. go-task keeps such a signal to itself, so
// this holds only through run.sh's --under-task watch.
// testRun is the Taskfile's run.sh command in a Taskfile of the test's
// own, on a binary built for the test, with a database of its own.
type testRun struct {
	root, taskfile, dsn string
}

// newTestRun builds the binary and the task tool and writes a Taskfile
// holding the Taskfile's run.sh command pointed at that binary.
func newTestRun(t *testing.T) *testRun {
	t.Helper()
	if testing.Short() {
		t.Skip("runs go-task, serve and the IM emulator; skipped with -short")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	taskfile, err := os.ReadFile(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		t.Fatal(err)
	}
	m := runLine.FindSubmatch(taskfile)
	if m == nil {
		t.Fatalf("Taskfile.yml has no `- bash deploy/run.sh ... ./bin/voiceroom` command")
	}
	_, dsn := testenv.NewDBWithDSN(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "voiceroom")
	build := exec.Command("go", "build", "-o", bin, "./cmd/voiceroom")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// Build the task tool first, outside any wait below (minutes when not cached).
	tool := exec.Command("go", "tool", "-modfile=tools.mod", "task", "--version")
	tool.Dir = root
	if out, err := tool.CombinedOutput(); err != nil {
		t.Fatalf("go tool task: %v\n%s", err, out)
	}
	line := strings.Replace(string(m[1]), "./bin/voiceroom", bin, 1)
	tf := filepath.Join(dir, "Taskfile.yml")
	if err := os.WriteFile(tf, []byte("version: \"3\"\ntasks:\n  run:\n    cmds:\n      - "+line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return &testRun{root: root, taskfile: tf, dsn: dsn}
}

// runningTask is one `task run` of a testRun.
type runningTask struct {
	cmd  *exec.Cmd
	logs *testenv.LogBuffer
	done chan error
}

// start runs the task (`go tool ... task run`, as task run does) in a
// process group of its own, with env added to the test's environment
// (the emulator on a port of its own unless env moves it).
func (r *testRun) start(t *testing.T, env ...string) *runningTask {
	t.Helper()
	cmd := exec.Command("go", "tool", "-modfile=tools.mod", "task", "--taskfile", r.taskfile, "--dir", r.root, "run")
	cmd.Dir = r.root
	cmd.Env = append(os.Environ(),
		"VOICEROOM_HTTP_ADDR=127.0.0.1:0",
		"VOICEROOM_OPS_ADDR=127.0.0.1:0",
		"VOICEROOM_NATS_LISTEN=127.0.0.1:0",
		"VOICEROOM_IMEMU_LISTEN=127.0.0.1:0",
		"VOICEROOM_DATA_DIR="+t.TempDir(),
		"VOICEROOM_MYSQL_DSN="+r.dsn,
		"VOICEROOM_REDIS_ADDR="+testenv.RedisAddr(),
		"VOICEROOM_LOG_FORMAT=text",
		"VOICEROOM_JWT_SECRET=run-test-secret-0123456789",
		"VOICEROOM_TIM_SDKAPPID=", "VOICEROOM_TIM_APPS=",
	)
	cmd.Env = append(cmd.Env, env...)
	// A group of its own, so that the cleanup can stop what the test
	// failed to, and a signal to the task goes to one process only.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("task run output:\n%s", logs.String())
		}
	})
	return &runningTask{cmd: cmd, logs: logs, done: done}
}

// serving waits until serve answers 200 on /readyz.
func (rt *runningTask) serving(t *testing.T) {
	t.Helper()
	serving := regexp.MustCompile(`msg="http serving".* addr=(\S+)`)
	testenv.Eventually(t, 2*time.Minute, func() error {
		select {
		case err := <-rt.done:
			t.Fatalf("task ended before serving: %v", err)
		default:
		}
		m := serving.FindStringSubmatch(rt.logs.String())
		if m == nil {
			return errors.New("serve is not serving yet")
		}
		resp, err := http.Get("http://" + m[1] + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
}

// ended waits for the task to end and returns its error.
func (rt *runningTask) ended(t *testing.T, why string) error {
	t.Helper()
	select {
	case err := <-rt.done:
		return err
	case <-time.After(2 * time.Minute):
		t.Fatalf("task run still running 2m after %s", why)
		return nil
	}
}

// TestTaskRunStopsWhatItStarted runs the Taskfile's run.sh command under
// go-task (`go tool -modfile=tools.mod task`, as task run does), sends a
// signal to the `go tool` process alone, as a script or a supervisor does,
// and checks that the task ends and nothing it started (serve, the IM
// emulator, run.sh) outlives it. go-task keeps such a signal to itself, so
// this holds only through run.sh's --under-task watch.
func TestTaskRunStopsWhatItStarted(t *testing.T) {
	r := newTestRun(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			rt := r.start(t)
			rt.serving(t)
			started := descendants(t, rt.cmd.Process.Pid)
			for _, want := range []string{"run.sh", " serve", " imemu"} {
				if !containsArgs(started, want) {
					t.Fatalf("no process %q under the task: %v", want, started)
				}
			}
			// The proof key is handed over in the environment: a command
			// line is visible to every user of the machine.
			for _, p := range started {
				if longHex.MatchString(p.args) {
					t.Errorf("%d %q: a key on the command line", p.pid, p.args)
				}
			}
			if out := rt.logs.String(); !strings.Contains(out, "proved with this run's key") {
				t.Errorf("run.sh did not say the emulator proved itself:\n%s", out)
			}

			if err := rt.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := rt.ended(t, sig.String()); err != nil {
				t.Errorf("task run after %v: %v, want a clean exit", sig, err)
			}
			for _, p := range started {
				if p.alive() {
					t.Errorf("%d %q outlived the task", p.pid, p.args)
				}
			}
			if out := rt.logs.String(); strings.Contains(out, "cannot watch the task process") {
				t.Errorf("run.sh did not watch the task process:\n%s", out)
			}
		})
	}
}

// longHex matches a key as run.sh makes them (32 random bytes in hex).
var longHex = regexp.MustCompile(`(^|[\s=])[0-9a-f]{64}(\s|$)`)

// TestTaskRunStopsOnATakenEmulatorPort: when something else holds the
// emulator's port, task run stops with an error naming the address and
// the variable that moves it, before serve starts, and the IM bridge never
// calls the stranger (before the fix, serve ran and the bridge sent it
// signed Tencent calls).
func TestTaskRunStopsOnATakenEmulatorPort(t *testing.T) {
	r := newTestRun(t)
	var mu sync.Mutex
	var asked []string
	stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		asked = append(asked, req.Method+" "+req.URL.RequestURI())
		mu.Unlock()
		w.Write([]byte(`{"ActionStatus":"OK","ErrorCode":0}`))
	}))
	t.Cleanup(stranger.Close)
	addr := stranger.Listener.Addr().String()

	rt := r.start(t, "VOICEROOM_IMEMU_LISTEN="+addr)
	err := rt.ended(t, "the emulator failed to listen")
	out := rt.logs.String()
	if err == nil {
		t.Errorf("task run ended cleanly, want an error")
	}
	for _, want := range []string{"could not listen on " + addr, "VOICEROOM_IMEMU_LISTEN", "address already in use"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "http serving") {
		t.Errorf("serve started:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, a := range asked {
		if strings.Contains(a, "usersig") || strings.HasPrefix(a, "POST") {
			t.Errorf("the stranger on the emulator's port was sent %s", a)
		}
	}
}

// TestTaskRunStopsWhenTheEmulatorEnds: when the emulator ends while serve
// runs, run.sh stops serve with an error rather than leave the bridge
// calling whatever takes the port next.
func TestTaskRunStopsWhenTheEmulatorEnds(t *testing.T) {
	r := newTestRun(t)
	rt := r.start(t)
	rt.serving(t)
	started := descendants(t, rt.cmd.Process.Pid)
	var emu process
	for _, p := range started {
		if strings.Contains(p.args, " imemu --listen") {
			emu = p
		}
	}
	if emu.pid == 0 {
		t.Fatalf("no emulator under the task: %v", started)
	}
	if err := syscall.Kill(emu.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := rt.ended(t, "the emulator was killed"); err == nil {
		t.Errorf("task run ended cleanly, want an error")
	}
	if out := rt.logs.String(); !strings.Contains(out, "the Tencent IM emulator ended; stopping serve") {
		t.Errorf("run.sh did not say why it stopped:\n%s", out)
	}
	for _, p := range started {
		if p.alive() {
			t.Errorf("%d %q outlived the task", p.pid, p.args)
		}
	}
}

// process is one process seen under the task: its pid, its start time (to
// tell it from a later process given the same pid) and its command line.
type process struct {
	pid   int
	start string
	args  string
}

// alive reports whether the process still runs (a zombie counts as gone).
func (p process) alive() bool {
	start, state, err := procStat(p.pid)
	return err == nil && start == p.start && state != "Z"
}

func containsArgs(ps []process, s string) bool {
	for _, p := range ps {
		if strings.Contains(p.args, s) {
			return true
		}
	}
	return false
}

// procStat reads a process's start time and state from /proc.
func procStat(pid int) (start, state string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", "", err
	}
	// The command name is in parentheses and may hold spaces: fields
	// count from the last ")".
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 20 {
		return "", "", fmt.Errorf("/proc/%d/stat: %q", pid, b)
	}
	return f[19], f[0], nil
}

// descendants lists every process under pid, from /proc.
func descendants(tb testing.TB, pid int) []process {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []process
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], children[p]...)
		start, _, err := procStat(p)
		args, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || err2 != nil {
			continue
		}
		out = append(out, process{pid: p, start: start, args: strings.ReplaceAll(strings.TrimRight(string(args), "\x00"), "\x00", " ")})
	}
	return out
}

// TestServicesInstallsNoBrowser: deploy/services.sh (task run's and task
// test's first step) makes MariaDB and Redis reachable and installs
// nothing else, Chromium in particular: only the console's browser test
// needs it, and deploy/test-tools.sh installs it for that test. It runs
// with a PATH of its own, where no browser is and apt-get only records
// that it was called.
func TestServicesInstallsNoBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MariaDB and Redis running")
	}
	bin := t.TempDir()
	calls := filepath.Join(t.TempDir(), "apt-get.calls")
	fake := "#!/bin/sh\necho \"$*\" >>" + calls + "\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "apt-get"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tool := range []string{"sh", "bash", "id", "mariadb", "mysql", "cat", "sleep", "redis-server", "redis-cli",
		"tr", "grep", "sed", "rm", "mkdir"} {
		if p, err := exec.LookPath(tool); err == nil {
			if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
				t.Fatal(err)
			}
		}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "services.sh")
	// Without the test suite's extras (Redis Cluster and Sentinel, the
	// MariaDB pair): whether they run or not, this is about the two
	// services task run needs (on a machine just started the pair is down,
	// and starting it needs tools this PATH leaves out).
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir(), "VOICEROOM_TEST_REDIS_EXTRA=0", "VOICEROOM_TEST_MYSQL_EXTRA=0",
		"VOICEROOM_MYSQL_DSN=" + testenv.MySQLDSN() + "voiceroom", "VOICEROOM_REDIS_ADDR=" + testenv.RedisAddr()}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("services.sh: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(calls); err == nil {
		t.Errorf("services.sh ran apt-get with MariaDB and Redis up:\n%s\noutput:\n%s", b, out)
	}
	if strings.Contains(strings.ToLower(string(out)), "chromium") {
		t.Errorf("services.sh speaks of Chromium:\n%s", out)
	}
}
