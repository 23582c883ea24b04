package pk

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"voiceroom/apperr"
	"voiceroom/mysqldb"
	"voiceroom/roomevent"
	"voiceroom/rooms"
)

// Bounds of a battle.
const (
	// MinDurationSeconds and MaxDurationSeconds bound duration_seconds.
	MinDurationSeconds = 60
	MaxDurationSeconds = 1800
	// InviteTTL is how long an invitation may be answered.
	InviteTTL = 30 * time.Second
)

// A battle's statuses: pending -> running [-> ending] -> ended, or
// pending -> declined | expired. A battle is ending from a forfeit or a
// room's close until the scorer has counted every gift of its (now
// shortened) window; then it is settled like one whose time is up.
const (
	StatusPending  = "pending"
	StatusRunning  = "running"
	StatusEnding   = "ending"
	StatusEnded    = "ended"
	StatusDeclined = "declined"
	StatusExpired  = "expired"
)

// Rooms is what the package asks of rooms (rooms.Rooms: a
// roomcluster.Router, or a rooms.Service on one node): the rooms' views,
// and the PK commands run on each room's owner.
type Rooms interface {
	Execute(ctx context.Context, cmd *rooms.Command) (rooms.Result, error)
	Get(ctx context.Context, appCode, roomID string) (rooms.View, error)
}

// Battle is one battle as GET /api/v1/pk/{battle_id} shows it: RoomID
// invited OpponentRoomID. Times are 0 until they happen; WinnerRoomID is
// "" on a draw or before the end.
type Battle struct {
	BattleID          string `json:"battle_id"`
	RoomID            string `json:"room_id"`
	OpponentRoomID    string `json:"opponent_room_id"`
	InvitedByUserID   int64  `json:"invited_by_user_id"`
	DurationSeconds   int    `json:"duration_seconds"`
	Status            string `json:"status"`
	InvitedAtMs       int64  `json:"invited_at_ms"`
	InviteExpiresAtMs int64  `json:"invite_expires_at_ms"`
	StartsAtMs        int64  `json:"starts_at_ms"`
	EndsAtMs          int64  `json:"ends_at_ms"`
	EndedAtMs         int64  `json:"ended_at_ms"`
	RoomScore         int64  `json:"room_score"`
	OpponentScore     int64  `json:"opponent_score"`
	Reason            string `json:"reason"`
	WinnerRoomID      string `json:"winner_room_id"`
	// RoomTopSenders and OpponentTopSenders are each side's top 3 gift
	// senders in the battle, most coins first (GET only).
	RoomTopSenders     []Sender `json:"room_top_senders"`
	OpponentTopSenders []Sender `json:"opponent_top_senders"`

	appCode  string
	notified int
	// scoreSeq counts the score changes (gifts, SetScore); toldSeq is the last count both
	// rooms were told (RoomPKScoreChanged's seq).
	scoreSeq, toldSeq int64
}

// Sender is a user's coins given to one side of a battle.
type Sender struct {
	UserID int64 `json:"user_id"`
	Coins  int64 `json:"coins"`
}

// TopSenders is how many senders of each side a battle shows.
const TopSenders = 3

// Invitation is POST /api/v1/rooms/{room_id}/pk's body.
type Invitation struct {
	OpponentRoomID  string `json:"opponent_room_id"`
	DurationSeconds int    `json:"duration_seconds"`
}

// Service is the battles' API: invitations and their answers, a forfeit,
// the battle's read; Clock ends them.
type Service struct {
	db    *sql.DB
	rooms Rooms
	now   func() time.Time
	log   *slog.Logger
	// notifyTimeout bounds telling one room, from a request (the clock
	// retries what it could not).
	notifyTimeout time.Duration
	// moderation counts the scores admins set (CountActions); nil counts
	// nothing.
	moderation *rooms.ModerationCounter
}

// New returns a Service on db, telling rooms through rs.
func New(db *sql.DB, rs Rooms, now func() time.Time, log *slog.Logger) (*Service, error) {
	if db == nil || rs == nil || now == nil {
		return nil, apperr.BadConfig("DB", "pk: db, rooms and clock are required")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: db, rooms: rs, now: now, log: log.With("component", "pk"), notifyTimeout: 2 * time.Second}, nil
}

// hasPowers reports whether userID is v's owner, host or a room admin.
func hasPowers(v rooms.View, userID int64) bool {
	return userID != 0 && (userID == v.OwnerUserID || userID == v.HostUserID || slices.Contains(v.AdminUserIDs, userID))
}

// activeRoom reads a room of app for field: NOT_FOUND when app has no such
// room, FAILED_PRECONDITION when it is closed or banned.
func (s *Service) activeRoom(ctx context.Context, app, roomID, field string) (rooms.View, error) {
	if roomID == "" {
		return rooms.View{}, apperr.Invalid(field, "is required")
	}
	if len(roomID) > 96 {
		return rooms.View{}, apperr.Invalid(field, "must be at most 96 characters")
	}
	v, err := s.rooms.Get(ctx, app, roomID)
	if apperr.Is(err, apperr.NotFound) {
		return rooms.View{}, apperr.New(apperr.NotFound, "%s: room %s not found in this app", field, roomID)
	}
	if err != nil {
		return rooms.View{}, err
	}
	if v.Status != roomevent.StatusActive {
		return rooms.View{}, apperr.New(apperr.FailedPrecondition, "%s: room %s is %s", field, roomID, v.Status)
	}
	return v, nil
}

// Invite is userID's invitation, from roomID (where they hold the host's
// powers), of another active room of app to a battle of
// inv.DurationSeconds. Every refusal changes nothing.
func (s *Service) Invite(ctx context.Context, app string, userID int64, roomID string, inv Invitation) (Battle, error) {
	if inv.DurationSeconds < MinDurationSeconds || inv.DurationSeconds > MaxDurationSeconds {
		return Battle{}, apperr.Invalid("duration_seconds", "must be %d..%d", MinDurationSeconds, MaxDurationSeconds)
	}
	if inv.OpponentRoomID == roomID {
		return Battle{}, apperr.Invalid("opponent_room_id", "must be another room than the inviting one")
	}
	mine, err := s.activeRoom(ctx, app, roomID, "room_id")
	if err != nil {
		return Battle{}, err
	}
	if !hasPowers(mine, userID) {
		return Battle{}, errNoPowers
	}
	if _, err := s.activeRoom(ctx, app, inv.OpponentRoomID, "opponent_room_id"); err != nil {
		return Battle{}, err
	}
	now := s.now().UnixMilli()
	b := Battle{BattleID: uuid.Must(uuid.NewV7()).String(), RoomID: roomID, OpponentRoomID: inv.OpponentRoomID,
		InvitedByUserID: userID, DurationSeconds: inv.DurationSeconds, Status: StatusPending, InvitedAtMs: now,
		InviteExpiresAtMs: now + InviteTTL.Milliseconds(), appCode: app}
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		if err := expireLapsed(ctx, tx, app, []string{roomID, inv.OpponentRoomID}, now); err != nil {
			return err
		}
		busy, err := busyRoom(ctx, tx, app, roomID, inv.OpponentRoomID)
		if err != nil {
			return err
		}
		if busy != "" {
			return inBattle(busy, roomID)
		}
		if err := insertBattle(ctx, tx, b, now); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO pk_room_slots (app_code, room_id, battle_id) VALUES (?, ?, ?), (?, ?, ?)`,
			app, roomID, b.BattleID, app, inv.OpponentRoomID, b.BattleID)
		if mysqldb.IsDuplicate(err) {
			return apperr.New(apperr.FailedPrecondition, "a room is already in a battle")
		}
		return err
	})
	if err != nil {
		return Battle{}, storeErr("invite", err)
	}
	return b.answer(), nil
}

// answer is b as an answer: its lists never null.
func (b Battle) answer() Battle {
	if b.RoomTopSenders == nil {
		b.RoomTopSenders = []Sender{}
	}
	if b.OpponentTopSenders == nil {
		b.OpponentTopSenders = []Sender{}
	}
	return b
}

// inBattle is the refusal of an invitation one of whose rooms is in a
// battle already.
func inBattle(busy, roomID string) error {
	field := "opponent_room_id"
	if busy == roomID {
		field = "room_id"
	}
	return apperr.New(apperr.FailedPrecondition, "%s: room %s is already in a battle", field, busy)
}

// answerable reads battleID for an answer by userID: the invited room's
// powers, a pending invitation not past its expiry.
func (s *Service) answerable(ctx context.Context, app string, userID int64, battleID string) (Battle, error) {
	b, err := s.Get(ctx, app, battleID)
	if err != nil {
		return Battle{}, err
	}
	v, err := s.rooms.Get(ctx, app, b.OpponentRoomID)
	if err != nil {
		return Battle{}, err
	}
	if !hasPowers(v, userID) {
		return Battle{}, errNoPowers
	}
	return b, nil
}

// Accept starts battleID: by the invited room's powers, within the
// invitation's 30 s, both rooms still active. Both rooms are told at once
// (the clock tells whichever could not be).
func (s *Service) Accept(ctx context.Context, app string, userID int64, battleID string) (Battle, error) {
	b, err := s.answerable(ctx, app, userID, battleID)
	if err != nil {
		return Battle{}, err
	}
	if _, err := s.activeRoom(ctx, app, b.RoomID, "room_id"); err != nil {
		return Battle{}, err
	}
	if _, err := s.activeRoom(ctx, app, b.OpponentRoomID, "opponent_room_id"); err != nil {
		return Battle{}, err
	}
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		cur, err := lockBattle(ctx, tx, app, battleID)
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		if err := pendingAt(cur, now); err != nil {
			return err
		}
		cur.Status, cur.StartsAtMs = StatusRunning, now
		cur.EndsAtMs = now + int64(cur.DurationSeconds)*1000
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET status = ?, starts_at_ms = ?, ends_at_ms = ?, updated_at_ms = ?
			WHERE battle_id = ?`, cur.Status, cur.StartsAtMs, cur.EndsAtMs, now, battleID); err != nil {
			return err
		}
		b = cur
		return nil
	})
	if err != nil {
		return Battle{}, storeErr("accept", err)
	}
	return s.tell(ctx, b).answer(), nil
}

// pendingAt refuses an answer to b unless it is pending and unexpired at nowMs.
func pendingAt(b Battle, nowMs int64) error {
	switch {
	case b.Status == StatusExpired || (b.Status == StatusPending && nowMs >= b.InviteExpiresAtMs):
		return errExpired
	case b.Status != StatusPending:
		return apperr.New(apperr.FailedPrecondition, "the battle is %s, not pending", b.Status)
	}
	return nil
}

// Decline declines battleID's invitation, by the invited room's powers
// within its 30 s; both rooms are free for another.
func (s *Service) Decline(ctx context.Context, app string, userID int64, battleID string) (Battle, error) {
	b, err := s.answerable(ctx, app, userID, battleID)
	if err != nil {
		return Battle{}, err
	}
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		cur, err := lockBattle(ctx, tx, app, battleID)
		if err != nil {
			return err
		}
		now := s.now().UnixMilli()
		if err := pendingAt(cur, now); err != nil {
			return err
		}
		if err := finishPending(ctx, tx, battleID, StatusDeclined, now); err != nil {
			return err
		}
		cur.Status = StatusDeclined
		b = cur
		return nil
	})
	if err != nil {
		return Battle{}, storeErr("decline", err)
	}
	return b.answer(), nil
}

// End is a forfeit: userID, with the host's powers in roomID (one of the
// battle's rooms; "" takes the first of them where userID has them), ends
// the running battleID early, and the other room wins.
func (s *Service) End(ctx context.Context, app string, userID int64, battleID, roomID string) (Battle, error) {
	b, err := s.Get(ctx, app, battleID)
	if err != nil {
		return Battle{}, err
	}
	if roomID != "" && roomID != b.RoomID && roomID != b.OpponentRoomID {
		return Battle{}, apperr.Invalid("room_id", "must be one of the battle's two rooms")
	}
	side := ""
	for _, r := range []string{b.RoomID, b.OpponentRoomID} {
		if roomID != "" && r != roomID {
			continue
		}
		v, err := s.rooms.Get(ctx, app, r)
		if err != nil {
			return Battle{}, err
		}
		if hasPowers(v, userID) {
			side = r
			break
		}
	}
	if side == "" {
		return Battle{}, errNoPowers
	}
	if b.Status != StatusRunning {
		return Battle{}, apperr.New(apperr.FailedPrecondition, "the battle is %s, not running", b.Status)
	}
	out, stopped, err := s.stop(ctx, app, battleID, roomevent.PKReasonForfeit, side)
	if err != nil {
		return Battle{}, err
	}
	if !stopped {
		return Battle{}, apperr.New(apperr.FailedPrecondition, "the battle is %s, not running", out.Status)
	}
	return out.answer(), nil
}

// stop ends the running battleID now for reason (forfeit, room_closed),
// loser losing ("": the scores decide): it becomes ending, its window
// closes now, and the clock settles it once the scorer has counted every
// gift of it. stopped is false (and b the battle as it is) when it was
// not running.
func (s *Service) stop(ctx context.Context, app, battleID, reason, loser string) (b Battle, stopped bool, err error) {
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		stopped = false
		cur, err := lockBattle(ctx, tx, app, battleID)
		if err != nil {
			return err
		}
		b = cur
		if cur.Status != StatusRunning {
			return nil
		}
		now := s.now().UnixMilli()
		cur.Status, cur.Reason, cur.EndsAtMs = StatusEnding, reason, min(cur.EndsAtMs, now)
		if loser != "" {
			cur.WinnerRoomID = winner(cur, loser)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET status = ?, reason = ?, ends_at_ms = ?, winner_room_id = ?,
			updated_at_ms = ? WHERE battle_id = ?`, cur.Status, cur.Reason, cur.EndsAtMs, cur.WinnerRoomID, now, battleID); err != nil {
			return err
		}
		b, stopped = cur, true
		return nil
	})
	if err != nil {
		return Battle{}, false, storeErr("stop", err)
	}
	return b, stopped, nil
}

// Get returns battleID of app.
func (s *Service) Get(ctx context.Context, app, battleID string) (Battle, error) {
	if !validBattleID(battleID) {
		return Battle{}, apperr.Invalid("battle_id", "is not a battle id")
	}
	b, err := readBattle(ctx, s.db, app, battleID, false)
	if err != nil {
		return Battle{}, storeErr("read", err)
	}
	if b.RoomTopSenders, b.OpponentTopSenders, err = topSenders(ctx, s.db, b, TopSenders); err != nil {
		return Battle{}, storeErr("read", err)
	}
	return b.answer(), nil
}

// validBattleID reports whether battleID is a battle id's form (a UUID).
func validBattleID(battleID string) bool {
	_, err := uuid.Parse(battleID)
	return err == nil && len(battleID) == 36
}

// settle ends the running battleID for reason, loser losing ("" : the
// scores decide), or the ending one for the reason and winner stop gave
// it, in one transaction with its PKSettled: settled is false (and b the
// battle as it is) when it was neither.
func (s *Service) settle(ctx context.Context, app, battleID, reason, loser string) (b Battle, settled bool, err error) {
	err = mysqldb.Update(ctx, s.db, func(tx *sql.Tx) error {
		settled = false
		cur, err := lockBattle(ctx, tx, app, battleID)
		if err != nil {
			return err
		}
		b = cur
		now := s.now().UnixMilli()
		switch cur.Status {
		case StatusRunning:
			cur.Reason, cur.WinnerRoomID = reason, winner(cur, loser)
		case StatusEnding:
			if cur.WinnerRoomID == "" {
				cur.WinnerRoomID = winner(cur, "")
			}
		default:
			return nil
		}
		cur.Status, cur.EndedAtMs = StatusEnded, now
		if _, err := tx.ExecContext(ctx, `UPDATE pk_battles SET status = ?, reason = ?, ended_at_ms = ?, winner_room_id = ?,
			updated_at_ms = ? WHERE battle_id = ?`, cur.Status, cur.Reason, cur.EndedAtMs, cur.WinnerRoomID, now, battleID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM pk_room_slots WHERE battle_id = ?`, battleID); err != nil {
			return err
		}
		if err := writeSettled(ctx, tx, cur, now); err != nil {
			return err
		}
		b, settled = cur, true
		return nil
	})
	if err != nil {
		return Battle{}, false, storeErr("settle", err)
	}
	if settled {
		s.log.Info("pk battle settled", "app_code", app, "battle_id", battleID, "reason", reason, "winner_room_id", b.WinnerRoomID,
			"room_score", b.RoomScore, "opponent_score", b.OpponentScore)
	}
	return b, settled, nil
}

// winner is b's winner: the room that is not loser, else the higher
// score ("" on a draw).
func winner(b Battle, loser string) string {
	switch {
	case loser == b.RoomID:
		return b.OpponentRoomID
	case loser == b.OpponentRoomID:
		return b.RoomID
	case b.RoomScore > b.OpponentScore:
		return b.RoomID
	case b.OpponentScore > b.RoomScore:
		return b.OpponentRoomID
	}
	return ""
}

// The notified bits.
const (
	notifiedRoomStarted     = 1
	notifiedOpponentStarted = 2
	notifiedRoomEnded       = 4
	notifiedOpponentEnded   = 8
)

// tell is notify from a request: bounded, its failures left to the clock.
func (s *Service) tell(ctx context.Context, b Battle) Battle {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*s.notifyTimeout)
	defer cancel()
	out, err := s.notify(ctx, b)
	if err != nil {
		s.log.Warn("pk: a room was not told yet; the clock retries", "battle_id", b.BattleID, "err", err)
	}
	return out
}

// notify tells each of b's rooms what it was not told yet: a running
// battle's start, an ended battle's end. It records what it told and
// returns b with the record; err is the first room that could not be told.
func (s *Service) notify(ctx context.Context, b Battle) (Battle, error) {
	sides := []struct {
		room, opponent   string
		mine, theirs     int64
		startBit, endBit int
	}{
		{b.RoomID, b.OpponentRoomID, b.RoomScore, b.OpponentScore, notifiedRoomStarted, notifiedRoomEnded},
		{b.OpponentRoomID, b.RoomID, b.OpponentScore, b.RoomScore, notifiedOpponentStarted, notifiedOpponentEnded},
	}
	var first error
	told := 0
	for _, side := range sides {
		args := &rooms.PKArgs{BattleID: b.BattleID, OpponentRoomID: side.opponent, StartsAtMs: b.StartsAtMs, EndsAtMs: b.EndsAtMs,
			MyScore: side.mine, OpponentScore: side.theirs}
		var kind rooms.Kind
		var bit int
		switch {
		case (b.Status == StatusRunning || b.Status == StatusEnding) && b.notified&side.startBit == 0:
			kind, bit = rooms.KindPKStart, side.startBit
		case b.Status == StatusEnded && b.notified&side.endBit == 0:
			kind, bit = rooms.KindPKEnd, side.endBit
			args.Reason, args.WinnerRoomID = b.Reason, b.WinnerRoomID
		default:
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.notifyTimeout)
		_, err := s.rooms.Execute(cctx, &rooms.Command{Kind: kind, AppCode: b.appCode, RoomID: side.room,
			CommandID: "pk:" + b.BattleID + ":" + string(kind), ClientKey: true, Actor: rooms.PKActor, Args: rooms.Args{PK: args}})
		cancel()
		if err != nil && s.gone(ctx, b.appCode, side.room) {
			err = nil // a closed room has nothing to show
		}
		if err != nil {
			if first == nil {
				first = fmt.Errorf("room %s: %s: %w", side.room, kind, err)
			}
			continue
		}
		told |= bit
	}
	if told != 0 {
		if _, err := s.db.ExecContext(ctx, `UPDATE pk_battles SET notified = notified | ? WHERE battle_id = ?`, told, b.BattleID); err != nil {
			return b, fmt.Errorf("pk battle %s: record notified: %w", b.BattleID, err)
		}
		b.notified |= told
	}
	return b, first
}

// pushScore tells both rooms of the running b its totals now, with their
// sequence number (score_seq): RoomPKScoreChanged in each. The clock does
// it at most once a tick per battle, whatever the gifts' rate.
func (s *Service) pushScore(ctx context.Context, b Battle) error {
	seq := strconv.FormatInt(b.scoreSeq, 10)
	for _, side := range []struct {
		room, opponent string
		mine, theirs   int64
	}{{b.RoomID, b.OpponentRoomID, b.RoomScore, b.OpponentScore}, {b.OpponentRoomID, b.RoomID, b.OpponentScore, b.RoomScore}} {
		cctx, cancel := context.WithTimeout(ctx, s.notifyTimeout)
		_, err := s.rooms.Execute(cctx, &rooms.Command{Kind: rooms.KindPKScore, AppCode: b.appCode, RoomID: side.room,
			CommandID: "pk:" + b.BattleID + ":score:" + seq, ClientKey: true, Actor: rooms.PKActor,
			Args: rooms.Args{PK: &rooms.PKArgs{BattleID: b.BattleID, OpponentRoomID: side.opponent, MyScore: side.mine,
				OpponentScore: side.theirs, Seq: b.scoreSeq}}})
		cancel()
		if err != nil && !s.gone(ctx, b.appCode, side.room) {
			return fmt.Errorf("room %s: %s: %w", side.room, rooms.KindPKScore, err)
		}
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE pk_battles SET told_seq = GREATEST(told_seq, ?) WHERE battle_id = ?`,
		b.scoreSeq, b.BattleID); err != nil {
		return fmt.Errorf("pk battle %s: record told score: %w", b.BattleID, err)
	}
	return nil
}

// gone reports whether roomID is closed (it takes no command any more).
func (s *Service) gone(ctx context.Context, app, roomID string) bool {
	v, err := s.rooms.Get(ctx, app, roomID)
	return err == nil && v.Status == roomevent.StatusClosed
}

// storeErr keeps an apperr kind and makes anything else UNAVAILABLE.
func storeErr(op string, err error) error {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return err
	}
	return apperr.Wrap(apperr.Unavailable, "pk storage unavailable, try again", fmt.Errorf("pk %s: %w", op, err))
}
