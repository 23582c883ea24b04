package rooms

import (
	"strings"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// Operators' room commands: ban and restore (admins only), each with a
// required reason (Args.Reason, 1..256 characters). BanRoom: everyone
// present leaves (RoomUserLeft, reason banned), seats are freed, the
// status becomes banned and RoomBanned is emitted; joins are refused until
// a RestoreRoom; banning a banned room changes nothing. RestoreRoom: a
// banned room is active again (RoomRestored); restoring an active room
// changes nothing, a closed room stays closed (FAILED_PRECONDITION). Like
// every room command they go through Execute, the cell, the rules and one
// transaction (command log, outbox, rooms row, snapshot and the room_audit
// row).
const (
	KindBanRoom     Kind = "BanRoom"
	KindRestoreRoom Kind = "RestoreRoom"
)

// maxAuditReason bounds an operator's reason, in characters.
const maxAuditReason = 256

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
		case KindBanRoom, KindRestoreRoom, KindChangeRoomVisibleRegion, KindLeaveRoom, KindSweepStale, KindPKEnd:
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
