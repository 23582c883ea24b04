package rooms

import (
	"slices"
	"sort"
	"voiceroom/roomevent"
)

// State is one room as its cell owns it. A command is applied to a Clone and
// the clone replaces the state only after the command's transaction commits.
//
// Slices rather than maps keep a loaded room small (a room with 50 present
// users is about 4 KiB): Online and Bans are sorted by user id, Contrib by
// value.
type State struct {
	AppCode         string `json:"app_code"`
	RoomID          string `json:"room_id"`
	ShortID         string `json:"room_short_id"`
	OwnerUserID     int64  `json:"owner_user_id"`
	HostUserID      int64  `json:"host_user_id"`
	VisibleRegionID int64  `json:"visible_region_id"`
	Status          string `json:"status"`
	Mode            string `json:"mode"`
	Title           string `json:"title"`
	CoverURL        string `json:"cover_url"`
	Description     string `json:"description,omitempty"`
	Notice          string `json:"notice,omitempty"`
	// SeatMode is roomevent.SeatModeFree or SeatModeApply ("" in rooms
	// created before seat modes: free).
	SeatMode string `json:"seat_mode,omitempty"`
	// PasswordHash is a bcrypt hash, "" when the room is unlocked. It is
	// kept in snapshots and the command log, never in events or responses.
	PasswordHash string                   `json:"password_hash,omitempty"`
	Seats        []Seat                   `json:"seats"`
	Online       []Presence               `json:"online,omitempty"`
	Bans         []Ban                    `json:"bans,omitempty"`
	Heat         int64                    `json:"heat"`
	Contrib      []roomevent.Contribution `json:"contrib,omitempty"`
	// Admins are the room admins the owner named, in the order named.
	Admins []int64 `json:"admins,omitempty"`
	// Requests are the requests to speak, in order of arrival; Invitations
	// the host's invitations to a seat, one per user. Both may hold
	// entries past their expiry until the next command that changes the
	// room drops them; every reader skips them.
	Requests    []MicRequest `json:"mic_requests,omitempty"`
	Invitations []Invitation `json:"mic_invitations,omitempty"`
	// ChatMutes are the users whose chat in the room is muted, sorted by
	// user id, each until a time.
	ChatMutes []Ban `json:"chat_mutes,omitempty"`
	// PK is the room's running battle (pk.go), nil when none; PKEnded
	// the battle it last ended, whose late start changes nothing.
	PK          *PK    `json:"pk,omitempty"`
	PKEnded     string `json:"pk_ended,omitempty"`
	Version     int64  `json:"room_version"`
	CreatedAtMs int64  `json:"created_at_ms"`
	UpdatedAtMs int64  `json:"updated_at_ms"`
}

// Seat is one mic seat. Muted is the host's mute and stays on the seat
// whoever sits on it; SelfMuted is its speaker's own, and goes with them.
type Seat struct {
	UserID    int64 `json:"user_id,omitempty"`
	Locked    bool  `json:"locked,omitempty"`
	Muted     bool  `json:"muted,omitempty"`
	SelfMuted bool  `json:"self_muted,omitempty"`
}

// MicRequest is a user's request to speak; SeatIndex is AnySeat or the
// seat asked for.
type MicRequest struct {
	UserID        int64 `json:"user_id"`
	SeatIndex     int   `json:"seat_index"`
	RequestedAtMs int64 `json:"requested_at_ms"`
	ExpiresAtMs   int64 `json:"expires_at_ms"`
}

// Invitation is the host's (or a room admin's) invitation of a user to a
// seat; SeatIndex is AnySeat or the seat offered.
type Invitation struct {
	UserID      int64 `json:"user_id"`
	ByUserID    int64 `json:"by_user_id"`
	SeatIndex   int   `json:"seat_index"`
	InvitedAtMs int64 `json:"invited_at_ms"`
	ExpiresAtMs int64 `json:"expires_at_ms"`
}

// Presence is a user in the room. When the user was last heard from is soft
// state kept by the cell, not here (see cell.seen).
type Presence struct {
	UserID     int64 `json:"user_id"`
	JoinedAtMs int64 `json:"joined_at_ms"`
}

// Ban keeps a user out until UntilMs.
type Ban struct {
	UserID  int64 `json:"user_id"`
	UntilMs int64 `json:"until_ms"`
}

// Clone returns a deep copy.
func (s *State) Clone() *State {
	c := *s
	c.Seats = slices.Clone(s.Seats)
	c.Online = slices.Clone(s.Online)
	c.Bans = slices.Clone(s.Bans)
	c.Contrib = slices.Clone(s.Contrib)
	c.Admins = slices.Clone(s.Admins)
	c.Requests = slices.Clone(s.Requests)
	c.Invitations = slices.Clone(s.Invitations)
	c.ChatMutes = slices.Clone(s.ChatMutes)
	if s.PK != nil {
		pk := *s.PK
		c.PK = &pk
	}
	return &c
}

// Locked reports whether joining needs a password.
func (s *State) Locked() bool { return s.PasswordHash != "" }

// presence returns the index of userID in Online and whether it is there.
func (s *State) presence(userID int64) (int, bool) {
	return sort.Find(len(s.Online), func(i int) int { return cmpInt(userID, s.Online[i].UserID) })
}

// isPresent reports whether userID is in the room.
func (s *State) isPresent(userID int64) bool {
	_, ok := s.presence(userID)
	return ok
}

func (s *State) addPresence(p Presence) {
	i, ok := s.presence(p.UserID)
	if ok {
		s.Online[i] = p
		return
	}
	s.Online = slices.Insert(s.Online, i, p)
}

func (s *State) removePresence(userID int64) bool {
	i, ok := s.presence(userID)
	if ok {
		s.Online = slices.Delete(s.Online, i, i+1)
	}
	return ok
}

// seatOf returns the seat index userID holds, or -1.
func (s *State) seatOf(userID int64) int {
	for i, seat := range s.Seats {
		if seat.UserID == userID {
			return i
		}
	}
	return -1
}

// occupiedSeats counts seats with a user.
func (s *State) occupiedSeats() int {
	n := 0
	for _, seat := range s.Seats {
		if seat.UserID != 0 {
			n++
		}
	}
	return n
}

// banUntil returns when userID's ban ends, 0 if not banned.
func (s *State) banUntil(userID int64) int64 { return until(s.Bans, userID) }

// setBan bans userID until untilMs and drops bans that ended before nowMs,
// so the list holds only live bans.
func (s *State) setBan(userID, untilMs, nowMs int64) {
	s.Bans = setUntil(s.Bans, userID, untilMs, nowMs)
}

// until returns when userID's entry in list (sorted by user id) ends, 0 if
// none.
func until(list []Ban, userID int64) int64 {
	i, ok := sort.Find(len(list), func(i int) int { return cmpInt(userID, list[i].UserID) })
	if !ok {
		return 0
	}
	return list[i].UntilMs
}

// setUntil returns list with userID's entry ending at untilMs (none when
// untilMs is 0) and without the entries that ended before nowMs.
func setUntil(list []Ban, userID, untilMs, nowMs int64) []Ban {
	list = slices.DeleteFunc(list, func(b Ban) bool { return b.UntilMs <= nowMs || b.UserID == userID })
	if untilMs == 0 {
		return list
	}
	i, _ := sort.Find(len(list), func(i int) int { return cmpInt(userID, list[i].UserID) })
	return slices.Insert(list, i, Ban{UserID: userID, UntilMs: untilMs})
}

// addContribution adds value to userID's gift total and keeps Contrib sorted
// by value, highest first, holding at most maxContributors entries. A user
// who falls off the end and gives again starts from the new gift: the rank
// is the room's leaderboard of current top givers, not an account book (the
// wallet ledger is that).
func (s *State) addContribution(userID, value int64) {
	total := value
	if i := slices.IndexFunc(s.Contrib, func(c roomevent.Contribution) bool { return c.UserID == userID }); i >= 0 {
		total += s.Contrib[i].Value
		s.Contrib = slices.Delete(s.Contrib, i, i+1)
	}
	// Insert after every entry of the same value: earlier givers keep their place.
	i := sort.Search(len(s.Contrib), func(i int) bool { return s.Contrib[i].Value < total })
	if i >= maxContributors {
		return
	}
	s.Contrib = slices.Insert(s.Contrib, i, roomevent.Contribution{UserID: userID, Value: total})
	if len(s.Contrib) > maxContributors {
		s.Contrib = s.Contrib[:maxContributors]
	}
}

// rank returns the top of the gift rank.
func (s *State) rank() []roomevent.Contribution {
	n := min(len(s.Contrib), rankSize)
	return append([]roomevent.Contribution{}, s.Contrib[:n]...) // never nil: JSON [] for no gifts
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
