package bus_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
)

// progressDurable is the durable the progress tests stand in for.
const progressDurable = "progresstest"

// newTestProgress returns MySQL, a JetStream with ROOM_EVENTS and the
// durable progressDurable, and the durable's progress.
func newTestProgress(t *testing.T) (*sql.DB, *bus.Conn, jetstream.Stream, *bus.DurableProgress) {
	t.Helper()
	db := testenv.NewDB(t)
	conn := testenv.NewJetStream(t)
	ctx := context.Background()
	if err := bus.Provision(ctx, conn.JetStream(), bus.StreamConfig{}, bus.ConsumerConfig{Durable: progressDurable}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	stream, err := conn.JetStream().Stream(ctx, bus.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	return db, conn, stream, bus.NewDurableProgress(db, stream, progressDurable, time.Now)
}

// TestDurableProgressUnderLoad: with the durable always a little behind,
// the progress still passes an end once everything stored before a mark
// taken earlier is acked.
func TestDurableProgressUnderLoad(t *testing.T) {
	_, conn, stream, progress := newTestProgress(t)
	ctx := context.Background()
	pub := testenv.NewPublisher(t, conn)
	end := time.Now().UnixMilli()
	publish := func(v int64) {
		t.Helper()
		if _, err := pub.Publish(ctx, testenv.NewEnvelope("a1", "a1_room", v, roomevent.RoomGiftSent)); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := stream.Consumer(ctx, progressDurable)
	if err != nil {
		t.Fatal(err)
	}
	ack := func() {
		t.Helper()
		batch, err := cons.Fetch(100, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for m := range batch.Messages() {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(1)
	if ok, err := progress.Passed(ctx, "a1", end); err != nil || ok {
		t.Fatalf("passed with an unacked message: %v %v", ok, err)
	}
	v := int64(2)
	testenv.Eventually(t, 10*time.Second, func() error {
		ack()      // everything so far...
		publish(v) // ...and one more, always pending
		v++
		ok, err := progress.Passed(ctx, "a1", end)
		if err != nil || !ok {
			return fmt.Errorf("not passed (%v)", err)
		}
		return nil
	})
}

// TestDurableProgressLeavesOutPseudoRooms: the pending outbox rows of an
// app's pseudo rooms (an activity's results, a battle's), which no
// settlement waits for, do not hold the app's progress back; a room's
// row, or one of the app committed after the end, does (or does not) as
// before.
func TestDurableProgressLeavesOutPseudoRooms(t *testing.T) {
	db, _, _, progress := newTestProgress(t)
	ctx := context.Background()
	end := time.Now().UnixMilli()
	pending := func(room string, createdAtMs int64) {
		t.Helper()
		env := testenv.NewEnvelope("a1", room, 1, roomevent.RoomGiftSent)
		if _, err := outboxrelay.InsertRows(ctx, db, []voiceroom.OutboxRow{{AppCode: "a1", EventID: env.EventID, RoomID: room,
			RoomVersion: 1, EventType: env.EventType, Envelope: []byte(`{}`), CreatedAtMs: createdAtMs}}, false, createdAtMs); err != nil {
			t.Fatal(err)
		}
	}
	pending(roomevent.PKRoomID("0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b"), end-1)
	pending(roomevent.ActivityRoomID(7), end-1)
	pending("a1_after", end+1)
	if ok, err := progress.Passed(ctx, "a1", end); err != nil || !ok {
		t.Fatalf("held back by the pseudo rooms' results: %v %v", ok, err)
	}
	pending("a1_room", end-1)
	if ok, err := progress.Passed(ctx, "a1", end-1); err != nil || ok {
		t.Fatalf("passed with a room's row pending: %v %v", ok, err)
	}
}
