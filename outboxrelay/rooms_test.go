package outboxrelay_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
	"voiceroom/rooms"
)

// The README's outbox promise with real room commands: JoinRoom and
// SendGift while JetStream is down succeed, their rows stay pending with
// retry_count 0, and once JetStream is back the relay publishes each event
// exactly once.

// profiles gives every user a profile in region 0.
type profiles struct{}

func (profiles) UserRegion(_ context.Context, _ string, id int64) (string, int64, error) {
	return fmt.Sprintf("u%d", id), 0, nil
}

func (profiles) CheckRegion(context.Context, string, int64) error { return nil }

func TestRoomCommandsWhileJetStreamIsDown(t *testing.T) {
	js := testenv.RunJetStream(t)
	db := testenv.NewDB(t)
	reg := prometheus.NewRegistry()
	m := newTestMetrics(t, reg)
	fp, err := outboxrelay.NewFastPath(db, testenv.NewPublisher(t, js.Conn()), testenv.Logger(t), m,
		outboxrelay.FastPathConfig{Connected: js.Conn().NATS().IsConnected, PublishTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	runInBackground(t, fp.Run)
	svc, err := rooms.New(db, profiles{}, profiles{}, fp, rooms.Config{BcryptCost: 4}, testenv.Logger(t), reg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	ctx := context.Background()

	created, err := svc.Execute(ctx, &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: testApp, CommandID: rooms.NewCommandID(), Actor: rooms.Actor{UserID: 1},
		Args: rooms.Args{Title: "r"}})
	if err != nil {
		t.Fatal(err)
	}
	room := created.View.RoomID
	exec := func(kind rooms.Kind, user int64) rooms.View {
		t.Helper()
		res, err := svc.Execute(ctx, &rooms.Command{Kind: kind, AppCode: testApp, RoomID: room, CommandID: rooms.NewCommandID(), Actor: rooms.Actor{UserID: user}})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		return res.View
	}
	exec(rooms.KindJoinRoom, 2)
	if err := svc.UpsertGift(ctx, testApp, rooms.Gift{GiftID: 1, Name: "Rose", Price: 10, Heat: 3, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Wallet().Credit(ctx, testApp, 2, 100, "seed", "test"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error { // the fast path works while JetStream is up
		if n := testenv.OutboxCount(t, db, "pending"); n > 0 {
			return fmt.Errorf("%d pending", n)
		}
		return nil
	})
	before := testenv.StreamLen(t, js.Conn().JetStream())

	js.Stop()
	joined := exec(rooms.KindJoinRoom, 3)
	if joined.OnlineCount != 2 {
		t.Fatalf("join while JetStream is down: %+v", joined)
	}
	gift, err := svc.Execute(ctx, &rooms.Command{Kind: rooms.KindSendGift, AppCode: testApp, RoomID: room, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: 2}, Args: rooms.Args{GiftID: 1, Count: 2, TargetUserID: 3}})
	if err != nil || gift.View.Heat != 6 {
		t.Fatalf("gift while JetStream is down: %+v %v", gift.View, err)
	}
	if got, err := svc.Get(ctx, testApp, room); err != nil || got.Heat != 6 || got.OnlineCount != 2 {
		t.Fatalf("snapshot not updated: %+v %v", got, err)
	}
	ids := eventIDsFrom(t, db, room, joined.RoomVersion)
	if len(ids) < 3 { // RoomUserJoined, RoomGiftSent, RoomHeatChanged (+ RoomRankChanged)
		t.Fatalf("%d events written", len(ids))
	}
	testenv.Eventually(t, 10*time.Second, func() error { // the fast path has given up on them
		if n, _ := fp.BlockedRooms(); n == 0 {
			return fmt.Errorf("room not handed to the relay yet")
		}
		return nil
	})
	for _, id := range ids {
		if st := testenv.OutboxState(t, db, id); st.Status != "pending" || st.RetryCount != 0 {
			t.Fatalf("row %s while JetStream is down: %+v", id, st)
		}
	}

	js.Start()
	r := newTestRelay(t, db, testenv.NewPublisher(t, js.Conn()), m, outboxrelay.Config{})
	testenv.Eventually(t, 20*time.Second, func() error {
		r.Pass(ctx)
		for _, id := range ids {
			if st := testenv.OutboxState(t, db, id); st.Status != "published" {
				return fmt.Errorf("row %s is %s", id, st.Status)
			}
		}
		return nil
	})
	for _, id := range ids {
		if n := testenv.StreamCount(t, js.Conn().JetStream(), id); n != 1 {
			t.Fatalf("stream holds %d copies of %s", n, id)
		}
	}
	if n := testenv.StreamLen(t, js.Conn().JetStream()); n != before+uint64(len(ids)) {
		t.Fatalf("stream grew from %d to %d for %d events", before, n, len(ids))
	}
	// Nothing was rolled back: the wallet paid once.
	if b, err := svc.Wallet().Balance(ctx, testApp, 2); err != nil || b != 80 {
		t.Fatalf("balance %d %v", b, err)
	}
	if _, err := svc.Execute(ctx, &rooms.Command{Kind: rooms.KindMicUp, AppCode: testApp, RoomID: room, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: 9}, Args: rooms.Args{SeatIndex: 0}}); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("room still applies its rules: %v", err)
	}
}

// eventIDsFrom lists a room's outbox event ids from version on.
func eventIDsFrom(tb testing.TB, db *sql.DB, room string, version int64) []string {
	tb.Helper()
	rows, err := db.Query("SELECT event_id FROM room_outbox WHERE room_id = ? AND room_version >= ? ORDER BY id", room, version)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return ids
}
