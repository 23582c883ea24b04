package webhooks_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/webhooks"
)

// testKey seals the tests' secrets.
var testKey = make([]byte, webhooks.KeySize)

// allowLocal lets tests use httptest servers on 127.0.0.1 over http.
var allowLocal = webhooks.Policy{AllowHTTP: true, AllowPrivate: true}

// harness is one test's database, JetStream, admin side and sink.
type harness struct {
	t         *testing.T
	db        *sql.DB
	js        *testenv.JetStream
	pub       *bus.Publisher
	sealer    *webhooks.Sealer
	endpoints *webhooks.Endpoints
	reg       *prometheus.Registry
	metrics   *webhooks.Metrics
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, db: testenv.NewDB(t), js: testenv.RunJetStream(t), reg: prometheus.NewRegistry()}
	h.pub = testenv.NewPublisher(t, h.js.Conn())
	var err error
	if h.sealer, err = webhooks.NewSealer(testKey); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log, err := webhooks.OpenDeliveryLog(ctx, h.js.Conn().JetStream(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if h.endpoints, err = webhooks.NewEndpoints(h.db, h.js.Conn().JetStream(), h.sealer, log, webhooks.EndpointsConfig{Policy: allowLocal}); err != nil {
		t.Fatal(err)
	}
	if h.metrics, err = webhooks.NewMetrics(h.reg); err != nil {
		t.Fatal(err)
	}
	return h
}

// testConfig is a sink that retries fast and refreshes often.
func testConfig() webhooks.Config {
	return webhooks.Config{
		Policy:          allowLocal,
		Timeout:         5 * time.Second,
		RetryDelays:     []time.Duration{50 * time.Millisecond},
		RefreshInterval: 100 * time.Millisecond,
		HistoryInterval: -1, // every attempt: the tests read the history
		LeaseTTL:        2 * time.Second,
		Consumer:        bus.ConsumerRunConfig{ShutdownTimeout: 5 * time.Second},
	}
}

// newSink returns a sink of the harness named holder.
func (h *harness) newSink(holder string, cfg webhooks.Config) *webhooks.Sink {
	h.t.Helper()
	s, err := webhooks.New(h.db, h.js.Conn().JetStream(), h.sealer, holder, cfg, testenv.Logger(h.t), h.metrics, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// startSink runs a sink until the test ends and waits until it delivers.
func (h *harness) startSink(cfg webhooks.Config) *webhooks.Sink {
	h.t.Helper()
	s := h.newSink("test-"+uuid.NewString()[:8], cfg)
	testenv.Start(h.t, s.Run)
	waitServing(h.t, s)
	return s
}

func waitServing(t *testing.T, s *webhooks.Sink) {
	t.Helper()
	select {
	case <-s.Serving():
	case <-time.After(30 * time.Second):
		t.Fatal("sink not delivering within 30s")
	}
}

// create adds an endpoint of app at url.
func (h *harness) create(app, url string, types ...string) webhooks.WithSecret {
	h.t.Helper()
	e, err := h.endpoints.Create(context.Background(), app, "admin:7", webhooks.NewEndpoint{URL: url, EventTypes: types})
	if err != nil {
		h.t.Fatalf("create webhook: %v", err)
	}
	return e
}

// newEndpoint adds an endpoint of app at a new receiver, which verifies
// with its secret.
func (h *harness) newEndpoint(app string, types ...string) (*receiver, webhooks.WithSecret) {
	h.t.Helper()
	rc := newReceiver(h.t)
	e := h.create(app, rc.url(), types...)
	rc.setSecrets(e.Secret)
	return rc, e
}

// setEnabled pauses or resumes endpoint id of app, as an admin.
func (h *harness) setEnabled(app string, id int64, on bool) {
	h.t.Helper()
	if _, err := h.endpoints.Update(context.Background(), app, "admin:7", id, webhooks.Patch{Enabled: &on}); err != nil {
		h.t.Fatal(err)
	}
}

// waitHistory waits until endpoint id of app has at least n attempts in
// its history and returns them, newest first.
func (h *harness) waitHistory(app string, id int64, n int) []webhooks.Delivery {
	h.t.Helper()
	var hist []webhooks.Delivery
	testenv.Eventually(h.t, 30*time.Second, func() error {
		var err error
		hist, err = h.endpoints.Deliveries(context.Background(), app, id, webhooks.MaxDeliveriesKept)
		if err == nil && len(hist) < n {
			return errWaiting
		}
		return err
	})
	return hist
}

// publish stores envs in ROOM_EVENTS, in order.
func (h *harness) publish(envs ...bus.Envelope) {
	h.t.Helper()
	for _, r := range h.pub.PublishEnvelopes(context.Background(), envs) {
		if r.Err != nil {
			h.t.Fatalf("publish: %v", r.Err)
		}
	}
}

// roomEvents is n events of each room of app, interleaved room by room.
func roomEvents(app string, rooms []string, n int) []bus.Envelope {
	var out []bus.Envelope
	for v := 1; v <= n; v++ {
		for _, r := range rooms {
			out = append(out, testenv.NewEnvelope(app, r, int64(v), "RoomUserJoined"))
		}
	}
	return out
}

// idsByRoom is the event ids of envs per room, in order.
func idsByRoom(envs []bus.Envelope) map[string][]string {
	out := map[string][]string{}
	for _, e := range envs {
		out[e.RoomID] = append(out[e.RoomID], e.EventID)
	}
	return out
}

// answer is what a receiver answers one request with.
type answer struct {
	status  int
	headers map[string]string
	body    string
	hold    <-chan struct{} // answer once closed
	drop    bool            // close the connection without an answer
}

// request is one request a receiver got.
type request struct {
	at       time.Time
	id       string
	room     string
	eventIDs []string
	sigs     int
	header   http.Header
	body     []byte
	verified error
	status   int
}

// receiver is an app's backend: it verifies every request with the
// README's verify, answers as answerFn says (200 by default), and records
// what it got.
type receiver struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	secrets  []string
	answerFn func(r request) answer
	reqs     []request
	inFlight map[string]int // by room
	maxRoom  int            // most requests of one room in flight at once
	active   int
	maxAll   int // most requests in flight at once
	quit     chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{t: t, inFlight: map[string]int{}, quit: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(func() {
		close(rc.quit) // answers what it still holds
		rc.srv.Close()
	})
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

func (rc *receiver) setSecrets(s ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets = s
}

func (rc *receiver) setAnswer(f func(r request) answer) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answerFn = f
}

// failWith answers every request with a until the returned flag is
// cleared, then 200.
func (rc *receiver) failWith(a answer) *atomic.Bool {
	var failing atomic.Bool
	failing.Store(true)
	rc.setAnswer(func(request) answer {
		if failing.Load() {
			return a
		}
		return answer{}
	})
	return &failing
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var payload webhooks.Payload
	req := request{at: time.Now(), id: r.Header.Get(webhooks.HeaderID), header: r.Header.Clone(), body: body}
	if err := json.Unmarshal(body, &payload); err != nil || len(payload.Events) == 0 {
		rc.t.Errorf("receiver: body %q: %v", body, err)
	}
	for _, e := range payload.Events {
		req.eventIDs = append(req.eventIDs, e.EventID)
		req.room = e.RoomID
	}
	rc.mu.Lock()
	req.sigs = len(strings.Fields(r.Header.Get(webhooks.HeaderSignature)))
	req.verified = fmt.Errorf("no secret")
	for _, s := range rc.secrets {
		if req.verified = verify(s, r.Header, body, time.Now()); req.verified == nil {
			break
		}
	}
	rc.inFlight[req.room]++
	rc.maxRoom = max(rc.maxRoom, rc.inFlight[req.room])
	rc.active++
	rc.maxAll = max(rc.maxAll, rc.active)
	a := answer{status: 200}
	if rc.answerFn != nil {
		a = rc.answerFn(req)
	}
	rc.mu.Unlock()
	if a.hold != nil {
		select {
		case <-a.hold:
		case <-rc.quit:
		}
	}
	rc.mu.Lock()
	rc.inFlight[req.room]--
	rc.active--
	if a.status == 0 {
		a.status = 200
	}
	req.status = a.status
	if a.drop {
		req.status = 0
	}
	rc.reqs = append(rc.reqs, req)
	rc.mu.Unlock()
	if a.drop {
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range a.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

// requests returns what the receiver got so far.
func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.reqs)
}

// accepted is the event ids the receiver answered 2xx for, per room, in
// the order it got them (repeats included).
func (rc *receiver) accepted() map[string][]string {
	out := map[string][]string{}
	for _, r := range rc.requests() {
		if r.status >= 200 && r.status < 300 {
			out[r.room] = append(out[r.room], r.eventIDs...)
		}
	}
	return out
}

// checkVerified fails for any request that did not verify.
func (rc *receiver) checkVerified() {
	rc.t.Helper()
	for _, r := range rc.requests() {
		if r.verified != nil {
			rc.t.Errorf("request %s did not verify: %v", r.id, r.verified)
		}
	}
}

// waitAccepted waits until the receiver has accepted every event of want,
// and then checks that, per room, the events came in order, each once.
func (rc *receiver) waitAccepted(want map[string][]string, timeout time.Duration) {
	rc.t.Helper()
	got := rc.waitAll(want, timeout)
	for room, ids := range want {
		if !slices.Equal(got[room], ids) {
			rc.t.Errorf("room %s: accepted %d events %v, want exactly %d in order %v", room, len(got[room]), got[room], len(ids), ids)
		}
	}
}

// waitFirstInOrder waits until the receiver has accepted every event of
// want, and then checks that, per room, the events first arrived in order
// (repeats allowed: a receiver drops them by id).
func (rc *receiver) waitFirstInOrder(want map[string][]string, timeout time.Duration) {
	rc.t.Helper()
	got := rc.waitAll(want, timeout)
	for room, ids := range want {
		if first := dedupe(got[room]); !slices.Equal(first, ids) {
			rc.t.Errorf("room %s: events first arrived in order %v, want %v", room, first, ids)
		}
	}
}

// waitAll waits until the receiver has accepted every event of want at
// least once and returns what it accepted.
func (rc *receiver) waitAll(want map[string][]string, timeout time.Duration) map[string][]string {
	rc.t.Helper()
	testenv.Eventually(rc.t, timeout, func() error {
		got := rc.accepted()
		for room, ids := range want {
			if n := len(dedupe(got[room])); n < len(ids) {
				return fmt.Errorf("room %s: %d of %d events accepted", room, n, len(ids))
			}
		}
		return nil
	})
	return rc.accepted()
}

// waitGot waits until the receiver has accepted the event id of room.
func (rc *receiver) waitGot(room, id string, timeout time.Duration) {
	rc.t.Helper()
	testenv.Eventually(rc.t, timeout, func() error {
		if !slices.Contains(rc.accepted()[room], id) {
			return errWaiting
		}
		return nil
	})
}

// dedupe drops repeats, keeping first arrivals in order.
func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// errWaiting is Eventually's "not yet".
var errWaiting = fmt.Errorf("not yet")

// newDLQ is the dead-letter queue of the harness's sinks.
func newDLQ(t *testing.T, h *harness) *bus.DLQ {
	t.Helper()
	q, err := bus.NewDLQ(h.js.Conn().JetStream(), bus.DLQConfig{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// durableInfo is the webhooks durable's state.
func durableInfo(t *testing.T, h *harness) *jetstream.ConsumerInfo {
	t.Helper()
	c, err := h.js.Conn().JetStream().Consumer(context.Background(), bus.StreamName, bus.DurableWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	return c.CachedInfo()
}

// waitHeld waits until the webhooks durable has n events handed out and
// not acked.
func waitHeld(t *testing.T, h *harness, n int) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, func() error {
		c, err := h.js.Conn().JetStream().Consumer(context.Background(), bus.StreamName, bus.DurableWebhooks)
		if err != nil {
			return err
		}
		if got := c.CachedInfo().NumAckPending; got < n {
			return fmt.Errorf("%d events held, want %d", got, n)
		}
		return nil
	})
}
