package pk

import (
	"context"
	"database/sql"
	"encoding/json"
	"unicode/utf8"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
	"voiceroom/rooms"
)

// MaxScore bounds the score an admin sets (SetScore).
const MaxScore = 1_000_000_000_000

// maxScoreReason bounds an admin's reason, in characters (as a room's
// audit trail does).
const maxScoreReason = 256

// ScoreChange is POST /admin/v1/pk/{battle_id}/score's body: the side
// RoomID's total becomes Score.
type ScoreChange struct {
	RoomID string `json:"room_id"`
	// Score is required (a pointer, so that 0 is not "absent").
	Score  *int64 `json:"score"`
	Reason string `json:"reason"`
}

// scoreAudit is what a score's audit row shows, before and after.
type scoreAudit struct {
	BattleID string `json:"battle_id"`
	Score    int64  `json:"score"`
}

// CountActions counts each score an admin sets in m
// (voiceroom_rooms_moderation_actions_total{action="pk_score"}); nil
// counts nothing. It returns s.
func (s *Service) CountActions(m *rooms.ModerationCounter) *Service {
	s.moderation = m
	return s
}

// SetScore is an admin's (operator's) change of one side of the running
// battleID of app: room ch.RoomID's total becomes *ch.Score (0..MaxScore).
// The total is absolute now, and gifts scored later add to it as to any
// total, also a gift committed before the change but scored after it. It
// counts as a score change (score_seq): both rooms get
// RoomPKScoreChanged with the next sequence at once (the clock retries a
// room it could not tell). The change is recorded in that room's audit
// trail (action pk_score, before and after) in its transaction.
//
// Errors, each changing nothing: INVALID_ARGUMENT for a bad battle id, a
// room_id that is not one of the battle's rooms, a score absent or out of
// range, a reason over 256 characters; NOT_FOUND for a battle of another
// app; FAILED_PRECONDITION when the battle is not running or its time is
// up; UNAVAILABLE when MySQL fails.
func (s *Service) SetScore(ctx context.Context, app, operator, battleID string, ch ScoreChange) (Battle, error) {
	if err := checkScoreChange(battleID, ch); err != nil {
		return Battle{}, err
	}
	var b Battle
	err := mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		cur, err := lockBattle(ctx, tx, app, battleID)
		if err != nil {
			return err
		}
		if ch.RoomID != cur.RoomID && ch.RoomID != cur.OpponentRoomID {
			return apperr.Invalid("room_id", "must be one of the battle's two rooms")
		}
		now := s.now().UnixMilli()
		switch {
		case cur.Status != StatusRunning:
			return apperr.New(apperr.FailedPrecondition, "the battle is %s, not running", cur.Status)
		case now >= cur.EndsAtMs:
			return apperr.New(apperr.FailedPrecondition, "the battle's time is up")
		}
		column, was := "room_score", &cur.RoomScore
		if ch.RoomID == cur.OpponentRoomID {
			column, was = "opponent_score", &cur.OpponentScore
		}
		before, err := json.Marshal(scoreAudit{battleID, *was})
		if err != nil {
			return err
		}
		after, err := json.Marshal(scoreAudit{battleID, *ch.Score})
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET `+column+` = ?, score_seq = score_seq + 1, updated_at_ms = ?
			WHERE battle_id = ?`, *ch.Score, now, battleID); err != nil {
			return err
		}
		if _, err := rooms.InsertAudit(ctx, tx, rooms.AuditEntry{AppCode: app, RoomID: ch.RoomID, Operator: operator,
			Action: rooms.AuditPKScore, Reason: ch.Reason, Before: before, After: after, CreatedAtMs: now}); err != nil {
			return err
		}
		*was = *ch.Score
		cur.scoreSeq++
		b = cur
		return nil
	})
	if err != nil {
		return Battle{}, storeErr("set score", err)
	}
	s.moderation.Count(rooms.AuditPKScore)
	s.log.Info("pk score set by an admin", "app_code", app, "battle_id", battleID, "room_id", ch.RoomID, "score", *ch.Score,
		"operator", operator)
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.notifyTimeout)
	defer cancel()
	if err := s.pushScore(pctx, b); err != nil {
		s.log.Warn("pk: a room was not told the score yet; the clock retries", "battle_id", battleID, "err", err)
	}
	return s.Get(ctx, app, battleID)
}

// checkScoreChange checks what SetScore can without reading.
func checkScoreChange(battleID string, ch ScoreChange) error {
	switch {
	case !validBattleID(battleID):
		return apperr.Invalid("battle_id", "is not a battle id")
	case ch.RoomID == "":
		return apperr.Invalid("room_id", "is required")
	case ch.Score == nil:
		return apperr.Invalid("score", "is required")
	case *ch.Score < 0 || *ch.Score > MaxScore:
		return apperr.Invalid("score", "must be 0..%d", int64(MaxScore))
	case utf8.RuneCountInString(ch.Reason) > maxScoreReason || !utf8.ValidString(ch.Reason):
		return apperr.Invalid("reason", "must be valid text of at most %d characters", maxScoreReason)
	}
	return nil
}
