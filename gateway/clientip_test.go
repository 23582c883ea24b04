package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// TestClientOf: the client is the peer unless the peer is a trusted
// proxy; then X-Forwarded-For is read from the right, past every trusted
// address, so that what a client writes there itself is never believed.
func TestClientOf(t *testing.T) {
	trusted, err := parseTrustedProxies([]string{"10.0.0.0/8", " 192.0.2.10 ", "::ffff:198.51.100.1", "2001:db8::/32", ""})
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddr
	for _, tc := range []struct {
		name      string
		peer      string
		forwarded []string
		want      string
	}{
		{"no proxy", "203.0.113.5", nil, "203.0.113.5"},
		{"an untrusted peer's header is ignored", "203.0.113.5", []string{"198.51.100.77"}, "203.0.113.5"},
		{"one trusted proxy", "10.1.2.3", []string{"203.0.113.5"}, "203.0.113.5"},
		{"a spoofed start of the chain", "10.1.2.3", []string{"1.1.1.1, 203.0.113.5"}, "203.0.113.5"},
		{"two trusted proxies", "192.0.2.10", []string{"6.6.6.6, 203.0.113.5, 10.9.9.9"}, "203.0.113.5"},
		{"two headers, the later appended later", "10.1.2.3", []string{"6.6.6.6", "203.0.113.5, 10.0.0.1"}, "203.0.113.5"},
		{"a port and spaces", "10.1.2.3", []string{" 203.0.113.5:4567 "}, "203.0.113.5"},
		{"IPv6", "2001:db8::1", []string{"[2001:db9::5]:80"}, "2001:db9::5"},
		{"an IPv4-mapped peer", "::ffff:10.1.2.3", []string{"203.0.113.5"}, "203.0.113.5"},
		{"a mapped trusted address", "198.51.100.1", []string{"203.0.113.5"}, "203.0.113.5"},
		{"no header from a trusted peer", "10.1.2.3", nil, "10.1.2.3"},
		{"only trusted addresses", "10.1.2.3", []string{"10.0.0.7, 10.0.0.8"}, "10.0.0.7"},
		{"garbage stops at the last proxy's word", "10.1.2.3", []string{"203.0.113.5, unknown, 10.0.0.8"}, "10.0.0.8"},
		{"an empty entry", "10.1.2.3", []string{"203.0.113.5,"}, "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fwd [][]byte
			for _, f := range tc.forwarded {
				fwd = append(fwd, []byte(f))
			}
			if got := clientOf(addr(tc.peer), fwd, trusted); got != addr(tc.want) {
				t.Errorf("client %s, want %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{"10.0.0.0/33", "example.com", "10.0.0.1:80"} {
		if _, err := parseTrustedProxies([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
		err := Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, TrustedProxies: []string{bad}}.Validate()
		var ce *apperr.ConfigError
		if !errors.As(err, &ce) || ce.Field != "TrustedProxies" {
			t.Errorf("Validate with %q: %v, want a ConfigError on TrustedProxies", bad, err)
		}
	}
}

// TestAccessLogNamesTheClient: over real connections from distinct
// loopback addresses, the access log names the peer of a direct request
// (whatever X-Forwarded-For it sends) and the forwarded client of a
// request from the trusted proxy; passing health checks are not logged.
func TestAccessLogNamesTheClient(t *testing.T) {
	s, logs := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1000, RateBurst: 1000,
		TrustedProxies: []string{"127.0.0.1"}, AccessLog: true})
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		<-served
	})
	from := func(local string) *http.Client {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	token := mustToken(t, "app1", 42, "", time.Hour)
	send := func(local, requestID, forwarded string) {
		t.Helper()
		req, err := http.NewRequest("POST", "http://"+s.Addr()+"/api/v1/echo", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("X-Request-Id", requestID)
		if forwarded != "" {
			req.Header.Set("X-Forwarded-For", forwarded)
		}
		resp, err := from(local).Do(req)
		if err != nil {
			t.Skipf("cannot connect from %s (this test needs the loopback network 127.0.0.0/8): %v", local, err)
		}
		resp.Body.Close()
	}
	send("127.0.0.2", "direct", "203.0.113.7")
	send("127.0.0.1", "proxied", "203.0.113.7, 198.51.100.9")
	if resp, err := http.Get("http://" + s.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
	}
	want := map[string]string{"direct": "127.0.0.2", "proxied": "198.51.100.9"}
	var got map[string]string
	testenv.Eventually(t, 10*time.Second, func() error {
		got = map[string]string{}
		for _, line := range strings.Split(logs.String(), "\n") {
			var e struct {
				Msg       string `json:"msg"`
				ClientIP  string `json:"client_ip"`
				RequestID string `json:"request_id"`
				Path      string `json:"path"`
			}
			if json.Unmarshal([]byte(line), &e) != nil || e.Msg != "http request" {
				continue
			}
			if e.Path == "/healthz" {
				return errors.New("a passing health check was logged")
			}
			got[e.RequestID] = e.ClientIP
		}
		if len(got) != len(want) || got["direct"] != want["direct"] || got["proxied"] != want["proxied"] {
			return errors.New("not logged yet")
		}
		return nil
	})
}
