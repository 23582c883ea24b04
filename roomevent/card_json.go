package roomevent

import (
	"encoding/json"
	"strconv"

	"voiceroom/internal/plainjson"
)

// AppendJSON appends c's JSON, byte for byte what json.Marshal makes of it
// (the field order of Listing, then room_version), without reflection.
// The rooms package encodes a command's card with it, once per command.
func (c *Card) AppendJSON(b []byte) []byte {
	b = append(b, `{"room_id":`...)
	b = plainjson.AppendString(b, c.RoomID)
	b = append(b, `,"room_short_id":`...)
	b = plainjson.AppendString(b, c.RoomShortID)
	b = append(b, `,"im_group_id":`...)
	b = plainjson.AppendString(b, c.IMGroupID)
	b = append(b, `,"owner_user_id":`...)
	b = strconv.AppendInt(b, c.OwnerUserID, 10)
	b = append(b, `,"host_user_id":`...)
	b = strconv.AppendInt(b, c.HostUserID, 10)
	b = append(b, `,"visible_region_id":`...)
	b = strconv.AppendInt(b, c.VisibleRegionID, 10)
	b = append(b, `,"title":`...)
	b = plainjson.AppendString(b, c.Title)
	b = append(b, `,"cover_url":`...)
	b = plainjson.AppendString(b, c.CoverURL)
	b = append(b, `,"mode":`...)
	b = plainjson.AppendString(b, c.Mode)
	b = append(b, `,"status":`...)
	b = plainjson.AppendString(b, c.Status)
	b = append(b, `,"locked":`...)
	b = strconv.AppendBool(b, c.Locked)
	b = append(b, `,"heat":`...)
	b = strconv.AppendInt(b, c.Heat, 10)
	b = append(b, `,"online_count":`...)
	b = strconv.AppendInt(b, int64(c.OnlineCount), 10)
	b = append(b, `,"seat_count":`...)
	b = strconv.AppendInt(b, int64(c.SeatCount), 10)
	b = append(b, `,"occupied_seat_count":`...)
	b = strconv.AppendInt(b, int64(c.OccupiedSeatCount), 10)
	b = append(b, `,"created_at_ms":`...)
	b = strconv.AppendInt(b, c.CreatedAtMs, 10)
	b = append(b, `,"room_version":`...)
	b = strconv.AppendInt(b, c.RoomVersion, 10)
	return append(b, '}')
}

// cardFields reads one card field's value into c. The fields come in the
// order AppendJSON writes them.
var cardFields = [...]struct {
	key  string
	read func(c *Card, p []byte) ([]byte, bool)
}{
	{`{"room":{"room_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.RoomID, q, ok = plainjson.String(p); return }},
	{`,"room_short_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.RoomShortID, q, ok = plainjson.String(p); return }},
	{`,"im_group_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.IMGroupID, q, ok = plainjson.String(p); return }},
	{`,"owner_user_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.OwnerUserID, q, ok = plainjson.Int(p); return }},
	{`,"host_user_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.HostUserID, q, ok = plainjson.Int(p); return }},
	{`,"visible_region_id":`, func(c *Card, p []byte) (q []byte, ok bool) { c.VisibleRegionID, q, ok = plainjson.Int(p); return }},
	{`,"title":`, func(c *Card, p []byte) (q []byte, ok bool) { c.Title, q, ok = plainjson.String(p); return }},
	{`,"cover_url":`, func(c *Card, p []byte) (q []byte, ok bool) { c.CoverURL, q, ok = plainjson.String(p); return }},
	{`,"mode":`, func(c *Card, p []byte) (q []byte, ok bool) { c.Mode, q, ok = plainjson.String(p); return }},
	{`,"status":`, func(c *Card, p []byte) (q []byte, ok bool) { c.Status, q, ok = plainjson.String(p); return }},
	{`,"locked":`, func(c *Card, p []byte) (q []byte, ok bool) { c.Locked, q, ok = plainjson.Bool(p); return }},
	{`,"heat":`, func(c *Card, p []byte) (q []byte, ok bool) { c.Heat, q, ok = plainjson.Int(p); return }},
	{`,"online_count":`, func(c *Card, p []byte) ([]byte, bool) { return readInt(&c.OnlineCount, p) }},
	{`,"seat_count":`, func(c *Card, p []byte) ([]byte, bool) { return readInt(&c.SeatCount, p) }},
	{`,"occupied_seat_count":`, func(c *Card, p []byte) ([]byte, bool) { return readInt(&c.OccupiedSeatCount, p) }},
	{`,"created_at_ms":`, func(c *Card, p []byte) (q []byte, ok bool) { c.CreatedAtMs, q, ok = plainjson.Int(p); return }},
	{`,"room_version":`, func(c *Card, p []byte) (q []byte, ok bool) { c.RoomVersion, q, ok = plainjson.Int(p); return }},
}

// readInt reads an int that fits the platform's int.
func readInt(dst *int, p []byte) ([]byte, bool) {
	n, q, ok := plainjson.Int(p)
	if !ok || int64(int(n)) != n {
		return p, false
	}
	*dst = int(n)
	return q, true
}

// decodeCardFast reads the card of a payload EncodePayload made from
// AppendJSON's (or json.Marshal's) card, with strings that need no
// unescaping; ok is false for anything else, and DecodeCard then uses
// encoding/json. The body's fields after the card are checked to be JSON,
// as json.Unmarshal would, but not read.
func decodeCardFast(payload []byte) (c Card, ok bool) {
	p := payload
	for _, f := range cardFields {
		if p, ok = plainjson.Skip(p, f.key); !ok {
			return c, false
		}
		if p, ok = f.read(&c, p); !ok {
			return c, false
		}
	}
	if p, ok = plainjson.Skip(p, "}"); !ok {
		return c, false
	}
	switch {
	case len(p) == 1 && p[0] == '}':
		return c, true
	case len(p) > 1 && p[0] == ',':
		// The body's fields: {"user_id":7} checked as JSON without the card.
		var buf [128]byte
		body := append(append(buf[:0], '{'), p[1:]...)
		return c, json.Valid(body)
	}
	return c, false
}
