package rooms

import (
	"context"
	"testing"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// TestLockStatus: the status and region of a room of the app, NOT_FOUND
// for an unknown room or another app's, and the row stays locked until the
// caller's transaction ends.
func TestLockStatus(t *testing.T) {
	e := newTestEnv(t, Config{})
	room := e.create(t, "a1", 1).RoomID
	ctx := context.Background()
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	status, region, err := LockStatus(ctx, tx, "a1", room)
	if err != nil || status != roomevent.StatusActive || region != 5 {
		t.Fatalf("LockStatus: %q %d %v, want active in region 5", status, region, err)
	}
	for _, tc := range []struct{ app, room string }{{"a1", "a1_nope"}, {"a2", room}} {
		if _, _, err := LockStatus(ctx, tx, tc.app, tc.room); !apperr.Is(err, apperr.NotFound) {
			t.Errorf("LockStatus(%s, %s): %v, want NOT_FOUND", tc.app, tc.room, err)
		}
	}

	// Another transaction cannot lock the row meanwhile (NOWAIT: it
	// fails at once instead of waiting), and can once tx ended.
	lockOther := func() error {
		other, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Rollback()
		var s string
		return other.QueryRowContext(ctx, `SELECT status FROM rooms WHERE app_code = 'a1' AND room_id = ? FOR UPDATE NOWAIT`, room).Scan(&s)
	}
	if err := lockOther(); err == nil {
		t.Error("another transaction locked the row while LockStatus's transaction held it")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := lockOther(); err != nil {
		t.Errorf("the row stays locked after the transaction: %v", err)
	}
}
