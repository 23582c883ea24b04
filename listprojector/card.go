package listprojector

import (
	"encoding/json"
	"fmt"
	"time"
)

// Room statuses as the room cards carry them. Only StatusActive is listed:
// closed and banned rooms leave every list.
const (
	StatusActive = "active"
)

// Tabs of GET /api/v1/rooms.
const (
	TabHot = "hot"
	TabNew = "new"
)

// Card is one room of the read model: the fields of a list item, its
// room_version (the guard against older events) and its sort_score. It is
// decoded from the "room" of every room event (rooms.Card), so any field a
// producer adds is simply ignored.
type Card struct {
	AppCode           string `json:"app_code"`
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
	RoomVersion       int64  `json:"room_version"`
	SortScore         int64  `json:"sort_score"`
	UpdatedAtMs       int64  `json:"updated_at_ms"`
}

// Item is an entry of the room list (docs/openapi.yaml, schema RoomListItem).
type Item struct {
	RoomID            string `json:"room_id"`
	IMGroupID         string `json:"im_group_id"`
	RoomShortID       string `json:"room_short_id"`
	Title             string `json:"title"`
	CoverURL          string `json:"cover_url"`
	Mode              string `json:"mode"`
	Status            string `json:"status"`
	Locked            bool   `json:"locked"`
	Heat              int64  `json:"heat"`
	OnlineCount       int    `json:"online_count"`
	SeatCount         int    `json:"seat_count"`
	OccupiedSeatCount int    `json:"occupied_seat_count"`
	OwnerUserID       int64  `json:"owner_user_id"`
	HostUserID        int64  `json:"host_user_id"`
	VisibleRegionID   int64  `json:"visible_region_id"`
	CreatedAtMs       int64  `json:"created_at_ms"`
	Pinned            bool   `json:"pinned"`
}

// item is the list item of c.
func (c *Card) item(pinned bool) Item {
	return Item{
		RoomID: c.RoomID, IMGroupID: c.IMGroupID, RoomShortID: c.RoomShortID, Title: c.Title,
		CoverURL: c.CoverURL, Mode: c.Mode, Status: c.Status, Locked: c.Locked, Heat: c.Heat,
		OnlineCount: c.OnlineCount, SeatCount: c.SeatCount, OccupiedSeatCount: c.OccupiedSeatCount,
		OwnerUserID: c.OwnerUserID, HostUserID: c.HostUserID, VisibleRegionID: c.VisibleRegionID,
		CreatedAtMs: c.CreatedAtMs, Pinned: pinned,
	}
}

// listedIn reports whether c may be shown in app's region list: an active
// room of that app, visible in that region. Every card read from the cache
// or a frozen order passes this check before it is shown.
func (c *Card) listedIn(app string, region int64) bool {
	return c.AppCode == app && c.VisibleRegionID == region && c.Status == StatusActive
}

// sortKey is the card's key in tab: sort_score for hot, created_at_ms for new.
func (c *Card) sortKey(tab string) int64 {
	if tab == TabNew {
		return c.CreatedAtMs
	}
	return c.SortScore
}

// payload is the part of a room event's payload the projector reads.
type payload struct {
	Room *Card `json:"room"`
}

// decodeCard reads the card of an event of app's room at version. The
// card's own room_id must be the event's and its room_version, when set,
// the event's; im_group_id defaults to room_id.
func decodeCard(app, roomID string, version int64, raw json.RawMessage) (*Card, error) {
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("decode payload: %w", err)
	}
	c := p.Room
	if c == nil {
		return nil, fmt.Errorf("payload has no room card")
	}
	if c.RoomID != roomID {
		return nil, fmt.Errorf("card of room %q in an event of room %q", c.RoomID, roomID)
	}
	if c.RoomVersion != 0 && c.RoomVersion != version {
		return nil, fmt.Errorf("card at version %d in an event at version %d", c.RoomVersion, version)
	}
	if c.Status == "" || c.CreatedAtMs <= 0 {
		return nil, fmt.Errorf("card without status or created_at_ms")
	}
	c.AppCode, c.RoomVersion = app, version
	if c.IMGroupID == "" {
		c.IMGroupID = c.RoomID
	}
	c.Title = clip(c.Title, 128)
	c.CoverURL = clip(c.CoverURL, 512)
	c.Mode = clip(c.Mode, 64)
	return c, nil
}

// clip cuts s to at most n runes, so a long field never fails the write.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}

// boostStep is one step of the freshness boost: rooms younger than MaxAge
// get Boost added to their sort_score.
type boostStep struct {
	MaxAge time.Duration
	Boost  int64
}

// freshness is the freshness boost, steps in increasing age: a room gets
// 5000 in its first 15 minutes (as much as 50 listeners), 2000 until it is
// an hour old, 500 until three hours, then nothing. It depends on time
// alone, so the reconcile job recomputes sort_score of rooms younger than
// the last step (and one reconcile interval) at every pass.
var freshness = []boostStep{
	{15 * time.Minute, 5000},
	{time.Hour, 2000},
	{3 * time.Hour, 500},
}

// maxBoostAge is the age after which a room has no boost.
var maxBoostAge = freshness[len(freshness)-1].MaxAge

// freshnessBoost is the boost of a room created at createdMs, at nowMs.
func freshnessBoost(createdMs, nowMs int64) int64 {
	age := time.Duration(nowMs-createdMs) * time.Millisecond
	for _, s := range freshness {
		if age < s.MaxAge {
			return s.Boost
		}
	}
	return 0
}

// sortScore is heat*1000 + online_count*100 + occupied_seat_count*10 +
// freshness boost. It is the projection's, never the room state's.
func sortScore(c *Card, nowMs int64) int64 {
	return c.Heat*1000 + int64(c.OnlineCount)*100 + int64(c.OccupiedSeatCount)*10 + freshnessBoost(c.CreatedAtMs, nowMs)
}

// sortScoreSQL is sortScore in SQL over room_list_entries' columns, with
// the time as its only parameter; the reconcile job uses it.
func sortScoreSQL() string {
	s := "heat*1000 + online_count*100 + occupied_seat_count*10 + CASE"
	for _, st := range freshness {
		s += fmt.Sprintf(" WHEN ? - created_at_ms < %d THEN %d", st.MaxAge.Milliseconds(), st.Boost)
	}
	return s + " ELSE 0 END"
}
