package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
)

// testTool is the path of a program only some tests need (find looks for
// it), installing Debian's package with deploy/test-tools.sh when it is
// missing (task run never installs these); without it the test skips,
// saying why.
func testTool(tb testing.TB, tool string, find func() string) string {
	tb.Helper()
	if p := find(); p != "" {
		return p
	}
	out, err := exec.Command("bash", filepath.Join("..", "..", "deploy", "test-tools.sh"), tool).CombinedOutput()
	if p := find(); p != "" {
		return p
	}
	tb.Skipf("no %s, and deploy/test-tools.sh could not install it (%v): %s", tool, err, strings.TrimSpace(string(out)))
	return ""
}

// nginxBinary finds nginx (testTool).
func nginxBinary(t *testing.T) string {
	t.Helper()
	return testTool(t, "nginx", func() string {
		if p, err := exec.LookPath("nginx"); err == nil {
			return p
		}
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			return "/usr/sbin/nginx"
		}
		return ""
	})
}

// accessLine is an access-log line of a text-format serve.
var accessLine = regexp.MustCompile(`msg="http request".* status=(\d+) .*client_ip=(\S+) request_id=(\S+)`)

// clientIPs returns the client address each request id was logged with.
func clientIPs(logs string) map[string]string {
	out := map[string]string{}
	for _, m := range accessLine.FindAllStringSubmatch(logs, -1) {
		out[m[3]] = m[2]
	}
	return out
}

// TestNginxInFrontOfTwoAPIs runs deploy/nginx/voiceroom.conf (its
// addresses and certificate replaced by the test's) in front of two api
// processes that trust nginx's address: requests over TLS reach both;
// each logs the client's own address, not nginx's and not what the
// client wrote into X-Forwarded-For itself; voiceroom's answers (an error
// envelope, X-Request-Id) pass through unchanged; plain HTTP is
// redirected to HTTPS. The client connects from 127.0.0.2, nginx's
// upstream connections come from 127.0.0.1, so the two are told apart. A
// request straight to an api process from an address it does not trust
// is logged with that address, whatever X-Forwarded-For it sends.
func TestNginxInFrontOfTwoAPIs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs nginx and two serve processes; skipped with -short")
	}
	nginx := nginxBinary(t)
	example, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nginx", "voiceroom.conf"))
	if err != nil {
		t.Fatal(err)
	}

	proxyEnv := []string{"VOICEROOM_HTTP_TRUSTED_PROXIES=127.0.0.1", "VOICEROOM_HTTP_ACCESS_LOG=true"}
	p1, vars1 := startServe(t, proxyEnv...)
	base1 := p1.waitServing(t, vars1)
	waitReady(t, p1, base1)
	vars2 := secondServe(t, vars1, "api", "test-node-2")
	p2 := startServeWith(t, vars2)
	base2 := p2.waitServing(t, vars2)
	waitReady(t, p2, base2)

	dir := t.TempDir()
	certFile, keyFile, pool := testenv.SelfSigned(t, dir)
	httpsAddr, httpAddr := testenv.ClosedAddr(t), testenv.ClosedAddr(t)
	conf := string(example)
	for _, r := range []struct{ from, to string }{
		{"server 10.0.0.11:8080;", "server " + vars1["VOICEROOM_HTTP_ADDR"] + ";"},
		{"server 10.0.0.12:8080;", "server " + vars2["VOICEROOM_HTTP_ADDR"] + ";"},
		{"listen 80;", "listen " + httpAddr + ";"},
		{"listen 443 ssl http2;", "listen " + httpsAddr + " ssl http2;"},
		{"/etc/ssl/voiceroom/fullchain.pem", certFile},
		{"/etc/ssl/voiceroom/privkey.pem", keyFile},
	} {
		if strings.Count(conf, r.from) != 1 {
			t.Fatalf("deploy/nginx/voiceroom.conf has %q %d times, want once (the test replaces it)", r.from, strings.Count(conf, r.from))
		}
		conf = strings.Replace(conf, r.from, r.to, 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "voiceroom.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	main := fmt.Sprintf(`daemon off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 256; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/voiceroom.conf;
}
`, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf")).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", filepath.Join(dir, "nginx.conf"))
	nlogs := &testenv.LogBuffer{}
	cmd.Stdout, cmd.Stderr = nlogs, nlogs
	// Its worker inherits the output: the master and the worker go in a
	// group of their own, which the cleanup stops whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			errs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx output:\n%s\nerror.log:\n%s", nlogs.String(), errs)
		}
	})

	// The client, on 127.0.0.2: nginx's upstream connections come from
	// 127.0.0.1, the address the api processes trust.
	from := func(local string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		return &http.Client{
			Transport:     &http.Transport{DialContext: d.DialContext, TLSClientConfig: &tls.Config{RootCAs: pool}},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	client := from("127.0.0.2")
	token, err := authtoken.Issue([]byte(vars1["VOICEROOM_JWT_SECRET"]), "e2e", 11, "", time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status    int
		requestID string
		code      string
	}
	send := func(c *http.Client, url, requestID, auth string) (answer, error) {
		req, err := http.NewRequest("GET", url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", requestID)
		req.Header.Set("X-Forwarded-For", "203.0.113.7") // the client's own claim: never believed
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := c.Do(req)
		if err != nil {
			return answer{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{}, err
		}
		var env struct {
			Code string `json:"code"`
		}
		json.Unmarshal(body, &env)
		return answer{status: resp.StatusCode, requestID: resp.Header.Get("X-Request-Id"), code: env.Code}, nil
	}
	proxied := "https://" + httpsAddr
	testenv.Eventually(t, 30*time.Second, func() error {
		select {
		case err := <-done:
			t.Fatalf("nginx exited: %v", err)
		default:
		}
		a, err := send(client, proxied+"/readyz", "probe", "")
		if err != nil {
			if strings.Contains(err.Error(), "assign requested address") {
				t.Skipf("cannot connect from 127.0.0.2 (this test needs the loopback network 127.0.0.0/8): %v", err)
			}
			return err
		}
		if a.status != 200 {
			return fmt.Errorf("readyz through nginx: %d", a.status)
		}
		return nil
	})

	const n = 12
	for i := range n {
		id := fmt.Sprintf("proxied-%d", i)
		a, err := send(client, proxied+"/api/v1/wallet", id, token)
		if err != nil {
			t.Fatal(err)
		}
		if a.status != 200 || a.requestID != id {
			t.Fatalf("GET /api/v1/wallet through nginx: %d, X-Request-Id %q; want 200 and %q", a.status, a.requestID, id)
		}
	}
	// voiceroom's error envelope passes through as it is.
	if a, err := send(client, proxied+"/api/v1/wallet", "no-token", ""); err != nil || a.status != 401 || a.code != "UNAUTHENTICATED" {
		t.Fatalf("no token through nginx: %+v %v, want 401 UNAUTHENTICATED", a, err)
	}
	// Plain HTTP goes to HTTPS.
	resp, err := client.Get("http://" + httpAddr + "/api/v1/wallet")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != 301 || !strings.HasPrefix(loc, "https://") {
		t.Fatalf("plain HTTP: %d to %q, want 301 to https://", resp.StatusCode, loc)
	}
	// Straight to an api process from an address it does not trust.
	if a, err := send(from("127.0.0.3"), base1+"/api/v1/wallet", "direct", token); err != nil || a.status != 200 {
		t.Fatalf("direct: %+v %v", a, err)
	}

	testenv.Eventually(t, 10*time.Second, func() error {
		got1, got2 := clientIPs(p1.logs.String()), clientIPs(p2.logs.String())
		reached := [2]int{}
		for i := range n {
			id := fmt.Sprintf("proxied-%d", i)
			ip1, in1 := got1[id]
			ip2, in2 := got2[id]
			switch {
			case in1 && in2:
				return fmt.Errorf("%s logged by both processes", id)
			case in1:
				reached[0]++
			case in2:
				reached[1]++
				ip1 = ip2
			default:
				return fmt.Errorf("%s not logged yet", id)
			}
			if ip1 != "127.0.0.2" {
				return fmt.Errorf("%s logged from %s, want the client's 127.0.0.2 (nginx is 127.0.0.1; the client claimed 203.0.113.7)", id, ip1)
			}
		}
		if reached[0] == 0 || reached[1] == 0 {
			return fmt.Errorf("requests per process %v: nginx sent every one to the same", reached)
		}
		if ip := got1["direct"]; ip != "127.0.0.3" {
			return fmt.Errorf("the direct request logged from %q, want its peer 127.0.0.3", ip)
		}
		return nil
	})
}
