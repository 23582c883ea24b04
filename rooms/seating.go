package rooms

import (
	"slices"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// Bounds of requests to speak and invitations.
const (
	// MaxMicRequests bounds a room's queue of requests to speak.
	MaxMicRequests = 100
	// MaxMicInvitations bounds a room's open invitations.
	MaxMicInvitations = 100
	// InvitationTTLMs is how long an invitation to a seat stands.
	InvitationTTLMs = 60_000
)

// seatMode returns the room's seat mode; rooms created before seat modes
// are free.
func (s *State) seatMode() string {
	if s.SeatMode == "" {
		return roomevent.SeatModeFree
	}
	return s.SeatMode
}

// validSeatMode checks a seat mode a client gave.
func validSeatMode(m string) error {
	if m != roomevent.SeatModeFree && m != roomevent.SeatModeApply {
		return apperr.Invalid("seat_mode", "must be %q or %q", roomevent.SeatModeFree, roomevent.SeatModeApply)
	}
	return nil
}

// sit puts userID on seat i, which must be free: the user's request to
// speak and invitation end with it.
func (s *State) sit(userID int64, i int, selfMuted bool) {
	s.Seats[i].UserID, s.Seats[i].SelfMuted = userID, selfMuted
	s.dropRequest(userID)
	s.dropInvitation(userID)
}

// vacate empties seat i; its host mute and lock stay.
func (s *State) vacate(i int) {
	s.Seats[i].UserID, s.Seats[i].SelfMuted = 0, false
}

// pickSeat returns the seat a request, approval or invitation lands on:
// want when it is a seat (it must be free), else the lowest free seat.
func (s *State) pickSeat(want int) (int, error) {
	if want != AnySeat {
		if err := s.mustBeFreeSeat(want); err != nil {
			return -1, err
		}
		return want, nil
	}
	for i, seat := range s.Seats {
		if seat.UserID == 0 && !seat.Locked {
			return i, nil
		}
	}
	return -1, apperr.New(apperr.FailedPrecondition, "no seat is free")
}

// mustBeSeatChoice checks a seat a client named for later (a request or
// an invitation): AnySeat, or a seat that exists and is not locked.
func (s *State) mustBeSeatChoice(i int) error {
	if i == AnySeat {
		return nil
	}
	if err := s.mustBeSeat(i); err != nil {
		return err
	}
	if s.Seats[i].Locked {
		return apperr.New(apperr.FailedPrecondition, "seat %d is locked", i)
	}
	return nil
}

// muteSeat is MuteSeat: the host's powers mute or unmute a seat. The mute
// stays on the seat when its occupant changes, until it is lifted; a
// speaker cannot lift it. A room admin may not mute or unmute the seat of
// the owner, the host or another admin (their own, yes).
func (s *State) muteSeat(c *Command) ([]Event, bool, error) {
	a := &c.Args
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	if err := s.mustBeSeat(a.SeatIndex); err != nil {
		return nil, false, err
	}
	if occupant := s.Seats[a.SeatIndex].UserID; occupant != 0 && occupant != c.Actor.UserID {
		if err := s.mustOutrank(c.Actor, occupant); err != nil {
			return nil, false, err
		}
	}
	if s.Seats[a.SeatIndex].Muted == a.Muted {
		return nil, false, nil
	}
	s.Seats[a.SeatIndex].Muted = a.Muted
	return []Event{{roomevent.RoomSeatMuteChanged, roomevent.SeatMuteChanged{SeatIndex: a.SeatIndex, Muted: a.Muted,
		ByUserID: c.Actor.UserID}}}, true, nil
}

// selfMute is SelfMute: a speaker mutes or unmutes themself. It does not
// touch the host's mute of the seat.
func (s *State) selfMute(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	i := s.seatOf(actor)
	if i < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "not on a seat")
	}
	if s.Seats[i].SelfMuted == c.Args.Muted {
		return nil, false, nil
	}
	s.Seats[i].SelfMuted = c.Args.Muted
	return []Event{{roomevent.RoomSelfMuteChanged, roomevent.SelfMuteChanged{UserID: actor, SeatIndex: i, Muted: c.Args.Muted}}}, true, nil
}

// setSeatMode is SetSeatMode, by the owner or the host. Requests already
// in the queue stay.
func (s *State) setSeatMode(c *Command) ([]Event, bool, error) {
	if err := s.mustManage(c.Actor); err != nil {
		return nil, false, err
	}
	if err := validSeatMode(c.Args.SeatMode); err != nil {
		return nil, false, err
	}
	if s.seatMode() == c.Args.SeatMode {
		return nil, false, nil
	}
	s.SeatMode = c.Args.SeatMode
	return []Event{{roomevent.RoomSeatModeChanged, roomevent.SeatModeChanged{SeatMode: s.SeatMode}}}, true, nil
}

// mayTakeSeat refuses a plain member's MicUp in a room whose seats need
// approval.
func (s *State) mayTakeSeat(a Actor) error {
	if s.seatMode() == roomevent.SeatModeFree || s.mustModerate(a) == nil {
		return nil
	}
	return apperr.New(apperr.FailedPrecondition, "seats in this room need the host's approval: request one")
}

// request returns the index of userID's live request to speak, or -1.
func (s *State) request(userID, nowMs int64) int {
	return slices.IndexFunc(s.Requests, func(r MicRequest) bool { return r.UserID == userID && r.ExpiresAtMs > nowMs })
}

// invitation returns the index of userID's live invitation, or -1.
func (s *State) invitation(userID, nowMs int64) int {
	return slices.IndexFunc(s.Invitations, func(v Invitation) bool { return v.UserID == userID && v.ExpiresAtMs > nowMs })
}

func (s *State) dropRequest(userID int64) {
	s.Requests = slices.DeleteFunc(s.Requests, func(r MicRequest) bool { return r.UserID == userID })
}

func (s *State) dropInvitation(userID int64) {
	s.Invitations = slices.DeleteFunc(s.Invitations, func(v Invitation) bool { return v.UserID == userID })
}

// dropExpired drops the requests and invitations that lapsed by nowMs, and
// the chat mutes that ended.
func (s *State) dropExpired(nowMs int64) {
	s.Requests = slices.DeleteFunc(s.Requests, func(r MicRequest) bool { return r.ExpiresAtMs <= nowMs })
	s.Invitations = slices.DeleteFunc(s.Invitations, func(v Invitation) bool { return v.ExpiresAtMs <= nowMs })
	s.ChatMutes = slices.DeleteFunc(s.ChatMutes, func(b Ban) bool { return b.UntilMs <= nowMs })
}

// LiveRequests returns the requests to speak that have not lapsed at
// nowMs, in order of arrival.
func (s *State) LiveRequests(nowMs int64) []MicRequest {
	out := make([]MicRequest, 0, len(s.Requests))
	for _, r := range s.Requests {
		if r.ExpiresAtMs > nowMs {
			out = append(out, r)
		}
	}
	return out
}

// requestMic is RequestMic: a present user without a seat asks for one
// (a given seat or any); asking again while the request stands changes
// nothing.
func (s *State) requestMic(c *Command) ([]Event, bool, error) {
	a := &c.Args
	actor := c.Actor.UserID
	now := c.NowMs
	if err := s.mustBePresent(actor); err != nil {
		return nil, false, err
	}
	if cur := s.seatOf(actor); cur >= 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "already on seat %d", cur)
	}
	if err := s.mustBeSeatChoice(a.SeatIndex); err != nil {
		return nil, false, err
	}
	if s.request(actor, now) >= 0 {
		return nil, false, nil
	}
	s.dropExpired(now)
	s.dropRequest(actor)
	if len(s.Requests) >= MaxMicRequests {
		return nil, false, apperr.New(apperr.FailedPrecondition, "the queue of requests to speak is full (%d)", MaxMicRequests)
	}
	if a.ExpiresAtMs <= now {
		return nil, false, apperr.New(apperr.Internal, "request to speak without an expiry")
	}
	s.Requests = append(s.Requests, MicRequest{UserID: actor, SeatIndex: a.SeatIndex, RequestedAtMs: now, ExpiresAtMs: a.ExpiresAtMs})
	return []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: actor, SeatIndex: a.SeatIndex, ExpiresAtMs: a.ExpiresAtMs}}}, true, nil
}

// cancelMicRequest is CancelMicRequest: the user withdraws their request;
// without one it changes nothing.
func (s *State) cancelMicRequest(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	if s.request(actor, c.NowMs) < 0 {
		return nil, false, nil
	}
	s.dropRequest(actor)
	return []Event{{roomevent.RoomMicRequestCancelled, roomevent.MicRequestEnded{UserID: actor, ByUserID: actor, SeatIndex: AnySeat}}}, true, nil
}

// approveMicRequest is ApproveMicRequest: the host's powers seat the
// requester in the same command, on the seat the approval names, else the
// one asked for, else the lowest free one; with none free it fails and
// the request stays.
func (s *State) approveMicRequest(c *Command) ([]Event, bool, error) {
	a := &c.Args
	target := a.TargetUserID
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	i := s.request(target, c.NowMs)
	if i < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d has no request to speak", target)
	}
	want := a.SeatIndex
	if want == AnySeat {
		want = s.Requests[i].SeatIndex
	}
	seat, err := s.pickSeat(want)
	if err != nil {
		return nil, false, err
	}
	s.sit(target, seat, false)
	return []Event{
		{roomevent.RoomMicRequestApproved, roomevent.MicRequestEnded{UserID: target, ByUserID: c.Actor.UserID, SeatIndex: seat}},
		{roomevent.RoomMicUp, roomevent.MicMoved{UserID: target, SeatIndex: seat}},
	}, true, nil
}

// rejectMicRequest is RejectMicRequest.
func (s *State) rejectMicRequest(c *Command) ([]Event, bool, error) {
	target := c.Args.TargetUserID
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	if s.request(target, c.NowMs) < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d has no request to speak", target)
	}
	s.dropRequest(target)
	return []Event{{roomevent.RoomMicRequestRejected, roomevent.MicRequestEnded{UserID: target, ByUserID: c.Actor.UserID, SeatIndex: AnySeat}}}, true, nil
}

// inviteToMic is InviteToMic: the host's powers invite a present user
// without a seat to one (a given seat or any), for InvitationTTLMs. A new
// invitation replaces the user's last.
func (s *State) inviteToMic(c *Command) ([]Event, bool, error) {
	a := &c.Args
	target := a.TargetUserID
	now := c.NowMs
	if err := s.mustModerate(c.Actor); err != nil {
		return nil, false, err
	}
	if !s.isPresent(target) {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d is not in the room", target)
	}
	if cur := s.seatOf(target); cur >= 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "user %d is already on seat %d", target, cur)
	}
	if err := s.mustBeSeatChoice(a.SeatIndex); err != nil {
		return nil, false, err
	}
	s.dropExpired(now)
	s.dropInvitation(target)
	if len(s.Invitations) >= MaxMicInvitations {
		return nil, false, apperr.New(apperr.FailedPrecondition, "too many open invitations (%d)", MaxMicInvitations)
	}
	expires := now + InvitationTTLMs
	s.Invitations = append(s.Invitations, Invitation{UserID: target, ByUserID: c.Actor.UserID, SeatIndex: a.SeatIndex,
		InvitedAtMs: now, ExpiresAtMs: expires})
	return []Event{{roomevent.RoomMicInvited, roomevent.MicInvited{UserID: target, ByUserID: c.Actor.UserID,
		SeatIndex: a.SeatIndex, ExpiresAtMs: expires}}}, true, nil
}

// acceptMicInvitation is AcceptMicInvitation: the invited user takes the
// seat offered (else the lowest free one) in the same command, whatever
// the seat mode.
func (s *State) acceptMicInvitation(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	i := s.invitation(actor, c.NowMs)
	if i < 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "no invitation to a seat stands for you")
	}
	if cur := s.seatOf(actor); cur >= 0 {
		return nil, false, apperr.New(apperr.FailedPrecondition, "already on seat %d", cur)
	}
	seat, err := s.pickSeat(s.Invitations[i].SeatIndex)
	if err != nil {
		return nil, false, err
	}
	s.sit(actor, seat, false)
	return []Event{
		{roomevent.RoomMicInvitationAccepted, roomevent.MicInvitationEnded{UserID: actor, SeatIndex: seat}},
		{roomevent.RoomMicUp, roomevent.MicMoved{UserID: actor, SeatIndex: seat}},
	}, true, nil
}

// declineMicInvitation is DeclineMicInvitation; without an invitation it
// changes nothing.
func (s *State) declineMicInvitation(c *Command) ([]Event, bool, error) {
	actor := c.Actor.UserID
	if s.invitation(actor, c.NowMs) < 0 {
		return nil, false, nil
	}
	s.dropInvitation(actor)
	return []Event{{roomevent.RoomMicInvitationDeclined, roomevent.MicInvitationEnded{UserID: actor, SeatIndex: AnySeat}}}, true, nil
}
