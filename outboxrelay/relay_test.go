package outboxrelay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/mysqldb"
	"voiceroom/outboxrelay"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	def := outboxrelay.Config{}.WithDefaults()
	if def.PollInterval != time.Second || def.BatchSize != 100 || def.PublishTimeout != 3*time.Second ||
		def.RetryStrategy != "fixed_interval" || def.Retention != 72*time.Hour {
		t.Fatalf("defaults %+v", def)
	}
	neg := outboxrelay.Config{PollInterval: -time.Second, BatchSize: -1, PublishTimeout: -1, Retention: -time.Hour}.WithDefaults()
	if neg.PollInterval != def.PollInterval || neg.BatchSize != def.BatchSize || neg.PublishTimeout != def.PublishTimeout || neg.Retention != def.Retention {
		t.Fatalf("values <= 0 must fall back to the defaults: %+v", neg)
	}
	tests := []struct {
		cfg  outboxrelay.Config
		want error
	}{
		{outboxrelay.Config{}, nil},
		{outboxrelay.Config{RetryStrategy: "fixed_interval"}, nil},
		{outboxrelay.Config{RetryStrategy: "exponential"}, outboxrelay.ErrUnknownRetryStrategy},
		{outboxrelay.Config{RetryStrategy: "Fixed_Interval"}, outboxrelay.ErrUnknownRetryStrategy},
		{outboxrelay.Config{BatchSize: outboxrelay.MaxBatchSize + 1}, outboxrelay.ErrInvalidConfig},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Validate(%+v) = %v, want %v", tt.cfg, err, tt.want)
		}
	}
}

func TestFastPathConfigDefaultsAndValidation(t *testing.T) {
	if def := (outboxrelay.FastPathConfig{}).WithDefaults(); def.Workers != 128 || def.PublishTimeout != 3*time.Second {
		t.Fatalf("defaults %+v", def)
	}
	tests := []struct {
		cfg  outboxrelay.FastPathConfig
		want error
	}{
		{outboxrelay.FastPathConfig{}, nil},
		{outboxrelay.FastPathConfig{Workers: outboxrelay.MaxFastWorkers}, nil},
		{outboxrelay.FastPathConfig{Workers: outboxrelay.MaxFastWorkers + 1}, outboxrelay.ErrInvalidConfig},
		{outboxrelay.FastPathConfig{MarkBatch: outboxrelay.MaxBatchSize + 1}, outboxrelay.ErrInvalidConfig},
		{outboxrelay.FastPathConfig{MarkBatch: 600, MarkQueueSize: 500}, outboxrelay.ErrInvalidConfig},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Errorf("Validate(%+v) = %v, want %v", tt.cfg, err, tt.want)
		}
	}
}

func TestSanitizeError(t *testing.T) {
	err := fmt.Errorf("publish event ev-1 to room.events.a.r.t: %w", errors.New("dial nats://user:s3cret@10.0.0.1:4222:\nrefused"))
	got := outboxrelay.SanitizeError(err, "ev-1", "room.events.a.r.t")
	if strings.Contains(got, "s3cret") || strings.Contains(got, "ev-1") || strings.ContainsAny(got, "\n") {
		t.Fatalf("not sanitized: %q", got)
	}
	long := outboxrelay.SanitizeError(errors.New(strings.Repeat("é", 300)), "", "")
	if len(long) > 200 || !strings.HasPrefix(long, "é") || strings.ContainsRune(long, '\uFFFD') {
		t.Fatalf("not cut on a rune boundary to 200 bytes: %d bytes", len(long))
	}
}

// TestQueryPlansUseTheOutboxIndexes checks with EXPLAIN that the claim,
// retention and the gauges walk idx_room_outbox_pending, and the relay's
// read of rooms' unsent rows short ranges of idx_room_outbox_room, on a table where
// most rows are published (the normal state).
func TestQueryPlansUseTheOutboxIndexes(t *testing.T) {
	db := testenv.NewDB(t)
	var envs []bus.Envelope
	for r := range 20 {
		envs = append(envs, testenv.RoomEnvelopes(testApp, fmt.Sprintf("room%d", r), 1, 50)...)
	}
	testenv.InsertOutbox(t, db, envs...)
	if _, err := db.Exec(`UPDATE room_outbox SET status = 'published', published_at_ms = created_at_ms WHERE id % 10 <> 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`ANALYZE TABLE room_outbox`); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, query string
		args        []any
		key         string
	}{
		{"claim", outboxrelay.ClaimSQL, []any{0, 100}, "idx_room_outbox_pending"},
		{"retention", outboxrelay.PublishedWindowSQL, []any{0, 500}, "idx_room_outbox_pending"},
		{"stats", outboxrelay.PendingStatsSQL, nil, "idx_room_outbox_pending"},
		{"unsent", outboxrelay.UnsentRowsSQL(3), []any{testApp, "room1", 9, 12, testApp, "room2", 0, 1, testApp, "room3", 40, 50},
			"idx_room_outbox_room"},
	} {
		var keys []string // of the room_outbox accesses
		for _, row := range testenv.Explain(t, db, tt.query, tt.args...) {
			if row["table"] == "room_outbox" || row["table"] == "o" {
				keys = append(keys, row["key"])
				if tt.name == "unsent" && row["type"] != "range" {
					t.Errorf("unsent reads idx_room_outbox_room by %q, want range", row["type"])
				}
			}
		}
		t.Logf("%s: EXPLAIN keys %v", tt.name, keys)
		if len(keys) == 0 {
			t.Errorf("%s reads no room_outbox rows", tt.name)
		}
		for _, k := range keys {
			if k != tt.key {
				t.Errorf("%s uses %v, want %s for every room_outbox access", tt.name, keys, tt.key)
				break
			}
		}
	}
}

// TestRelayPublishesPendingRows: every pending row ends up in the stream
// once, in room_version order per room, and published in MySQL.
func TestRelayPublishesPendingRows(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	var envs []bus.Envelope
	for v := range 30 {
		for r := range 3 {
			envs = append(envs, testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", r), int64(v+1), "seat_changed"))
		}
	}
	msgs := testenv.InsertOutbox(t, db, envs...)
	reg := prometheus.NewRegistry()
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), newTestMetrics(t, reg), outboxrelay.Config{BatchSize: 7})
	run := runInBackground(t, r.Run)
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	run.stop(t, 10*time.Second)

	for _, m := range msgs {
		st := testenv.OutboxState(t, db, m.ID)
		if st.Status != "published" || st.PublishedAtMs == 0 || st.LastError != "" || st.RetryCount != 0 {
			t.Fatalf("row %s: %+v", m.ID, st)
		}
	}
	stored := testenv.StreamMessages(t, conn.JetStream())
	if len(stored) != len(msgs) {
		t.Fatalf("stream holds %d messages, want %d", len(stored), len(msgs))
	}
	last := map[string]int64{}
	for _, m := range stored {
		if m.MsgID != m.Envelope.EventID {
			t.Fatalf("Nats-Msg-Id %q, event_id %q", m.MsgID, m.Envelope.EventID)
		}
		if want, err := bus.Subject(m.Envelope.AppCode, m.Envelope.RoomID, m.Envelope.EventType); err != nil || m.Subject != want {
			t.Fatalf("subject %q, want %q (%v)", m.Subject, want, err)
		}
		if m.Envelope.RoomVersion <= last[m.Envelope.RoomID] {
			t.Fatalf("room %s: version %d after %d", m.Envelope.RoomID, m.Envelope.RoomVersion, last[m.Envelope.RoomID])
		}
		last[m.Envelope.RoomID] = m.Envelope.RoomVersion
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_success_total", "path", "relay"); got != float64(len(msgs)) {
		t.Fatalf("success metric %v, want %d", got, len(msgs))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"voiceroom_outbox_pending_rows", "voiceroom_outbox_publish_success_total", "voiceroom_outbox_publish_failure_total",
		"voiceroom_outbox_publish_latency_seconds", "voiceroom_outbox_oldest_pending_age_seconds"} {
		found := false
		for _, mf := range mfs {
			found = found || mf.GetName() == name
		}
		if !found && name != "voiceroom_outbox_publish_failure_total" {
			t.Errorf("metric %s not exported", name)
		}
	}
}

// limitStreamMsgSize makes ROOM_EVENTS refuse messages larger than n bytes
// (a real, per-message publish failure); n = -1 lifts the limit.
func limitStreamMsgSize(tb testing.TB, js jetstream.JetStream, n int32) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, bus.StreamName)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgSize = n
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		tb.Fatal(err)
	}
}

// TestPublishFailureKeepsRowPendingThenSucceeds: a row the stream refuses
// stays pending with retry_count + 1 and last_error, never holds back the
// other rooms, holds back its own room's later rows for the pass, and is
// published on the next pass once the stream takes it.
func TestPublishFailureKeepsRowPendingThenSucceeds(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	big := testenv.NewEnvelope(testApp, "roomA", 1, "gift_sent")
	big.Payload = []byte(`{"note":"` + strings.Repeat("x", 4000) + `"}`)
	a2 := testenv.NewEnvelope(testApp, "roomA", 2, "gift_sent")
	b1 := testenv.NewEnvelope(testApp, "roomB", 1, "gift_sent")
	b2 := testenv.NewEnvelope(testApp, "roomB", 2, "gift_sent")
	// Batches of two: [A1 big, B1], then [A2, B2].
	testenv.InsertOutbox(t, db, big, b1, a2, b2)
	limitStreamMsgSize(t, conn.JetStream(), 2000)

	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	r, err := outboxrelay.New(db, testenv.NewPublisher(t, conn), logs.logger(), newTestMetrics(t, reg), outboxrelay.Config{BatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Pass(context.Background())
	t.Logf("first pass: %+v", res)
	st := testenv.OutboxState(t, db, big.EventID)
	if st.Status != "pending" || st.RetryCount != 1 || st.LastError == "" {
		t.Fatalf("failed row: %+v", st)
	}
	t.Logf("last_error: %q", st.LastError)
	if strings.Contains(st.LastError, big.EventID) {
		t.Fatalf("last_error repeats the event_id: %q", st.LastError)
	}
	if s := testenv.OutboxState(t, db, a2.EventID); s.Status != "pending" || s.RetryCount != 0 {
		t.Fatalf("room A's later row must wait for the next pass untouched: %+v", s)
	}
	for _, e := range []bus.Envelope{b1, b2} {
		if s := testenv.OutboxState(t, db, e.EventID); s.Status != "published" {
			t.Fatalf("room B row %d: %+v", e.RoomVersion, s)
		}
	}
	if res.Failed != 1 || res.HeldBack != 1 || res.Published != 2 {
		t.Fatalf("pass result %+v", res)
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_failure_total", "path", "relay"); got != 1 {
		t.Fatalf("failure metric %v", got)
	}
	// The failure is logged with the fields the README's "The outbox" names.
	lines := logs.lines("outbox publish failed")
	if len(lines) != 1 {
		t.Fatalf("want one failure line, got:\n%s", logs.String())
	}
	for _, field := range []string{`"worker":"room_outbox"`, `"node_id":"test-node"`, `"event_id":"` + big.EventID + `"`,
		`"event_type":"gift_sent"`, `"room_id":"roomA"`, `"retry_count":1`, `"status":"pending"`, `"error":`} {
		if !strings.Contains(lines[0], field) {
			t.Errorf("failure log lacks %s: %s", field, lines[0])
		}
	}

	limitStreamMsgSize(t, conn.JetStream(), -1)
	res = r.Pass(context.Background())
	t.Logf("second pass: %+v", res)
	for _, e := range []bus.Envelope{big, a2} {
		if s := testenv.OutboxState(t, db, e.EventID); s.Status != "published" || s.LastError != "" || s.RetryCount != map[bool]int{true: 1, false: 0}[e.EventID == big.EventID] {
			t.Fatalf("room A row %d after the second pass: %+v", e.RoomVersion, s)
		}
	}
	// Room A's events are in the stream in order: A1 then A2.
	var order []int64
	for _, m := range testenv.StreamMessages(t, conn.JetStream()) {
		if m.Envelope.RoomID == "roomA" {
			order = append(order, m.Envelope.RoomVersion)
		}
	}
	if fmt.Sprint(order) != "[1 2]" {
		t.Fatalf("room A stored as %v", order)
	}
}

// TestJetStreamDownThenBack: with the server down a pass fails its first
// batch (retry_count + 1, last_error) and stops; once the server is back
// the next pass publishes every row exactly once.
//
// Nothing here depends on how fast the machine is: a pass also ends when
// it has run for a poll interval, so the poll interval is an hour (a pass
// ends by its conditions only), and a publish gets the default timeout
// (the down pass waits for it once, the pass after the restart never).
func TestJetStreamDownThenBack(t *testing.T) {
	db := testenv.NewDB(t)
	js := testenv.RunJetStream(t)
	msgs := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", 1, 25)...)
	r := newTestRelay(t, db, testenv.NewPublisher(t, js.Conn()), nil, outboxrelay.Config{BatchSize: 10, PollInterval: time.Hour})

	js.Stop()
	res := r.Pass(context.Background())
	t.Logf("pass while down: %+v", res)
	// One room: its first row fails, and the nine after it in the batch
	// are not sent (never two of a room's messages in flight).
	if res.Published != 0 || res.Failed != 1 || res.HeldBack != 9 {
		t.Fatalf("pass while down: %+v", res)
	}
	for i, m := range msgs {
		st := testenv.OutboxState(t, db, m.ID)
		wantRetries := 0
		if i == 0 {
			wantRetries = 1
		}
		if st.Status != "pending" || st.RetryCount != wantRetries || (wantRetries == 1) != (st.LastError != "") {
			t.Fatalf("row %d: %+v", i, st)
		}
	}

	js.Start()
	// The connection is back; the stream is back once the server has
	// recovered it from its store and answers for it.
	testenv.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.Conn().JetStream().Stream(ctx, bus.StreamName)
		return err
	})
	res = r.Pass(context.Background())
	t.Logf("pass after restart: %+v", res)
	if n := testenv.OutboxCount(t, db, "pending"); n != 0 || res.Published != len(msgs) {
		t.Fatalf("%d rows still pending after %+v", n, res)
	}
	stored := testenv.StreamMessages(t, js.Conn().JetStream())
	seen := map[string]int{}
	for _, m := range stored {
		seen[m.MsgID]++
	}
	for _, m := range msgs {
		if seen[m.ID] != 1 {
			t.Fatalf("event %s stored %d times", m.ID, seen[m.ID])
		}
	}
	if len(stored) != len(msgs) {
		t.Fatalf("stream holds %d, want %d", len(stored), len(msgs))
	}
	for i, m := range stored {
		if m.MsgID != msgs[i].ID {
			t.Fatalf("stream message %d is event %s, want %s: the room's events are out of order", i, m.MsgID, msgs[i].ID)
		}
	}
}

// refusingPublisher is the real publisher, but the first attempt of the
// events in refuse fails at once (as a server restarting refuses a
// message and accepts the next).
type refusingPublisher struct {
	outboxrelay.Publisher
	mu     sync.Mutex
	refuse map[string]bool
}

func (p *refusingPublisher) PublishBatch(ctx context.Context, msgs []bus.Message) []bus.Result {
	p.mu.Lock()
	var send []bus.Message
	var at []int
	results := make([]bus.Result, len(msgs))
	for i, m := range msgs {
		if p.refuse[m.ID] {
			delete(p.refuse, m.ID)
			results[i].Err = errors.New("nats: no responders available for request")
			continue
		}
		send = append(send, m)
		at = append(at, i)
	}
	p.mu.Unlock()
	for i, r := range p.Publisher.PublishBatch(ctx, send) {
		results[at[i]] = r
	}
	return results
}

// TestRoomOrderSurvivesARefusedMessage: a room's message refused in a
// batch whose later messages of the same room would be accepted: none of
// those is stored before it, so the stream holds every room's events in
// order once the next pass has published the rest.
func TestRoomOrderSurvivesARefusedMessage(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	var msgs []bus.Message
	for _, room := range []string{"room1", "room2", "room3"} {
		msgs = append(msgs, testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, room, 1, 4)...)...)
	}
	// room1 v2 and room2 v1 are refused once.
	pub := &refusingPublisher{Publisher: testenv.NewPublisher(t, conn), refuse: map[string]bool{msgs[1].ID: true, msgs[4].ID: true}}
	r := newTestRelay(t, db, pub, nil, outboxrelay.Config{BatchSize: 100, PollInterval: time.Hour})
	res := r.Pass(context.Background())
	if res.Failed != 2 || res.HeldBack != 2+3 || res.Published != 12-7 {
		t.Fatalf("first pass: %+v, want room1 v2 and room2 v1 failed and the rooms' later rows held back", res)
	}
	if res := r.Pass(context.Background()); res.Published != 7 {
		t.Fatalf("second pass: %+v, want the 7 rows left", res)
	}
	last := map[string]int64{}
	for _, m := range testenv.StreamMessages(t, conn.JetStream()) {
		env := m.Envelope
		if env.RoomVersion != last[env.RoomID]+1 {
			t.Fatalf("%s v%d stored after v%d", env.RoomID, env.RoomVersion, last[env.RoomID])
		}
		last[env.RoomID] = env.RoomVersion
	}
	for _, room := range []string{"room1", "room2", "room3"} {
		if last[room] != 4 {
			t.Errorf("%s: stream holds up to v%d, want 4", room, last[room])
		}
	}
}

// TestTwoRelaysOneBacklog: two relays, each with its own MySQL pool and NATS
// connection, drain one backlog; every row is published and the stream
// holds each event_id exactly once, and neither relay ever re-published a
// row the other had (no duplicate acks at all).
func TestTwoRelaysOneBacklog(t *testing.T) {
	db, dsn := testenv.NewDBWithDSN(t)
	srv := testenv.NewJetStreamServer(t)
	var envs []bus.Envelope
	for r := range 50 {
		envs = append(envs, testenv.RoomEnvelopes(testApp, fmt.Sprintf("room%d", r), 1, 100)...)
	}
	msgs := testenv.InsertOutbox(t, db, envs...)

	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	var firstConn *bus.Conn
	var wg sync.WaitGroup
	for i := range 2 {
		pool, err := mysqldb.Open(context.Background(), mysqldb.Config{DSN: dsn, MaxOpenConns: 8}, testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { pool.Close() })
		conn, err := bus.Connect(context.Background(), bus.ConnConfig{URL: srv.ClientURL(), Name: fmt.Sprintf("relay%d", i)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(conn.Close)
		if i == 0 {
			firstConn = conn
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{}); err != nil {
				t.Fatal(err)
			}
			cancel()
		}
		r := newTestRelay(t, pool, testenv.NewPublisher(t, conn), m, outboxrelay.Config{BatchSize: 50})
		run := runInBackground(t, r.Run)
		wg.Go(func() {
			testenv.Eventually(t, 60*time.Second, func() error {
				if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
					return fmt.Errorf("%d pending", n)
				}
				return nil
			})
			run.stop(t, 10*time.Second)
		})
	}
	wg.Wait()

	stored := testenv.StreamMessages(t, firstConn.JetStream())
	seen := make(map[string]int, len(stored))
	for _, s := range stored {
		seen[s.MsgID]++
	}
	for _, msg := range msgs {
		if seen[msg.ID] != 1 {
			t.Fatalf("event %s stored %d times", msg.ID, seen[msg.ID])
		}
	}
	if len(stored) != len(msgs) {
		t.Fatalf("stream holds %d, want %d", len(stored), len(msgs))
	}
	if dup := testenv.MustMetric(t, reg, "voiceroom_outbox_publish_duplicate_total", "path", "relay"); dup != 0 {
		t.Fatalf("%v rows were published twice", dup)
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_success_total", "path", "relay"); got != float64(len(msgs)) {
		t.Fatalf("%v acks for %d rows", got, len(msgs))
	}
}

// TestStoppedAfterPublishBeforeMark: a relay that dies between the stream's
// ack and its marks (the transaction rolls back) leaves the rows pending;
// the next relay publishes them again and the stream drops the repeats.
func TestStoppedAfterPublishBeforeMark(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	msgs := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", 1, 20)...)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	crashing := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	outboxrelay.SetTestHookBeforeMark(crashing, func() error { return errors.New("killed") })
	res := crashing.Pass(context.Background())
	if res.Unmarked != 20 || testenv.OutboxCount(t, db, "pending") != 20 {
		t.Fatalf("after the crash: %+v, %d pending", res, testenv.OutboxCount(t, db, "pending"))
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != 20 {
		t.Fatalf("stream holds %d", n)
	}

	outboxrelay.EndSession(crashing) // its process is gone, and its drain lock with it
	next := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	res = next.Pass(context.Background())
	if res.Published != 20 || testenv.OutboxCount(t, db, "pending") != 0 {
		t.Fatalf("after the restart: %+v", res)
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != 20 {
		t.Fatalf("stream holds %d after the re-publish, want 20", n)
	}
	if dup := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_duplicate_total", "path", "relay"); dup != 20 {
		t.Fatalf("duplicate acks %v, want 20", dup)
	}
	for _, msg := range msgs {
		if st := testenv.OutboxState(t, db, msg.ID); st.Status != "published" || st.RetryCount != 0 {
			t.Fatalf("row %+v", st)
		}
	}
}

// countingPublisher is the real publisher, counting batches and telling the
// test when one starts.
type countingPublisher struct {
	outboxrelay.Publisher
	batches atomic.Int64
	started chan struct{}
	once    sync.Once
}

func (p *countingPublisher) PublishBatch(ctx context.Context, msgs []bus.Message) []bus.Result {
	p.batches.Add(1)
	p.once.Do(func() { close(p.started) })
	return p.Publisher.PublishBatch(ctx, msgs)
}

// TestCancelStopsClaimingAndBoundsInFlight: after cancel no new batch is
// published, the batch in flight ends within the publish timeout and its
// results are recorded, and Run returns holding no MySQL connection.
func TestCancelStopsClaimingAndBoundsInFlight(t *testing.T) {
	db := testenv.NewDB(t)
	js := testenv.RunJetStream(t)
	testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", 1, 100)...)
	js.Stop() // publishes get no ack: the batch in flight lasts its whole timeout

	pub := &countingPublisher{Publisher: testenv.NewPublisher(t, js.Conn()), started: make(chan struct{})}
	const timeout = time.Second
	r := newTestRelay(t, db, pub, nil, outboxrelay.Config{BatchSize: 10, PublishTimeout: timeout, PollInterval: time.Hour})
	run := runInBackground(t, r.Run)
	select {
	case <-pub.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no batch published")
	}
	took := run.stop(t, 10*time.Second)
	t.Logf("Run returned %v after cancel (publish timeout %v)", took, timeout)
	// Without the bound Run would publish the nine other batches, a
	// timeout each: the count shows it, where a limit on the time taken
	// would fail on a loaded machine.
	if n := pub.batches.Load(); n != 1 {
		t.Fatalf("%d batches published, want only the one in flight at cancel", n)
	}
	var failed, untouched int
	if err := db.QueryRow(`SELECT SUM(retry_count = 1 AND last_error IS NOT NULL), SUM(retry_count = 0) FROM room_outbox WHERE status = 'pending'`).Scan(&failed, &untouched); err != nil {
		t.Fatal(err)
	}
	// One room: only its first row is in flight (the others of the batch
	// wait for its ack), and it fails.
	if failed != 1 || untouched != 99 {
		t.Fatalf("%d rows recorded as failed (want the 1 in flight), %d untouched (want 99)", failed, untouched)
	}
	if inUse := db.Stats().InUse; inUse != 0 {
		t.Fatalf("%d MySQL connections still in use after Run returned", inUse)
	}
}

// TestUndecodableRowStaysPending: broken rows at the head of the queue are
// never published nor deleted, get retry_count + 1 and last_error, are
// listed by the Inspector, and do not hold back the rows behind them.
func TestUndecodableRowStaysPending(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	badJSON := testenv.InsertOutboxRaw(t, db, testApp, "ev-bad-json", "room1", 1, "seat_changed", []byte(`{"event_id":`))
	other := testenv.NewEnvelope(testApp, "room1", 2, "seat_changed")
	mismatched, err := other.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	badMatch := testenv.InsertOutboxRaw(t, db, testApp, "ev-mismatch", "room1", 2, "seat_changed", mismatched)
	otherApp := testenv.InsertOutboxRaw(t, db, "app2", "ev-bad-app2", "room9", 1, "seat_changed", []byte(`not json`))
	good := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room2", 1, 5)...)

	logs := &logBuffer{}
	reg := prometheus.NewRegistry()
	r, err := outboxrelay.New(db, testenv.NewPublisher(t, conn), logs.logger(), newTestMetrics(t, reg), outboxrelay.Config{BatchSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	for pass := 1; pass <= 2; pass++ {
		res := r.Pass(context.Background())
		t.Logf("pass %d: %+v", pass, res)
		for _, id := range []string{"ev-bad-json", "ev-mismatch", "ev-bad-app2"} {
			st := testenv.OutboxState(t, db, id)
			if st.Status != "pending" || st.RetryCount != pass || !strings.HasPrefix(st.LastError, "undecodable envelope") {
				t.Fatalf("pass %d: %s: %+v", pass, id, st)
			}
		}
	}
	for _, m := range good {
		if st := testenv.OutboxState(t, db, m.ID); st.Status != "published" {
			t.Fatalf("good row behind the broken ones: %+v", st)
		}
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != uint64(len(good)) {
		t.Fatalf("stream holds %d, want only the %d good rows", n, len(good))
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_undecodable_total"); got != 6 {
		t.Fatalf("undecodable metric %v, want 3 rows x 2 passes", got)
	}
	if lines := logs.lines("undecodable envelope; it stays pending"); len(lines) != 3 || !strings.Contains(strings.Join(lines, ""), `"event_id":"ev-mismatch"`) {
		t.Fatalf("want each broken row logged once with its event_id, got:\n%s", strings.Join(lines, "\n"))
	}

	report, err := outboxrelay.NewInspector(db, nil).Report(context.Background(), testApp)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot: %+v", report)
	if report.PendingCount != 2 || len(report.Undecodable) != 2 || report.Undecodable[0].ID != badJSON || report.Undecodable[1].ID != badMatch {
		t.Fatalf("report of %s: %+v", testApp, report)
	}
	if len(report.TopRetries) != 2 || report.TopRetries[0].RetryCount != 2 || report.OldestPendingEventID != "ev-bad-json" {
		t.Fatalf("report of %s: %+v", testApp, report)
	}
	report2, err := outboxrelay.NewInspector(db, nil).Report(context.Background(), "app2")
	if err != nil {
		t.Fatal(err)
	}
	if len(report2.Undecodable) != 1 || report2.Undecodable[0].ID != otherApp {
		t.Fatalf("report of app2: %+v", report2)
	}
}

// TestRetentionDeletesOldPublishedRows: published rows older than the
// retention go, in small batches; recent published rows and every pending
// row stay.
func TestRetentionDeletesOldPublishedRows(t *testing.T) {
	db := testenv.NewDB(t)
	old := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", 1, 7)...)
	recent := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room2", 1, 3)...)
	oldPending := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room3", 1, 2)...)
	twoHoursAgo := time.Now().Add(-2 * time.Hour).UnixMilli()
	exec := func(query string, args ...any) {
		t.Helper()
		if _, err := db.Exec(query, args...); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range old {
		exec(`UPDATE room_outbox SET status = 'published', published_at_ms = ?, created_at_ms = ? WHERE event_id = ?`, twoHoursAgo, twoHoursAgo, m.ID)
	}
	for _, m := range recent {
		exec(`UPDATE room_outbox SET status = 'published', published_at_ms = ? WHERE event_id = ?`, time.Now().UnixMilli(), m.ID)
	}
	for _, m := range oldPending {
		exec(`UPDATE room_outbox SET created_at_ms = ? WHERE event_id = ?`, twoHoursAgo, m.ID)
	}
	reg := prometheus.NewRegistry()
	// A publisher that never works: retention must not depend on it.
	js := testenv.RunJetStream(t)
	js.Stop()
	r := newTestRelay(t, db, testenv.NewPublisher(t, js.Conn()), newTestMetrics(t, reg),
		outboxrelay.Config{Retention: time.Hour, RetentionBatch: 2, PollInterval: time.Hour, PublishTimeout: 100 * time.Millisecond})
	run := runInBackground(t, r.Run)
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := testenv.MetricValue(t, reg, "voiceroom_outbox_retention_deleted_total"); got != 7 {
			return fmt.Errorf("deleted %v", got)
		}
		return nil
	})
	run.stop(t, 10*time.Second)
	if n := testenv.OutboxCount(t, db, ""); n != 5 {
		t.Fatalf("%d rows left, want the 3 recent published and 2 pending", n)
	}
	if n := testenv.OutboxCount(t, db, "pending"); n != 2 {
		t.Fatalf("%d pending rows left, want 2", n)
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_pending_rows"); got != 2 {
		t.Fatalf("pending gauge %v", got)
	}
	if age := testenv.MetricValue(t, reg, "voiceroom_outbox_oldest_pending_age_seconds"); age < time.Hour.Seconds() {
		t.Fatalf("oldest pending age %vs", age)
	}
}
