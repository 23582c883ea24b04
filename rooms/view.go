package rooms

import "voiceroom/roomevent"

// View is a room as clients see it (docs/openapi.yaml, schema Room: "the room
// snapshot"). It never
// carries the password or its hash, only Locked.
type View struct {
	RoomID          string                   `json:"room_id"`
	RoomShortID     string                   `json:"room_short_id"`
	IMGroupID       string                   `json:"im_group_id"`
	OwnerUserID     int64                    `json:"owner_user_id"`
	HostUserID      int64                    `json:"host_user_id"`
	VisibleRegionID int64                    `json:"visible_region_id"`
	Title           string                   `json:"title"`
	CoverURL        string                   `json:"cover_url"`
	Description     string                   `json:"description"`
	Notice          string                   `json:"notice"`
	Mode            string                   `json:"mode"`
	SeatMode        string                   `json:"seat_mode"`
	Status          string                   `json:"status"`
	Locked          bool                     `json:"locked"`
	Heat            int64                    `json:"heat"`
	RoomVersion     int64                    `json:"room_version"`
	SeatCount       int                      `json:"seat_count"`
	Seats           []SeatView               `json:"seats"`
	OnlineCount     int                      `json:"online_count"`
	OnlineUsers     []OnlineUser             `json:"online_users"`
	GiftRank        []roomevent.Contribution `json:"gift_rank"`
	// AdminUserIDs are the room admins, in the order the owner named them.
	AdminUserIDs []int64 `json:"admin_user_ids"`
	// MicRequestCount is how many requests to speak wait (the queue
	// itself is for the host's powers: GET .../mic/requests).
	MicRequestCount int `json:"mic_request_count"`
	// MicInvitations are the open invitations to a seat.
	MicInvitations []Invitation `json:"mic_invitations"`
	// ChatMutes are the users whose chat in the room is muted, and until
	// when.
	ChatMutes []Ban `json:"chat_mutes"`
	// PK is the room's running battle; absent when none (the view holds
	// no null).
	PK          *PK   `json:"pk,omitempty"`
	CreatedAtMs int64 `json:"created_at_ms"`
	UpdatedAtMs int64 `json:"updated_at_ms"`
}

// SeatView is a seat in a View; UserID 0 is a free seat. Muted is the
// host's mute of the seat, SelfMuted its speaker's own.
type SeatView struct {
	Index     int   `json:"index"`
	UserID    int64 `json:"user_id"`
	Locked    bool  `json:"locked"`
	Muted     bool  `json:"muted"`
	SelfMuted bool  `json:"self_muted"`
}

// OnlineUser is a present user in a View.
type OnlineUser struct {
	UserID     int64 `json:"user_id"`
	JoinedAtMs int64 `json:"joined_at_ms"`
}

// View returns the client view of s. Requests, invitations and chat mutes
// are as of the room's last change: one that lapsed since is shown until
// the next change drops it, and each carries its expiry.
func (s *State) View() View {
	v := View{
		RoomID:          s.RoomID,
		RoomShortID:     s.ShortID,
		IMGroupID:       roomevent.IMGroupID(s.AppCode, s.RoomID),
		OwnerUserID:     s.OwnerUserID,
		HostUserID:      s.HostUserID,
		VisibleRegionID: s.VisibleRegionID,
		Title:           s.Title,
		CoverURL:        s.CoverURL,
		Description:     s.Description,
		Notice:          s.Notice,
		Mode:            s.Mode,
		SeatMode:        s.seatMode(),
		Status:          s.Status,
		Locked:          s.Locked(),
		Heat:            s.Heat,
		RoomVersion:     s.Version,
		SeatCount:       len(s.Seats),
		Seats:           make([]SeatView, len(s.Seats)),
		OnlineCount:     len(s.Online),
		OnlineUsers:     make([]OnlineUser, len(s.Online)),
		GiftRank:        s.rank(),
		AdminUserIDs:    append([]int64{}, s.Admins...), // never nil: JSON []
		MicRequestCount: len(s.Requests),
		MicInvitations:  append([]Invitation{}, s.Invitations...),
		ChatMutes:       append([]Ban{}, s.ChatMutes...),
		PK:              s.pkView(),
		CreatedAtMs:     s.CreatedAtMs,
		UpdatedAtMs:     s.UpdatedAtMs,
	}
	for i, seat := range s.Seats {
		v.Seats[i] = SeatView{Index: i, UserID: seat.UserID, Locked: seat.Locked, Muted: seat.Muted, SelfMuted: seat.SelfMuted}
	}
	for i, p := range s.Online {
		v.OnlineUsers[i] = OnlineUser{UserID: p.UserID, JoinedAtMs: p.JoinedAtMs}
	}
	return v
}

// pkView is a copy of the room's battle for a view, nil when none.
func (s *State) pkView() *PK {
	if s.PK == nil {
		return nil
	}
	pk := *s.PK
	return &pk
}

// Card returns the card of s, as its events carry it.
func (s *State) Card() roomevent.Card {
	return roomevent.Card{
		Listing: roomevent.Listing{
			RoomID:            s.RoomID,
			RoomShortID:       s.ShortID,
			IMGroupID:         roomevent.IMGroupID(s.AppCode, s.RoomID),
			OwnerUserID:       s.OwnerUserID,
			HostUserID:        s.HostUserID,
			VisibleRegionID:   s.VisibleRegionID,
			Title:             s.Title,
			CoverURL:          s.CoverURL,
			Mode:              s.Mode,
			Status:            s.Status,
			Locked:            s.Locked(),
			Heat:              s.Heat,
			OnlineCount:       len(s.Online),
			SeatCount:         len(s.Seats),
			OccupiedSeatCount: s.occupiedSeats(),
			CreatedAtMs:       s.CreatedAtMs,
		},
		RoomVersion: s.Version,
	}
}
