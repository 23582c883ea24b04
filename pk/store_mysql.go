package pk

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/google/uuid"

	"voiceroom"
	"voiceroom/bus"
	"voiceroom/outboxrelay"
	"voiceroom/roomevent"
)

const battleColumns = `app_code, battle_id, room_id, opponent_room_id, invited_by, duration_seconds, status, invited_at_ms,
	invite_expires_at_ms, starts_at_ms, ends_at_ms, ended_at_ms, room_score, opponent_score, reason, winner_room_id, notified,
	score_seq, told_seq`

func scanBattle(row interface{ Scan(...any) error }) (Battle, error) {
	var b Battle
	err := row.Scan(&b.appCode, &b.BattleID, &b.RoomID, &b.OpponentRoomID, &b.InvitedByUserID, &b.DurationSeconds, &b.Status,
		&b.InvitedAtMs, &b.InviteExpiresAtMs, &b.StartsAtMs, &b.EndsAtMs, &b.EndedAtMs, &b.RoomScore, &b.OpponentScore,
		&b.Reason, &b.WinnerRoomID, &b.notified, &b.scoreSeq, &b.toldSeq)
	if errors.Is(err, sql.ErrNoRows) {
		return Battle{}, errNotFound
	}
	return b, err
}

// rowQuerier is a *sql.DB or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// readBattle reads battleID of app, locking its row when lock is set.
func readBattle(ctx context.Context, q rowQuerier, app, battleID string, lock bool) (Battle, error) {
	query := `SELECT ` + battleColumns + ` FROM pk_battles WHERE app_code = ? AND battle_id = ?`
	if lock {
		query += ` FOR UPDATE`
	}
	return scanBattle(q.QueryRowContext(ctx, query, app, battleID))
}

// lockBattle reads and locks battleID of app in tx.
func lockBattle(ctx context.Context, tx *sql.Tx, app, battleID string) (Battle, error) {
	return readBattle(ctx, tx, app, battleID, true)
}

func insertBattle(ctx context.Context, tx *sql.Tx, b Battle, nowMs int64) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO pk_battles (app_code, battle_id, room_id, opponent_room_id, invited_by,
		duration_seconds, status, invited_at_ms, invite_expires_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.appCode, b.BattleID, b.RoomID, b.OpponentRoomID, b.InvitedByUserID, b.DurationSeconds, b.Status, b.InvitedAtMs,
		b.InviteExpiresAtMs, nowMs)
	return err
}

// busyRoom returns the first of roomIDs that holds a battle's slot, "" if none.
func busyRoom(ctx context.Context, tx *sql.Tx, app string, roomIDs ...string) (string, error) {
	for _, id := range roomIDs {
		var battle string
		err := tx.QueryRowContext(ctx, `SELECT battle_id FROM pk_room_slots WHERE app_code = ? AND room_id = ? FOR UPDATE`, app, id).Scan(&battle)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return "", err
		}
		return id, nil
	}
	return "", nil
}

// expireLapsed expires the pending invitations of roomIDs past their
// expiry at nowMs (the clock does it too, within a tick), freeing their
// slots.
func expireLapsed(ctx context.Context, tx *sql.Tx, app string, roomIDs []string, nowMs int64) error {
	var lapsed []string
	for _, id := range roomIDs {
		var battle string
		err := tx.QueryRowContext(ctx, `SELECT b.battle_id FROM pk_room_slots s JOIN pk_battles b ON b.battle_id = s.battle_id
			WHERE s.app_code = ? AND s.room_id = ? AND b.status = 'pending' AND b.invite_expires_at_ms <= ? FOR UPDATE`,
			app, id, nowMs).Scan(&battle)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		lapsed = append(lapsed, battle)
	}
	for _, battle := range lapsed {
		if err := finishPending(ctx, tx, battle, StatusExpired, nowMs); err != nil {
			return err
		}
	}
	return nil
}

// finishPending moves a pending battle to status (declined, expired) and
// frees its rooms' slots.
func finishPending(ctx context.Context, tx *sql.Tx, battleID, status string, nowMs int64) error {
	if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET status = ?, updated_at_ms = ? WHERE battle_id = ? AND status = 'pending'`,
		status, nowMs, battleID); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM pk_room_slots WHERE battle_id = ?`, battleID)
	return err
}

// writeSettled writes b's PKSettled into the outbox in tx: room_id
// pk-<battle_id>, room_version 1 (a battle's one result), published by
// the relay and delivered by the webhooks.
func writeSettled(ctx context.Context, tx *sql.Tx, b Battle, nowMs int64) error {
	body := roomevent.PKResult{BattleID: b.BattleID, RoomID: b.RoomID, OpponentRoomID: b.OpponentRoomID, Reason: b.Reason,
		RoomScore: b.RoomScore, OpponentScore: b.OpponentScore, WinnerRoomID: b.WinnerRoomID, StartsAtMs: b.StartsAtMs,
		EndsAtMs: b.EndsAtMs, EndedAtMs: b.EndedAtMs}
	payload, err := json.Marshal(body)
	if err != nil {
		return err
	}
	env := bus.Envelope{EventID: uuid.Must(uuid.NewV7()).String(), AppCode: b.appCode, RoomID: roomevent.PKRoomID(b.BattleID),
		RoomVersion: 1, EventType: roomevent.PKSettled, CommandID: "pk:" + b.BattleID + ":settled", OccurredAtMs: nowMs, Payload: payload}
	msg, err := env.Message()
	if err != nil {
		return err
	}
	_, err = outboxrelay.InsertRows(ctx, tx, []voiceroom.OutboxRow{{AppCode: b.appCode, EventID: env.EventID, RoomID: env.RoomID,
		RoomVersion: 1, EventType: env.EventType, Envelope: msg.Data, CreatedAtMs: nowMs}}, false, nowMs)
	return err
}

// topSenders reads the top n senders of each side of battleID, most
// coins first (ties: the lower user id).
func topSenders(ctx context.Context, db *sql.DB, b Battle, n int) (room, opponent []Sender, err error) {
	read := func(roomID string) ([]Sender, error) {
		rows, err := db.QueryContext(ctx, `SELECT user_id, coins FROM pk_senders WHERE battle_id = ? AND room_id = ?
			ORDER BY coins DESC, user_id LIMIT ?`, b.BattleID, roomID, n)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		out := []Sender{}
		for rows.Next() {
			var s Sender
			if err := rows.Scan(&s.UserID, &s.Coins); err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, rows.Err()
	}
	if room, err = read(b.RoomID); err != nil {
		return nil, nil, err
	}
	opponent, err = read(b.OpponentRoomID)
	return room, opponent, err
}
