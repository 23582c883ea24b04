package rooms

import (
	"reflect"
	"testing"

	"voiceroom/apperr"
	"voiceroom/roomevent"
)

const (
	owner = int64(1)
	host  = int64(2)
	alice = int64(3)
	bob   = int64(4)
	carol = int64(5)
)

// room returns an active room with owner 1, host 2, alice (3) and bob (4)
// present, alice on seat 0, seat 3 locked, at version 10.
func room() *State {
	s := &State{AppCode: "app", RoomID: "app_r", OwnerUserID: owner, HostUserID: host, Status: roomevent.StatusActive,
		Mode: DefaultMode, Seats: make([]Seat, 5), Version: 10}
	for _, u := range []int64{owner, host, alice, bob} {
		s.addPresence(Presence{UserID: u, JoinedAtMs: 1})
	}
	s.Seats[0].UserID = alice
	s.Seats[3].Locked = true
	return s
}

func cmd(kind Kind, actor int64, args Args) *Command {
	return &Command{Kind: kind, AppCode: "app", RoomID: "app_r", Actor: Actor{UserID: actor}, NowMs: 1000, Args: args}
}

func TestRules(t *testing.T) {
	closed := func(s *State) { s.Status = roomevent.StatusClosed }
	locked := func(s *State) { s.PasswordHash = "HASH" }
	banned := func(s *State) { s.setBan(carol, 5000, 0) }
	admin := func(c *Command) { c.Actor = Actor{Admin: true, Operator: "admin:9"} }

	tests := []struct {
		name    string
		setup   func(*State)
		cmd     *Command
		adjust  func(*Command)
		want    apperr.Code // "" = accepted
		field   string
		events  []string
		changed bool
		check   func(t *testing.T, s *State)
	}{
		// Join
		{name: "join", cmd: cmd(KindJoinRoom, carol, Args{}), events: []string{roomevent.RoomUserJoined}, changed: true,
			check: func(t *testing.T, s *State) { mustBePresent(t, s, carol) }},
		{name: "join again refreshes only", cmd: cmd(KindJoinRoom, alice, Args{})},
		{name: "join closed room", setup: closed, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.FailedPrecondition},
		{name: "join while banned", setup: banned, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.FailedPrecondition},
		{name: "join after ban ended", setup: func(s *State) { s.setBan(carol, 900, 0) }, cmd: cmd(KindJoinRoom, carol, Args{}),
			events: []string{roomevent.RoomUserJoined}, changed: true},
		{name: "locked room without password", setup: locked, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.PermissionDenied},
		{name: "locked room wrong password", setup: locked, cmd: cmd(KindJoinRoom, carol, Args{PasswordGiven: true}), want: apperr.PermissionDenied},
		{name: "locked room right password", setup: locked, cmd: cmd(KindJoinRoom, carol, Args{PasswordGiven: true, PasswordHash: "HASH"}),
			events: []string{roomevent.RoomUserJoined}, changed: true},
		{name: "password checked against an older hash", setup: locked, cmd: cmd(KindJoinRoom, carol, Args{PasswordGiven: true, PasswordHash: "OLD"}),
			want: apperr.PermissionDenied},
		{name: "owner needs no password", setup: func(s *State) { locked(s); s.removePresence(owner) }, cmd: cmd(KindJoinRoom, owner, Args{}),
			events: []string{roomevent.RoomUserJoined}, changed: true},
		{name: "full room", setup: func(s *State) {
			for u := int64(100); u < 100+testMaxOnline-4; u++ {
				s.addPresence(Presence{UserID: u})
			}
		}, cmd: cmd(KindJoinRoom, carol, Args{}), want: apperr.FailedPrecondition},

		// Leave and heartbeat
		{name: "leave frees the seat", cmd: cmd(KindLeaveRoom, alice, Args{}), events: []string{roomevent.RoomUserLeft}, changed: true,
			check: func(t *testing.T, s *State) {
				mustBeAbsent(t, s, alice)
				if s.Seats[0].UserID != 0 {
					t.Error("seat 0 still taken")
				}
			}},
		{name: "leave when absent is a no-op", cmd: cmd(KindLeaveRoom, carol, Args{})},
		{name: "heartbeat", cmd: cmd(KindHeartbeat, bob, Args{})},
		{name: "heartbeat when absent", cmd: cmd(KindHeartbeat, carol, Args{}), want: apperr.FailedPrecondition},

		// Seats
		{name: "mic up", cmd: cmd(KindMicUp, bob, Args{SeatIndex: 1}), events: []string{roomevent.RoomMicUp}, changed: true,
			check: func(t *testing.T, s *State) { seatHolds(t, s, 1, bob) }},
		{name: "mic up absent", cmd: cmd(KindMicUp, carol, Args{SeatIndex: 1}), want: apperr.FailedPrecondition},
		{name: "mic up taken seat", cmd: cmd(KindMicUp, bob, Args{SeatIndex: 0}), want: apperr.FailedPrecondition},
		{name: "mic up locked seat", cmd: cmd(KindMicUp, bob, Args{SeatIndex: 3}), want: apperr.FailedPrecondition},
		{name: "mic up out of range", cmd: cmd(KindMicUp, bob, Args{SeatIndex: 5}), want: apperr.InvalidArgument, field: "seat_index"},
		{name: "mic up negative", cmd: cmd(KindMicUp, bob, Args{SeatIndex: -1}), want: apperr.InvalidArgument, field: "seat_index"},
		{name: "mic up twice", cmd: cmd(KindMicUp, alice, Args{SeatIndex: 1}), want: apperr.FailedPrecondition},
		{name: "mic down", cmd: cmd(KindMicDown, alice, Args{}), events: []string{roomevent.RoomMicDown}, changed: true,
			check: func(t *testing.T, s *State) { seatHolds(t, s, 0, 0) }},
		{name: "mic down without seat", cmd: cmd(KindMicDown, bob, Args{}), want: apperr.FailedPrecondition},
		{name: "change seat", cmd: cmd(KindChangeMicSeat, alice, Args{SeatIndex: 4}), events: []string{roomevent.RoomMicChanged}, changed: true,
			check: func(t *testing.T, s *State) { seatHolds(t, s, 0, 0); seatHolds(t, s, 4, alice) }},
		{name: "change to same seat", cmd: cmd(KindChangeMicSeat, alice, Args{SeatIndex: 0}), want: apperr.FailedPrecondition},
		{name: "change to locked seat", cmd: cmd(KindChangeMicSeat, alice, Args{SeatIndex: 3}), want: apperr.FailedPrecondition},
		{name: "change without seat", cmd: cmd(KindChangeMicSeat, bob, Args{SeatIndex: 1}), want: apperr.FailedPrecondition},
		{name: "lock occupied seat takes the user down", cmd: cmd(KindSetSeatLock, host, Args{SeatIndex: 0, Locked: true}),
			events: []string{roomevent.RoomMicDown, roomevent.RoomSeatLockChanged}, changed: true,
			check: func(t *testing.T, s *State) {
				if !s.Seats[0].Locked || s.Seats[0].UserID != 0 {
					t.Errorf("seat 0 = %+v", s.Seats[0])
				}
			}},
		{name: "lock seat by a guest", cmd: cmd(KindSetSeatLock, bob, Args{SeatIndex: 1, Locked: true}), want: apperr.PermissionDenied},

		// Host
		{name: "owner transfers host", cmd: cmd(KindTransferRoomHost, owner, Args{TargetUserID: bob}),
			events: []string{roomevent.RoomHostTransferred}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.HostUserID != bob {
					t.Errorf("host %d", s.HostUserID)
				}
			}},
		{name: "host transfers host", cmd: cmd(KindTransferRoomHost, host, Args{TargetUserID: alice}), events: []string{roomevent.RoomHostTransferred}, changed: true},
		{name: "guest transfers host", cmd: cmd(KindTransferRoomHost, alice, Args{TargetUserID: bob}), want: apperr.PermissionDenied},
		{name: "transfer to absent user", cmd: cmd(KindTransferRoomHost, owner, Args{TargetUserID: carol}), want: apperr.FailedPrecondition},

		// Gifts
		{name: "gift", cmd: cmd(KindSendGift, bob, Args{TargetUserID: alice, GiftID: 1, Count: 3, Price: 10, HeatPer: 5}),
			events: []string{roomevent.RoomGiftSent, roomevent.RoomHeatChanged, roomevent.RoomRankChanged}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.Heat != 15 || len(s.Contrib) != 1 || s.Contrib[0] != (roomevent.Contribution{UserID: bob, Value: 30}) {
					t.Errorf("heat %d contrib %v", s.Heat, s.Contrib)
				}
			}},
		{name: "gift to absent receiver", cmd: cmd(KindSendGift, bob, Args{TargetUserID: carol, Count: 1, Price: 1}), want: apperr.FailedPrecondition},
		{name: "gift by absent sender", cmd: cmd(KindSendGift, carol, Args{TargetUserID: bob, Count: 1, Price: 1}), want: apperr.FailedPrecondition},
		{name: "gift count zero", cmd: cmd(KindSendGift, bob, Args{TargetUserID: alice, Count: 0, Price: 1}), want: apperr.InvalidArgument, field: "count"},
		{name: "gift overflow", cmd: cmd(KindSendGift, bob, Args{TargetUserID: alice, Count: 9999, Price: 1 << 60}), want: apperr.InvalidArgument, field: "count"},

		// Password
		{name: "host sets password", cmd: cmd(KindSetRoomPassword, host, Args{PasswordHash: "H2"}), events: []string{roomevent.RoomPasswordChanged}, changed: true,
			check: func(t *testing.T, s *State) {
				if !s.Locked() {
					t.Error("not locked")
				}
			}},
		{name: "guest sets password", cmd: cmd(KindSetRoomPassword, bob, Args{PasswordHash: "H2"}), want: apperr.PermissionDenied},
		{name: "unlock", setup: locked, cmd: cmd(KindSetRoomPassword, owner, Args{}), events: []string{roomevent.RoomPasswordChanged}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.Locked() {
					t.Error("still locked")
				}
			}},
		{name: "unlock unlocked is a no-op", cmd: cmd(KindSetRoomPassword, owner, Args{})},

		// Kick
		{name: "kick with ban", cmd: cmd(KindKickUser, host, Args{TargetUserID: alice, BanSeconds: 60}),
			events: []string{roomevent.RoomUserKicked, roomevent.RoomUserLeft}, changed: true,
			check: func(t *testing.T, s *State) {
				mustBeAbsent(t, s, alice)
				seatHolds(t, s, 0, 0)
				if s.banUntil(alice) != 61000 {
					t.Errorf("ban until %d", s.banUntil(alice))
				}
			}},
		{name: "kick the host moves host to owner", cmd: cmd(KindKickUser, owner, Args{TargetUserID: host}),
			events: []string{roomevent.RoomUserKicked, roomevent.RoomUserLeft}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.HostUserID != owner {
					t.Errorf("host %d", s.HostUserID)
				}
			}},
		{name: "ban an absent user", cmd: cmd(KindKickUser, owner, Args{TargetUserID: carol, BanSeconds: 10}),
			events: []string{roomevent.RoomUserKicked}, changed: true},
		{name: "kick an absent user without ban", cmd: cmd(KindKickUser, owner, Args{TargetUserID: carol}), want: apperr.FailedPrecondition},
		{name: "kick the owner", cmd: cmd(KindKickUser, host, Args{TargetUserID: owner}), want: apperr.PermissionDenied},
		{name: "kick yourself", cmd: cmd(KindKickUser, host, Args{TargetUserID: host}), want: apperr.InvalidArgument, field: "user_id"},
		{name: "guest kicks", cmd: cmd(KindKickUser, bob, Args{TargetUserID: alice}), want: apperr.PermissionDenied},

		// Close
		{name: "owner closes", cmd: cmd(KindCloseRoom, owner, Args{}),
			events: []string{roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomClosed}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.Status != roomevent.StatusClosed || len(s.Online) != 0 || s.occupiedSeats() != 0 {
					t.Errorf("status %s online %d seats %d", s.Status, len(s.Online), s.occupiedSeats())
				}
			}},
		{name: "host cannot close", cmd: cmd(KindCloseRoom, host, Args{}), want: apperr.PermissionDenied},
		{name: "admin closes", cmd: cmd(KindCloseRoom, 0, Args{}), adjust: admin,
			events: []string{roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomUserLeft, roomevent.RoomClosed}, changed: true},
		{name: "any command on a closed room", setup: closed, cmd: cmd(KindMicDown, alice, Args{}), want: apperr.FailedPrecondition},
		{name: "close twice", setup: closed, cmd: cmd(KindCloseRoom, owner, Args{}), want: apperr.FailedPrecondition},

		// Region
		{name: "admin changes region", cmd: cmd(KindChangeRoomVisibleRegion, 0, Args{RegionID: 7, Reason: "ops"}), adjust: admin,
			events: []string{roomevent.RoomVisibleRegionChanged}, changed: true,
			check: func(t *testing.T, s *State) {
				if s.VisibleRegionID != 7 {
					t.Errorf("region %d", s.VisibleRegionID)
				}
			}},
		{name: "owner changes region", cmd: cmd(KindChangeRoomVisibleRegion, owner, Args{RegionID: 7}), want: apperr.PermissionDenied},
		{name: "same region is a no-op", cmd: cmd(KindChangeRoomVisibleRegion, 0, Args{RegionID: 0}), adjust: admin},

		// Sweep
		{name: "sweep", cmd: cmd(KindSweepStale, 0, Args{UserIDs: []int64{alice, carol}}), events: []string{roomevent.RoomUserLeft}, changed: true,
			check: func(t *testing.T, s *State) { mustBeAbsent(t, s, alice); seatHolds(t, s, 0, 0) }},
		{name: "sweep nobody present", cmd: cmd(KindSweepStale, 0, Args{UserIDs: []int64{carol}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := room()
			if tt.setup != nil {
				tt.setup(s)
			}
			if tt.adjust != nil {
				tt.adjust(tt.cmd)
			}
			before := s.Clone()
			events, changed, err := apply(s, tt.cmd, limits{maxOnline: testMaxOnline}, false)
			if tt.want != "" {
				if apperr.CodeOf(err) != tt.want {
					t.Fatalf("err = %v, want %s", err, tt.want)
				}
				if tt.field != "" && apperr.FieldOf(err) != tt.field {
					t.Fatalf("field = %q, want %q", apperr.FieldOf(err), tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("rejected: %v", err)
			}
			if changed != tt.changed {
				t.Fatalf("changed = %v, want %v", changed, tt.changed)
			}
			var types []string
			for _, e := range events {
				types = append(types, e.Type)
				checkContract(t, e)
			}
			if len(types) != len(tt.events) {
				t.Fatalf("events %v, want %v", types, tt.events)
			}
			for i := range types {
				if types[i] != tt.events[i] {
					t.Fatalf("events %v, want %v", types, tt.events)
				}
			}
			if !changed && !sameJSON(t, before, s) {
				t.Fatal("unchanged command changed the state")
			}
			if tt.check != nil {
				tt.check(t, s)
			}
		})
	}
}

const testMaxOnline = 20

// checkContract fails unless e is an event type of the contract with the
// contract's body type (roomevent.NewBody), so rooms cannot emit a body
// its sinks would decode as something else.
func checkContract(t *testing.T, e Event) {
	t.Helper()
	if _, ok := roomevent.Lookup(e.Type); !ok {
		t.Fatalf("event type %s is not in roomevent", e.Type)
	}
	want := roomevent.NewBody(e.Type)
	if want == nil {
		if _, ok := e.Body.(empty); !ok {
			t.Fatalf("%s has body %T, the contract has none", e.Type, e.Body)
		}
		return
	}
	if got, wantT := reflect.TypeOf(e.Body), reflect.TypeOf(want).Elem(); got != wantT {
		t.Fatalf("%s has body %v, the contract says %v", e.Type, got, wantT)
	}
}

// TestReplayIgnoresLimits checks a logged join applies on replay even if the
// room is over today's limit: it was accepted under the limit of its day.
func TestReplayIgnoresLimits(t *testing.T) {
	s := room()
	_, changed, err := apply(s, cmd(KindJoinRoom, carol, Args{}), limits{maxOnline: 1}, true)
	if err != nil || !changed {
		t.Fatalf("replayed join: %v %v", changed, err)
	}
}

func TestRankKeepsTopContributors(t *testing.T) {
	s := &State{}
	for u := int64(1); u <= maxContributors+10; u++ {
		s.addContribution(u, u) // user u gives u
	}
	if len(s.Contrib) != maxContributors || s.Contrib[0].UserID != maxContributors+10 {
		t.Fatalf("contrib %d entries, first %+v", len(s.Contrib), s.Contrib[0])
	}
	s.addContribution(1, 1000) // falls off earlier, comes back on top with the new gift
	if s.Contrib[0] != (roomevent.Contribution{UserID: 1, Value: 1000}) {
		t.Fatalf("first %+v", s.Contrib[0])
	}
	s.addContribution(2, 1) // too small to enter
	for _, c := range s.Contrib {
		if c.UserID == 2 {
			t.Fatal("a gift below the table entered it")
		}
	}
	if r := s.rank(); len(r) != rankSize {
		t.Fatalf("rank has %d entries", len(r))
	}
	for i := 1; i < len(s.Contrib); i++ {
		if s.Contrib[i-1].Value < s.Contrib[i].Value {
			t.Fatalf("not sorted at %d", i)
		}
	}
}

func mustBePresent(t *testing.T, s *State, u int64) {
	t.Helper()
	if !s.isPresent(u) {
		t.Errorf("user %d not present", u)
	}
}

func mustBeAbsent(t *testing.T, s *State, u int64) {
	t.Helper()
	if s.isPresent(u) {
		t.Errorf("user %d still present", u)
	}
}

func seatHolds(t *testing.T, s *State, seat int, u int64) {
	t.Helper()
	if s.Seats[seat].UserID != u {
		t.Errorf("seat %d holds %d, want %d", seat, s.Seats[seat].UserID, u)
	}
}
