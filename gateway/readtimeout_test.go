package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveTCP runs s on a loopback port until the test ends.
func serveTCP(tb testing.TB, s *Server) string {
	tb.Helper()
	if err := s.Listen(); err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return s.Addr()
}

// TestReadTimeoutAnswers408: a client that sends no complete request
// within ReadTimeout gets HTTP's 408 with the envelope code
// REQUEST_TIMEOUT and a closed connection (not INVALID_ARGUMENT: it sent
// nothing wrong; not UNAVAILABLE: the server is fine). An idle keep-alive
// connection past IdleTimeout is closed without any answer, so a client
// never reads an unsolicited response on a connection it reuses.
func TestReadTimeoutAnswers408(t *testing.T) {
	s, _ := newTestServerConfig(t, Config{Addr: "127.0.0.1:0", JWTSecret: testSecret, RatePerUser: 1000, RateBurst: 1000,
		ReadTimeout: 200 * time.Millisecond, IdleTimeout: 200 * time.Millisecond})
	addr := serveTCP(t, s)

	for name, partial := range map[string]string{
		"nothing sent":       "",
		"headers unfinished": "GET /healthz HTTP/1.1\r\nHost: x\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, partial); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(10 * time.Second)) // a bound on a hung test, not a measurement
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer after the read timeout: %v", err)
			}
			defer resp.Body.Close()
			var env Envelope
			if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusRequestTimeout || env.Code != "REQUEST_TIMEOUT" || !resp.Close {
				t.Fatalf("answered %d %q (close %v), want 408 REQUEST_TIMEOUT and a closed connection", resp.StatusCode, env.Code, resp.Close)
			}
		})
	}

	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("healthz: %d, close %v", resp.StatusCode, resp.Close)
		}
		// Idle past IdleTimeout: the server closes, writing nothing.
		n, err := br.Read(make([]byte, 1))
		if n != 0 || !errors.Is(err, io.EOF) {
			t.Fatalf("idle connection: read %d bytes, %v; want a silent close", n, err)
		}
	})
}
