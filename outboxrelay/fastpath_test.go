package outboxrelay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// TestFastPathPublishesAndMarks: committed events reach the stream at once
// and their rows become published, so the relay never publishes them again.
func TestFastPathPublishesAndMarks(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), m, outboxrelay.FastPathConfig{})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, fp.Run)

	var all []bus.Message
	for v := range 10 {
		var envs []bus.Envelope
		for r := range 5 {
			envs = append(envs, testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", r), int64(v+1), "user_joined"))
		}
		msgs := testenv.InsertOutbox(t, db, envs...)
		fp.Committed(msgs, voiceroom.OutboxGroup{}, time.Now())
		all = append(all, msgs...)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	for _, msg := range all {
		if st := testenv.OutboxState(t, db, msg.ID); st.Status != "published" || st.RetryCount != 0 || st.PublishedAtMs == 0 {
			t.Fatalf("row %+v", st)
		}
	}

	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	if res := r.Pass(context.Background()); res.Claimed != 0 {
		t.Fatalf("the relay took rows the fast path published: %+v", res)
	}
	if got := testenv.MustMetric(t, reg, "voiceroom_outbox_publish_success_total", "path", "relay"); got != 0 {
		t.Fatalf("relay published %v", got)
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != uint64(len(all)) {
		t.Fatalf("stream holds %d, want %d", n, len(all))
	}
	// Per room, the stream holds the events in room_version order.
	last := map[string]int64{}
	for _, sm := range testenv.StreamMessages(t, conn.JetStream()) {
		if sm.Envelope.RoomVersion != last[sm.Envelope.RoomID]+1 {
			t.Fatalf("room %s: version %d after %d", sm.Envelope.RoomID, sm.Envelope.RoomVersion, last[sm.Envelope.RoomID])
		}
		last[sm.Envelope.RoomID] = sm.Envelope.RoomVersion
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_latency_seconds", "path", "fast"); got != float64(len(all)) {
		t.Fatalf("latency observations %v, want %d", got, len(all))
	}
}

// TestFastPathJetStreamDown: while JetStream is down a fast publish fails
// (at once when the connection is known to be down, after the publish
// timeout otherwise); the row stays pending with retry_count 0. Once
// JetStream is back the room's later events go to the relay too, which
// publishes the room in order, each event once; then the room is fast again.
func TestFastPathJetStreamDown(t *testing.T) {
	for _, knowsDown := range []bool{true, false} {
		t.Run(fmt.Sprintf("connected_check=%v", knowsDown), func(t *testing.T) {
			db := testenv.NewDB(t)
			js := testenv.RunJetStream(t)
			reg := prometheus.NewRegistry()
			m := newTestMetrics(t, reg)
			cfg := outboxrelay.FastPathConfig{PublishTimeout: 300 * time.Millisecond, CheckInterval: 20 * time.Millisecond}
			if knowsDown {
				cfg.Connected = js.Conn().NATS().IsConnected
			}
			fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, js.Conn()), testenv.Logger(t), m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			runInBackground(t, fp.Run)
			relay := newTestRelay(t, db, testenv.NewPublisher(t, js.Conn()), m, outboxrelay.Config{})

			js.Stop()
			v1 := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 1, "gift_sent"))
			start := time.Now()
			fp.Committed(v1, voiceroom.OutboxGroup{}, time.Now())
			if time.Since(start) > 500*time.Millisecond { // it takes microseconds; the margin is for a loaded machine
				t.Fatalf("Committed blocked for %v", time.Since(start))
			}
			testenv.Eventually(t, 5*time.Second, func() error {
				if n, _ := fp.BlockedRooms(); n != 1 {
					return fmt.Errorf("%d rooms handed to the relay", n)
				}
				return nil
			})
			if st := testenv.OutboxState(t, db, v1[0].ID); st.Status != "pending" || st.RetryCount != 0 || st.LastError != "" {
				t.Fatalf("row after the failed fast publish: %+v", st)
			}
			reason := "disconnected"
			if !knowsDown {
				reason = "publish_failed"
				if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_failure_total", "path", "fast"); got != 1 {
					t.Fatalf("fast failures %v", got)
				}
			}
			if got := testenv.MetricValue(t, reg, "voiceroom_outbox_fastpath_handed_over_total", "reason", reason); got != 1 {
				t.Fatalf("handed over (%s) %v", reason, got)
			}

			js.Start()
			v2 := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 2, "gift_sent"))
			fp.Committed(v2, voiceroom.OutboxGroup{}, time.Now())
			if got := testenv.MetricValue(t, reg, "voiceroom_outbox_fastpath_handed_over_total", "reason", "room_blocked"); got != 1 {
				t.Fatalf("room 1's next event must go to the relay behind the first: handed over %v", got)
			}
			if res := relay.Pass(context.Background()); res.Published != 2 {
				t.Fatalf("relay pass: %+v", res)
			}
			testenv.Eventually(t, 5*time.Second, func() error {
				if n, _ := fp.BlockedRooms(); n != 0 {
					return fmt.Errorf("%d rooms still handed to the relay", n)
				}
				return nil
			})
			v3 := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 3, "gift_sent"))
			fp.Committed(v3, voiceroom.OutboxGroup{}, time.Now())
			testenv.Eventually(t, 5*time.Second, func() error {
				if st := testenv.OutboxState(t, db, v3[0].ID); st.Status != "published" {
					return fmt.Errorf("v3 %s", st.Status)
				}
				return nil
			})
			if got := testenv.MetricValue(t, reg, "voiceroom_outbox_publish_success_total", "path", "fast"); got != 1 {
				t.Fatalf("fast publishes %v, want v3 only", got)
			}
			var order []int64
			for _, sm := range testenv.StreamMessages(t, js.Conn().JetStream()) {
				order = append(order, sm.Envelope.RoomVersion)
			}
			if fmt.Sprint(order) != "[1 2 3]" {
				t.Fatalf("stream holds room 1 as %v, want [1 2 3]", order)
			}
			if st := testenv.OutboxState(t, db, v1[0].ID); st.Status != "published" || st.RetryCount != 0 {
				t.Fatalf("v1 after the relay: %+v", st)
			}
		})
	}
}

// TestFastPathQueueFullHandsOver: an event that finds the queue full goes
// to the relay, and so do its room's later events; other rooms stay fast.
func TestFastPathQueueFullHandsOver(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	reg := prometheus.NewRegistry()
	// Not running: nothing leaves the queue of one.
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), newTestMetrics(t, reg),
		outboxrelay.FastPathConfig{QueueSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "roomA", 1, "t"))
	b := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "roomB", 1, 2)...)
	fp.Committed(a, voiceroom.OutboxGroup{}, time.Now())
	fp.Committed(b, voiceroom.OutboxGroup{}, time.Now())
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_fastpath_handed_over_total", "reason", "queue_full"); got != 1 {
		t.Fatalf("queue_full %v", got)
	}
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_fastpath_handed_over_total", "reason", "room_blocked"); got != 1 {
		t.Fatalf("room_blocked %v", got)
	}
	runInBackground(t, fp.Run)
	testenv.Eventually(t, 5*time.Second, func() error {
		if st := testenv.OutboxState(t, db, a[0].ID); st.Status != "published" {
			return fmt.Errorf("room A %s", st.Status)
		}
		return nil
	})
	for _, m := range b {
		if st := testenv.OutboxState(t, db, m.ID); st.Status != "pending" {
			t.Fatalf("room B went fast: %+v", st)
		}
	}
}

// TestFastPathShutdown: Run returns within its bound, and what is committed
// afterwards is left to the relay.
func TestFastPathShutdown(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	reg := prometheus.NewRegistry()
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), newTestMetrics(t, reg), outboxrelay.FastPathConfig{})
	if err != nil {
		t.Fatal(err)
	}
	run := runInBackground(t, fp.Run)
	msgs := testenv.InsertOutbox(t, db, testenv.RoomEnvelopes(testApp, "room1", 1, 3)...)
	fp.Committed(msgs, voiceroom.OutboxGroup{}, time.Now())
	took := run.stop(t, fp.Config().DrainBound()+time.Second)
	t.Logf("stopped in %v", took)
	late := testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 4, "t"))
	fp.Committed(late, voiceroom.OutboxGroup{}, time.Now())
	if got := testenv.MetricValue(t, reg, "voiceroom_outbox_fastpath_handed_over_total", "reason", "stopped"); got < 1 {
		t.Fatalf("stopped hand-overs %v", got)
	}
	if st := testenv.OutboxState(t, db, late[0].ID); st.Status != "pending" {
		t.Fatalf("late row %+v", st)
	}
	if inUse := db.Stats().InUse; inUse != 0 {
		t.Fatalf("%d connections in use after Run returned", inUse)
	}
	if err := fp.Run(context.Background()); err == nil {
		t.Fatal("second Run accepted")
	}
}
