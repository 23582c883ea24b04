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

	"voiceroom"
	"voiceroom/apperr"
	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// sameJSON reports whether a and b encode to the same JSON (two states,
// two views); an encoding error fails the test, so that two failed
// encodings never compare equal.
func sameJSON(tb testing.TB, a, b any) bool {
	tb.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		tb.Fatalf("encode %T: %v", a, err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		tb.Fatalf("encode %T: %v", b, err)
	}
	return string(ja) == string(jb)
}

// mustPayload decodes an outbox envelope and its payload into p.
func mustPayload(tb testing.TB, raw []byte, p any) bus.Envelope {
	tb.Helper()
	env, err := bus.DecodeEnvelope(raw)
	if err != nil {
		tb.Fatalf("decode envelope: %v", err)
	}
	if err := json.Unmarshal(env.Payload, p); err != nil {
		tb.Fatalf("decode %s payload %s: %v", env.EventType, env.Payload, err)
	}
	return env
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

// recordingFastPath keeps what the pipeline handed over, unless discard
// is set (before the first command) by a benchmark that measures the heap.
type recordingFastPath struct {
	mu      sync.Mutex
	msgs    []bus.Message
	groups  []voiceroom.OutboxGroup
	discard bool
	taking  bool // Taking's answer: rows are written in flight
	behind  map[voiceroom.RoomKey]string
}

func (f *recordingFastPath) Taking() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taking
}

func (f *recordingFastPath) Behind(key voiceroom.RoomKey, newestEventID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.behind == nil {
		f.behind = map[voiceroom.RoomKey]string{}
	}
	f.behind[key] = newestEventID
}

func (f *recordingFastPath) Committed(msgs []bus.Message, group voiceroom.OutboxGroup, _ time.Time) {
	f.mu.Lock()
	if !f.discard {
		f.msgs = append(f.msgs, msgs...)
		f.groups = append(f.groups, group)
	}
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
	reg   *prometheus.Registry
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
		clock: testenv.NewClock(time.Time{}), fast: &recordingFastPath{}, cfg: cfg, reg: prometheus.NewRegistry()}
	svc, err := New(db, e.users, e.users, e.fast, cfg, testenv.Logger(tb), e.reg, e.clock.Now)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(svc.Close)
	e.svc = svc
	return e
}

func (e *testEnv) create(tb testing.TB, app string, owner int64) View {
	tb.Helper()
	cmd := createCmd(app, owner, Args{Title: "Room of " + fmt.Sprint(owner), SeatCount: 5})
	cmd.RequestID = "req-1"
	res, err := e.svc.Execute(context.Background(), cmd)
	if err != nil {
		tb.Fatalf("create: %v", err)
	}
	return res.View
}

// createCmd is owner's CreateRoom in app, with a fresh command id.
func createCmd(app string, owner int64, args Args) *Command {
	return &Command{Kind: KindCreateRoom, AppCode: app, CommandID: NewCommandID(), Actor: Actor{UserID: owner}, Args: args}
}

// as sets cmd's kind and its reason (an operator's command).
func as(cmd *Command, kind Kind, reason string) *Command {
	cmd.Kind, cmd.Args.Reason = kind, reason
	return cmd
}

// region makes cmd ChangeRoomVisibleRegion to regionID, with its reason.
func region(cmd *Command, regionID int64, reason string) *Command {
	cmd.Kind, cmd.Args.RegionID, cmd.Args.Reason = KindChangeRoomVisibleRegion, regionID, reason
	return cmd
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
	return testenv.Scalar[int](tb, db, query, args...)
}

// mustGet returns the room's view, failing the test if it cannot be read.
func (e *testEnv) mustGet(tb testing.TB, app, room string) View {
	tb.Helper()
	v, err := e.svc.Get(context.Background(), app, room)
	if err != nil {
		tb.Fatalf("get %s: %v", room, err)
	}
	return v
}

// mustBalance returns the user's wallet balance, failing the test if it
// cannot be read.
func (e *testEnv) mustBalance(tb testing.TB, app string, user int64) int64 {
	tb.Helper()
	b, err := e.svc.Wallet().Balance(context.Background(), app, user)
	if err != nil {
		tb.Fatalf("balance of %d: %v", user, err)
	}
	return b
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
