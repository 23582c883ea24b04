package rooms

import (
	"context"
	"testing"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

func pkCmd(kind Kind, a PKArgs) *Command {
	return &Command{Kind: kind, AppCode: "app", RoomID: "app_r", Actor: PKActor, NowMs: 1000, Args: Args{PK: &a}}
}

// TestPKRules: a start shows the battle, a repeated or late start changes
// nothing, an end clears it once with the room's result, a banned room
// takes the end, a closed one nothing, and a close drops the battle.
func TestPKRules(t *testing.T) {
	start := PKArgs{BattleID: "b1", OpponentRoomID: "app_o", StartsAtMs: 1000, EndsAtMs: 61000}
	end := PKArgs{BattleID: "b1", OpponentRoomID: "app_o", Reason: roomevent.PKReasonTimeUp, MyScore: 5, OpponentScore: 3, WinnerRoomID: "app_r"}

	s := room()
	ev, changed, err := apply(s, pkCmd(KindPKStart, start), limits{}, false)
	if err != nil || !changed || len(ev) != 1 || ev[0].Type != roomevent.RoomPKStarted {
		t.Fatalf("start: %v %v %v", ev, changed, err)
	}
	if v := s.View(); v.PK == nil || v.PK.BattleID != "b1" || v.PK.EndsAtMs != 61000 || v.PK.Status != PKRunning {
		t.Fatalf("view after start: %+v", v.PK)
	}
	if _, changed, err := apply(s, pkCmd(KindPKStart, start), limits{}, false); err != nil || changed {
		t.Fatalf("repeated start: %v %v", changed, err)
	}
	other := start
	other.BattleID = "b2"
	if _, _, err := apply(s.Clone(), pkCmd(KindPKStart, other), limits{}, false); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("second battle: %v", err)
	}
	ev, changed, err = apply(s, pkCmd(KindPKEnd, end), limits{}, false)
	if err != nil || !changed || len(ev) != 1 {
		t.Fatalf("end: %v %v %v", ev, changed, err)
	}
	if b := ev[0].Body.(roomevent.PKEnded); b.Result != roomevent.PKWin || b.MyScore != 5 || b.Reason != roomevent.PKReasonTimeUp {
		t.Fatalf("ended body: %+v", b)
	}
	if s.View().PK != nil {
		t.Fatal("view still shows the battle after its end")
	}
	if _, changed, err := apply(s, pkCmd(KindPKEnd, end), limits{}, false); err != nil || changed {
		t.Fatalf("repeated end: %v %v", changed, err)
	}
	if _, changed, err := apply(s, pkCmd(KindPKStart, start), limits{}, false); err != nil || changed || s.PK != nil {
		t.Fatalf("late start of an ended battle: %v %v %+v", changed, err, s.PK)
	}

	lost := room()
	lost.Status = roomevent.StatusBanned
	lostEnd := end
	lostEnd.WinnerRoomID = "app_o"
	ev, _, err = apply(lost, pkCmd(KindPKEnd, lostEnd), limits{}, false)
	if err != nil || ev[0].Body.(roomevent.PKEnded).Result != roomevent.PKLose {
		t.Fatalf("end on a banned room: %v %v", ev, err)
	}
	if _, _, err := apply(lost, pkCmd(KindPKStart, other), limits{}, false); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("start on a banned room: %v", err)
	}

	closing := room()
	closing.PK = &PK{BattleID: "b1"}
	if _, _, err := apply(closing, cmd(KindCloseRoom, owner, Args{}), limits{}, false); err != nil || closing.PK != nil {
		t.Fatalf("close keeps the battle: %v %+v", err, closing.PK)
	}
}

// TestPKCommandsOnlyFromThePKActor: a caller (even an operator) cannot
// send PKStart or PKEnd; the pk actor can, through Execute, and the view
// and the snapshot carry the battle.
func TestPKCommandsOnlyFromThePKActor(t *testing.T) {
	e := newTestEnv(t, Config{})
	v := e.create(t, "app", owner)
	args := Args{PK: &PKArgs{BattleID: "b1", OpponentRoomID: "app_o", StartsAtMs: 1, EndsAtMs: 2}}
	for _, actor := range []Actor{{UserID: owner}, {Admin: true, Operator: "admin:9"}} {
		_, err := e.svc.Execute(context.Background(), &Command{Kind: KindPKStart, AppCode: "app", RoomID: v.RoomID,
			CommandID: NewCommandID(), Actor: actor, Args: args})
		if !apperr.Is(err, apperr.InvalidArgument) {
			t.Fatalf("PKStart by %+v: %v", actor, err)
		}
	}
	res, err := e.svc.Execute(context.Background(), &Command{Kind: KindPKStart, AppCode: "app", RoomID: v.RoomID,
		CommandID: NewCommandID(), Actor: PKActor, Args: args})
	if err != nil || res.View.PK == nil || res.View.PK.BattleID != "b1" {
		t.Fatalf("PKStart by the pk actor: %+v %v", res.View.PK, err)
	}
	if got := e.mustGet(t, "app", v.RoomID); got.PK == nil {
		t.Fatal("view lost the battle")
	}
}
