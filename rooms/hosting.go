package rooms

import (
	"slices"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// Room roles beyond the owner and the host. Room admins are named by the
// owner and may do in the room what the host does (seats, requests to
// speak, invitations, kicks, chat mutes) while they are in it, but not
// name admins, transfer the host, change the password or close the room;
// and they may not kick or mute the owner, the host or another admin.
const (
	// MaxRoomAdmins bounds a room's admins.
	MaxRoomAdmins = 10
	// MaxMuteSeconds bounds a chat mute: 30 days.
	MaxMuteSeconds = MaxBanSeconds
)

// Roles a member list shows.
const (
	RoleOwner  = "owner"
	RoleHost   = "host"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// isAdmin reports whether userID is a room admin.
func (s *State) isAdmin(userID int64) bool {
	return userID != 0 && slices.Contains(s.Admins, userID)
}

// roleOf is userID's role in the room, the highest it holds.
func (s *State) roleOf(userID int64) string {
	return role(s.OwnerUserID, s.HostUserID, s.Admins, userID)
}

// role is userID's role in a room of that owner, host and admins.
func role(owner, host int64, admins []int64, userID int64) string {
	switch {
	case userID == owner:
		return RoleOwner
	case userID == host:
		return RoleHost
	case userID != 0 && slices.Contains(admins, userID):
		return RoleAdmin
	}
	return RoleMember
}

// mustModerate admits the host's powers in the room: an operator, the
// owner or the host anywhere, a room admin while in the room.
func (s *State) mustModerate(a Actor) error {
	if a.Admin || s.isManager(a.UserID) {
		return nil
	}
	if s.isAdmin(a.UserID) {
		if !s.isPresent(a.UserID) {
			return apperr.New(apperr.PermissionDenied, "room admins act only while in the room: join it first")
		}
		return nil
	}
	return apperr.New(apperr.PermissionDenied, "only the owner, the host or a room admin may do this")
}

// mustOutrank refuses a room admin's kick or mute of the owner, the host
// or another admin; the owner, the host and operators may (except that
// nobody kicks or mutes the owner, which the callers check).
func (s *State) mustOutrank(a Actor, target int64) error {
	if a.Admin || s.isManager(a.UserID) {
		return nil
	}
	if target == s.HostUserID || target == s.OwnerUserID || s.isAdmin(target) {
		return apperr.New(apperr.PermissionDenied, "a room admin may not act on the owner, the host or another admin")
	}
	return nil
}

// addAdmin is AddRoomAdmin, by the owner (or an operator): a present user
// other than the owner becomes a room admin.
func (s *State) addAdmin(c *Command) ([]Event, bool, error) {
	target := c.Args.TargetUserID
	if err := s.mustOwn(c.Actor, "name room admins"); err != nil {
		return nil, false, err
	}
	switch {
	case target == s.OwnerUserID:
		return nil, false, apperr.Invalid("user_id", "the owner is not made a room admin")
	case s.isAdmin(target):
		return nil, false, nil
	case !s.isPresent(target):
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d is not in the room", target)
	case len(s.Admins) >= MaxRoomAdmins:
		return nil, false, apperr.New(apperr.FailedPrecondition, "a room has at most %d admins", MaxRoomAdmins)
	}
	s.Admins = append(s.Admins, target)
	return []Event{{roomevent.RoomAdminAdded, roomevent.AdminChanged{UserID: target, ByUserID: c.Actor.UserID}}}, true, nil
}

// removeAdmin is RemoveRoomAdmin, by the owner (or an operator); removing
// someone who is not an admin changes nothing.
func (s *State) removeAdmin(c *Command) ([]Event, bool, error) {
	target := c.Args.TargetUserID
	if err := s.mustOwn(c.Actor, "remove room admins"); err != nil {
		return nil, false, err
	}
	i := slices.Index(s.Admins, target)
	if i < 0 {
		return nil, false, nil
	}
	s.Admins = slices.Delete(s.Admins, i, i+1)
	return []Event{{roomevent.RoomAdminRemoved, roomevent.AdminChanged{UserID: target, ByUserID: c.Actor.UserID}}}, true, nil
}

// mustActOn admits the host's powers acting on target (a kick, a chat
// mute): not on themself, never on the owner, and a room admin not on the
// host or another admin. verb and done name the act in the refusals.
func (s *State) mustActOn(a Actor, target int64, verb, done string) error {
	if err := s.mustModerate(a); err != nil {
		return err
	}
	switch {
	case target == a.UserID:
		return apperr.Invalid("user_id", "you cannot %s yourself", verb)
	case target == s.OwnerUserID:
		return apperr.New(apperr.PermissionDenied, "the owner cannot be %s", done)
	}
	return s.mustOutrank(a, target)
}

// mustOwn admits the owner and operators.
func (s *State) mustOwn(a Actor, what string) error {
	if a.Admin || (a.UserID != 0 && a.UserID == s.OwnerUserID) {
		return nil
	}
	return apperr.New(apperr.PermissionDenied, "only the owner may %s", what)
}

// chatMutedUntil returns when userID's chat mute ends, 0 if none was set.
func (s *State) chatMutedUntil(userID int64) int64 { return until(s.ChatMutes, userID) }

// muteChat is MuteChat: the host's powers mute a user's chat in the room
// for MuteSeconds (0 lifts it). The user need not be present: the mute
// holds when they come back.
func (s *State) muteChat(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	now := c.NowMs
	target := a.TargetUserID
	if err := s.mustActOn(c.Actor, target, "mute", "muted"); err != nil {
		return nil, false, err
	}
	if a.MuteSeconds < 0 || a.MuteSeconds > MaxMuteSeconds {
		return nil, false, apperr.Invalid("seconds", "must be 0..%d", MaxMuteSeconds)
	}
	var untilMs int64
	if a.MuteSeconds > 0 {
		untilMs = now + a.MuteSeconds*1000
	} else if s.chatMutedUntil(target) <= now {
		return nil, false, nil // nothing to lift
	}
	s.ChatMutes = setUntil(s.ChatMutes, target, untilMs, now)
	return []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: target, ByUserID: actor, UntilMs: untilMs,
		Seconds: a.MuteSeconds}}}, true, nil
}

// updateInfo is UpdateRoomInfo: the host's powers change the room's name,
// notice, cover and description (the service checked the values).
func (s *State) updateInfo(c *Command) ([]Event, bool, error) {
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	info := c.Args.Info
	if info == nil {
		return nil, false, apperr.Invalid("room_name", "nothing to change")
	}
	before := [4]string{s.Title, s.Notice, s.CoverURL, s.Description}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	set(&s.Title, info.Title)
	set(&s.Notice, info.Notice)
	set(&s.CoverURL, info.CoverURL)
	set(&s.Description, info.Description)
	if before == [4]string{s.Title, s.Notice, s.CoverURL, s.Description} {
		return nil, false, nil
	}
	return []Event{{roomevent.RoomInfoChanged, roomevent.InfoChanged{Title: s.Title, Notice: s.Notice, CoverURL: s.CoverURL,
		Description: s.Description, ByUserID: c.Actor.UserID}}}, true, nil
}
