package outboxrelay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// TestFastPathReleasesInFlightGroups: rows written in flight are pending
// for every reader until the fast path has them in the stream; then their
// in-flight rows are gone, no row was updated, and the relay finds
// nothing to do.
func TestFastPathReleasesInFlightGroups(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), m, outboxrelay.FastPathConfig{})
	if err != nil {
		t.Fatal(err)
	}
	// Before Run nothing is taken in flight.
	if fp.Taking() {
		t.Fatal("Taking before Run")
	}
	// Written in flight, not yet handed over: pending for every reader.
	msgs, g := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room0", 1, "user_joined"),
		testenv.NewEnvelope(testApp, "room1", 1, "user_joined"))
	if g.Rows() != 2 {
		t.Fatalf("group %+v", g)
	}
	if n := testenv.OutboxCount(t, db, "pending"); n != 2 {
		t.Fatalf("%d pending, want the 2 in-flight rows", n)
	}
	rep, err := outboxrelay.NewInspector(db, nil).Report(context.Background(), testApp)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PendingCount != 2 || rep.OldestPendingEventID != msgs[0].ID {
		t.Fatalf("report %+v: want 2 pending, the oldest %s", rep, msgs[0].ID)
	}

	runTaking(t, fp)
	var all []bus.Message
	fp.Committed(msgs, g, time.Now())
	all = append(all, msgs...)
	for v := range 10 {
		var envs []bus.Envelope
		for r := range 5 {
			envs = append(envs, testenv.NewEnvelope(testApp, fmt.Sprintf("room%d", r), int64(v+2), "user_joined"))
		}
		msgs, g := testenv.InsertOutboxInFlight(t, db, time.Now(), envs...)
		fp.Committed(msgs, g, time.Now())
		all = append(all, msgs...)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox_inflight"); n > 0 {
			return fmt.Errorf("%d in-flight groups", n)
		}
		return nil
	})
	if n := testenv.OutboxCount(t, db, "pending"); n != 0 {
		t.Fatalf("%d pending after every group was released", n)
	}
	// Released, not marked one by one: a mark sets published_at_ms.
	if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox WHERE status <> 'published' OR published_at_ms IS NOT NULL"); n != 0 {
		t.Fatalf("%d rows marked or pending, want every row written published and left as it was", n)
	}
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	if res := r.Pass(context.Background()); res.Claimed != 0 {
		t.Fatalf("the relay took rows the fast path published: %+v", res)
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != uint64(len(all)) {
		t.Fatalf("stream holds %d, want %d", n, len(all))
	}
}

// TestFastPathRependsGroupItCannotPublish: an event of an in-flight group
// that the fast path leaves to the relay (here: the connection is down)
// sets the group's rows back to pending at once, and the relay publishes
// them, each once.
func TestFastPathRependsGroupItCannotPublish(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	var up atomic.Bool
	up.Store(true)
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, conn), testenv.Logger(t), m,
		outboxrelay.FastPathConfig{Connected: up.Load})
	if err != nil {
		t.Fatal(err)
	}
	runTaking(t, fp)
	msgs, g := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 1, "user_joined"),
		testenv.NewEnvelope(testApp, "room2", 1, "user_joined"))
	up.Store(false) // the connection drops between the commit and the hand-over
	if fp.Taking() {
		t.Fatal("Taking while disconnected")
	}
	fp.Committed(msgs, g, time.Now())
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n != 2 {
			return fmt.Errorf("%d pending", n)
		}
		if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox WHERE status = 'pending'"); n != 2 {
			return fmt.Errorf("%d marked pending, want 2", n)
		}
		if n := testenv.Scalar[int](t, db, "SELECT COUNT(*) FROM room_outbox_inflight"); n != 0 {
			return fmt.Errorf("%d in-flight groups left", n)
		}
		return nil
	})
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	if res := r.Pass(context.Background()); res.Published != 2 {
		t.Fatalf("relay pass %+v, want 2 published", res)
	}
	if n := testenv.StreamLen(t, conn.JetStream()); n != 2 {
		t.Fatalf("stream holds %d, want 2", n)
	}
}

// TestRelayExpiresStaleInFlightGroups: an in-flight group no fast path
// settles (its process died after the commit) is pending for the
// operators' report, and once older than InFlightGrace a relay pass sets
// its rows back to pending and publishes them; a younger group is left to
// its fast path.
func TestRelayExpiresStaleInFlightGroups(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	m := newTestMetrics(t, prometheus.NewRegistry())
	old, _ := testenv.InsertOutboxInFlight(t, db, time.Now().Add(-time.Minute),
		testenv.NewEnvelope(testApp, "room1", 1, "user_joined"), testenv.NewEnvelope(testApp, "room1", 2, "user_left"))
	young, _ := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room2", 1, "user_joined"))
	rep, err := outboxrelay.NewInspector(db, nil).Report(context.Background(), testApp)
	if err != nil {
		t.Fatal(err)
	}
	if rep.PendingCount != 3 || rep.OldestPendingEventID != old[0].ID || rep.OldestPendingAgeMs < 50_000 {
		t.Fatalf("report %+v: want 3 pending, the oldest %s about a minute old", rep, old[0].ID)
	}
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{InFlightGrace: 10 * time.Second})
	if res := r.Pass(context.Background()); res.Published != 2 {
		t.Fatalf("relay pass %+v, want the stale group's 2 published", res)
	}
	for _, msg := range old {
		if st := testenv.OutboxState(t, db, msg.ID); st.Status != "published" || st.PublishedAtMs == 0 {
			t.Fatalf("stale group's row %+v: want published by the relay", st)
		}
	}
	if n := testenv.OutboxCount(t, db, "pending"); n != 1 {
		t.Fatalf("%d pending, want the young group's 1", n)
	}
	if st := testenv.OutboxState(t, db, young[0].ID); st.Status != "published" || st.PublishedAtMs != 0 {
		t.Fatalf("young group's row %+v: want left in flight", st)
	}
	got := testenv.StreamMessages(t, conn.JetStream())
	if len(got) != 2 || got[0].Envelope.RoomVersion != 1 || got[1].Envelope.RoomVersion != 2 {
		t.Fatalf("stream %+v: want room1 v1, v2", got)
	}
}

// TestRelayHoldsBackRoomsWithEventsInFlight: a room's pending row waits
// while an earlier event of the room is in a fast path's in-flight group,
// so the relay never publishes the room out of order; once that group is
// settled (here: expired) both go out, in order.
func TestRelayHoldsBackRoomsWithEventsInFlight(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	m := newTestMetrics(t, prometheus.NewRegistry())
	testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 1, "user_joined"))
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 2, "user_left"), testenv.NewEnvelope(testApp, "room2", 1, "user_joined"))
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), m, outboxrelay.Config{})
	if res := r.Pass(context.Background()); res.Published != 1 || res.HeldBack != 1 {
		t.Fatalf("pass %+v: want room2's row published and room1's held back", res)
	}
	if _, err := db.Exec("UPDATE room_outbox_inflight SET created_at_ms = 0"); err != nil {
		t.Fatal(err)
	}
	if res := r.Pass(context.Background()); res.Published != 2 {
		t.Fatalf("pass %+v: want room1's two rows published", res)
	}
	var versions []int64
	for _, sm := range testenv.StreamMessages(t, conn.JetStream()) {
		if sm.Envelope.RoomID == "room1" {
			versions = append(versions, sm.Envelope.RoomVersion)
		}
	}
	if len(versions) != 2 || versions[0] != 1 || versions[1] != 2 {
		t.Fatalf("room1 in the stream: versions %v, want [1 2]", versions)
	}
}
