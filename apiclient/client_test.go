package apiclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"voiceroom/apiclient"
	"voiceroom/internal/testenv"
)

// seen is what the test server got.
type seen struct {
	method, path, auth, key, contentType, body string
}

// newTestServer answers every request with status and body, and records
// the last request.
func newTestServer(tb testing.TB, status int, body string) (*httptest.Server, *seen) {
	tb.Helper()
	s := &seen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		*s = seen{method: r.Method, path: r.URL.RequestURI(), auth: r.Header.Get("Authorization"), key: r.Header.Get("Idempotency-Key"),
			contentType: r.Header.Get("Content-Type"), body: string(b)}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	tb.Cleanup(srv.Close)
	return srv, s
}

func TestCallSendsTheRequestAndDecodesTheData(t *testing.T) {
	srv, got := newTestServer(t, 200, `{"code":"OK","message":"ok","request_id":"r1","data":{"room_id":"a_1","seats":[{"index":2}]}}`)
	c := apiclient.Client{BaseURL: srv.URL}
	var out struct {
		RoomID string `json:"room_id"`
		Seats  []struct {
			Index int `json:"index"`
		} `json:"seats"`
	}
	err := c.Call(context.Background(), apiclient.Request{Method: "POST", Path: "/api/v1/rooms/a_1/mic/up?x=1", Token: "tok",
		IdempotencyKey: "k-1", Body: map[string]any{"seat_index": 2}}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if out.RoomID != "a_1" || len(out.Seats) != 1 || out.Seats[0].Index != 2 {
		t.Fatalf("data decoded as %+v", out)
	}
	want := seen{method: "POST", path: "/api/v1/rooms/a_1/mic/up?x=1", auth: "Bearer tok", key: "k-1", contentType: "application/json", body: `{"seat_index":2}`}
	if *got != want {
		t.Fatalf("server got %+v, want %+v", *got, want)
	}

	// No body, token or key: none of their headers.
	if err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/healthz"}, nil); err != nil {
		t.Fatal(err)
	}
	if want := (seen{method: "GET", path: "/healthz"}); *got != want {
		t.Fatalf("server got %+v, want %+v", *got, want)
	}
}

func TestCallAnswersTheEnvelopesRefusal(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		body     string
		code     string
		notFound bool
	}{
		{"refused", 409, `{"code":"FAILED_PRECONDITION","message":"room is closed","request_id":"r2"}`, "FAILED_PRECONDITION", false},
		{"no such room", 404, `{"code":"NOT_FOUND","message":"room not found","request_id":"r3"}`, "NOT_FOUND", false},
		{"no such route", 404, `{"code":"NOT_FOUND","message":"route not found","request_id":"r4"}`, "NOT_FOUND", true},
		{"200 but not OK", 200, `{"code":"INTERNAL","message":"odd","request_id":"r5"}`, "INTERNAL", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newTestServer(t, tc.status, tc.body)
			c := apiclient.Client{BaseURL: srv.URL}
			out := map[string]any{"untouched": true}
			err := c.Call(context.Background(), apiclient.Request{Method: "POST", Path: "/p"}, &out)
			var ae *apiclient.Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T), want an *apiclient.Error", err, err)
			}
			var env apiclient.Envelope
			if err := json.Unmarshal([]byte(tc.body), &env); err != nil {
				t.Fatal(err)
			}
			want := apiclient.Error{Method: "POST", Path: "/p", Status: tc.status, Code: tc.code, Message: env.Message, RequestID: env.RequestID}
			if *ae != want {
				t.Fatalf("error %+v, want %+v", *ae, want)
			}
			if !apiclient.IsCode(err, tc.code) || apiclient.IsCode(err, "OK") {
				t.Fatalf("IsCode(%v, %s) wrong", err, tc.code)
			}
			if got := errors.Is(err, apiclient.ErrRouteNotFound); got != tc.notFound {
				t.Fatalf("errors.Is(%v, ErrRouteNotFound) = %v", err, got)
			}
			if len(out) != 1 {
				t.Fatalf("a refusal decoded data: %v", out)
			}
			if s := err.Error(); !strings.Contains(s, "POST /p") || !strings.Contains(s, tc.code) || !strings.Contains(s, env.Message) {
				t.Fatalf("error text %q names neither the call nor the refusal", s)
			}
		})
	}
}

func TestCallRefusesAnAnswerThatIsNoEnvelope(t *testing.T) {
	srv, _ := newTestServer(t, 502, `<html>bad gateway</html>`)
	c := apiclient.Client{BaseURL: srv.URL}
	err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/api/v1/wallet"}, nil)
	var ae *apiclient.Error
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "502") || !strings.Contains(err.Error(), "bad gateway") {
		t.Fatalf("error %v (%T), want a plain error naming the status and the body", err, err)
	}
}

func TestMaxAnswerBytesCutsTheAnswer(t *testing.T) {
	big := `{"code":"OK","message":"ok","data":{"title":"` + strings.Repeat("x", 1000) + `"}}`
	srv, _ := newTestServer(t, 200, big)
	c := apiclient.Client{BaseURL: srv.URL, MaxAnswerBytes: 100}
	a, err := c.Send(context.Background(), apiclient.Request{Method: "GET", Path: "/"})
	if err != nil || a.Status != 200 || len(a.Body) != 100 {
		t.Fatalf("Send: %d, %d bytes, %v; want 200 and the first 100 bytes", a.Status, len(a.Body), err)
	}
	if err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/"}, nil); err == nil {
		t.Fatal("a cut answer decoded")
	}
	c.MaxAnswerBytes = 0 // the default holds it
	if err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/"}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestUseNumberKeepsNumbersExact(t *testing.T) {
	srv, _ := newTestServer(t, 200, `{"code":"OK","message":"ok","data":{"user_id":9007199254740993}}`)
	for _, useNumber := range []bool{false, true} {
		c := apiclient.Client{BaseURL: srv.URL, UseNumber: useNumber}
		var out map[string]any
		if err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/"}, &out); err != nil {
			t.Fatal(err)
		}
		n, isNumber := out["user_id"].(json.Number)
		if isNumber != useNumber || (useNumber && n.String() != "9007199254740993") {
			t.Fatalf("UseNumber %v: user_id decoded as %T %v", useNumber, out["user_id"], out["user_id"])
		}
	}
}

func TestSendAnswersEveryStatusAndFailsOnlyWithoutAnAnswer(t *testing.T) {
	srv, _ := newTestServer(t, 429, `{"code":"RATE_LIMITED","message":"slow down","data":{"retry_after_ms":20}}`)
	c := apiclient.Client{BaseURL: srv.URL}
	a, err := c.Send(context.Background(), apiclient.Request{Method: "POST", Path: "/p", Body: map[string]any{}})
	if err != nil || a.Status != 429 {
		t.Fatalf("Send: %d, %v", a.Status, err)
	}
	env, ok := a.Envelope()
	if !ok || env.Code != "RATE_LIMITED" || string(env.Data) != `{"retry_after_ms":20}` {
		t.Fatalf("envelope %+v, %v", env, ok)
	}
	if _, ok := (apiclient.Answer{Body: []byte("not json")}).Envelope(); ok {
		t.Fatal("a body that is no JSON read as an envelope")
	}

	c.BaseURL = "http://" + testenv.ClosedAddr(t)
	if _, err := c.Send(context.Background(), apiclient.Request{Method: "POST", Path: "/p"}); err == nil || !strings.Contains(err.Error(), "POST /p") {
		t.Fatalf("Send to a closed port: %v, want an error naming the call", err)
	}
	if _, err := c.Send(context.Background(), apiclient.Request{Method: "POST", Path: "/p", Body: func() {}}); err == nil || !strings.Contains(err.Error(), "encode POST /p") {
		t.Fatalf("Send of a body JSON cannot hold: %v", err)
	}
}

// A Client runs over an in-process RoundTripper with bare paths, as the
// console does over the server's Loopback: nothing touches the network.
func TestCallOverAnInProcessRoundTripper(t *testing.T) {
	var got *http.Request
	rt := roundTripper(func(r *http.Request) (*http.Response, error) {
		got = r
		return &http.Response{StatusCode: 200, Header: http.Header{}, Request: r,
			Body: io.NopCloser(strings.NewReader(`{"code":"OK","message":"ok","data":{"n":1}}`))}, nil
	})
	c := apiclient.Client{HTTP: &http.Client{Transport: rt}}
	var out struct{ N int }
	if err := c.Call(context.Background(), apiclient.Request{Method: "GET", Path: "/admin/v1/outbox?limit=5", Token: "t"}, &out); err != nil {
		t.Fatal(err)
	}
	if out.N != 1 || got == nil || got.URL.RequestURI() != "/admin/v1/outbox?limit=5" || got.Header.Get("Authorization") != "Bearer t" {
		t.Fatalf("out %+v, request %v", out, got)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestGetReadsOutsideTheEnvelope(t *testing.T) {
	srv, got := newTestServer(t, 503, "not ready\n")
	c := apiclient.Client{BaseURL: "http://ignored.invalid"}
	status, body, err := c.Get(context.Background(), srv.URL+"/readyz", 4)
	if err != nil || status != 503 || string(body) != "not " || got.path != "/readyz" || got.auth != "" {
		t.Fatalf("Get: %d %q %v (server got %+v)", status, body, err, *got)
	}
}
