package imbridge

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"voiceroom/bus"
	"voiceroom/roomevent"
)

// knownTypes are the event_type label values created at 0.
func knownTypes() []string {
	return append(roomevent.Types(), "unknown")
}

// typeLabel bounds the event_type label to the known types.
func typeLabel(t string) string {
	if _, ok := roomevent.Lookup(t); ok {
		return t
	}
	return "unknown"
}

// imEvent is an event as clients receive it in a message's Data.
type imEvent struct {
	EventID      string          `json:"event_id"`
	EventType    string          `json:"event_type"`
	RoomID       string          `json:"room_id"`
	RoomVersion  int64           `json:"room_version"`
	OccurredAtMs int64           `json:"occurred_at_ms"`
	Payload      json.RawMessage `json:"payload,omitempty"`
}

func newIMEvent(e bus.Envelope) imEvent {
	return imEvent{EventID: e.EventID, EventType: e.EventType, RoomID: e.RoomID, RoomVersion: e.RoomVersion,
		OccurredAtMs: e.OccurredAtMs, Payload: e.Payload}
}

// cardOf reads payload.room; a payload without a card leaves zeros.
func cardOf(e bus.Envelope) roomevent.Card {
	c, _ := roomevent.DecodeCard(e.Payload)
	return c
}

// groupIDOf is the room's GroupId: the card's im_group_id, else derived.
func groupIDOf(e bus.Envelope) string {
	if g := cardOf(e).IMGroupID; roomevent.ValidIMGroupID(g) {
		return g
	}
	return roomevent.IMGroupID(e.AppCode, e.RoomID)
}

// groupName cuts a title to Tencent's 30-byte group name on a UTF-8
// boundary.
func groupName(title string) string {
	const maxName = 30
	if title == "" {
		return "room"
	}
	if len(title) <= maxName {
		return title
	}
	n := maxName
	for n > 0 && !utf8.RuneStart(title[n]) {
		n--
	}
	return title[:n]
}

// MaxMessageBytes is Tencent's limit on one message; the bridge keeps the
// whole send_group_msg body within it.
const MaxMessageBytes = 12 * 1024

// DescBatch is the Desc of a message carrying several events.
const DescBatch = "RoomEventBatch"

// outMsg is one send_group_msg body, built once and sent unchanged on
// every retry (same Random, same grouping).
type outMsg struct {
	groupID string
	random  uint32
	body    []byte
	n       int // events carried: the first n of the lane's queue
}

// customElem and sendGroupMsg are the send_group_msg request.
type customElem struct {
	MsgType    string `json:"MsgType"`
	MsgContent struct {
		Data string `json:"Data"`
		Desc string `json:"Desc"`
	} `json:"MsgContent"`
}

type sendGroupMsg struct {
	GroupID     string       `json:"GroupId"`
	Random      uint32       `json:"Random"`
	MsgPriority string       `json:"MsgPriority"`
	FromAccount string       `json:"From_Account"`
	MsgBody     []customElem `json:"MsgBody"`
}

// randomOf derives a message's Random from its event ids, so the same
// events always make the same Random and Tencent's duplicate check drops a
// repeat.
func randomOf(ids []string) uint32 {
	h := sha256.New()
	for _, id := range ids {
		h.Write([]byte(id))
		h.Write([]byte{0})
	}
	r := binary.BigEndian.Uint32(h.Sum(nil))
	if r == 0 {
		r = 1
	}
	return r
}

// buildMessage encodes evs (one room, in room order) as one message:
// Data is the event for one, {"events":[...]} for several.
func buildMessage(groupID, admin string, evs []bus.Envelope) ([]byte, uint32, error) {
	ids := make([]string, len(evs))
	prio := "Normal"
	for i, e := range evs {
		ids[i] = e.EventID
		if spec, _ := roomevent.Lookup(e.EventType); spec.IMHigh {
			prio = "High"
		}
	}
	var data []byte
	var err error
	desc := DescBatch
	if len(evs) == 1 {
		data, err = json.Marshal(newIMEvent(evs[0]))
		desc = evs[0].EventType
	} else {
		batch := struct {
			Events []imEvent `json:"events"`
		}{Events: make([]imEvent, len(evs))}
		for i, e := range evs {
			batch.Events[i] = newIMEvent(e)
		}
		data, err = json.Marshal(batch)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("encode message data: %w", err)
	}
	elem := customElem{MsgType: "TIMCustomElem"}
	elem.MsgContent.Data = string(data)
	elem.MsgContent.Desc = desc
	random := randomOf(ids)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(sendGroupMsg{GroupID: groupID, Random: random, MsgPriority: prio, FromAccount: admin, MsgBody: []customElem{elem}}); err != nil {
		return nil, 0, fmt.Errorf("encode message: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), random, nil
}

// EventIDsOfData returns the event ids a message's Data carries, in the
// single or the batched form (for the emulator and client developers'
// tests).
func EventIDsOfData(data string) []string {
	var v struct {
		EventID string `json:"event_id"`
		Events  []struct {
			EventID string `json:"event_id"`
		} `json:"events"`
	}
	if json.Unmarshal([]byte(data), &v) != nil {
		return nil
	}
	if len(v.Events) > 0 {
		ids := make([]string, 0, len(v.Events))
		for _, e := range v.Events {
			ids = append(ids, e.EventID)
		}
		return ids
	}
	if v.EventID != "" {
		return []string{v.EventID}
	}
	return nil
}
