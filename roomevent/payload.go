package roomevent

import (
	"encoding/json"
	"errors"
	"fmt"
)

// EncodePayload returns an event's payload: {"room": card, ...body's
// fields}. card is the JSON of a Card, encoded once per command and shared
// by its events; body is one of the bodies (nil or a struct without fields
// for none). The result is the payload byte for byte as stored in the
// outbox and published.
func EncodePayload(card []byte, body any) (json.RawMessage, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode event body: %w", err)
		}
		if len(b) < 2 || b[0] != '{' {
			return nil, fmt.Errorf("encode event body: %T is not a JSON object", body)
		}
	}
	out := make([]byte, 0, len(card)+len(b)+10)
	out = append(out, `{"room":`...)
	out = append(out, card...)
	if len(b) > 2 { // not "{}"
		out = append(out, ',')
		out = append(out, b[1:]...)
	} else {
		out = append(out, '}')
	}
	return out, nil
}

// ErrNoCard is returned by DecodeCard for a payload without a room card.
var ErrNoCard = errors.New("payload has no room card")

// DecodeCard reads the card of an event's payload. Fields the card lacks
// stay zero; unknown fields are ignored. Errors: the payload is not JSON,
// or ErrNoCard. A payload as the rooms package writes it is read without
// reflection (decodeCardFast).
func DecodeCard(payload []byte) (Card, error) {
	if c, ok := decodeCardFast(payload); ok {
		return c, nil
	}
	var p struct {
		Room *Card `json:"room"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return Card{}, fmt.Errorf("decode payload: %w", err)
	}
	if p.Room == nil {
		return Card{}, ErrNoCard
	}
	return *p.Room, nil
}

// Check reports whether c may be the card of an event of room roomID at
// version: the same room, the same version (when the card has one), and a
// status and creation time, which every card the rooms package emits has.
func (c *Card) Check(roomID string, version int64) error {
	if c.RoomID != roomID {
		return fmt.Errorf("card of room %q in an event of room %q", c.RoomID, roomID)
	}
	if c.RoomVersion != 0 && c.RoomVersion != version {
		return fmt.Errorf("card at version %d in an event at version %d", c.RoomVersion, version)
	}
	if c.Status == "" || c.CreatedAtMs <= 0 {
		return fmt.Errorf("card without status or created_at_ms")
	}
	return nil
}
