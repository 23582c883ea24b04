package rooms

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

func stateEqual(a, b *State) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// testUsers is the user directory of these tests (the regions package is
// another package's concern; its own tests cover it). Users below 1,000,000 have a
// profile "u<id>" in region 5 unless set otherwise.
type testUsers struct {
	mu      sync.Mutex
	regions map[int64]int64
	missing map[int64]bool
}

func (u *testUsers) UserRegion(_ context.Context, appCode string, userID int64) (string, int64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.missing[userID] || userID >= 1_000_000 {
		return "", 0, apperr.New(apperr.NotFound, "no profile")
	}
	region, ok := u.regions[userID]
	if !ok {
		region = 5
	}
	return fmt.Sprintf("%s-u%d", appCode, userID), region, nil
}

func (u *testUsers) CheckRegion(_ context.Context, _ string, regionID int64) error {
	if regionID == 0 || regionID == 5 || regionID == 7 {
		return nil
	}
	return apperr.Invalid("region_id", "no such active region")
}

// recordingFastPath keeps what the pipeline handed over.
type recordingFastPath struct {
	mu   sync.Mutex
	msgs []bus.Message
}

func (f *recordingFastPath) Committed(msgs []bus.Message, _ time.Time) {
	f.mu.Lock()
	f.msgs = append(f.msgs, msgs...)
	f.mu.Unlock()
}

func (f *recordingFastPath) all() []bus.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bus.Message(nil), f.msgs...)
}

type testEnv struct {
	svc   *Service
	db    *sql.DB
	users *testUsers
	clock *testenv.Clock
	fast  *recordingFastPath
	cfg   Config
}

func newTestEnv(tb testing.TB, cfg Config) *testEnv {
	tb.Helper()
	db := testenv.NewDB(tb)
	return newTestEnvOn(tb, db, cfg)
}

// newTestEnvOn starts a service on an existing database, as a restarted
// process would.
func newTestEnvOn(tb testing.TB, db *sql.DB, cfg Config) *testEnv {
	tb.Helper()
	if cfg.BcryptCost == 0 {
		cfg.BcryptCost = 4 // the minimum: tests need no slow hashes
	}
	e := &testEnv{db: db, users: &testUsers{regions: map[int64]int64{}, missing: map[int64]bool{}},
		clock: testenv.NewClock(time.Time{}), fast: &recordingFastPath{}, cfg: cfg}
	svc, err := New(db, e.users, e.users, e.fast, cfg, testenv.Logger(tb), prometheus.NewRegistry(), e.clock.Now)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	e.svc = svc
	return e
}

func (e *testEnv) create(tb testing.TB, app string, owner int64) View {
	tb.Helper()
	res, err := e.svc.Create(context.Background(), app, Actor{UserID: owner}, NewCommandID(), false, "req-1",
		CreateRequest{Title: "Room of " + fmt.Sprint(owner), SeatCount: 5})
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	return res.View
}

func (e *testEnv) do(tb testing.TB, app, room string, kind Kind, actor int64, args Args) (Result, error) {
	tb.Helper()
	return e.svc.Execute(context.Background(), &Command{Kind: kind, AppCode: app, RoomID: room, CommandID: NewCommandID(),
		Actor: Actor{UserID: actor}, Args: args})
}

func (e *testEnv) mustDo(tb testing.TB, app, room string, kind Kind, actor int64, args Args) View {
	tb.Helper()
	res, err := e.do(tb, app, room, kind, actor, args)
	if err != nil {
		tb.Fatalf("%s by %d: %v", kind, actor, err)
	}
	return res.View
}

// count returns a COUNT(*) query's answer.
func count(tb testing.TB, db *sql.DB, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		tb.Fatal(err)
	}
	return n
}

// rowCounts are the rows a room has in the tables commands write.
func rowCounts(tb testing.TB, db *sql.DB, room string) [3]int {
	tb.Helper()
	return [3]int{
		count(tb, db, "SELECT COUNT(*) FROM room_command_log WHERE room_id = ?", room),
		count(tb, db, "SELECT COUNT(*) FROM room_outbox WHERE room_id = ?", room),
		count(tb, db, "SELECT COUNT(*) FROM wallet_ledger"),
	}
}
