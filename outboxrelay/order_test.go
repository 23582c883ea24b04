package outboxrelay_test

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

// A fast path settles its in-flight rows whenever its publishes end, also
// in the middle of a relay's pass. The two tests below settle a room's
// first event that way (set back to pending, its group released, as
// FastPath does when a publish fails) while the pass is under way, at the
// first publish, and check that the room's events still reach the stream
// in room_version order.

// publishedRow writes one row published by a relay long ago, lowest in
// the (status, id) index among the published ones: a claim that reaches
// the end of the pending rows locks the next index record, which must not
// be the test's in-flight row (its settle would wait for the pass).
func publishedRow(tb testing.TB, db *sql.DB) {
	tb.Helper()
	msgs := testenv.InsertOutbox(tb, db, testenv.NewEnvelope(testApp, "room0", 1, "user_joined"))
	if _, err := db.Exec("UPDATE room_outbox SET status = 'published', published_at_ms = 1 WHERE event_id = ?", msgs[0].ID); err != nil {
		tb.Fatal(err)
	}
}

// TestRelayPassKeepsARoomItHeldBack: a room held back in one batch of a
// pass (an earlier event in flight) stays held back in the pass's later
// batches, even when the earlier event has been set back to pending in
// between: otherwise the later batch's event overtakes both.
func TestRelayPassKeepsARoomItHeldBack(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	publishedRow(t, db)
	_, g := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 1, "user_joined"))
	// Batches of two: [room1 v2, room2 v1], then [room1 v3].
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 2, "user_left"),
		testenv.NewEnvelope(testApp, "room2", 1, "user_joined"), testenv.NewEnvelope(testApp, "room1", 3, "user_joined"))
	pub := &settlingPublisher{Publisher: testenv.NewPublisher(t, conn), settle: func() { repend(t, db, g.FirstID) }}
	r := newTestRelay(t, db, pub, newTestMetrics(t, prometheus.NewRegistry()), outboxrelay.Config{BatchSize: 2})

	res := r.Pass(context.Background())
	if res.Published != 1 || res.HeldBack != 2 {
		t.Fatalf("pass %+v: want room2's row published and room1's two held back", res)
	}
	if res := r.Pass(context.Background()); res.Published != 3 {
		t.Fatalf("second pass %+v: want room1's three rows published", res)
	}
	if got := roomVersions(t, conn, "room1"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("room1 in the stream: versions %v, want [1 2 3]", got)
	}
}

// TestRelayWaitsForARowPendingBehindItsCursor: a row set back to pending
// after the pass's claims went past it (it was in flight then) still goes
// before its room's later rows, which the pass claimed after it.
func TestRelayWaitsForARowPendingBehindItsCursor(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	publishedRow(t, db)
	_, g := testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 1, "user_joined"))
	// Batches of one: [room2 v1], then [room1 v2]; room1 v1 lies before
	// both and is pending for neither claim.
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room2", 1, "user_joined"))
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 2, "user_left"))
	pub := &settlingPublisher{Publisher: testenv.NewPublisher(t, conn), settle: func() { repend(t, db, g.FirstID) }}
	r := newTestRelay(t, db, pub, newTestMetrics(t, prometheus.NewRegistry()), outboxrelay.Config{BatchSize: 1})

	res := r.Pass(context.Background())
	if res.Published != 1 || res.HeldBack != 1 {
		t.Fatalf("pass %+v: want room2's row published and room1's held back", res)
	}
	if res := r.Pass(context.Background()); res.Published != 2 {
		t.Fatalf("second pass %+v: want room1's two rows published", res)
	}
	if got := roomVersions(t, conn, "room1"); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("room1 in the stream: versions %v, want [1 2]", got)
	}
}

// settlingPublisher calls settle once, before the first publish goes out.
type settlingPublisher struct {
	outboxrelay.Publisher
	settle func()
	once   sync.Once
}

func (p *settlingPublisher) PublishMessage(ctx context.Context, m bus.Message) (bus.PubAck, error) {
	p.once.Do(p.settle)
	return p.Publisher.PublishMessage(ctx, m)
}

func (p *settlingPublisher) PublishBatch(ctx context.Context, msgs []bus.Message) []bus.Result {
	p.once.Do(p.settle)
	return p.Publisher.PublishBatch(ctx, msgs)
}

// repend does what a fast path does when the publish of its in-flight
// group's only row fails: the row goes back to pending, then the group is
// released.
func repend(tb testing.TB, db *sql.DB, firstID int64) {
	tb.Helper()
	for _, q := range []string{
		"UPDATE room_outbox SET status = 'pending' WHERE id = ? AND status = 'published' AND published_at_ms IS NULL",
		"DELETE FROM room_outbox_inflight WHERE first_id = ?",
	} {
		if _, err := db.Exec(q, firstID); err != nil {
			tb.Fatal(err)
		}
	}
}

// roomVersions returns the room_versions of room's events in ROOM_EVENTS,
// in stream order.
func roomVersions(tb testing.TB, conn *bus.Conn, room string) []int64 {
	tb.Helper()
	var versions []int64
	for _, sm := range testenv.StreamMessages(tb, conn.JetStream()) {
		if sm.Envelope.RoomID == room {
			versions = append(versions, sm.Envelope.RoomVersion)
		}
	}
	return versions
}

// TestTwoRelaysKeepRoomOrder: two relays draining one backlog side by side
// (each skips the rows the other holds) still store each room's events in
// room_version order: a relay holds a room's row back while an earlier one
// is claimed by the other.
func TestTwoRelaysKeepRoomOrder(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	var envs []bus.Envelope
	for r := range 3 {
		envs = append(envs, testenv.RoomEnvelopes(testApp, fmt.Sprintf("room%d", r), 1, 100)...)
	}
	rand.Shuffle(len(envs), func(i, j int) { envs[i], envs[j] = envs[j], envs[i] })
	slices.SortStableFunc(envs, func(a, b bus.Envelope) int { return cmp.Compare(a.RoomVersion, b.RoomVersion) })
	testenv.InsertOutbox(t, db, envs...)
	for range 2 {
		r := newTestRelay(t, db, testenv.NewPublisher(t, conn), newTestMetrics(t, prometheus.NewRegistry()),
			outboxrelay.Config{BatchSize: 3, Pipeline: 2, PollInterval: 10 * time.Millisecond})
		runInBackground(t, r.Run)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	want := make([]int64, 100)
	for i := range want {
		want[i] = int64(i + 1)
	}
	for r := range 3 {
		room := fmt.Sprintf("room%d", r)
		if got := slices.Compact(roomVersions(t, conn, room)); !slices.Equal(got, want) {
			t.Errorf("%s in the stream: versions %v, want 1..100 in order", room, got)
		}
	}
}

// TestRelayReadsAroundAGapInARoom: the relay skips the read of earlier
// rows for a room whose rows follow on from what the pass claimed, but not
// across a gap in its versions: there an event may still be in flight.
func TestRelayReadsAroundAGapInARoom(t *testing.T) {
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 1, "user_joined"))
	testenv.InsertOutboxInFlight(t, db, time.Now(), testenv.NewEnvelope(testApp, "room1", 2, "user_left"))
	testenv.InsertOutbox(t, db, testenv.NewEnvelope(testApp, "room1", 3, "user_joined"))
	r := newTestRelay(t, db, testenv.NewPublisher(t, conn), newTestMetrics(t, prometheus.NewRegistry()), outboxrelay.Config{BatchSize: 1})
	if res := r.Pass(context.Background()); res.Published != 1 || res.HeldBack != 1 {
		t.Fatalf("pass %+v: want v1 published and v3 held back behind v2 in flight", res)
	}
	if _, err := db.Exec("UPDATE room_outbox_inflight SET created_at_ms = 0"); err != nil {
		t.Fatal(err)
	}
	if res := r.Pass(context.Background()); res.Published != 2 {
		t.Fatalf("second pass %+v: want v2 (its group expired) and v3 published", res)
	}
	if got := roomVersions(t, conn, "room1"); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("room1 in the stream: versions %v, want [1 2 3]", got)
	}
}
