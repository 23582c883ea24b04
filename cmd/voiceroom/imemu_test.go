package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voiceroom/internal/testenv"
)

// TestIMEmuVerify: `imemu verify` passes only for the emulator started with
// the same VOICEROOM_IMEMU_PROOF_KEY (handed over in the environment), and
// says why it fails otherwise; `imemu --addr-file` writes the address a
// port 0 got.
func TestIMEmuVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	const key = "this-run-key-0123456789abcdef"
	addrFile := filepath.Join(t.TempDir(), "imemu.addr")
	cmd := exec.Command(bin, "imemu", "--listen", "127.0.0.1:0", "--addr-file", addrFile)
	cmd.Env = append(os.Environ(), "VOICEROOM_IMEMU_PROOF_KEY="+key)
	logs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	var addr string
	testenv.Eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(addrFile)
		if err != nil || len(b) == 0 {
			return errors.New("no address written yet")
		}
		addr = strings.TrimSpace(string(b))
		return nil
	})
	if strings.HasSuffix(addr, ":0") {
		t.Fatalf("--addr-file holds %q, want the port it got", addr)
	}
	stranger := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"mac":"00"}`))
	}))
	t.Cleanup(stranger.Close)

	for _, tc := range []struct {
		name, key, url string
		args           []string
		code           int
		says           string
	}{
		{"the emulator with this key", key, "http://" + addr, nil, 0, ""},
		{"another key", "another-key-0123456789abcdef", "http://" + addr, nil, 1, "is not this run's IM emulator: not the emulator holding the key"},
		{"a stranger", key, stranger.URL, nil, 1, "not the emulator holding the key"},
		{"nothing listening", key, "http://" + testenv.ClosedAddr(t), []string{"--wait", "300ms"}, 1, "is not this run's IM emulator"},
		{"no key", "", "http://" + addr, nil, 2, "VOICEROOM_IMEMU_PROOF_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"imemu", "verify", "--url", tc.url}, tc.args...)
			code, out := runCommand(t, map[string]string{"VOICEROOM_IMEMU_PROOF_KEY": tc.key}, args...)
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Fatalf("exit %d, want %d saying %q:\n%s", code, tc.code, tc.says, out)
			}
		})
	}
}
