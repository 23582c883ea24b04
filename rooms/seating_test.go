package rooms

import (
	"slices"
	"testing"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

// TestSeatingRules covers seat mutes, self-mutes, seat modes, requests to
// speak and invitations.
func TestSeatingRules(t *testing.T) {
	const (
		reqExpiry    = 1000 + 300_000 // hostsLimits' request at cmd's NowMs
		inviteExpiry = 1000 + InvitationTTLMs
	)
	hostOn := func(seat int) func(*State) { return func(s *State) { s.Seats[seat].UserID = host } }
	seatMuted := func(seat int) func(*State) { return func(s *State) { s.Seats[seat].Muted = true } }
	applyMode := func(s *State) { s.SeatMode = roomevent.SeatModeApply }
	request := func(user int64, seat int, expires int64) func(*State) {
		return func(s *State) {
			s.Requests = append(s.Requests, MicRequest{UserID: user, SeatIndex: seat, RequestedAtMs: 1, ExpiresAtMs: expires})
		}
	}
	invite := func(user int64, seat int, expires int64) func(*State) {
		return func(s *State) {
			s.Invitations = append(s.Invitations, Invitation{UserID: user, ByUserID: host, SeatIndex: seat, InvitedAtMs: 1, ExpiresAtMs: expires})
		}
	}
	both := func(fs ...func(*State)) func(*State) {
		return func(s *State) {
			for _, f := range fs {
				f(s)
			}
		}
	}
	fillSeats := func(s *State) { // seats 1, 2 and 4 taken; 3 is locked
		for i, u := range map[int]int64{1: 101, 2: 102, 4: 104} {
			s.addPresence(Presence{UserID: u})
			s.Seats[i].UserID = u
		}
	}
	seat := func(i int, want Seat) func(*testing.T, *State) {
		return func(t *testing.T, s *State) {
			if s.Seats[i] != want {
				t.Errorf("seat %d = %+v, want %+v", i, s.Seats[i], want)
			}
		}
	}
	requests := func(want ...MicRequest) func(*testing.T, *State) {
		return func(t *testing.T, s *State) {
			if !slices.Equal(s.Requests, want) {
				t.Errorf("requests %+v, want %+v", s.Requests, want)
			}
		}
	}
	invitations := func(want ...Invitation) func(*testing.T, *State) {
		return func(t *testing.T, s *State) {
			if !slices.Equal(s.Invitations, want) {
				t.Errorf("invitations %+v, want %+v", s.Invitations, want)
			}
		}
	}
	seatMuteEvent := func(i int, muted bool, by int64) []Event {
		return []Event{{roomevent.RoomSeatMuteChanged, roomevent.SeatMuteChanged{SeatIndex: i, Muted: muted, ByUserID: by}}}
	}
	micUp := func(user int64, i int) Event {
		return Event{roomevent.RoomMicUp, roomevent.MicMoved{UserID: user, SeatIndex: i}}
	}
	approved := func(user, by int64, i int) []Event {
		return []Event{{roomevent.RoomMicRequestApproved, roomevent.MicRequestEnded{UserID: user, ByUserID: by, SeatIndex: i}}, micUp(user, i)}
	}
	accepted := func(user int64, i int) []Event {
		return []Event{{roomevent.RoomMicInvitationAccepted, roomevent.MicInvitationEnded{UserID: user, SeatIndex: i}}, micUp(user, i)}
	}

	runRuleCases(t, hostsRoom, []ruleCase{
		// MuteSeat
		{name: "host mutes a free seat", cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 1, Muted: true}), changed: true,
			events: seatMuteEvent(1, true, host), check: seat(1, Seat{Muted: true})},
		{name: "host mutes a speaker's seat", setup: func(s *State) { s.Seats[0].SelfMuted = true },
			cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 0, Muted: true}), changed: true,
			events: seatMuteEvent(0, true, host), check: seat(0, Seat{UserID: alice, Muted: true, SelfMuted: true})},
		{name: "an admin mutes a locked seat", cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 3, Muted: true}), changed: true,
			events: seatMuteEvent(3, true, dave), check: seat(3, Seat{Locked: true, Muted: true})},
		{name: "an operator unmutes", setup: seatMuted(0), cmd: opCmd(KindMuteSeat, Args{SeatIndex: 0}), changed: true,
			events: seatMuteEvent(0, false, 0), check: seat(0, Seat{UserID: alice})},
		{name: "muting a muted seat", setup: seatMuted(1), cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 1, Muted: true})},
		{name: "unmuting an unmuted seat", cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 1})},
		{name: "mute a seat past the last", cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 5, Muted: true}), want: apperr.InvalidArgument, field: "seat_index"},
		{name: "mute seat -1", cmd: cmd(KindMuteSeat, host, Args{SeatIndex: AnySeat, Muted: true}), want: apperr.InvalidArgument, field: "seat_index"},
		{name: "a speaker mutes her seat", cmd: cmd(KindMuteSeat, alice, Args{SeatIndex: 0, Muted: true}), want: apperr.PermissionDenied},
		{name: "a speaker lifts the host's mute", setup: seatMuted(0), cmd: cmd(KindMuteSeat, alice, Args{SeatIndex: 0}), want: apperr.PermissionDenied},
		{name: "an admin mutes the host's seat", setup: hostOn(1), cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 1, Muted: true}),
			want: apperr.PermissionDenied, msg: "may not act on the owner, the host or another admin"},
		{name: "an admin mutes the owner's seat", setup: func(s *State) { s.Seats[1].UserID = owner },
			cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 1, Muted: true}), want: apperr.PermissionDenied},
		{name: "an admin mutes another admin's seat", setup: func(s *State) { s.Admins = append(s.Admins, alice) },
			cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 0, Muted: true}), want: apperr.PermissionDenied},
		{name: "an admin mutes his own seat", setup: func(s *State) { s.Seats[1].UserID = dave },
			cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 1, Muted: true}), changed: true, events: seatMuteEvent(1, true, dave)},
		{name: "an admin lifts the mute of the host's seat", setup: both(hostOn(1), seatMuted(1)),
			cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 1}), want: apperr.PermissionDenied},
		{name: "an admin lifts the mute of a member's seat", setup: seatMuted(0),
			cmd: cmd(KindMuteSeat, dave, Args{SeatIndex: 0}), changed: true, events: seatMuteEvent(0, false, dave)},
		{name: "the host mutes an admin's seat", setup: func(s *State) { s.Seats[1].UserID = dave },
			cmd: cmd(KindMuteSeat, host, Args{SeatIndex: 1, Muted: true}), changed: true, events: seatMuteEvent(1, true, host)},

		// SelfMute
		{name: "a speaker mutes herself", cmd: cmd(KindSelfMute, alice, Args{Muted: true}), changed: true,
			events: []Event{{roomevent.RoomSelfMuteChanged, roomevent.SelfMuteChanged{UserID: alice, SeatIndex: 0, Muted: true}}},
			check:  seat(0, Seat{UserID: alice, SelfMuted: true})},
		{name: "a speaker unmutes herself, not the seat", setup: func(s *State) { s.Seats[0].Muted, s.Seats[0].SelfMuted = true, true },
			cmd: cmd(KindSelfMute, alice, Args{}), changed: true,
			events: []Event{{roomevent.RoomSelfMuteChanged, roomevent.SelfMuteChanged{UserID: alice, SeatIndex: 0}}},
			check:  seat(0, Seat{UserID: alice, Muted: true})},
		{name: "self-muting again", setup: func(s *State) { s.Seats[0].SelfMuted = true }, cmd: cmd(KindSelfMute, alice, Args{Muted: true})},
		{name: "self-unmuting unmuted", cmd: cmd(KindSelfMute, alice, Args{})},
		{name: "self-mute without a seat", cmd: cmd(KindSelfMute, bob, Args{Muted: true}), want: apperr.FailedPrecondition, msg: "not on a seat"},
		{name: "self-mute away", cmd: cmd(KindSelfMute, carol, Args{Muted: true}), want: apperr.FailedPrecondition},

		// SetSeatMode
		{name: "owner sets apply", setup: request(bob, AnySeat, 9000), cmd: cmd(KindSetSeatMode, owner, Args{SeatMode: roomevent.SeatModeApply}),
			changed: true, events: []Event{{roomevent.RoomSeatModeChanged, roomevent.SeatModeChanged{SeatMode: roomevent.SeatModeApply}}},
			check: func(t *testing.T, s *State) {
				if s.seatMode() != roomevent.SeatModeApply || len(s.Requests) != 1 {
					t.Errorf("mode %s requests %v", s.seatMode(), s.Requests)
				}
			}},
		{name: "host sets free", setup: applyMode, cmd: cmd(KindSetSeatMode, host, Args{SeatMode: roomevent.SeatModeFree}), changed: true,
			events: []Event{{roomevent.RoomSeatModeChanged, roomevent.SeatModeChanged{SeatMode: roomevent.SeatModeFree}}}},
		{name: "free in a room from before seat modes", cmd: cmd(KindSetSeatMode, owner, Args{SeatMode: roomevent.SeatModeFree})},
		{name: "apply twice", setup: applyMode, cmd: cmd(KindSetSeatMode, owner, Args{SeatMode: roomevent.SeatModeApply})},
		{name: "an unknown mode", cmd: cmd(KindSetSeatMode, owner, Args{SeatMode: "open"}), want: apperr.InvalidArgument, field: "seat_mode"},
		{name: "no mode", cmd: cmd(KindSetSeatMode, owner, Args{}), want: apperr.InvalidArgument, field: "seat_mode"},

		// MicUp in apply mode
		{name: "a member's mic up in apply mode", setup: applyMode, cmd: cmd(KindMicUp, bob, Args{SeatIndex: 1}),
			want: apperr.FailedPrecondition, msg: "request one"},
		{name: "the host's mic up in apply mode", setup: applyMode, cmd: cmd(KindMicUp, host, Args{SeatIndex: 1}), changed: true,
			events: []Event{micUp(host, 1)}},
		{name: "the owner's mic up in apply mode", setup: applyMode, cmd: cmd(KindMicUp, owner, Args{SeatIndex: 1}), changed: true,
			events: []Event{micUp(owner, 1)}},
		{name: "an admin's mic up in apply mode", setup: applyMode, cmd: cmd(KindMicUp, dave, Args{SeatIndex: 1}), changed: true,
			events: []Event{micUp(dave, 1)}},
		{name: "mic up onto a muted seat", setup: seatMuted(1), cmd: cmd(KindMicUp, bob, Args{SeatIndex: 1}), changed: true,
			events: []Event{micUp(bob, 1)}, check: seat(1, Seat{UserID: bob, Muted: true})},
		{name: "mic up drops the user's request and invitation", setup: both(request(bob, 2, 9000), invite(bob, 2, 9000), request(erin, 4, 9000)),
			cmd: cmd(KindMicUp, bob, Args{SeatIndex: 1}), changed: true, events: []Event{micUp(bob, 1)},
			check: func(t *testing.T, s *State) {
				requests(MicRequest{UserID: erin, SeatIndex: 4, RequestedAtMs: 1, ExpiresAtMs: 9000})(t, s)
				invitations()(t, s)
			}},

		// RequestMic
		{name: "request any seat", cmd: cmd(KindRequestMic, bob, Args{SeatIndex: AnySeat}), changed: true,
			events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: AnySeat, ExpiresAtMs: reqExpiry}}},
			check:  requests(MicRequest{UserID: bob, SeatIndex: AnySeat, RequestedAtMs: 1000, ExpiresAtMs: reqExpiry})},
		{name: "request a seat, in arrival order", setup: request(erin, AnySeat, 9000), cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 2}),
			changed: true, events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: 2, ExpiresAtMs: reqExpiry}}},
			check: requests(MicRequest{UserID: erin, SeatIndex: AnySeat, RequestedAtMs: 1, ExpiresAtMs: 9000},
				MicRequest{UserID: bob, SeatIndex: 2, RequestedAtMs: 1000, ExpiresAtMs: reqExpiry})},
		{name: "request a taken seat", cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 0}), changed: true,
			events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: 0, ExpiresAtMs: reqExpiry}}}},
		{name: "request in apply mode", setup: applyMode, cmd: cmd(KindRequestMic, bob, Args{SeatIndex: AnySeat}), changed: true,
			events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: AnySeat, ExpiresAtMs: reqExpiry}}}},
		{name: "request again while it stands", setup: request(bob, 2, 9000), cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 4})},
		{name: "request again after it lapsed", setup: both(request(bob, 2, 1000), request(erin, 2, 900)),
			cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 4}), changed: true,
			events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: 4, ExpiresAtMs: reqExpiry}}},
			check:  requests(MicRequest{UserID: bob, SeatIndex: 4, RequestedAtMs: 1000, ExpiresAtMs: reqExpiry})},
		{name: "request a locked seat", cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 3}), want: apperr.FailedPrecondition, msg: "locked"},
		{name: "request a seat past the last", cmd: cmd(KindRequestMic, bob, Args{SeatIndex: 5}), want: apperr.InvalidArgument, field: "seat_index"},
		{name: "request on a seat", cmd: cmd(KindRequestMic, alice, Args{SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "already on seat 0"},
		{name: "request away", cmd: cmd(KindRequestMic, carol, Args{SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "join it first"},
		{name: "request in a full queue", setup: func(s *State) {
			for u := int64(100); len(s.Requests) < MaxMicRequests; u++ {
				request(u, AnySeat, 9000)(s)
			}
		}, cmd: cmd(KindRequestMic, bob, Args{SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "full (100)"},
		{name: "request in a queue full of lapsed requests", setup: func(s *State) {
			for u := int64(100); len(s.Requests) < MaxMicRequests; u++ {
				request(u, AnySeat, 1000)(s)
			}
		}, cmd: cmd(KindRequestMic, bob, Args{SeatIndex: AnySeat}), changed: true,
			events: []Event{{roomevent.RoomMicRequested, roomevent.MicRequested{UserID: bob, SeatIndex: AnySeat, ExpiresAtMs: reqExpiry}}},
			check:  requests(MicRequest{UserID: bob, SeatIndex: AnySeat, RequestedAtMs: 1000, ExpiresAtMs: reqExpiry})},

		// CancelMicRequest
		{name: "cancel", setup: both(request(bob, 2, 9000), request(erin, AnySeat, 9000)), cmd: cmd(KindCancelMicRequest, bob, Args{}), changed: true,
			events: []Event{{roomevent.RoomMicRequestCancelled, roomevent.MicRequestEnded{UserID: bob, ByUserID: bob, SeatIndex: AnySeat}}},
			check:  requests(MicRequest{UserID: erin, SeatIndex: AnySeat, RequestedAtMs: 1, ExpiresAtMs: 9000})},
		{name: "cancel without a request", cmd: cmd(KindCancelMicRequest, bob, Args{})},
		{name: "cancel a lapsed request", setup: request(bob, 2, 1000), cmd: cmd(KindCancelMicRequest, bob, Args{})},

		// ApproveMicRequest
		{name: "approve onto the lowest free seat", setup: request(bob, AnySeat, 9000),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), changed: true,
			events: approved(bob, host, 1), check: func(t *testing.T, s *State) { seat(1, Seat{UserID: bob})(t, s); requests()(t, s) }},
		{name: "approve onto the seat asked for", setup: request(bob, 4, 9000),
			cmd: cmd(KindApproveMicRequest, dave, Args{TargetUserID: bob, SeatIndex: AnySeat}), changed: true, events: approved(bob, dave, 4)},
		{name: "approve onto the seat the approver names", setup: request(bob, 4, 9000),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: 2}), changed: true, events: approved(bob, host, 2)},
		{name: "approve onto a muted seat", setup: both(request(bob, AnySeat, 9000), seatMuted(1)),
			cmd: opCmd(KindApproveMicRequest, Args{TargetUserID: bob, SeatIndex: AnySeat}), changed: true,
			events: approved(bob, 0, 1), check: seat(1, Seat{UserID: bob, Muted: true})},
		{name: "approve in apply mode, with the user's invitation", setup: both(applyMode, request(bob, AnySeat, 9000), invite(bob, 4, 9000)),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), changed: true,
			events: approved(bob, host, 1), check: invitations()},
		{name: "approve onto the seat asked for, taken", setup: request(bob, 0, 9000),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "seat 0 is taken"},
		{name: "approve onto a locked seat", setup: request(bob, AnySeat, 9000),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: 3}), want: apperr.FailedPrecondition, msg: "locked"},
		{name: "approve with no seat free", setup: both(request(bob, AnySeat, 9000), fillSeats),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "no seat is free"},
		{name: "approve without a request", cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}),
			want: apperr.FailedPrecondition, msg: "no request"},
		{name: "approve a lapsed request", setup: request(bob, AnySeat, 1000),
			cmd: cmd(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "no request"},

		// RejectMicRequest
		{name: "reject", setup: request(bob, AnySeat, 9000), cmd: cmd(KindRejectMicRequest, dave, Args{TargetUserID: bob}), changed: true,
			events: []Event{{roomevent.RoomMicRequestRejected, roomevent.MicRequestEnded{UserID: bob, ByUserID: dave, SeatIndex: AnySeat}}},
			check:  requests()},
		{name: "reject without a request", cmd: cmd(KindRejectMicRequest, host, Args{TargetUserID: bob}), want: apperr.FailedPrecondition},
		{name: "reject a lapsed request", setup: request(bob, AnySeat, 1000), cmd: cmd(KindRejectMicRequest, host, Args{TargetUserID: bob}),
			want: apperr.FailedPrecondition},

		// InviteToMic
		{name: "invite to any seat", cmd: cmd(KindInviteToMic, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), changed: true,
			events: []Event{{roomevent.RoomMicInvited, roomevent.MicInvited{UserID: bob, ByUserID: host, SeatIndex: AnySeat, ExpiresAtMs: inviteExpiry}}},
			check:  invitations(Invitation{UserID: bob, ByUserID: host, SeatIndex: AnySeat, InvitedAtMs: 1000, ExpiresAtMs: inviteExpiry})},
		{name: "a new invitation replaces the last", setup: invite(bob, 2, 9000), cmd: cmd(KindInviteToMic, dave, Args{TargetUserID: bob, SeatIndex: 4}),
			changed: true, events: []Event{{roomevent.RoomMicInvited, roomevent.MicInvited{UserID: bob, ByUserID: dave, SeatIndex: 4, ExpiresAtMs: inviteExpiry}}},
			check: invitations(Invitation{UserID: bob, ByUserID: dave, SeatIndex: 4, InvitedAtMs: 1000, ExpiresAtMs: inviteExpiry})},
		{name: "invite someone away", cmd: cmd(KindInviteToMic, host, Args{TargetUserID: carol, SeatIndex: AnySeat}), want: apperr.FailedPrecondition,
			msg: "not in the room"},
		{name: "invite a speaker", cmd: cmd(KindInviteToMic, host, Args{TargetUserID: alice, SeatIndex: AnySeat}), want: apperr.FailedPrecondition,
			msg: "already on seat 0"},
		{name: "invite to a locked seat", cmd: cmd(KindInviteToMic, host, Args{TargetUserID: bob, SeatIndex: 3}), want: apperr.FailedPrecondition},
		{name: "invite to a seat past the last", cmd: cmd(KindInviteToMic, host, Args{TargetUserID: bob, SeatIndex: 9}),
			want: apperr.InvalidArgument, field: "seat_index"},
		{name: "a hundred and first invitation", setup: func(s *State) {
			for u := int64(100); len(s.Invitations) < MaxMicInvitations; u++ {
				invite(u, AnySeat, 9000)(s)
			}
		}, cmd: cmd(KindInviteToMic, host, Args{TargetUserID: bob, SeatIndex: AnySeat}), want: apperr.FailedPrecondition, msg: "(100)"},

		// AcceptMicInvitation
		{name: "accept onto the lowest free seat", setup: both(invite(bob, AnySeat, 9000), request(bob, 4, 9000)),
			cmd: cmd(KindAcceptMicInvitation, bob, Args{}), changed: true, events: accepted(bob, 1),
			check: func(t *testing.T, s *State) { seat(1, Seat{UserID: bob})(t, s); invitations()(t, s); requests()(t, s) }},
		{name: "accept onto the seat offered, in apply mode", setup: both(applyMode, invite(bob, 4, 9000)),
			cmd: cmd(KindAcceptMicInvitation, bob, Args{}), changed: true, events: accepted(bob, 4)},
		{name: "accept onto a seat taken since", setup: invite(bob, 0, 9000), cmd: cmd(KindAcceptMicInvitation, bob, Args{}),
			want: apperr.FailedPrecondition, msg: "taken"},
		{name: "accept with no seat free", setup: both(invite(bob, AnySeat, 9000), fillSeats), cmd: cmd(KindAcceptMicInvitation, bob, Args{}),
			want: apperr.FailedPrecondition, msg: "no seat is free"},
		{name: "accept without an invitation", cmd: cmd(KindAcceptMicInvitation, bob, Args{}), want: apperr.FailedPrecondition},
		{name: "accept another's invitation", setup: invite(erin, AnySeat, 9000), cmd: cmd(KindAcceptMicInvitation, bob, Args{}),
			want: apperr.FailedPrecondition},
		{name: "accept a lapsed invitation", setup: invite(bob, AnySeat, 1000), cmd: cmd(KindAcceptMicInvitation, bob, Args{}),
			want: apperr.FailedPrecondition},

		// DeclineMicInvitation
		{name: "decline", setup: invite(bob, 2, 9000), cmd: cmd(KindDeclineMicInvitation, bob, Args{}), changed: true,
			events: []Event{{roomevent.RoomMicInvitationDeclined, roomevent.MicInvitationEnded{UserID: bob, SeatIndex: AnySeat}}},
			check:  invitations()},
		{name: "decline without an invitation", cmd: cmd(KindDeclineMicInvitation, bob, Args{})},
		{name: "decline a lapsed invitation", setup: invite(bob, 2, 1000), cmd: cmd(KindDeclineMicInvitation, bob, Args{})},
	})
}

// TestSeatMuteStaysOnTheSeat: the host's mute belongs to the seat, through
// every way its occupant changes, until the host's powers lift it.
func TestSeatMuteStaysOnTheSeat(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	muted := func(when string, want Seat) {
		t.Helper()
		if r.s.Seats[0] != want {
			t.Fatalf("%s: seat 0 = %+v, want %+v", when, r.s.Seats[0], want)
		}
	}
	r.must(KindMuteSeat, host, Args{SeatIndex: 0, Muted: true})
	r.refused(KindMuteSeat, alice, Args{SeatIndex: 0}, apperr.PermissionDenied, "")
	r.must(KindSelfMute, alice, Args{Muted: true})
	r.must(KindSelfMute, alice, Args{})
	muted("speaker unmuted herself", Seat{UserID: alice, Muted: true})
	r.must(KindLeaveRoom, alice, Args{})
	muted("speaker left", Seat{Muted: true})
	r.must(KindMicUp, bob, Args{SeatIndex: 0})
	muted("new speaker", Seat{UserID: bob, Muted: true})
	// Moving would shed the mute: refused until the host lifts it.
	r.refused(KindChangeMicSeat, bob, Args{SeatIndex: 1}, apperr.FailedPrecondition, "muted by the host")
	r.must(KindMicDown, bob, Args{})
	muted("speaker left the seat", Seat{Muted: true})
	r.must(KindMicUp, bob, Args{SeatIndex: 1})
	if r.s.Seats[1].Muted {
		t.Fatal("the mute moved with the speaker")
	}
	r.must(KindMicDown, bob, Args{})
	r.must(KindRequestMic, erin, Args{SeatIndex: 0})
	r.must(KindApproveMicRequest, dave, Args{TargetUserID: erin, SeatIndex: AnySeat})
	muted("approved speaker", Seat{UserID: erin, Muted: true})
	r.must(KindKickUser, dave, Args{TargetUserID: erin})
	muted("speaker kicked", Seat{Muted: true})
	r.must(KindJoinRoom, carol, Args{})
	r.must(KindInviteToMic, host, Args{TargetUserID: carol, SeatIndex: 0})
	r.must(KindAcceptMicInvitation, carol, Args{})
	muted("invited speaker", Seat{UserID: carol, Muted: true})
	r.must(KindSetSeatLock, host, Args{SeatIndex: 0, Locked: true})
	muted("seat locked", Seat{Locked: true, Muted: true})
	r.must(KindSetSeatLock, host, Args{SeatIndex: 0})
	r.must(KindMicUp, carol, Args{SeatIndex: 0})
	if _, changed, err := r.exec(KindSweepStale, operator, Args{UserIDs: []int64{carol}}); err != nil || !changed {
		t.Fatalf("sweep: %v %v", changed, err)
	}
	muted("speaker swept", Seat{Muted: true})
	r.must(KindMuteSeat, dave, Args{SeatIndex: 0})
	muted("lifted", Seat{})
}

// TestSelfMuteFollowsTheSpeaker: a speaker's own mute moves with them to
// another seat and ends when they leave the seat by any way.
func TestSelfMuteFollowsTheSpeaker(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	events := r.must(KindSelfMute, alice, Args{Muted: true})
	if body := events[0].Body.(roomevent.SelfMuteChanged); body != (roomevent.SelfMuteChanged{UserID: alice, SeatIndex: 0, Muted: true}) {
		t.Fatalf("event %+v", body)
	}
	r.must(KindChangeMicSeat, alice, Args{SeatIndex: 2})
	if r.s.Seats[0].SelfMuted || !r.s.Seats[2].SelfMuted {
		t.Fatalf("after the move: %+v", r.s.Seats)
	}
	r.must(KindMicDown, alice, Args{})
	r.must(KindMicUp, alice, Args{SeatIndex: 2})
	if r.s.Seats[2].SelfMuted {
		t.Fatal("self-mute kept through mic down")
	}
	r.must(KindMicDown, alice, Args{})
	for _, end := range []struct {
		name string
		do   func()
	}{
		{"leave", func() { r.must(KindLeaveRoom, alice, Args{}); r.must(KindJoinRoom, alice, Args{}) }},
		{"lock", func() {
			r.must(KindSetSeatLock, host, Args{SeatIndex: 2, Locked: true})
			r.must(KindSetSeatLock, host, Args{SeatIndex: 2})
		}},
		{"kick", func() { r.must(KindKickUser, dave, Args{TargetUserID: alice}); r.must(KindJoinRoom, alice, Args{}) }},
	} {
		r.must(KindMicUp, alice, Args{SeatIndex: 2})
		r.must(KindSelfMute, alice, Args{Muted: true})
		end.do()
		if r.s.Seats[2] != (Seat{}) {
			t.Fatalf("%s: seat 2 = %+v", end.name, r.s.Seats[2])
		}
	}
	// Under the host's mute, a self-mute stands apart: lifting one keeps the other.
	r.must(KindMicUp, alice, Args{SeatIndex: 2})
	r.must(KindSelfMute, alice, Args{Muted: true})
	r.must(KindMuteSeat, host, Args{SeatIndex: 2, Muted: true})
	r.must(KindMuteSeat, host, Args{SeatIndex: 2})
	if r.s.Seats[2] != (Seat{UserID: alice, SelfMuted: true}) {
		t.Fatalf("seat 2 = %+v", r.s.Seats[2])
	}
}

// TestRequestsAndInvitationsLeaveWithTheUser: a user's request to speak
// and invitation end with their presence, however it ends, and an
// invitation to a user who left is not there when they come back.
func TestRequestsAndInvitationsLeaveWithTheUser(t *testing.T) {
	ways := []struct {
		name string
		end  func(r *roomRun)
	}{
		{"leave", func(r *roomRun) { r.must(KindLeaveRoom, bob, Args{}); r.must(KindLeaveRoom, erin, Args{}) }},
		{"kick", func(r *roomRun) {
			r.must(KindKickUser, dave, Args{TargetUserID: bob})
			r.must(KindKickUser, host, Args{TargetUserID: erin, BanSeconds: 1})
		}},
		{"sweep", func(r *roomRun) {
			if _, changed, err := r.exec(KindSweepStale, operator, Args{UserIDs: []int64{bob, erin}}); err != nil || !changed {
				r.t.Fatalf("sweep: %v %v", changed, err)
			}
		}},
		{"close", func(r *roomRun) { r.must(KindCloseRoom, owner, Args{}) }},
		{"room ban", func(r *roomRun) {
			if _, changed, err := r.exec(KindBanRoom, operator, Args{Reason: "spam"}); err != nil || !changed {
				r.t.Fatalf("ban: %v %v", changed, err)
			}
		}},
	}
	for _, w := range ways {
		t.Run(w.name, func(t *testing.T) {
			r := newRoomRun(t, hostsRoom())
			r.must(KindRequestMic, bob, Args{SeatIndex: AnySeat})
			r.must(KindRequestMic, erin, Args{SeatIndex: 2})
			r.must(KindInviteToMic, host, Args{TargetUserID: bob, SeatIndex: AnySeat})
			r.must(KindInviteToMic, dave, Args{TargetUserID: erin, SeatIndex: 4})
			w.end(r)
			v := r.s.View()
			if len(r.s.Requests) != 0 || len(r.s.Invitations) != 0 || v.MicRequestCount != 0 || len(v.MicInvitations) != 0 {
				t.Fatalf("left behind: requests %v invitations %v", r.s.Requests, r.s.Invitations)
			}
			if r.s.Status != roomevent.StatusActive {
				return
			}
			r.advance(1000) // erin's ban, if any, ends
			r.must(KindJoinRoom, bob, Args{})
			r.refused(KindAcceptMicInvitation, bob, Args{}, apperr.FailedPrecondition, "no invitation")
			r.refused(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}, apperr.FailedPrecondition, "no request")
		})
	}
}

// TestApproveWhenTheSeatWasTaken: an approval or an acceptance that finds
// its seat taken, or no seat free, fails and leaves the request or the
// invitation standing for a later try.
func TestApproveWhenTheSeatWasTaken(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.must(KindRequestMic, bob, Args{SeatIndex: 1})
	r.must(KindInviteToMic, host, Args{TargetUserID: erin, SeatIndex: 1})
	r.must(KindMicUp, dave, Args{SeatIndex: 1}) // just before the approval
	r.refused(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}, apperr.FailedPrecondition, "seat 1 is taken")
	r.refused(KindAcceptMicInvitation, erin, Args{}, apperr.FailedPrecondition, "seat 1 is taken")
	if live := r.s.LiveRequests(r.now); len(live) != 1 || live[0].UserID != bob || len(r.s.Invitations) != 1 {
		t.Fatalf("after the failures: requests %v invitations %v", live, r.s.Invitations)
	}
	r.must(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: 2})

	// No seat free: seats 0, 1, 2 taken, 3 locked, then 4.
	r.must(KindJoinRoom, carol, Args{})
	r.must(KindRequestMic, carol, Args{SeatIndex: AnySeat})
	r.must(KindMicUp, host, Args{SeatIndex: 4})
	r.refused(KindApproveMicRequest, dave, Args{TargetUserID: carol, SeatIndex: AnySeat}, apperr.FailedPrecondition, "no seat is free")
	r.must(KindInviteToMic, dave, Args{TargetUserID: erin, SeatIndex: AnySeat})
	r.refused(KindAcceptMicInvitation, erin, Args{}, apperr.FailedPrecondition, "no seat is free")
	r.must(KindMicDown, host, Args{})
	r.must(KindApproveMicRequest, dave, Args{TargetUserID: carol, SeatIndex: AnySeat})
	if r.s.Seats[4].UserID != carol || len(r.s.Requests) != 0 || len(r.s.Invitations) != 1 {
		t.Fatalf("seats %+v requests %v invitations %v", r.s.Seats, r.s.Requests, r.s.Invitations)
	}
}

// TestRequestsAndInvitationsLapse: at its expiry a request is no longer
// approvable, rejectable or listed, and an invitation no longer
// acceptable; both stay in the state, unread, until the next change.
func TestRequestsAndInvitationsLapse(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.must(KindRequestMic, bob, Args{SeatIndex: AnySeat})
	r.must(KindInviteToMic, host, Args{TargetUserID: erin, SeatIndex: AnySeat})
	if live := r.s.LiveRequests(r.now); len(live) != 1 || live[0].ExpiresAtMs != r.now+hostsLimits.micRequestTTLMs {
		t.Fatalf("live requests %v", live)
	}

	r.advance(InvitationTTLMs - 1)
	r.must(KindMuteSeat, host, Args{SeatIndex: 4, Muted: true})
	if len(r.s.Invitations) != 1 {
		t.Fatal("invitation dropped before its expiry")
	}
	r.advance(1)
	r.refused(KindAcceptMicInvitation, erin, Args{}, apperr.FailedPrecondition, "no invitation")
	r.noop(KindDeclineMicInvitation, erin, Args{})
	r.must(KindMuteSeat, host, Args{SeatIndex: 4})
	if len(r.s.Invitations) != 0 || len(r.s.Requests) != 1 {
		t.Fatalf("after the invitation's expiry: invitations %v requests %v", r.s.Invitations, r.s.Requests)
	}

	r.advance(hostsLimits.micRequestTTLMs - InvitationTTLMs)
	if live := r.s.LiveRequests(r.now); len(live) != 0 {
		t.Fatalf("a lapsed request is listed: %v", live)
	}
	r.refused(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat}, apperr.FailedPrecondition, "no request")
	r.refused(KindRejectMicRequest, host, Args{TargetUserID: bob}, apperr.FailedPrecondition, "no request")
	r.noop(KindCancelMicRequest, bob, Args{})
	if len(r.s.Requests) != 1 {
		t.Fatal("a refused or no-op command dropped the lapsed request")
	}
	r.must(KindJoinRoom, carol, Args{})
	if len(r.s.Requests) != 0 || r.s.View().MicRequestCount != 0 {
		t.Fatalf("lapsed request kept after a change: %v", r.s.Requests)
	}
	// Asking again starts a new request.
	r.must(KindRequestMic, bob, Args{SeatIndex: 2})
	r.must(KindApproveMicRequest, host, Args{TargetUserID: bob, SeatIndex: AnySeat})
	if r.s.Seats[2].UserID != bob {
		t.Fatalf("seats %+v", r.s.Seats)
	}
}

// TestRequestQueueBound: a hundred requests wait at most; a cancel or a
// lapse makes room.
func TestRequestQueueBound(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.lim.maxOnline = 1000
	for u := int64(1000); len(r.s.Requests) < MaxMicRequests; u++ {
		r.must(KindJoinRoom, u, Args{})
		r.must(KindRequestMic, u, Args{SeatIndex: AnySeat})
		r.advance(1)
	}
	r.refused(KindRequestMic, bob, Args{SeatIndex: AnySeat}, apperr.FailedPrecondition, "full (100)")
	r.must(KindCancelMicRequest, 1050, Args{})
	r.must(KindRequestMic, bob, Args{SeatIndex: AnySeat})
	r.refused(KindRequestMic, erin, Args{SeatIndex: AnySeat}, apperr.FailedPrecondition, "full")
	r.advance(hostsLimits.micRequestTTLMs - MaxMicRequests) // the first request lapses, the second not yet
	r.must(KindRequestMic, erin, Args{SeatIndex: AnySeat})
	live := r.s.LiveRequests(r.now)
	if len(live) != MaxMicRequests || live[0].UserID != 1001 || live[len(live)-1].UserID != erin {
		t.Fatalf("%d live requests, first %+v, last %+v", len(live), live[0], live[len(live)-1])
	}
}

// TestApplyMode: in apply mode a member reaches a seat only through an
// approved request or an accepted invitation; the owner, the host and
// room admins take seats as before.
func TestApplyMode(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.refused(KindSetSeatMode, dave, Args{SeatMode: roomevent.SeatModeApply}, apperr.PermissionDenied, "")
	r.must(KindSetSeatMode, host, Args{SeatMode: roomevent.SeatModeApply})
	if r.s.View().SeatMode != roomevent.SeatModeApply {
		t.Fatalf("view seat mode %s", r.s.View().SeatMode)
	}
	r.refused(KindMicUp, bob, Args{SeatIndex: 1}, apperr.FailedPrecondition, "request one")
	r.must(KindMicUp, dave, Args{SeatIndex: 1})
	r.must(KindMicUp, host, Args{SeatIndex: 2})
	r.must(KindRequestMic, bob, Args{SeatIndex: AnySeat})
	r.must(KindApproveMicRequest, dave, Args{TargetUserID: bob, SeatIndex: AnySeat})
	r.must(KindInviteToMic, host, Args{TargetUserID: erin, SeatIndex: AnySeat})
	r.must(KindMicDown, bob, Args{})
	r.refused(KindMicUp, bob, Args{SeatIndex: 4}, apperr.FailedPrecondition, "request one")
	r.must(KindAcceptMicInvitation, erin, Args{})
	r.must(KindSetSeatMode, owner, Args{SeatMode: roomevent.SeatModeFree})
	r.must(KindMicDown, host, Args{})
	r.must(KindMicUp, bob, Args{SeatIndex: 2})
	want := []int64{alice, dave, bob, 0, erin}
	for i, u := range want {
		if r.s.Seats[i].UserID != u {
			t.Fatalf("seats %+v, want users %v", r.s.Seats, want)
		}
	}
}

// TestReplayKeepsLoggedExpiries: a request to speak and an invitation
// lapse on replay when they first did, from the expiry the command log
// holds, whatever the configuration or the code says by then.
// TestReplayKeepsMovesFromMutedSeats: a seat change from a host-muted seat,
// refused since the rule came, still replays when a log holds one from
// before it.
func TestReplayKeepsMovesFromMutedSeats(t *testing.T) {
	s := hostsRoom()
	s.Seats[0] = Seat{UserID: alice, Muted: true}
	c := &Command{Kind: KindChangeMicSeat, Actor: Actor{UserID: alice}, NowMs: 1, Args: Args{SeatIndex: 1}}
	if _, _, err := apply(s.Clone(), c, limits{}, false); !apperr.Is(err, apperr.FailedPrecondition) {
		t.Fatalf("new command: err = %v, want FAILED_PRECONDITION", err)
	}
	next := s.Clone()
	if _, changed, err := apply(next, c, limits{}, true); err != nil || !changed {
		t.Fatalf("replay: changed %v, err %v", changed, err)
	}
	if next.Seats[1].UserID != alice || !next.Seats[0].Muted {
		t.Fatalf("replayed move: seats %+v", next.Seats[:2])
	}
}

func TestReplayKeepsLoggedExpiries(t *testing.T) {
	start := hostsRoom()
	request := *cmd(KindRequestMic, bob, Args{SeatIndex: AnySeat, ExpiresAtMs: 7000})
	invite := *cmd(KindInviteToMic, host, Args{TargetUserID: erin, SeatIndex: 2, ExpiresAtMs: 8000})
	want := start.Clone()
	want.Requests = []MicRequest{{UserID: bob, SeatIndex: AnySeat, RequestedAtMs: 1000, ExpiresAtMs: 7000}}
	want.Invitations = []Invitation{{UserID: erin, ByUserID: host, SeatIndex: 2, InvitedAtMs: 1000, ExpiresAtMs: 8000}}
	mustReplayTo(t, start, []Command{request, invite}, want)

	// A new command gets its expiry from the room's limits, and the log keeps it.
	c := *cmd(KindInviteToMic, host, Args{TargetUserID: erin, SeatIndex: AnySeat, ExpiresAtMs: 8000})
	if _, _, err := apply(start.Clone(), &c, hostsLimits, false); err != nil || c.Args.ExpiresAtMs != 1000+InvitationTTLMs {
		t.Fatalf("new invitation: expires %d, err %v", c.Args.ExpiresAtMs, err)
	}
}
