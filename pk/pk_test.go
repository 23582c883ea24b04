package pk_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/apperr"
	"voiceroom/internal/testenv"
	"voiceroom/pk"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// profiles gives every user a profile in region 0.
type profiles struct{}

func (profiles) UserRegion(_ context.Context, _ string, id int64) (string, int64, error) {
	return fmt.Sprintf("u%d", id), 0, nil
}

func (profiles) CheckRegion(context.Context, string, int64) error { return nil }

// harness is one rooms service and the battles on it, with the battles'
// clock under the test's hand.
type harness struct {
	progress *fakeProgress
	db       *sql.DB
	rooms    *rooms.Service
	svc      *pk.Service
	clock    *testenv.Clock
	tick     *pk.Clock
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	db := testenv.NewDB(t)
	rs, err := rooms.New(db, profiles{}, profiles{}, nil, rooms.Config{BcryptCost: 4}, testenv.Logger(t), prometheus.NewRegistry(), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rs.Close)
	clock := testenv.NewClock(time.Now())
	h := &harness{progress: &fakeProgress{}}
	h.progress.passed.Store(true)
	svc, err := pk.New(db, rs, clock.Now, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	tick, err := pk.NewClock(svc, h.progress, pk.ClockConfig{Owner: "test"})
	if err != nil {
		t.Fatal(err)
	}
	h.db, h.rooms, h.svc, h.clock, h.tick = db, rs, svc, clock, tick
	return h
}

// room creates owner's room in app.
func (h *harness) room(t testing.TB, app string, owner int64) string {
	t.Helper()
	res, err := h.rooms.Execute(context.Background(), &rooms.Command{Kind: rooms.KindCreateRoom, AppCode: app, CommandID: rooms.NewCommandID(),
		Actor: rooms.Actor{UserID: owner}, Args: rooms.Args{Title: "room"}})
	if err != nil {
		t.Fatal(err)
	}
	return res.View.RoomID
}

func (h *harness) do(t testing.TB, app, room string, kind rooms.Kind, actor rooms.Actor, args rooms.Args) {
	t.Helper()
	if _, err := h.rooms.Execute(context.Background(), &rooms.Command{Kind: kind, AppCode: app, RoomID: room, CommandID: rooms.NewCommandID(),
		Actor: actor, Args: args}); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
}

func (h *harness) view(t testing.TB, app, room string) rooms.View {
	t.Helper()
	v, err := h.rooms.Get(context.Background(), app, room)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// battle starts a battle of seconds: inviter invites from to, accepter
// accepts.
func (h *harness) battle(t testing.TB, from, to string, inviter, accepter int64, seconds int) pk.Battle {
	t.Helper()
	ctx := context.Background()
	inv, err := h.svc.Invite(ctx, app, inviter, from, pk.Invitation{OpponentRoomID: to, DurationSeconds: seconds})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.svc.Accept(ctx, app, accepter, inv.BattleID)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *harness) round(t testing.TB) {
	t.Helper()
	if err := h.tick.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) count(t testing.TB, query string, args ...any) int {
	t.Helper()
	return testenv.Scalar[int](t, h.db, query, args...)
}

// events counts typ's rows in room's outbox.
func (h *harness) events(t testing.TB, room, typ string) int {
	t.Helper()
	return h.count(t, `SELECT COUNT(*) FROM room_outbox WHERE room_id = ? AND event_type = ?`, room, typ)
}

const app = "pkt"

// fakeProgress is the scoring durable's progress, as the test says.
type fakeProgress struct{ passed atomic.Bool }

func (p *fakeProgress) Passed(context.Context, string, int64) (bool, error) {
	return p.passed.Load(), nil
}

func mustCode(t testing.TB, what string, err error, code apperr.Code) {
	t.Helper()
	if !apperr.Is(err, code) {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
}

// TestBadInputChangesNothing: every refusal of the issue is a clear 4xx
// and leaves no battle, slot or event behind.
func TestBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3)
	other := h.room(t, "pkother", 9)
	closed, banned := h.room(t, app, 4), h.room(t, app, 5)
	h.do(t, app, closed, rooms.KindCloseRoom, rooms.Actor{UserID: 4}, rooms.Args{})
	h.do(t, app, banned, rooms.KindBanRoom, rooms.Actor{Admin: true, Operator: "admin:ops"}, rooms.Args{Reason: "spam"})
	h.do(t, app, a, rooms.KindJoinRoom, rooms.Actor{UserID: 7}, rooms.Args{}) // a member without powers

	before := func() [3]int {
		return [3]int{h.count(t, `SELECT COUNT(*) FROM pk_battles`), h.count(t, `SELECT COUNT(*) FROM pk_room_slots`),
			h.count(t, `SELECT COUNT(*) FROM room_outbox WHERE event_type IN ('RoomPKStarted', 'RoomPKEnded', 'PKSettled')`)}
	}
	cases := []struct {
		name  string
		user  int64
		room  string
		inv   pk.Invitation
		code  apperr.Code
		field string
	}{
		{"own room", 1, a, pk.Invitation{OpponentRoomID: a, DurationSeconds: 60}, apperr.InvalidArgument, "opponent_room_id"},
		{"another app's room", 1, a, pk.Invitation{OpponentRoomID: other, DurationSeconds: 60}, apperr.NotFound, ""},
		{"closed room", 1, a, pk.Invitation{OpponentRoomID: closed, DurationSeconds: 60}, apperr.FailedPrecondition, ""},
		{"banned room", 1, a, pk.Invitation{OpponentRoomID: banned, DurationSeconds: 60}, apperr.FailedPrecondition, ""},
		{"from a closed room", 4, closed, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60}, apperr.FailedPrecondition, ""},
		{"too short", 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 59}, apperr.InvalidArgument, "duration_seconds"},
		{"too long", 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 1801}, apperr.InvalidArgument, "duration_seconds"},
		{"no powers", 7, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60}, apperr.PermissionDenied, ""},
		{"unknown room", 1, a, pk.Invitation{OpponentRoomID: app + "_nope", DurationSeconds: 60}, apperr.NotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			was := before()
			_, err := h.svc.Invite(ctx, app, tc.user, tc.room, tc.inv)
			mustCode(t, tc.name, err, tc.code)
			if tc.field != "" {
				if ae, ok := err.(*apperr.Error); !ok || ae.Field != tc.field {
					t.Fatalf("%s: %v does not name %s", tc.name, err, tc.field)
				}
			}
			if now := before(); now != was {
				t.Fatalf("%s changed something: %v -> %v", tc.name, was, now)
			}
		})
	}

	// A room already in a battle, pending: neither side may be invited again.
	battle, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	was := before()
	for _, pair := range [][2]string{{c, a}, {c, b}} {
		owner := int64(3)
		_, err := h.svc.Invite(ctx, app, owner, pair[0], pk.Invitation{OpponentRoomID: pair[1], DurationSeconds: 60})
		mustCode(t, "room already in a battle", err, apperr.FailedPrecondition)
	}
	_, err = h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: c, DurationSeconds: 60})
	mustCode(t, "inviting room already in a battle", err, apperr.FailedPrecondition)
	// Answers: by the inviting side, or a member without powers.
	_, err = h.svc.Accept(ctx, app, 1, battle.BattleID)
	mustCode(t, "accept by the inviting room", err, apperr.PermissionDenied)
	_, err = h.svc.Accept(ctx, app, 7, battle.BattleID)
	mustCode(t, "accept without powers", err, apperr.PermissionDenied)
	_, err = h.svc.Accept(ctx, "pkother", 2, battle.BattleID)
	mustCode(t, "accept from another app", err, apperr.NotFound)
	_, err = h.svc.Accept(ctx, app, 2, "not-a-battle")
	mustCode(t, "accept of a malformed id", err, apperr.InvalidArgument)
	_, err = h.svc.End(ctx, app, 1, battle.BattleID, "")
	mustCode(t, "end of a pending battle", err, apperr.FailedPrecondition)
	if now := before(); now != was {
		t.Fatalf("refusals changed something: %v -> %v", was, now)
	}

	// Accepting an expired invitation.
	h.clock.Advance(pk.InviteTTL)
	_, err = h.svc.Accept(ctx, app, 2, battle.BattleID)
	mustCode(t, "accept after 30 s", err, apperr.FailedPrecondition)
	_, err = h.svc.Decline(ctx, app, 2, battle.BattleID)
	mustCode(t, "decline after 30 s", err, apperr.FailedPrecondition)
	if now := before(); now != was {
		t.Fatalf("late answers changed something: %v -> %v", was, now)
	}
	if h.view(t, app, a).PK != nil || h.view(t, app, b).PK != nil {
		t.Fatal("a room shows a battle that never started")
	}
	// The clock expires it and frees both rooms.
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, battle.BattleID); got.Status != pk.StatusExpired {
		t.Fatalf("after the clock: %s, want expired", got.Status)
	}
	if _, err := h.svc.Invite(ctx, app, 3, c, pk.Invitation{OpponentRoomID: a, DurationSeconds: 60}); err != nil {
		t.Fatalf("invite once the invitation expired: %v", err)
	}
}

// TestBattleRunsAndEndsWhenTimeIsUp: accepted, both views show the
// battle; the clock ends it at its end, settles it once (PKSettled),
// tells both rooms once (RoomPKEnded) and their views go back to none.
func TestBattleRunsAndEndsWhenTimeIsUp(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b := h.room(t, app, 1), h.room(t, app, 2)
	h.do(t, app, b, rooms.KindJoinRoom, rooms.Actor{UserID: 8}, rooms.Args{})
	h.do(t, app, b, rooms.KindAddRoomAdmin, rooms.Actor{UserID: 2}, rooms.Args{TargetUserID: 8})
	inv, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(10 * time.Second)
	started, err := h.svc.Accept(ctx, app, 8, inv.BattleID) // a room admin of the invited room
	if err != nil {
		t.Fatal(err)
	}
	if started.Status != pk.StatusRunning || started.EndsAtMs-started.StartsAtMs != 60_000 {
		t.Fatalf("accepted: %+v", started)
	}
	for _, side := range [][2]string{{a, b}, {b, a}} {
		v := h.view(t, app, side[0])
		if v.PK == nil || v.PK.BattleID != inv.BattleID || v.PK.OpponentRoomID != side[1] || v.PK.EndsAtMs != started.EndsAtMs {
			t.Fatalf("view of %s: %+v", side[0], v.PK)
		}
		if n := h.events(t, side[0], roomevent.RoomPKStarted); n != 1 {
			t.Fatalf("%s: %d RoomPKStarted", side[0], n)
		}
	}
	h.round(t) // nothing due yet
	if got, _ := h.svc.Get(ctx, app, inv.BattleID); got.Status != pk.StatusRunning {
		t.Fatalf("ended early: %+v", got)
	}
	h.clock.Advance(60 * time.Second)
	h.round(t)
	h.round(t)
	got, err := h.svc.Get(ctx, app, inv.BattleID)
	if err != nil || got.Status != pk.StatusEnded || got.Reason != roomevent.PKReasonTimeUp || got.WinnerRoomID != "" {
		t.Fatalf("after the end: %+v %v", got, err)
	}
	for _, r := range []string{a, b} {
		if v := h.view(t, app, r); v.PK != nil {
			t.Fatalf("%s still shows %+v", r, v.PK)
		}
		if n := h.events(t, r, roomevent.RoomPKEnded); n != 1 {
			t.Fatalf("%s: %d RoomPKEnded", r, n)
		}
	}
	if n := h.events(t, roomevent.PKRoomID(inv.BattleID), roomevent.PKSettled); n != 1 {
		t.Fatalf("%d PKSettled", n)
	}
	if n := h.count(t, `SELECT COUNT(*) FROM pk_room_slots`); n != 0 {
		t.Fatalf("%d slots left", n)
	}
	// Both rooms are free for another battle.
	if _, err := h.svc.Invite(ctx, app, 2, b, pk.Invitation{OpponentRoomID: a, DurationSeconds: 60}); err != nil {
		t.Fatal(err)
	}
}

// TestForfeitAndRoomClosed: a forfeit ends the battle at once, the other
// room winning, settled once; a room closed mid-battle ends its battle
// (room_closed) and the other room wins.
func TestForfeitAndRoomClosed(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b, c := h.room(t, app, 1), h.room(t, app, 2), h.room(t, app, 3)
	start := func(from, to string, inviter, accepter int64) pk.Battle {
		t.Helper()
		return h.battle(t, from, to, inviter, accepter, 300)
	}
	first := start(a, b, 1, 2)
	_, err := h.svc.End(ctx, app, 3, first.BattleID, "")
	mustCode(t, "end by an outsider", err, apperr.PermissionDenied)
	ended, err := h.svc.End(ctx, app, 2, first.BattleID, "")
	if err != nil || ended.Status != pk.StatusEnding || ended.Reason != roomevent.PKReasonForfeit || ended.WinnerRoomID != a {
		t.Fatalf("forfeit: %+v %v", ended, err)
	}
	_, err = h.svc.End(ctx, app, 1, first.BattleID, "")
	mustCode(t, "second end", err, apperr.FailedPrecondition)
	h.progress.passed.Store(false) // settled only once its gifts are scored
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, first.BattleID); got.Status != pk.StatusEnding {
		t.Fatalf("settled before the scorer passed the forfeit: %+v", got)
	}
	h.progress.passed.Store(true)
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, first.BattleID); got.Status != pk.StatusEnded || got.WinnerRoomID != a || got.Reason != roomevent.PKReasonForfeit {
		t.Fatalf("after the forfeit: %+v", got)
	}
	if n := h.events(t, roomevent.PKRoomID(first.BattleID), roomevent.PKSettled); n != 1 {
		t.Fatalf("%d PKSettled", n)
	}
	if h.view(t, app, a).PK != nil || h.view(t, app, b).PK != nil {
		t.Fatal("a view still shows the forfeited battle")
	}

	second := start(c, a, 3, 1)
	h.do(t, app, a, rooms.KindCloseRoom, rooms.Actor{UserID: 1}, rooms.Args{})
	h.round(t)
	got, _ := h.svc.Get(ctx, app, second.BattleID)
	if got.Status != pk.StatusEnded || got.Reason != roomevent.PKReasonRoomClosed || got.WinnerRoomID != c {
		t.Fatalf("room closed: %+v", got)
	}
	if h.view(t, app, c).PK != nil || h.events(t, c, roomevent.RoomPKEnded) != 1 {
		t.Fatal("the other room was not told")
	}
	if n := h.count(t, `SELECT notified FROM pk_battles WHERE battle_id = ?`, second.BattleID); n != 15 {
		t.Fatalf("notified %b: the closed room must count as told", n)
	}
}

// TestClockTakesOverALapsedLease: a battle whose clock's process died
// (its lease held, never renewed) is ended by another clock once the
// lease lapses, and only then.
func TestClockTakesOverALapsedLease(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b := h.room(t, app, 1), h.room(t, app, 2)
	inv, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Accept(ctx, app, 2, inv.BattleID); err != nil {
		t.Fatal(err)
	}
	testenv.Exec(t, h.db, fmt.Sprintf(`UPDATE pk_battles SET clock_owner = 'dead', clock_lease_until_ms = %d`,
		h.clock.Now().Add(90*time.Second).UnixMilli()))
	h.clock.Advance(61 * time.Second)
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, inv.BattleID); got.Status != pk.StatusRunning {
		t.Fatalf("ended under another clock's lease: %s", got.Status)
	}
	h.clock.Advance(30 * time.Second)
	h.round(t)
	if got, _ := h.svc.Get(ctx, app, inv.BattleID); got.Status != pk.StatusEnded {
		t.Fatalf("not ended once the lease lapsed: %s", got.Status)
	}
}

// TestDecline frees both rooms.
func TestDecline(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	a, b := h.room(t, app, 1), h.room(t, app, 2)
	inv, err := h.svc.Invite(ctx, app, 1, a, pk.Invitation{OpponentRoomID: b, DurationSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.svc.Decline(ctx, app, 2, inv.BattleID)
	if err != nil || got.Status != pk.StatusDeclined {
		t.Fatalf("decline: %+v %v", got, err)
	}
	_, err = h.svc.Accept(ctx, app, 2, inv.BattleID)
	mustCode(t, "accept after decline", err, apperr.FailedPrecondition)
	if _, err := h.svc.Invite(ctx, app, 2, b, pk.Invitation{OpponentRoomID: a, DurationSeconds: 60}); err != nil {
		t.Fatal(err)
	}
}
