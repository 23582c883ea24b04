package roomevent

// Room statuses, as the card carries them. Only an active room is listed.
const (
	StatusActive = "active"
	StatusClosed = "closed"
	// StatusBanned is a room an operator banned: nobody is in it, nobody
	// may join, it is listed nowhere, and it can be restored.
	StatusBanned = "banned"
)

// Listing is what a room list shows of a room (docs/openapi.yaml,
// RoomListItem, without "pinned").
type Listing struct {
	RoomID            string `json:"room_id"`
	RoomShortID       string `json:"room_short_id"`
	IMGroupID         string `json:"im_group_id"`
	OwnerUserID       int64  `json:"owner_user_id"`
	HostUserID        int64  `json:"host_user_id"`
	VisibleRegionID   int64  `json:"visible_region_id"`
	Title             string `json:"title"`
	CoverURL          string `json:"cover_url"`
	Mode              string `json:"mode"`
	Status            string `json:"status"`
	Locked            bool   `json:"locked"`
	Heat              int64  `json:"heat"`
	OnlineCount       int    `json:"online_count"`
	SeatCount         int    `json:"seat_count"`
	OccupiedSeatCount int    `json:"occupied_seat_count"`
	CreatedAtMs       int64  `json:"created_at_ms"`
}

// Card is the room after the event's command, as every event's payload
// carries it under "room": all a room list needs to rebuild the room's
// entry without reading anything else.
type Card struct {
	Listing
	// RoomVersion is the room's version after the command: the event's.
	RoomVersion int64 `json:"room_version"`
}
