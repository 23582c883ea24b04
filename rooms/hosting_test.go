package rooms

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

const (
	dave = int64(6) // a room admin in hostsRoom
	erin = int64(7) // present in hostsRoom, without a seat or a role
)

// hostsLimits are the limits of the hosts' rules: a request to speak
// stands five minutes.
var hostsLimits = limits{maxOnline: testMaxOnline, micRequestTTLMs: 300_000}

// hostsRoom is room() with a title and cover, dave present and a room
// admin, and erin present.
func hostsRoom() *State {
	s := room()
	s.Title, s.CoverURL = "Room", "https://cdn.example/1.png"
	s.addPresence(Presence{UserID: dave, JoinedAtMs: 1})
	s.addPresence(Presence{UserID: erin, JoinedAtMs: 1})
	s.Admins = []int64{dave}
	return s
}

// operator is an operator acting through /admin routes.
var operator = Actor{Admin: true, Operator: "admin:9"}

// opCmd is cmd by operator.
func opCmd(kind Kind, args Args) *Command {
	c := cmd(kind, 0, args)
	c.Actor = operator
	return c
}

// ruleCase is one command on a room and what apply must make of it.
type ruleCase struct {
	name  string
	setup func(*State)
	cmd   *Command
	want  apperr.Code // "" = accepted
	field string      // the field a rejection names, when it names one
	msg   string      // part of a rejection's message
	// events are what an accepted command emits, bodies and all; changed
	// whether it changes the room.
	events  []Event
	changed bool
	check   func(t *testing.T, s *State)
}

// runRuleCases applies each case's command to base() after its setup, with
// hostsLimits, and checks the answer. An accepted change must replay, from
// the command as the log stores it, to the same state and events.
func runRuleCases(t *testing.T, base func() *State, cases []ruleCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			if tt.setup != nil {
				tt.setup(s)
			}
			before := s.Clone()
			c := *tt.cmd
			events, changed, err := apply(s, &c, hostsLimits, false)
			if tt.want != "" {
				if apperr.CodeOf(err) != tt.want || apperr.FieldOf(err) != tt.field || !strings.Contains(errMessage(err), tt.msg) {
					t.Fatalf("err = %v (field %q), want %s %q field %q", err, apperr.FieldOf(err), tt.want, tt.msg, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if changed != tt.changed {
				t.Fatalf("changed = %v, want %v", changed, tt.changed)
			}
			for _, e := range events {
				checkContract(t, e)
			}
			if !reflect.DeepEqual(events, tt.events) {
				t.Fatalf("events\n %+v\nwant\n %+v", events, tt.events)
			}
			if !changed && !sameJSON(t, before, s) {
				t.Fatal("unchanged command changed the state")
			}
			if tt.check != nil {
				tt.check(t, s)
			}
			if changed {
				mustReplayTo(t, before, []Command{c}, s)
			}
		})
	}
}

// mustReplayTo replays cmds, as the command log stores them, on start the
// way recovery does, and fails unless that gives want.
func mustReplayTo(t *testing.T, start *State, cmds []Command, want *State) {
	t.Helper()
	sr := &storedRoom{snapshot: start.Clone()}
	for i, c := range cmds {
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		lc := loggedCommand{version: start.Version + int64(i) + 1}
		if err := json.Unmarshal(raw, &lc.cmd); err != nil {
			t.Fatal(err)
		}
		lc.cmd.AppCode, lc.cmd.RoomID, lc.cmd.CommandID = c.AppCode, c.RoomID, c.CommandID
		sr.log = append(sr.log, lc)
	}
	got, err := replay(sr)
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	// apply leaves the version and the time of the change to its caller.
	want = want.Clone()
	want.Version, want.UpdatedAtMs = got.Version, got.UpdatedAtMs
	if !sameJSON(t, want, got) {
		t.Fatalf("replay gives another state:\n%+v\nwant\n%+v", got, want)
	}
}

// TestHostsPowers is who may do what: each command that needs a role, by
// the owner, the host, a room admin in the room and away from it, a
// member and an operator.
func TestHostsPowers(t *testing.T) {
	requested := func(s *State) {
		s.Requests = []MicRequest{{UserID: erin, SeatIndex: AnySeat, RequestedAtMs: 1, ExpiresAtMs: 10_000}}
	}
	kinds := []struct {
		kind    Kind
		args    Args
		setup   func(*State)
		allowed string // who may, by the names below
	}{
		{KindMuteSeat, Args{SeatIndex: 1, Muted: true}, nil, "owner host admin operator"},
		{KindSetSeatLock, Args{SeatIndex: 1, Locked: true}, nil, "owner host admin operator"},
		{KindApproveMicRequest, Args{TargetUserID: erin, SeatIndex: AnySeat}, requested, "owner host admin operator"},
		{KindRejectMicRequest, Args{TargetUserID: erin}, requested, "owner host admin operator"},
		{KindInviteToMic, Args{TargetUserID: erin, SeatIndex: AnySeat}, nil, "owner host admin operator"},
		{KindUpdateRoomInfo, Args{Info: &RoomInfo{Notice: new("Welcome")}}, nil, "owner host admin operator"},
		{KindMuteChat, Args{TargetUserID: erin, MuteSeconds: 60}, nil, "owner host admin operator"},
		{KindKickUser, Args{TargetUserID: erin}, nil, "owner host admin operator"},
		{KindSetSeatMode, Args{SeatMode: roomevent.SeatModeApply}, nil, "owner host operator"},
		{KindSetRoomPassword, Args{PasswordHash: "H"}, nil, "owner host operator"},
		{KindTransferRoomHost, Args{TargetUserID: erin}, nil, "owner host"},
		{KindAddRoomAdmin, Args{TargetUserID: erin}, nil, "owner operator"},
		{KindRemoveRoomAdmin, Args{TargetUserID: dave}, nil, "owner operator"},
		{KindCloseRoom, Args{}, nil, "owner operator"},
	}
	actors := []struct {
		name  string
		actor Actor
		setup func(*State)
	}{
		{"owner", Actor{UserID: owner}, nil},
		{"host", Actor{UserID: host}, nil},
		{"admin", Actor{UserID: dave}, nil},
		{"admin-away", Actor{UserID: dave}, func(s *State) { s.removePresence(dave) }},
		{"member", Actor{UserID: bob}, nil},
		{"operator", operator, nil},
	}
	for _, k := range kinds {
		for _, a := range actors {
			t.Run(string(k.kind)+"/"+a.name, func(t *testing.T) {
				s := hostsRoom()
				for _, setup := range []func(*State){k.setup, a.setup} {
					if setup != nil {
						setup(s)
					}
				}
				c := cmd(k.kind, 0, k.args)
				c.Actor = a.actor
				_, changed, err := apply(s, c, hostsLimits, false)
				if slices.Contains(strings.Fields(k.allowed), a.name) {
					if err != nil || !changed {
						t.Fatalf("refused: changed=%v err=%v", changed, err)
					}
					return
				}
				if !apperr.Is(err, apperr.PermissionDenied) {
					t.Fatalf("err = %v, want PERMISSION_DENIED", err)
				}
				if a.name == "admin-away" && strings.Contains(k.allowed, "admin") && !strings.Contains(err.Error(), "join it first") {
					t.Fatalf("an admin away is told %q, not to join first", err)
				}
			})
		}
	}
}

// TestHostingRules covers room admins, chat mutes and the room's
// information.
func TestHostingRules(t *testing.T) {
	otherAdmin := func(s *State) { s.Admins = append(s.Admins, erin) }
	bobMuted := func(until int64) func(*State) {
		return func(s *State) { s.ChatMutes = setUntil(s.ChatMutes, bob, until, 0) }
	}
	admins := func(want ...int64) func(t *testing.T, s *State) {
		return func(t *testing.T, s *State) {
			if !slices.Equal(s.Admins, want) {
				t.Errorf("admins %v, want %v", s.Admins, want)
			}
		}
	}
	chatMutes := func(want ...Ban) func(t *testing.T, s *State) {
		return func(t *testing.T, s *State) {
			if !slices.Equal(s.ChatMutes, want) {
				t.Errorf("chat mutes %v, want %v", s.ChatMutes, want)
			}
		}
	}
	runRuleCases(t, hostsRoom, []ruleCase{
		// AddRoomAdmin
		{name: "owner names an admin", cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: erin}), changed: true,
			events: []Event{{roomevent.RoomAdminAdded, roomevent.AdminChanged{UserID: erin, ByUserID: owner}}}, check: admins(dave, erin)},
		{name: "operator names an admin", cmd: opCmd(KindAddRoomAdmin, Args{TargetUserID: erin}), changed: true,
			events: []Event{{roomevent.RoomAdminAdded, roomevent.AdminChanged{UserID: erin}}}, check: admins(dave, erin)},
		{name: "the host may be an admin too", cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: host}), changed: true,
			events: []Event{{roomevent.RoomAdminAdded, roomevent.AdminChanged{UserID: host, ByUserID: owner}}}, check: admins(dave, host)},
		{name: "naming an admin again", cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: dave})},
		{name: "naming an admin again while away", setup: func(s *State) { s.removePresence(dave) },
			cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: dave})},
		{name: "the owner as admin", cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: owner}), want: apperr.InvalidArgument, field: "user_id"},
		{name: "an absent user as admin", cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: carol}), want: apperr.FailedPrecondition,
			msg: "not in the room"},
		{name: "an eleventh admin", setup: func(s *State) {
			for u := int64(100); len(s.Admins) < MaxRoomAdmins; u++ {
				s.Admins = append(s.Admins, u)
			}
		}, cmd: cmd(KindAddRoomAdmin, owner, Args{TargetUserID: erin}), want: apperr.FailedPrecondition, msg: "at most 10 admins"},
		{name: "the host names an admin", cmd: cmd(KindAddRoomAdmin, host, Args{TargetUserID: erin}), want: apperr.PermissionDenied,
			msg: "only the owner"},

		// RemoveRoomAdmin
		{name: "owner removes an admin", cmd: cmd(KindRemoveRoomAdmin, owner, Args{TargetUserID: dave}), changed: true,
			events: []Event{{roomevent.RoomAdminRemoved, roomevent.AdminChanged{UserID: dave, ByUserID: owner}}}, check: admins()},
		{name: "owner removes an admin who is away", setup: func(s *State) { s.removePresence(dave) },
			cmd: cmd(KindRemoveRoomAdmin, owner, Args{TargetUserID: dave}), changed: true,
			events: []Event{{roomevent.RoomAdminRemoved, roomevent.AdminChanged{UserID: dave, ByUserID: owner}}}, check: admins()},
		{name: "removing a non-admin", cmd: cmd(KindRemoveRoomAdmin, owner, Args{TargetUserID: bob})},
		{name: "an admin removes himself", cmd: cmd(KindRemoveRoomAdmin, dave, Args{TargetUserID: dave}), want: apperr.PermissionDenied},

		// MuteChat
		{name: "host mutes a user's chat", cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob, MuteSeconds: 60}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: bob, ByUserID: host, UntilMs: 61_000, Seconds: 60}}},
			check:  chatMutes(Ban{UserID: bob, UntilMs: 61_000})},
		{name: "an admin mutes a user's chat", cmd: cmd(KindMuteChat, dave, Args{TargetUserID: bob, MuteSeconds: MaxMuteSeconds}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: bob, ByUserID: dave, UntilMs: 1000 + MaxMuteSeconds*1000,
				Seconds: MaxMuteSeconds}}}},
		{name: "a mute of someone away holds for their return", cmd: cmd(KindMuteChat, host, Args{TargetUserID: carol, MuteSeconds: 10}),
			changed: true, events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: carol, ByUserID: host, UntilMs: 11_000, Seconds: 10}}},
			check: chatMutes(Ban{UserID: carol, UntilMs: 11_000})},
		{name: "a new mute replaces the last", setup: bobMuted(500_000), cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob, MuteSeconds: 5}),
			changed: true, events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: bob, ByUserID: host, UntilMs: 6000, Seconds: 5}}},
			check: chatMutes(Ban{UserID: bob, UntilMs: 6000})},
		{name: "0 lifts a mute", setup: bobMuted(500_000), cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: bob, ByUserID: host}}}, check: chatMutes()},
		{name: "lifting no mute", cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob})},
		{name: "lifting a mute that ended", setup: bobMuted(1000), cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob})},
		{name: "mutes that ended leave with the next change", setup: bobMuted(900),
			cmd: cmd(KindMuteChat, host, Args{TargetUserID: erin, MuteSeconds: 1}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: erin, ByUserID: host, UntilMs: 2000, Seconds: 1}}},
			check:  chatMutes(Ban{UserID: erin, UntilMs: 2000})},
		{name: "muting yourself", cmd: cmd(KindMuteChat, host, Args{TargetUserID: host, MuteSeconds: 1}), want: apperr.InvalidArgument, field: "user_id"},
		{name: "the host mutes the owner", cmd: cmd(KindMuteChat, host, Args{TargetUserID: owner, MuteSeconds: 1}), want: apperr.PermissionDenied,
			msg: "the owner cannot be muted"},
		{name: "an operator mutes the owner", cmd: opCmd(KindMuteChat, Args{TargetUserID: owner, MuteSeconds: 1}), want: apperr.PermissionDenied},
		{name: "the owner mutes the host", cmd: cmd(KindMuteChat, owner, Args{TargetUserID: host, MuteSeconds: 1}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: host, ByUserID: owner, UntilMs: 2000, Seconds: 1}}}},
		{name: "the host mutes an admin", cmd: cmd(KindMuteChat, host, Args{TargetUserID: dave, MuteSeconds: 1}), changed: true,
			events: []Event{{roomevent.RoomChatMuted, roomevent.ChatMuted{UserID: dave, ByUserID: host, UntilMs: 2000, Seconds: 1}}}},
		{name: "an admin mutes the host", cmd: cmd(KindMuteChat, dave, Args{TargetUserID: host, MuteSeconds: 1}), want: apperr.PermissionDenied,
			msg: "may not act on the owner, the host or another admin"},
		{name: "an admin mutes the owner", cmd: cmd(KindMuteChat, dave, Args{TargetUserID: owner, MuteSeconds: 1}), want: apperr.PermissionDenied},
		{name: "an admin mutes another admin", setup: otherAdmin, cmd: cmd(KindMuteChat, dave, Args{TargetUserID: erin, MuteSeconds: 1}),
			want: apperr.PermissionDenied, msg: "another admin"},
		{name: "an admin lifts another admin's mute", setup: func(s *State) { otherAdmin(s); s.ChatMutes = []Ban{{UserID: erin, UntilMs: 9000}} },
			cmd: cmd(KindMuteChat, dave, Args{TargetUserID: erin}), want: apperr.PermissionDenied},
		{name: "negative seconds", cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob, MuteSeconds: -1}), want: apperr.InvalidArgument, field: "seconds"},
		{name: "more than 30 days", cmd: cmd(KindMuteChat, host, Args{TargetUserID: bob, MuteSeconds: MaxMuteSeconds + 1}),
			want: apperr.InvalidArgument, field: "seconds"},

		// KickUser by room admins
		{name: "an admin kicks a member", cmd: cmd(KindKickUser, dave, Args{TargetUserID: bob}), changed: true,
			events: []Event{
				{roomevent.RoomUserKicked, roomevent.UserKicked{UserID: bob, ByUserID: dave}},
				{roomevent.RoomUserLeft, roomevent.UserLeft{UserID: bob, Reason: roomevent.LeaveReasonKicked, SeatIndex: -1}},
			}},
		{name: "an admin bans someone away", cmd: cmd(KindKickUser, dave, Args{TargetUserID: carol, BanSeconds: 60}), changed: true,
			events: []Event{{roomevent.RoomUserKicked, roomevent.UserKicked{UserID: carol, ByUserID: dave, BanUntilMs: 61_000}}}},
		{name: "an admin kicks the host", cmd: cmd(KindKickUser, dave, Args{TargetUserID: host}), want: apperr.PermissionDenied, msg: "another admin"},
		{name: "an admin kicks the owner", cmd: cmd(KindKickUser, dave, Args{TargetUserID: owner}), want: apperr.PermissionDenied},
		{name: "an admin kicks another admin", setup: otherAdmin, cmd: cmd(KindKickUser, dave, Args{TargetUserID: erin}),
			want: apperr.PermissionDenied, msg: "another admin"},
		{name: "an admin bans another admin who is away", setup: func(s *State) { otherAdmin(s); s.removePresence(erin) },
			cmd: cmd(KindKickUser, dave, Args{TargetUserID: erin, BanSeconds: 60}), want: apperr.PermissionDenied},
		{name: "the host kicks an admin, who stays one", cmd: cmd(KindKickUser, host, Args{TargetUserID: dave}), changed: true,
			events: []Event{
				{roomevent.RoomUserKicked, roomevent.UserKicked{UserID: dave, ByUserID: host}},
				{roomevent.RoomUserLeft, roomevent.UserLeft{UserID: dave, Reason: roomevent.LeaveReasonKicked, SeatIndex: -1}},
			}, check: func(t *testing.T, s *State) { mustBeAbsent(t, s, dave); admins(dave)(t, s) }},
		{name: "an admin away kicks", setup: func(s *State) { s.removePresence(dave) }, cmd: cmd(KindKickUser, dave, Args{TargetUserID: bob}),
			want: apperr.PermissionDenied, msg: "join it first"},

		// UpdateRoomInfo
		{name: "host renames the room", cmd: cmd(KindUpdateRoomInfo, host, Args{Info: &RoomInfo{Title: new("Late show")}}), changed: true,
			events: []Event{{roomevent.RoomInfoChanged, roomevent.InfoChanged{Title: "Late show", CoverURL: "https://cdn.example/1.png", ByUserID: host}}},
			check: func(t *testing.T, s *State) {
				if card := s.Card(); card.Title != "Late show" || card.CoverURL != "https://cdn.example/1.png" {
					t.Errorf("card %+v", card.Listing)
				}
			}},
		{name: "an admin changes all four", cmd: cmd(KindUpdateRoomInfo, dave, Args{Info: &RoomInfo{Title: new("T"), Notice: new("N"),
			CoverURL: new("https://cdn.example/2.png"), Description: new("D")}}), changed: true,
			events: []Event{{roomevent.RoomInfoChanged, roomevent.InfoChanged{Title: "T", Notice: "N", CoverURL: "https://cdn.example/2.png",
				Description: "D", ByUserID: dave}}},
			check: func(t *testing.T, s *State) {
				v := s.View()
				if v.Title != "T" || v.Notice != "N" || v.CoverURL != "https://cdn.example/2.png" || v.Description != "D" {
					t.Errorf("view %+v", v)
				}
				if card := s.Card(); card.Title != "T" || card.CoverURL != "https://cdn.example/2.png" {
					t.Errorf("card %+v", card.Listing)
				}
			}},
		{name: "an empty notice clears it", setup: func(s *State) { s.Notice = "old" }, cmd: opCmd(KindUpdateRoomInfo, Args{Info: &RoomInfo{Notice: new("")}}),
			changed: true, events: []Event{{roomevent.RoomInfoChanged, roomevent.InfoChanged{Title: "Room", CoverURL: "https://cdn.example/1.png"}}},
			check: func(t *testing.T, s *State) {
				if s.Notice != "" {
					t.Errorf("notice %q", s.Notice)
				}
			}},
		{name: "the same information", cmd: cmd(KindUpdateRoomInfo, host, Args{Info: &RoomInfo{Title: new("Room"), Notice: new("")}})},
		{name: "no information", cmd: cmd(KindUpdateRoomInfo, host, Args{}), want: apperr.InvalidArgument, field: "room_name"},
		{name: "a member renames the room", cmd: cmd(KindUpdateRoomInfo, bob, Args{Info: &RoomInfo{Title: new("x")}}), want: apperr.PermissionDenied},
	})
}

// TestRoomAdminsActOnlyInTheRoom: a kicked admin keeps the role, acts
// again once back in the room, and stays out while banned.
func TestRoomAdminsActOnlyInTheRoom(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.must(KindKickUser, host, Args{TargetUserID: dave, BanSeconds: 60})
	if !slices.Equal(r.s.View().AdminUserIDs, []int64{dave}) {
		t.Fatalf("admins after the kick %v", r.s.Admins)
	}
	r.refused(KindMuteSeat, dave, Args{SeatIndex: 1, Muted: true}, apperr.PermissionDenied, "join it first")
	r.refused(KindMuteChat, dave, Args{TargetUserID: bob, MuteSeconds: 10}, apperr.PermissionDenied, "join it first")
	r.refused(KindInviteToMic, dave, Args{TargetUserID: bob, SeatIndex: AnySeat}, apperr.PermissionDenied, "join it first")
	r.refused(KindJoinRoom, dave, Args{}, apperr.FailedPrecondition, "banned")
	r.advance(60_000)
	r.must(KindJoinRoom, dave, Args{})
	r.must(KindMuteSeat, dave, Args{SeatIndex: 1, Muted: true})
	r.must(KindKickUser, dave, Args{TargetUserID: bob})

	// Removed, dave is a member: he kicks no one, and the owner's
	// naming him again needs him present.
	r.must(KindRemoveRoomAdmin, owner, Args{TargetUserID: dave})
	r.refused(KindKickUser, dave, Args{TargetUserID: erin}, apperr.PermissionDenied, "only the owner, the host or a room admin")
	r.must(KindLeaveRoom, dave, Args{})
	r.refused(KindAddRoomAdmin, owner, Args{TargetUserID: dave}, apperr.FailedPrecondition, "not in the room")
}

// TestRoomAdminsBound: ten admins at most, counting those away; removing
// one makes room for another.
func TestRoomAdminsBound(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	for u := int64(100); len(r.s.Admins) < MaxRoomAdmins; u++ {
		r.must(KindJoinRoom, u, Args{})
		r.must(KindAddRoomAdmin, owner, Args{TargetUserID: u})
		r.must(KindLeaveRoom, u, Args{})
	}
	r.refused(KindAddRoomAdmin, owner, Args{TargetUserID: erin}, apperr.FailedPrecondition, "at most 10")
	r.must(KindRemoveRoomAdmin, owner, Args{TargetUserID: 100})
	r.must(KindAddRoomAdmin, owner, Args{TargetUserID: erin})
	if len(r.s.Admins) != MaxRoomAdmins || r.s.Admins[MaxRoomAdmins-1] != erin {
		t.Fatalf("admins %v", r.s.Admins)
	}
}

// TestChatMuteLiftsAndLapses: 0 lifts a mute; a mute that ran out stays
// in the state, harmless, until the next change drops it.
func TestChatMuteLiftsAndLapses(t *testing.T) {
	r := newRoomRun(t, hostsRoom())
	r.must(KindMuteChat, dave, Args{TargetUserID: bob, MuteSeconds: 30})
	if until := r.s.chatMutedUntil(bob); until != r.now+30_000 {
		t.Fatalf("muted until %d", until)
	}
	r.must(KindMuteChat, dave, Args{TargetUserID: bob})
	if r.s.chatMutedUntil(bob) != 0 || len(r.s.View().ChatMutes) != 0 {
		t.Fatalf("mute not lifted: %v", r.s.ChatMutes)
	}
	r.noop(KindMuteChat, dave, Args{TargetUserID: bob})

	r.must(KindMuteChat, dave, Args{TargetUserID: bob, MuteSeconds: 30})
	r.advance(30_000)
	r.noop(KindMuteChat, dave, Args{TargetUserID: bob}) // ended: nothing to lift
	if len(r.s.ChatMutes) != 1 {
		t.Fatalf("a no-op dropped the ended mute: %v", r.s.ChatMutes)
	}
	r.must(KindMuteSeat, host, Args{SeatIndex: 2, Muted: true})
	if len(r.s.ChatMutes) != 0 {
		t.Fatalf("ended mute kept after a change: %v", r.s.ChatMutes)
	}
}

// roomRun drives a room through commands as its cell does: each applies
// to a clone, which replaces the room when the command is accepted and
// changes it. At the end of the test the accepted commands must replay,
// from their logged form, to the room reached.
type roomRun struct {
	t     *testing.T
	start *State
	s     *State
	now   int64
	lim   limits
	log   []Command
}

func newRoomRun(t *testing.T, s *State) *roomRun {
	r := &roomRun{t: t, start: s.Clone(), s: s, now: 1000, lim: hostsLimits}
	t.Cleanup(func() {
		if !t.Failed() {
			mustReplayTo(t, r.start, r.log, r.s)
		}
	})
	return r
}

// advance moves the room's clock.
func (r *roomRun) advance(ms int64) { r.now += ms }

// exec applies a command by actor at the run's time.
func (r *roomRun) exec(kind Kind, actor Actor, args Args) ([]Event, bool, error) {
	c := &Command{Kind: kind, AppCode: "app", RoomID: "app_r", CommandID: NewCommandID(), Actor: actor, NowMs: r.now, Args: args}
	next := r.s.Clone()
	events, changed, err := apply(next, c, r.lim, false)
	if err == nil && changed {
		next.Version++
		next.UpdatedAtMs = c.NowMs
		r.s = next
		r.log = append(r.log, *c)
	}
	return events, changed, err
}

// must runs a command by user actor that must change the room.
func (r *roomRun) must(kind Kind, actor int64, args Args) []Event {
	r.t.Helper()
	events, changed, err := r.exec(kind, Actor{UserID: actor}, args)
	if err != nil || !changed {
		r.t.Fatalf("%s by %d: changed=%v err=%v", kind, actor, changed, err)
	}
	return events
}

// noop runs a command by user actor that must be accepted and change
// nothing.
func (r *roomRun) noop(kind Kind, actor int64, args Args) {
	r.t.Helper()
	before := r.s
	if _, changed, err := r.exec(kind, Actor{UserID: actor}, args); err != nil || changed {
		r.t.Fatalf("%s by %d: changed=%v err=%v, want a no-op", kind, actor, changed, err)
	}
	if r.s != before {
		r.t.Fatalf("%s by %d replaced the state", kind, actor)
	}
}

// refused runs a command by user actor that must be refused with code and
// a message holding msg; the room stays as it was.
func (r *roomRun) refused(kind Kind, actor int64, args Args, code apperr.Code, msg string) {
	r.t.Helper()
	before := r.s
	if _, _, err := r.exec(kind, Actor{UserID: actor}, args); !apperr.Is(err, code) || !strings.Contains(err.Error(), msg) {
		r.t.Fatalf("%s by %d: err = %v, want %s %q", kind, actor, err, code, msg)
	}
	if r.s != before {
		r.t.Fatalf("refused %s by %d replaced the state", kind, actor)
	}
}
