package rooms

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
)

// lockRoomRows holds row locks on the rooms rows of the given rooms in an
// open transaction of its own, as a slow writer elsewhere would: every
// command of those rooms blocks on its write, and no other room does. The
// returned func releases the locks; it is also called at cleanup.
func lockRoomRows(tb testing.TB, db *sql.DB, app string, roomIDs ...string) (release func()) {
	tb.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	for _, id := range roomIDs {
		var v int64
		if err := tx.QueryRow("SELECT room_version FROM rooms WHERE app_code = ? AND room_id = ? FOR UPDATE", app, id).Scan(&v); err != nil {
			tb.Fatal(err)
		}
	}
	released := false
	release = func() {
		if !released {
			released = true
			tx.Rollback()
		}
	}
	tb.Cleanup(release)
	return release
}

// waitForLockWaits waits until n transactions of this test's database wait
// for a row lock.
func waitForLockWaits(tb testing.TB, db *sql.DB, n int) {
	tb.Helper()
	testenv.Eventually(tb, 10*time.Second, func() error {
		var got int
		err := db.QueryRow(`SELECT COUNT(*) FROM information_schema.innodb_trx t
			JOIN information_schema.processlist p ON p.id = t.trx_mysql_thread_id
			WHERE t.trx_state = 'LOCK WAIT' AND p.db = DATABASE()`).Scan(&got)
		if err != nil {
			return err
		}
		if got < n {
			return fmt.Errorf("%d transactions wait for a lock, want %d", got, n)
		}
		return nil
	})
}

type outcome struct {
	res     Result
	err     error
	elapsed time.Duration
}

// goDo runs cmd in the background; its outcome arrives on the channel.
func (e *testEnv) goDo(ctx context.Context, cmd *Command) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		start := time.Now()
		res, err := e.svc.Execute(ctx, cmd)
		out <- outcome{res, err, time.Since(start)}
	}()
	return out
}

// checkStoredAgrees checks that the room's rooms row, command log, outbox
// and a fresh load from storage all agree with the cell's state.
func checkStoredAgrees(tb testing.TB, e *testEnv, app, room string) *State {
	tb.Helper()
	st, err := e.svc.current(context.Background(), roomKey{AppCode: app, RoomID: room})
	if err != nil {
		tb.Fatal(err)
	}
	var rowVersion, logMax, logRows, outboxVersions, orphans int64
	var rowStatus string
	var rowRegion int64
	var rowOnline int
	if err := e.db.QueryRow("SELECT room_version, status, visible_region_id, online_count FROM rooms WHERE app_code = ? AND room_id = ?",
		app, room).Scan(&rowVersion, &rowStatus, &rowRegion, &rowOnline); err != nil {
		tb.Fatal(err)
	}
	// The rooms row is written when what others read of it changes, not
	// by every command: it is never ahead, and those columns are current.
	if rowVersion > st.Version || rowStatus != st.Status || rowRegion != st.VisibleRegionID || (rowOnline > 0) != (len(st.Online) > 0) {
		tb.Fatalf("room %s: rooms row v%d %s region %d online %d; cell v%d %s region %d online %d", room, rowVersion, rowStatus,
			rowRegion, rowOnline, st.Version, st.Status, st.VisibleRegionID, len(st.Online))
	}
	if err := e.db.QueryRow("SELECT COALESCE(MAX(room_version), 0), COUNT(*) FROM room_command_log WHERE app_code = ? AND room_id = ?",
		app, room).Scan(&logMax, &logRows); err != nil {
		tb.Fatal(err)
	}
	if err := e.db.QueryRow("SELECT COUNT(DISTINCT room_version) FROM room_outbox WHERE app_code = ? AND room_id = ?", app, room).Scan(&outboxVersions); err != nil {
		tb.Fatal(err)
	}
	if err := e.db.QueryRow(`SELECT COUNT(*) FROM room_outbox o WHERE o.app_code = ? AND o.room_id = ? AND NOT EXISTS
		(SELECT 1 FROM room_command_log l WHERE l.app_code = o.app_code AND l.room_id = o.room_id AND l.room_version = o.room_version)`,
		app, room).Scan(&orphans); err != nil {
		tb.Fatal(err)
	}
	if logMax != st.Version || logRows != st.Version || outboxVersions != st.Version || orphans != 0 {
		tb.Fatalf("room %s: cell version %d, command log max %d (%d rows), outbox versions %d, outbox rows without a log row %d",
			room, st.Version, logMax, logRows, outboxVersions, orphans)
	}
	sr, err := e.svc.store.load(context.Background(), app, room)
	if err != nil {
		tb.Fatal(err)
	}
	loaded, err := replay(sr)
	if err != nil {
		tb.Fatal(err)
	}
	if !sameJSON(tb, loaded, st) {
		tb.Fatalf("room %s: a fresh load differs from the cell", room)
	}
	return st
}

// The hand test, with a lock that stalls one room only: a command
// whose write is stuck answers UNAVAILABLE within its deadline, other rooms
// keep committing meanwhile, and once the lock is gone state, command log
// and outbox agree and a retry with the same key gets a clean answer.
func TestStuckWriteAnswersWithinDeadline(t *testing.T) {
	const timeout = time.Second
	e := newTestEnv(t, Config{CommandTimeout: timeout, CommitWorkers: 4})
	a := e.create(t, "app1", 1).RoomID
	others := []string{e.create(t, "app1", 2).RoomID, e.create(t, "app1", 3).RoomID}

	release := lockRoomRows(t, e.db, "app1", a)
	join := &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: a, CommandID: "join-key", ClientKey: true, Actor: Actor{UserID: 100}}
	stuck := e.goDo(context.Background(), join)
	waitForLockWaits(t, e.db, 1)

	// Other rooms commit while room a's write is stuck in one worker.
	for i, room := range others {
		for u := int64(200); u < 205; u++ {
			e.mustDo(t, "app1", room, KindJoinRoom, u+int64(i)*10, Args{})
		}
	}

	got := <-stuck
	// errInDoubt, or a plain UNAVAILABLE when the group's transaction, which
	// ends at the same deadline, reported its rollback first.
	if !apperr.Is(got.err, apperr.Unavailable) {
		t.Fatalf("stuck join: %v", got.err)
	}
	// A correctness check of the deadline, not a measurement: before it held,
	// the join waited for the driver's 30s read timeout.
	if margin := 2 * time.Second; got.elapsed > timeout+margin {
		t.Fatalf("stuck join answered after %v, want within %v + %v", got.elapsed, timeout, margin)
	}
	// The room stays usable for reads, and its other commands are bounded
	// the same way while the lock is held.
	if _, err := e.svc.Get(context.Background(), "app1", a); err != nil {
		t.Fatalf("get during the lock: %v", err)
	}
	if _, err := e.do(t, "app1", a, KindJoinRoom, 101, Args{}); !apperr.Is(err, apperr.Unavailable) {
		t.Fatalf("second join during the lock: %v", err)
	}

	release()
	retry := *join
	var res Result
	testenv.Eventually(t, 10*time.Second, func() error {
		var err error
		res, err = e.svc.Execute(context.Background(), &retry)
		return err
	})
	st := checkStoredAgrees(t, e, "app1", a)
	if !st.isPresent(100) || st.isPresent(101) || res.View.RoomVersion != st.Version {
		t.Fatalf("after the retry: version %d (answered %d), 100 present %v, 101 present %v",
			st.Version, res.View.RoomVersion, st.isPresent(100), st.isPresent(101))
	}
	for _, room := range append(others, a) {
		checkStoredAgrees(t, e, "app1", room)
	}
	// Cancelled queries closed their connections; none is left in use.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := e.db.Stats().InUse; n != 0 {
			return fmt.Errorf("%d connections in use", n)
		}
		return nil
	})
}

// A command whose deadline passes while its group is still writing answers
// at once; when the group then commits, the room reloads what was committed
// and a retry with the same key finds the committed answer.
func TestInDoubtWriteIsFoundByItsKey(t *testing.T) {
	// One worker, so the commands below share a group: x's stuck write
	// holds the worker while a and b queue behind it.
	e := newTestEnv(t, Config{CommandTimeout: 30 * time.Second, CommitWorkers: 1})
	x := e.create(t, "app1", 1).RoomID
	a := e.create(t, "app1", 2).RoomID
	b := e.create(t, "app1", 3).RoomID
	release := lockRoomRows(t, e.db, "app1", x, b)

	xCtx, cancelX := context.WithTimeout(context.Background(), time.Second)
	defer cancelX()
	xDone := e.goDo(xCtx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: x, CommandID: NewCommandID(), Actor: Actor{UserID: 100}})
	waitForLockWaits(t, e.db, 1)
	aCtx, cancelA := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelA()
	join := &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: a, CommandID: "a-key", ClientKey: true, Actor: Actor{UserID: 100}}
	aDone := e.goDo(aCtx, join)
	bDone := e.goDo(context.Background(), &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: b, CommandID: NewCommandID(), Actor: Actor{UserID: 100}})

	if got := <-xDone; !apperr.Is(got.err, apperr.Unavailable) {
		t.Fatalf("x: %v", got.err)
	}
	// x's group was cut at x's deadline while its query, COMMIT included,
	// waited on x's row: its outcome is unknown. x answered when its
	// deadline passed; its worker counts the group as it gets the error.
	testenv.Eventually(t, 5*time.Second, func() error {
		if v := testenv.MetricValue(t, e.reg, "voiceroom_rooms_commits_in_doubt_total"); v != 1 {
			return fmt.Errorf("commits in doubt %v, want 1 (x's group)", v)
		}
		return nil
	})
	// a and b now write in one group, stuck on b's row; a's deadline passes.
	got := <-aDone
	if !errors.Is(got.err, errInDoubt) {
		t.Fatalf("a: %v", got.err)
	}
	release()
	if got := <-bDone; got.err != nil {
		t.Fatalf("b: %v", got.err)
	}
	res, err := e.svc.Execute(context.Background(), join)
	if err != nil {
		t.Fatal(err)
	}
	st := checkStoredAgrees(t, e, "app1", a)
	if !res.Replayed || res.View.RoomVersion != 2 || st.Version != 2 || !st.isPresent(100) {
		t.Fatalf("retry of a: replayed %v, version %d, state version %d", res.Replayed, res.View.RoomVersion, st.Version)
	}
	checkStoredAgrees(t, e, "app1", b)
	checkStoredAgrees(t, e, "app1", x)
}

// A command whose deadline passes while its write is still queued behind a
// stuck group is never written: it answers UNAVAILABLE (not in doubt), and
// its room keeps its cell.
func TestQueuedWriteIsDroppedAtItsDeadline(t *testing.T) {
	e := newTestEnv(t, Config{CommandTimeout: 30 * time.Second, CommitWorkers: 1})
	x := e.create(t, "app1", 1).RoomID
	a := e.create(t, "app1", 2).RoomID
	release := lockRoomRows(t, e.db, "app1", x)
	cellA := e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: a})

	xCtx, cancelX := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancelX()
	xDone := e.goDo(xCtx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: x, CommandID: NewCommandID(), Actor: Actor{UserID: 100}})
	waitForLockWaits(t, e.db, 1)
	aCtx, cancelA := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelA()
	got := <-e.goDo(aCtx, &Command{Kind: KindJoinRoom, AppCode: "app1", RoomID: a, CommandID: NewCommandID(), Actor: Actor{UserID: 100}})
	if !apperr.Is(got.err, apperr.Unavailable) || errors.Is(got.err, errInDoubt) {
		t.Fatalf("queued join: %v, want UNAVAILABLE without doubt", got.err)
	}
	if got := <-xDone; !apperr.Is(got.err, apperr.Unavailable) {
		t.Fatalf("x: %v", got.err)
	}
	release()
	// The worker is free again: a later command of a commits, at version 2.
	snap := e.mustDo(t, "app1", a, KindJoinRoom, 101, Args{})
	st := checkStoredAgrees(t, e, "app1", a)
	if e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: a}) != cellA || snap.RoomVersion != 2 || st.isPresent(100) {
		t.Fatalf("room a: version %d, 100 present %v, same cell %v", snap.RoomVersion, st.isPresent(100),
			e.svc.loadedCell(roomKey{AppCode: "app1", RoomID: a}) == cellA)
	}
	checkStoredAgrees(t, e, "app1", x)
}
