package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkClientCommand is the load's hot path on the client side: one
// command (a JSON body, a bearer token) over a pooled connection to a
// server that answers a room-sized OK envelope at once, and the answer's
// code read, never its data. The server's share is the floor the client's
// own cost sits on; "bare" is the same exchange with net/http alone, the
// ceiling the client's figure is read against.
func BenchmarkClientCommand(b *testing.B) {
	answer := []byte(`{"code":"OK","message":"ok","request_id":"req-1","data":{"room_id":"bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","seats":[` +
		strings.TrimSuffix(strings.Repeat(`{"index":0,"user_id":1000000001,"muted":false},`, 12), ",") + `],"title":"` + strings.Repeat("x", 400) + `"}}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(answer)
	}))
	defer srv.Close()
	c := newClient(srv.URL, 4)
	ctx := context.Background()
	body := map[string]any{"seat_index": 3}
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if a := c.do(ctx, http.MethodPost, "/api/v1/rooms/r/mic/up", "token", body); a.code != "" {
				b.Fatalf("answer %d %s: %s", a.status, a.code, a.message)
			}
		}
	})
	// The ceiling: the same request and answer over the same pool with
	// net/http alone, no envelope and no answer struct.
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			raw, err := json.Marshal(body)
			if err != nil {
				b.Fatal(err)
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/rooms/r/mic/up", bytes.NewReader(raw))
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer token")
			resp, err := c.http.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
		}
	})
}
