package rooms

import (
	"context"
	"strings"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// Operators' room commands: ban and restore. Like every room command they go
// through the cell, the rules and one transaction (command log, outbox,
// rooms row, snapshot and the room_audit row).
const (
	KindBanRoom     Kind = "BanRoom"
	KindRestoreRoom Kind = "RestoreRoom"
)

// maxAuditReason bounds an operator's reason, in characters.
const maxAuditReason = 256

// Ban runs BanRoom (admins only): everyone present leaves (RoomUserLeft,
// reason banned), seats are freed, the status becomes banned and RoomBanned
// is emitted; joins are refused until a Restore. reason is required (1..256
// characters). Banning a banned room changes nothing.
func (s *Service) Ban(ctx context.Context, cmd *Command, reason string) (Result, error) {
	return s.moderate(ctx, cmd, KindBanRoom, reason, true)
}

// Restore runs RestoreRoom (admins only): a banned room is active again
// (RoomRestored). reason is required (1..256 characters). Restoring an active
// room changes nothing; a closed room stays closed (FAILED_PRECONDITION).
func (s *Service) Restore(ctx context.Context, cmd *Command, reason string) (Result, error) {
	return s.moderate(ctx, cmd, KindRestoreRoom, reason, true)
}

// CloseRoom runs CloseRoom with an optional reason (0..256 characters),
// which an admin's close records in the room's audit trail. A banned room is
// closed only by an admin.
func (s *Service) CloseRoom(ctx context.Context, cmd *Command, reason string) (Result, error) {
	return s.moderate(ctx, cmd, KindCloseRoom, reason, false)
}

func (s *Service) moderate(ctx context.Context, cmd *Command, kind Kind, reason string, required bool) (Result, error) {
	cmd.Kind = kind
	reason, err := checkReason(reason, required)
	if err != nil {
		return Result{}, err
	}
	cmd.Args.Reason = reason
	return s.run(ctx, cmd, nil)
}

// checkReason trims an operator's reason and checks its length.
func checkReason(reason string, required bool) (string, error) {
	reason = strings.TrimSpace(reason)
	minLen := 0
	if required {
		minLen = 1
	}
	return reason, checkText("reason", reason, minLen, maxAuditReason)
}

// admits refuses the commands a room's status forbids. A closed room takes
// none. A banned room takes an admin's restore, close and region change;
// leaves and sweeps find nobody there and change nothing; everything else is
// refused with "room is banned".
func (s *State) admits(c *Command) error {
	switch s.Status {
	case roomevent.StatusActive:
		return nil
	case roomevent.StatusBanned:
		switch c.Kind {
		case KindBanRoom, KindRestoreRoom, KindChangeRoomVisibleRegion, KindLeaveRoom, KindSweepStale:
			return nil
		case KindCloseRoom:
			if c.Actor.Admin {
				return nil
			}
			return errBannedClose
		}
		return errRoomBanned
	}
	return errRoomClosed
}

// ban is BanRoom.
func (s *State) ban(c *Command) ([]Event, bool, error) {
	if !c.Actor.Admin {
		return nil, false, apperr.New(apperr.PermissionDenied, "only an admin may ban a room")
	}
	if s.Status == roomevent.StatusBanned {
		return nil, false, nil
	}
	var events []Event
	for len(s.Online) > 0 {
		events = append(events, s.leave(s.Online[0].UserID, roomevent.LeaveReasonBanned))
	}
	s.Status = roomevent.StatusBanned
	return append(events, Event{roomevent.RoomBanned, roomevent.Moderated{Reason: c.Args.Reason, Operator: c.Actor.Operator}}), true, nil
}

// restore is RestoreRoom.
func (s *State) restore(c *Command) ([]Event, bool, error) {
	if !c.Actor.Admin {
		return nil, false, apperr.New(apperr.PermissionDenied, "only an admin may restore a room")
	}
	if s.Status == roomevent.StatusActive {
		return nil, false, nil
	}
	s.Status = roomevent.StatusActive
	return []Event{{roomevent.RoomRestored, roomevent.Moderated{Reason: c.Args.Reason, Operator: c.Actor.Operator}}}, true, nil
}
