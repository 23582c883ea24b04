package rooms

import (
	"math"
	"slices"
	"time"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// Bounds of a room.
const (
	// DefaultSeatCount is a new room's number of mic seats.
	DefaultSeatCount = 10
	// MaxSeatCount bounds seat_count: voice rooms in the product show at most
	// two rows of ten seats.
	MaxSeatCount = 20
	// DefaultMode is a new room's mode.
	DefaultMode = "voice"
	// MaxGiftCount bounds the count of one SendGift.
	MaxGiftCount = 9999
	// MaxBanSeconds bounds a kick's ban: 30 days.
	MaxBanSeconds = 30 * 24 * 3600
	// rankSize is how many contributors a snapshot and RoomRankChanged show.
	rankSize = 20
	// maxContributors is how many contributors a room keeps for its rank.
	maxContributors = 50
)

// limits are the configured bounds apply enforces on new commands (not on
// replay, where the command was already accepted under the limits of its day).
type limits struct {
	maxOnline int
	// micRequestTTLMs is how long a new request to speak stands.
	micRequestTTLMs int64
}

// apply applies c to s (a clone) and returns the events it emits. changed
// is false for commands that leave nothing to persist (a heartbeat, a join
// by someone already present): the state stays as it was.
// A rejected command returns an *apperr.Error and s must be discarded. apply
// is deterministic: it reads only s and c (c.NowMs is the clock). Each kind
// is a method below, with the same contract.
func apply(s *State, c *Command, lim limits, replay bool) (events []Event, changed bool, err error) {
	if err := s.admits(c); err != nil {
		return nil, false, err
	}
	if !replay {
		// Expiries are part of the logged command, so that replay lapses
		// a request or an invitation when it first did, whatever the
		// configuration or the code says later.
		switch c.Kind {
		case KindRequestMic:
			c.Args.ExpiresAtMs = c.NowMs + lim.micRequestTTLMs
		case KindInviteToMic:
			c.Args.ExpiresAtMs = c.NowMs + InvitationTTLMs
		}
	}
	events, changed, err = applyKind(s, c, lim, replay)
	if changed {
		// Lapsed requests, invitations and chat mutes leave with the
		// next change; readers skip them meanwhile.
		s.dropExpired(c.NowMs)
	}
	return events, changed, err
}

// applyKind is apply's dispatch to each kind's method.
func applyKind(s *State, c *Command, lim limits, replay bool) (events []Event, changed bool, err error) {
	switch c.Kind {
	case KindJoinRoom:
		return s.join(c, lim, replay)
	case KindLeaveRoom:
		return s.leaveRoom(c)
	case KindHeartbeat:
		return nil, false, s.mustBePresent(c.Actor.UserID) // the cell records the beat
	case KindMicUp:
		return s.micUp(c)
	case KindMicDown:
		return s.micDown(c)
	case KindChangeMicSeat:
		return s.changeMicSeat(c, replay)
	case KindSetSeatLock:
		return s.setSeatLock(c)
	case KindTransferRoomHost:
		return s.transferHost(c)
	case KindSendGift:
		return s.sendGift(c)
	case KindSetRoomPassword:
		return s.setPassword(c)
	case KindKickUser:
		return s.kick(c)
	case KindCloseRoom:
		return s.closeRoom(c)
	case KindChangeRoomVisibleRegion:
		return s.changeVisibleRegion(c)
	case KindBanRoom:
		return s.ban(c)
	case KindRestoreRoom:
		return s.restore(c)
	case KindSweepStale:
		return s.sweepStale(c)
	case KindAddRoomAdmin:
		return s.addAdmin(c)
	case KindRemoveRoomAdmin:
		return s.removeAdmin(c)
	case KindMuteSeat:
		return s.muteSeat(c)
	case KindSelfMute:
		return s.selfMute(c)
	case KindSetSeatMode:
		return s.setSeatMode(c)
	case KindRequestMic:
		return s.requestMic(c)
	case KindCancelMicRequest:
		return s.cancelMicRequest(c)
	case KindApproveMicRequest:
		return s.approveMicRequest(c)
	case KindRejectMicRequest:
		return s.rejectMicRequest(c)
	case KindInviteToMic:
		return s.inviteToMic(c)
	case KindAcceptMicInvitation:
		return s.acceptMicInvitation(c)
	case KindDeclineMicInvitation:
		return s.declineMicInvitation(c)
	case KindUpdateRoomInfo:
		return s.updateInfo(c)
	case KindMuteChat:
		return s.muteChat(c)
	case KindPKStart:
		return s.pkStart(c)
	case KindPKScore:
		return s.pkScore(c)
	case KindPKEnd:
		return s.pkEnd(c)
	}
	return nil, false, apperr.New(apperr.InvalidArgument, "unknown command %q", c.Kind)
}

// join is JoinRoom: refused while banned, on a locked room without the password, or when full (not on replay, see limits).
func (s *State) join(c *Command, lim limits, replay bool) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	now := c.NowMs
	if until := s.banUntil(actor); until > now {
		return nil, false, apperr.New(apperr.FailedPrecondition, "you are banned from this room until %s",
			time.UnixMilli(until).UTC().Format(time.RFC3339))
	}
	if s.isPresent(actor) {
		return nil, false, nil // joining again only refreshes presence (the cell's)
	}
	if s.Locked() && !s.isManager(actor) && !s.isAdmin(actor) && a.PasswordHash != s.PasswordHash {
		if !a.PasswordGiven {
			return nil, false, apperr.New(apperr.PermissionDenied, "room is locked: password required")
		}
		return nil, false, apperr.New(apperr.PermissionDenied, "wrong password")
	}
	if !replay && lim.maxOnline > 0 && len(s.Online) >= lim.maxOnline {
		return nil, false, apperr.New(apperr.FailedPrecondition, "room is full")
	}
	s.addPresence(Presence{UserID: actor, JoinedAtMs: now})
	return []Event{{roomevent.RoomUserJoined, roomevent.UserJoined{UserID: actor}}}, true, nil
}

// leaveRoom is LeaveRoom; leaving twice is not an error.
func (s *State) leaveRoom(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	if !s.isPresent(actor) {
		return nil, false, nil // leaving twice is not an error
	}
	return []Event{s.leave(actor, roomevent.LeaveReasonLeave)}, true, nil
}

// micUp is MicUp: a present user takes a free, unlocked seat (in a room
// whose seats need approval, only the host's powers do).
func (s *State) micUp(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	if err := s.mustBePresent(actor); err != nil {
		return nil, false, err
	}
	if cur := s.seatOf(actor); cur >= 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "already on seat %d: change seats instead", cur)
	}
	if err := s.mayTakeSeat(c.Actor); err != nil {
		return nil, false, err
	}
	if err := s.mustBeFreeSeat(a.SeatIndex); err != nil {
		return nil, false, err
	}
	s.sit(actor, a.SeatIndex, false)
	return []Event{{roomevent.RoomMicUp, roomevent.MicMoved{UserID: actor, SeatIndex: a.SeatIndex}}}, true, nil
}

// micDown is MicDown.
func (s *State) micDown(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	cur := s.seatOf(actor)
	if cur < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "not on a seat")
	}
	s.vacate(cur)
	return []Event{{roomevent.RoomMicDown, roomevent.MicMoved{UserID: actor, SeatIndex: cur}}}, true, nil
}

// changeMicSeat is ChangeMicSeat: from the actor's seat to a free, unlocked one.
//
// A speaker whose seat the host muted may not move (the mute stays on the
// seat, and a move would shed it) unless they have the host's powers. Not
// checked on replay: commands logged before the rule stay valid.
func (s *State) changeMicSeat(c *Command, replay bool) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	if err := s.mustBePresent(actor); err != nil {
		return nil, false, err
	}
	cur := s.seatOf(actor)
	if cur < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "not on a seat: take one first")
	}
	if a.SeatIndex == cur {
		return nil, false, apperr.New(apperr.FailedPrecondition, "already on seat %d", cur)
	}
	if !replay && s.Seats[cur].Muted && s.mustModerate(c.Actor) != nil {
		return nil, false, apperr.New(apperr.FailedPrecondition, "seat %d is muted by the host: you may change seats once the mute is lifted", cur)
	}
	if err := s.mustBeFreeSeat(a.SeatIndex); err != nil {
		return nil, false, err
	}
	selfMuted := s.Seats[cur].SelfMuted
	s.vacate(cur)
	s.sit(actor, a.SeatIndex, selfMuted)
	return []Event{{roomevent.RoomMicChanged, roomevent.MicChanged{UserID: actor, FromSeatIndex: cur, ToSeatIndex: a.SeatIndex}}}, true, nil
}

// setSeatLock is SetSeatLock, by the host's powers; locking an occupied
// seat takes its user down first.
func (s *State) setSeatLock(c *Command) ([]Event, bool, error) {
	a := &c.Args
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	if err := s.mustBeSeat(a.SeatIndex); err != nil {
		return nil, false, err
	}
	seat := &s.Seats[a.SeatIndex]
	if seat.Locked == a.Locked {
		return nil, false, nil
	}
	var events []Event
	if a.Locked && seat.UserID != 0 {
		events = append(events, Event{roomevent.RoomMicDown, roomevent.MicMoved{UserID: seat.UserID, SeatIndex: a.SeatIndex}})
		s.vacate(a.SeatIndex)
	}
	seat.Locked = a.Locked
	return append(events, Event{roomevent.RoomSeatLockChanged, roomevent.SeatLockChanged{SeatIndex: a.SeatIndex, Locked: a.Locked}}), true, nil
}

// transferHost is TransferRoomHost, by the owner or the host to a present user.
func (s *State) transferHost(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	if actor != s.OwnerUserID && actor != s.HostUserID {
		return nil, false, apperr.New(apperr.PermissionDenied, "only the owner or the host may transfer the host")
	}
	if !s.isPresent(a.TargetUserID) {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d is not in the room", a.TargetUserID)
	}
	if a.TargetUserID == s.HostUserID {
		return nil, false, nil
	}
	from := s.HostUserID
	s.HostUserID = a.TargetUserID
	return []Event{{roomevent.RoomHostTransferred, roomevent.HostTransferred{FromUserID: from, ToUserID: a.TargetUserID}}}, true, nil
}

// sendGift is SendGift: heat, the sender's contribution and, when it moves, the rank.
func (s *State) sendGift(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	if err := s.mustBePresent(actor); err != nil {
		return nil, false, err
	}
	if !s.isPresent(a.TargetUserID) {
		return nil, false, apperr.New(apperr.FailedPrecondition, "receiver %d is not in the room", a.TargetUserID)
	}
	value, heat, err := giftTotals(a)
	if err != nil {
		return nil, false, err
	}
	before := s.rank()
	s.Heat += heat
	s.addContribution(actor, value)
	events := []Event{
		{roomevent.RoomGiftSent, roomevent.GiftSent{SenderUserID: actor, ReceiverUserID: a.TargetUserID, GiftID: a.GiftID,
			GiftName: a.GiftName, Count: a.Count, Value: value, HeatDelta: heat}},
		{roomevent.RoomHeatChanged, roomevent.HeatChanged{Heat: s.Heat, Delta: heat}},
	}
	if after := s.rank(); !slices.Equal(before, after) {
		events = append(events, Event{roomevent.RoomRankChanged, roomevent.RankChanged{GiftRank: after}})
	}
	return events, true, nil
}

// setPassword is SetRoomPassword; an empty hash unlocks.
func (s *State) setPassword(c *Command) ([]Event, bool, error) {
	a := &c.Args
	if err := s.mustManage(c.Actor); err != nil {
		return nil, false, err
	}
	if a.PasswordHash == "" && !s.Locked() {
		return nil, false, nil
	}
	s.PasswordHash = a.PasswordHash
	return []Event{{roomevent.RoomPasswordChanged, roomevent.PasswordChanged{Locked: s.Locked()}}}, true, nil
}

// kick is KickUser by the host's powers, with an optional ban; the owner
// cannot be kicked, nor the host or an admin by a room admin. A kicked
// admin stays an admin, but acts only once back in the room.
func (s *State) kick(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	now := c.NowMs
	target := a.TargetUserID
	if err := s.mustActOn(c.Actor, target, "kick", "kicked"); err != nil {
		return nil, false, err
	}
	present := s.isPresent(target)
	if !present && a.BanSeconds == 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d is not in the room", target)
	}
	var until int64
	if a.BanSeconds > 0 {
		until = now + a.BanSeconds*1000
		s.setBan(target, until, now)
	}
	events := []Event{{roomevent.RoomUserKicked, roomevent.UserKicked{UserID: target, ByUserID: actor, BanUntilMs: until}}}
	if present {
		events = append(events, s.leave(target, roomevent.LeaveReasonKicked))
	}
	if target == s.HostUserID {
		s.HostUserID = s.OwnerUserID
	}
	return events, true, nil
}

// closeRoom is CloseRoom, by the owner or an admin: everyone leaves.
func (s *State) closeRoom(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	if actor != s.OwnerUserID && !c.Actor.Admin {
		return nil, false, apperr.New(apperr.PermissionDenied, "only the owner may close the room")
	}
	var events []Event
	for len(s.Online) > 0 {
		events = append(events, s.leave(s.Online[0].UserID, roomevent.LeaveReasonClosed))
	}
	s.Status = roomevent.StatusClosed
	s.PK = nil // its battle ends with reason room_closed (package pk)
	return append(events, Event{roomevent.RoomClosed, roomevent.Closed{ByUserID: actor, Operator: c.Actor.Operator}}), true, nil
}

// changeVisibleRegion is ChangeRoomVisibleRegion, by an admin.
func (s *State) changeVisibleRegion(c *Command) ([]Event, bool, error) {
	a := &c.Args
	if !c.Actor.Admin {
		return nil, false, apperr.New(apperr.PermissionDenied, "only an admin may change a room's region")
	}
	if a.RegionID == s.VisibleRegionID {
		return nil, false, nil
	}
	old := s.VisibleRegionID
	s.VisibleRegionID = a.RegionID
	return []Event{{roomevent.RoomVisibleRegionChanged, roomevent.VisibleRegionChanged{OldRegionID: old, NewRegionID: a.RegionID,
		Reason: a.Reason, Operator: c.Actor.Operator}}}, true, nil
}

// sweepStale is SweepStale: the users given leave with reason stale.
func (s *State) sweepStale(c *Command) ([]Event, bool, error) {
	a := &c.Args
	var events []Event
	for _, id := range a.UserIDs {
		if s.isPresent(id) {
			events = append(events, s.leave(id, roomevent.LeaveReasonStale))
		}
	}
	return events, len(events) > 0, nil

}

// leave removes userID's presence, seat, request to speak and invitation
// and returns the RoomUserLeft event (which tells clients all of that).
func (s *State) leave(userID int64, reason string) Event {
	seat := s.seatOf(userID)
	if seat >= 0 {
		s.vacate(seat)
	}
	s.removePresence(userID)
	s.dropRequest(userID)
	s.dropInvitation(userID)
	return Event{roomevent.RoomUserLeft, roomevent.UserLeft{UserID: userID, Reason: reason, SeatIndex: seat}}
}

// isManager reports whether userID is the owner or the host.
func (s *State) isManager(userID int64) bool {
	return userID != 0 && (userID == s.OwnerUserID || userID == s.HostUserID)
}

func (s *State) mustManage(a Actor) error {
	if a.Admin || s.isManager(a.UserID) {
		return nil
	}
	return apperr.New(apperr.PermissionDenied, "only the owner or the host may do this")
}

func (s *State) mustBePresent(userID int64) error {
	if s.isPresent(userID) {
		return nil
	}
	return apperr.New(apperr.FailedPrecondition, "not in the room: join it first")
}

func (s *State) mustBeSeat(i int) error {
	if i < 0 || i >= len(s.Seats) {
		return apperr.Invalid("seat_index", "must be 0..%d", len(s.Seats)-1)
	}
	return nil
}

func (s *State) mustBeFreeSeat(i int) error {
	if err := s.mustBeSeat(i); err != nil {
		return err
	}
	switch {
	case s.Seats[i].Locked:
		return apperr.New(apperr.FailedPrecondition, "seat %d is locked", i)
	case s.Seats[i].UserID != 0:
		return apperr.New(apperr.FailedPrecondition, "seat %d is taken", i)
	}
	return nil
}

// giftTotals returns the coin value and heat of a gift command, refusing
// products that would overflow.
func giftTotals(a *Args) (value, heat int64, err error) {
	if a.Count < 1 || a.Count > MaxGiftCount {
		return 0, 0, apperr.Invalid("count", "must be 1..%d", MaxGiftCount)
	}
	if a.Price < 0 || a.HeatPer < 0 || a.Price > math.MaxInt64/a.Count || a.HeatPer > math.MaxInt64/a.Count {
		return 0, 0, apperr.Invalid("count", "gift total too large")
	}
	return a.Price * a.Count, a.HeatPer * a.Count, nil
}

// newRoom is CreateRoom: the first state of a room, at version 1.
func newRoom(c *Command) (*State, []Event) {
	a := &c.Args
	s := &State{
		AppCode:         c.AppCode,
		RoomID:          c.RoomID,
		ShortID:         a.ShortID,
		OwnerUserID:     c.Actor.UserID,
		HostUserID:      c.Actor.UserID,
		VisibleRegionID: a.RegionID,
		Status:          roomevent.StatusActive,
		Mode:            a.Mode,
		SeatMode:        a.SeatMode,
		Title:           a.Title,
		CoverURL:        a.CoverURL,
		Description:     a.Description,
		Seats:           make([]Seat, a.SeatCount),
		Version:         1,
		CreatedAtMs:     c.NowMs,
		UpdatedAtMs:     c.NowMs,
	}
	return s, []Event{{roomevent.RoomCreated, empty{}}}
}
