package listprojector

import (
	"fmt"
	"time"

	"voiceroom"
	"voiceroom/roomevent"
)

// Tabs: the two orders of a region's list (GET /api/v1/rooms?tab=), each
// kept in a Redis set of its own (Keys.List).
const (
	TabHot = "hot"
	TabNew = "new"
)

// Card is one room of the read model: the event's card (roomevent.Card),
// the app it belongs to, its sort_score and when the projection last wrote
// it. It is decoded from the "room" of every room event, so any field a
// producer adds is simply ignored. Its JSON is the form the Redis cache
// stores (pinned by TestCardCacheGolden).
type Card struct {
	AppCode string `json:"app_code"`
	roomevent.Card
	SortScore   int64 `json:"sort_score"`
	UpdatedAtMs int64 `json:"updated_at_ms"`
}

// ListedIn reports whether c may be shown in app's region list: an active
// room of that app, visible in that region. It is ListedSQL in Go: the
// list query checks every card it read (from Redis, a frozen order or
// MySQL) with it before showing it.
func (c *Card) ListedIn(app string, region int64) bool {
	return c.AppCode == app && c.VisibleRegionID == region && c.Status == roomevent.StatusActive
}

// decodeCard reads the card of an event of app's room at version as the
// read model's Card (see fromEvent).
func decodeCard(app, roomID string, version int64, payload []byte) (*Card, error) {
	rc, err := roomevent.DecodeCard(payload)
	if err != nil {
		return nil, err
	}
	return fromEventCard(app, roomID, version, rc)
}

// fromEventCard makes an event's card app's read-model card (see
// fromEvent).
func fromEventCard(app, roomID string, version int64, rc roomevent.Card) (*Card, error) {
	c := &Card{Card: rc}
	if err := c.fromEvent(app, roomID, version); err != nil {
		return nil, err
	}
	return c, nil
}

// fromEvent makes c, as an event carried it, app's read-model card: it
// must pass roomevent.Card.Check; im_group_id defaults to room_id, and
// text fields are clipped to their columns.
func (c *Card) fromEvent(app, roomID string, version int64) error {
	if err := c.Card.Check(roomID, version); err != nil {
		return err
	}
	c.AppCode, c.RoomVersion = app, version
	if c.IMGroupID == "" {
		c.IMGroupID = c.RoomID
	}
	c.Title = voiceroom.Clip(c.Title, 128)
	c.CoverURL = voiceroom.Clip(c.CoverURL, 512)
	c.Mode = voiceroom.Clip(c.Mode, 64)
	return nil
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
