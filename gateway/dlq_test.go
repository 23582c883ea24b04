package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/authtoken"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// runTestSink runs a consumer of durable until the test ends.
func runTestSink(tb testing.TB, conn *bus.Conn, durable string, h bus.Handler) {
	tb.Helper()
	c, err := bus.NewConsumer(conn.JetStream(), bus.ConsumerRunConfig{Durable: durable}, h, testenv.Logger(tb), nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := c.Run(ctx); err != nil {
			tb.Errorf("run %s: %v", durable, err)
		}
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-c.Running():
	case <-done:
		tb.Fatalf("%s stopped before running", durable)
	}
}

func mustPublishEvent(tb testing.TB, p *bus.Publisher, app, room string) bus.Envelope {
	tb.Helper()
	env := bus.Envelope{EventID: uuid.NewString(), AppCode: app, RoomID: room, RoomVersion: 1, EventType: "RoomCreated",
		CommandID: uuid.NewString(), OccurredAtMs: time.Now().UnixMilli(), Payload: []byte(`{}`)}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := p.Publish(ctx, env); err != nil {
		tb.Fatal(err)
	}
	return env
}

func dataAs[T any](tb testing.TB, env Envelope) T {
	tb.Helper()
	raw, err := json.Marshal(env.Data)
	if err != nil {
		tb.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		tb.Fatalf("data %s: %v", raw, err)
	}
	return v
}

func TestAdminDLQListAndReplay(t *testing.T) {
	conn := testenv.NewJetStream(t)
	pub, err := bus.NewPublisher(conn.JetStream(), bus.PublisherConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var imFails atomic.Bool
	imFails.Store(true)
	var mu sync.Mutex
	imReplays := map[string]int{} // event_id -> replayed deliveries
	runTestSink(t, conn, bus.DurableIMBridge, func(_ context.Context, d bus.Delivery) error {
		if d.ReplayOf != 0 {
			mu.Lock()
			imReplays[d.Envelope.EventID]++
			mu.Unlock()
		}
		if imFails.Load() {
			return bus.Permanent(errors.New("IM: group does not exist"))
		}
		return nil
	})
	var projected atomic.Int32
	var lastProjected atomic.Value
	runTestSink(t, conn, bus.DurableListProjector, func(_ context.Context, d bus.Delivery) error {
		projected.Add(1)
		lastProjected.Store(d.Envelope.RoomID)
		return nil
	})
	q, err := bus.NewDLQ(conn.JetStream(), bus.DLQConfig{}, testenv.Logger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil, DLQRoutes(q))
	if err != nil {
		t.Fatal(err)
	}
	adminA := mustToken(t, "appA", 0, authtoken.RoleAdmin, time.Hour)
	adminB := mustToken(t, "appB", 0, authtoken.RoleAdmin, time.Hour)

	sent := map[string]bus.Envelope{}
	for i := range 3 {
		env := mustPublishEvent(t, pub, "appA", "room"+strconv.Itoa(i))
		sent[env.EventID] = env
	}
	mustPublishEvent(t, pub, "appB", "roomB")
	list := func(token, query string) DeadLetterPage {
		t.Helper()
		status, env, _ := do(t, s, "GET", "/admin/v1/dlq?"+query, token, "")
		if status != http.StatusOK {
			t.Fatalf("GET ?%s: %d %+v", query, status, env)
		}
		return dataAs[DeadLetterPage](t, env)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(list(adminA, "sink=imbridge").Items); n != 3 {
			return fmt.Errorf("%d letters", n)
		}
		if projected.Load() != 4 {
			return fmt.Errorf("projected %d", projected.Load())
		}
		return nil
	})

	// Paged, with the fields of docs/openapi.yaml's DeadLetterPage.
	first := list(adminA, "sink=imbridge&limit=2")
	if len(first.Items) != 2 || first.Next == nil || *first.Next != first.Items[1].Seq {
		t.Fatalf("first page %+v", first)
	}
	second := list(adminA, "sink=imbridge&limit=2&after="+strconv.FormatUint(*first.Next, 10))
	if len(second.Items) != 1 || second.Next != nil {
		t.Fatalf("second page %+v", second)
	}
	for _, it := range append(first.Items, second.Items...) {
		env, ok := sent[it.EventID]
		if !ok || it.Sink != "imbridge" || it.RoomID != env.RoomID || it.EventType != "RoomCreated" ||
			it.Subject != "room.events.appA."+env.RoomID+".RoomCreated" || it.Reason != "IM: group does not exist" ||
			it.Deliveries != 1 || it.FailedAtMs <= 0 || it.Seq == 0 {
			t.Errorf("item %+v", it)
		}
		delete(sent, it.EventID)
	}
	// Another app's admin sees only its own letter; no sink has another's.
	if b := list(adminB, "sink=imbridge"); len(b.Items) != 1 || b.Items[0].RoomID != "roomB" {
		t.Errorf("appB sees %+v", b)
	}
	if p := list(adminA, "sink=listprojector"); len(p.Items) != 0 {
		t.Errorf("listprojector letters %+v", p)
	}

	for _, bad := range []string{"", "sink=nosuch", "sink=imbridge&limit=abc", "sink=imbridge&limit=-1", "sink=imbridge&after=x", "sink=imbridge.>"} {
		if status, env, _ := do(t, s, "GET", "/admin/v1/dlq?"+bad, adminA, ""); status != http.StatusBadRequest {
			t.Errorf("GET ?%s: %d %+v", bad, status, env)
		}
	}
	if status, _, _ := do(t, s, "GET", "/admin/v1/dlq?sink=imbridge", mustToken(t, "appA", 7, "", time.Hour), ""); status != http.StatusForbidden {
		t.Errorf("a user token got %d", status)
	}
	for _, bad := range []string{`{"sink":"nosuch"}`, `{}`, `{"sink":"imbridge","seqs":"1"}`, `{"sink":`} {
		if status, env, _ := do(t, s, "POST", "/admin/v1/dlq/replay", adminA, bad); status != http.StatusBadRequest {
			t.Errorf("POST %s: %d %+v", bad, status, env)
		}
	}

	// Replay one by seq, then the rest: only the IM sink sees them, once.
	imFails.Store(false)
	status, env, _ := do(t, s, "POST", "/admin/v1/dlq/replay", adminA, fmt.Sprintf(`{"sink":"imbridge","seqs":[%d]}`, first.Items[0].Seq))
	if r := dataAs[ReplayResponse](t, env); status != http.StatusOK || r.Replayed != 1 || r.Skipped != 0 {
		t.Fatalf("replay one: %d %+v", status, env)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(list(adminA, "sink=imbridge").Items); n != 2 {
			return fmt.Errorf("%d letters left", n)
		}
		return nil
	})
	status, env, _ = do(t, s, "POST", "/admin/v1/dlq/replay", adminA, `{"sink":"imbridge"}`)
	if r := dataAs[ReplayResponse](t, env); status != http.StatusOK || r.Replayed != 2 || r.More {
		t.Fatalf("replay all: %d %+v", status, env)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := len(list(adminA, "sink=imbridge").Items); n != 0 {
			return fmt.Errorf("%d letters left", n)
		}
		return nil
	})
	// appB's letter was not touched by appA's replay.
	if b := list(adminB, "sink=imbridge"); len(b.Items) != 1 {
		t.Errorf("appB letters after appA's replay: %+v", b)
	}
	mu.Lock()
	if len(imReplays) != 3 {
		t.Errorf("IM saw replays of %d events, want 3: %v", len(imReplays), imReplays)
	}
	for id, n := range imReplays {
		if n != 1 {
			t.Errorf("event %s replayed to IM %d times", id, n)
		}
	}
	mu.Unlock()
	// The list projector saw each event once, never a replay: a later
	// event, stored after the replays, reaches it as the fifth.
	mustPublishEvent(t, pub, "appA", "room9")
	testenv.Eventually(t, 10*time.Second, func() error {
		if last, _ := lastProjected.Load().(string); last != "room9" {
			return fmt.Errorf("last projected %q", last)
		}
		return nil
	})
	if n := projected.Load(); n != 5 {
		t.Errorf("projected %d deliveries, want 5", n)
	}
}

// fakeDeadLetters records the after of the last List and answers no letters.
type fakeDeadLetters struct {
	after uint64
	calls int
}

func (f *fakeDeadLetters) List(_ context.Context, _, _ string, after uint64, _ int) (bus.LetterPage, error) {
	f.after, f.calls = after, f.calls+1
	return bus.LetterPage{}, nil
}

func (f *fakeDeadLetters) Replay(context.Context, string, string, []uint64) (bus.ReplayResult, error) {
	return bus.ReplayResult{}, nil
}

func (f *fakeDeadLetters) Sinks() []string { return []string{bus.DurableIMBridge} }

func (f *fakeDeadLetters) Backlog(context.Context, string) (bus.Backlog, error) {
	return bus.Backlog{}, nil
}

// TestAdminDLQAfterBound: after is an int64 in docs/openapi.yaml, so the
// route takes up to math.MaxInt64 and names that bound when refusing.
func TestAdminDLQAfterBound(t *testing.T) {
	const maxInt64 = "9223372036854775807"
	reg := prometheus.NewRegistry()
	q := &fakeDeadLetters{}
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil, DLQRoutes(q))
	if err != nil {
		t.Fatal(err)
	}
	admin := mustToken(t, "appA", 0, authtoken.RoleAdmin, time.Hour)
	for _, tc := range []struct {
		after  string
		status int
	}{
		{"0", http.StatusOK},
		{maxInt64, http.StatusOK},
		{"9223372036854775808", http.StatusBadRequest},
		{"18446744073709551615", http.StatusBadRequest},
		{"-1", http.StatusBadRequest},
	} {
		calls := q.calls
		status, env, _ := do(t, s, "GET", "/admin/v1/dlq?sink=imbridge&after="+tc.after, admin, "")
		if status != tc.status {
			t.Errorf("after=%s: %d %+v, want %d", tc.after, status, env, tc.status)
			continue
		}
		if status == http.StatusOK {
			if q.calls != calls+1 || strconv.FormatUint(q.after, 10) != tc.after {
				t.Errorf("after=%s reached List as %d (%d calls)", tc.after, q.after, q.calls-calls)
			}
			continue
		}
		if want := "after: must be a whole number from 0 to " + maxInt64; env.Message != want {
			t.Errorf("after=%s: message %q, want %q", tc.after, env.Message, want)
		}
	}
}
