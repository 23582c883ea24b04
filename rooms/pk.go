package rooms

import (
	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// PK battles (package pk owns a battle: its row in pk_battles is the
// truth, and its clock ends it). What a room holds of its battle is the
// part its view shows, set by two internal commands the pk package sends
// through the Rooms surface, so that they run on the room's owner node,
// in the room's order, with the room's events in its outbox:
//
//   - PKStart: the room's battle runs (State.PK set, RoomPKStarted);
//     a start of the battle the room already holds, or of the one it last
//     ended, changes nothing;
//   - PKScore: the battle's totals now, with their sequence number
//     (RoomPKScoreChanged); one whose sequence is not above the room's
//     changes nothing, so a late or repeated one cannot undo a newer;
//   - PKEnd: the battle is over (State.PK cleared, RoomPKEnded with the
//     reason, the final scores and the room's result); an end of a battle
//     the room already ended changes nothing. A banned room takes it (its
//     view must not show a battle); a closed room takes nothing, and a
//     close drops the room's battle from its state.
//
// Only the pk package issues them, as the system actor (PKActor); no HTTP
// route builds them, and Execute refuses them from any other actor.
const (
	KindPKStart Kind = "PKStart"
	KindPKScore Kind = "PKScore"
	KindPKEnd   Kind = "PKEnd"
)

// PKOperator is the operator name of the system actor of PK commands.
const PKOperator = "system:pk"

// PKActor is the actor of the PK commands.
var PKActor = Actor{Admin: true, Operator: PKOperator}

// PK is a room's running battle, as its state holds it and its view
// shows it (docs/openapi.yaml, schema RoomPK). MyScore is this room's.
type PK struct {
	BattleID       string `json:"battle_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	StartsAtMs     int64  `json:"starts_at_ms"`
	EndsAtMs       int64  `json:"ends_at_ms"`
	MyScore        int64  `json:"my_score"`
	OpponentScore  int64  `json:"opponent_score"`
	// Seq is the scores' sequence number (RoomPKScoreChanged's).
	Seq int64 `json:"seq"`
	// Status is PKRunning while the room holds the battle.
	Status string `json:"status"`
}

// PKRunning is the status of a battle a room holds.
const PKRunning = "running"

// PKArgs are the arguments of PKStart and PKEnd, as the pk package sends
// them: the battle as this room sees it (MyScore is its own), and for
// PKEnd why it ended and the winner ("" on a draw).
type PKArgs struct {
	BattleID       string `json:"battle_id"`
	OpponentRoomID string `json:"opponent_room_id"`
	StartsAtMs     int64  `json:"starts_at_ms,omitempty"`
	EndsAtMs       int64  `json:"ends_at_ms,omitempty"`
	MyScore        int64  `json:"my_score,omitempty"`
	OpponentScore  int64  `json:"opponent_score,omitempty"`
	Reason         string `json:"reason,omitempty"`
	WinnerRoomID   string `json:"winner_room_id,omitempty"`
	// Seq is PKScore's sequence number.
	Seq int64 `json:"seq,omitempty"`
}

// pkKinds are the PK commands: only PKActor may send them.
var pkKinds = map[Kind]bool{KindPKStart: true, KindPKScore: true, KindPKEnd: true}

// checkPK checks a PK command's actor and arguments.
func checkPK(cmd *Command) error {
	if !cmd.Actor.Admin || cmd.Actor.Operator != PKOperator {
		return apperr.Invalid("kind", "%q is not a room command a caller may send", cmd.Kind)
	}
	a := cmd.Args.PK
	if a == nil || a.BattleID == "" || a.OpponentRoomID == "" {
		return apperr.Invalid("pk", "battle_id and opponent_room_id are required")
	}
	return nil
}

// pkStart is PKStart.
func (s *State) pkStart(c *Command) ([]Event, bool, error) {
	a := c.Args.PK
	if s.PKEnded == a.BattleID || (s.PK != nil && s.PK.BattleID == a.BattleID) {
		return nil, false, nil
	}
	if s.PK != nil {
		return nil, false, apperr.New(apperr.FailedPrecondition, "room is in battle %s", s.PK.BattleID)
	}
	s.PK = &PK{BattleID: a.BattleID, OpponentRoomID: a.OpponentRoomID, StartsAtMs: a.StartsAtMs, EndsAtMs: a.EndsAtMs,
		MyScore: a.MyScore, OpponentScore: a.OpponentScore, Status: PKRunning}
	return []Event{{roomevent.RoomPKStarted, roomevent.PKStarted{BattleID: a.BattleID, OpponentRoomID: a.OpponentRoomID,
		StartsAtMs: a.StartsAtMs, EndsAtMs: a.EndsAtMs}}}, true, nil
}

// pkScore is PKScore.
func (s *State) pkScore(c *Command) ([]Event, bool, error) {
	a := c.Args.PK
	if s.PK == nil || s.PK.BattleID != a.BattleID || a.Seq <= s.PK.Seq {
		return nil, false, nil
	}
	s.PK.MyScore, s.PK.OpponentScore, s.PK.Seq = a.MyScore, a.OpponentScore, a.Seq
	return []Event{{roomevent.RoomPKScoreChanged, roomevent.PKScore{BattleID: a.BattleID, OpponentRoomID: s.PK.OpponentRoomID,
		MyScore: a.MyScore, OpponentScore: a.OpponentScore, Seq: a.Seq}}}, true, nil
}

// pkEnd is PKEnd.
func (s *State) pkEnd(c *Command) ([]Event, bool, error) {
	a := c.Args.PK
	if s.PKEnded == a.BattleID {
		return nil, false, nil
	}
	if s.PK != nil && s.PK.BattleID == a.BattleID {
		s.PK = nil
	}
	s.PKEnded = a.BattleID
	result := roomevent.PKDraw
	switch a.WinnerRoomID {
	case "":
	case s.RoomID:
		result = roomevent.PKWin
	default:
		result = roomevent.PKLose
	}
	return []Event{{roomevent.RoomPKEnded, roomevent.PKEnded{BattleID: a.BattleID, OpponentRoomID: a.OpponentRoomID,
		Reason: a.Reason, MyScore: a.MyScore, OpponentScore: a.OpponentScore, Result: result, WinnerRoomID: a.WinnerRoomID}}}, true, nil
}
