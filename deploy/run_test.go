package deploy_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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
func TestTaskRunStopsWhatItStarted(t *testing.T) {
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

	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command("go", "tool", "-modfile=tools.mod", "task", "--taskfile", tf, "--dir", root, "run")
			cmd.Dir = root
			cmd.Env = append(os.Environ(),
				"VOICEROOM_HTTP_ADDR=127.0.0.1:0",
				"VOICEROOM_NATS_LISTEN=127.0.0.1:0",
				// The bridge is never asked to deliver here, so the
				// emulator's port (and the bridge's domain) may be any.
				"VOICEROOM_IMEMU_LISTEN=127.0.0.1:0",
				"VOICEROOM_DATA_DIR="+t.TempDir(),
				"VOICEROOM_MYSQL_DSN="+dsn,
				"VOICEROOM_REDIS_ADDR="+testenv.RedisAddr(),
				"VOICEROOM_LOG_FORMAT=text",
				"VOICEROOM_JWT_SECRET=run-test-secret-0123456789",
				"VOICEROOM_TIM_SDKAPPID=", "VOICEROOM_TIM_APPS=",
			)
			// A group of its own, so that the cleanup can stop what the test
			// failed to, and the signal below goes to one process only.
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

			serving := regexp.MustCompile(`msg="http serving".* addr=(\S+)`)
			testenv.Eventually(t, 2*time.Minute, func() error {
				select {
				case err := <-done:
					t.Fatalf("task ended before serving: %v", err)
				default:
				}
				m := serving.FindStringSubmatch(logs.String())
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
			started := descendants(t, cmd.Process.Pid)
			for _, want := range []string{"run.sh", " serve", " imemu"} {
				if !containsArgs(started, want) {
					t.Fatalf("no process %q under the task: %v", want, started)
				}
			}

			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("task run after %v: %v, want a clean exit", sig, err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatalf("task run still running 2m after %v", sig)
			}
			for _, p := range started {
				if p.alive() {
					t.Errorf("%d %q outlived the task", p.pid, p.args)
				}
			}
			if out := logs.String(); strings.Contains(out, "cannot watch the task process") {
				t.Errorf("run.sh did not watch the task process:\n%s", out)
			}
		})
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
