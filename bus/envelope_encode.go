package bus

import (
	"strconv"

	"voiceroom/internal/plainjson"
)

// appendJSON appends e as JSON, byte for byte what json.Marshal makes of
// it (the field order of Envelope, HTML-safe string escaping, request_id
// and payload omitted when empty), without reflection and without
// re-validating Payload: the producer's payload is already compact JSON
// (roomevent.EncodePayload's json.Marshal output). It is the one encoding
// of an event: the outbox row, the fast path and the stream carry these
// bytes.
func (e *Envelope) appendJSON(b []byte) []byte {
	b = append(b, `{"event_id":`...)
	b = plainjson.AppendString(b, e.EventID)
	b = append(b, `,"app_code":`...)
	b = plainjson.AppendString(b, e.AppCode)
	b = append(b, `,"room_id":`...)
	b = plainjson.AppendString(b, e.RoomID)
	b = append(b, `,"room_version":`...)
	b = strconv.AppendInt(b, e.RoomVersion, 10)
	b = append(b, `,"event_type":`...)
	b = plainjson.AppendString(b, e.EventType)
	b = append(b, `,"command_id":`...)
	b = plainjson.AppendString(b, e.CommandID)
	if e.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = plainjson.AppendString(b, e.RequestID)
	}
	b = append(b, `,"occurred_at_ms":`...)
	b = strconv.AppendInt(b, e.OccurredAtMs, 10)
	if len(e.Payload) > 0 {
		b = append(b, `,"payload":`...)
		b = append(b, e.Payload...)
	}
	return append(b, '}')
}

// encodedSize is about the length of e's JSON: enough when no string needs
// escaping.
func (e *Envelope) encodedSize() int {
	return 200 + len(e.EventID) + len(e.AppCode) + len(e.RoomID) + len(e.EventType) + len(e.CommandID) + len(e.RequestID) + len(e.Payload)
}

// eventTokens are the app_code, room_id and event_type of the subject an
// envelope came on, if known: strings its decoded fields may share.
type eventTokens struct{ app, room, typ string }

// decodeEnvelopeFast reads data in the exact shape appendJSON writes,
// with strings that need no unescaping; ok is false for anything else
// (DecodeEnvelope then uses encoding/json). Payload aliases data.
func decodeEnvelopeFast(data []byte, tok eventTokens) (e Envelope, ok bool) {
	p := data
	if p, ok = plainjson.Skip(p, `{"event_id":`); !ok {
		return e, false
	}
	if e.EventID, p, ok = plainjson.String(p); !ok {
		return e, false
	}
	if p, ok = plainjson.Skip(p, `,"app_code":`); !ok {
		return e, false
	}
	if e.AppCode, p, ok = plainjson.StringAs(p, tok.app); !ok {
		return e, false
	}
	if p, ok = plainjson.Skip(p, `,"room_id":`); !ok {
		return e, false
	}
	if e.RoomID, p, ok = plainjson.StringAs(p, tok.room); !ok {
		return e, false
	}
	if p, ok = plainjson.Skip(p, `,"room_version":`); !ok {
		return e, false
	}
	if e.RoomVersion, p, ok = plainjson.Int(p); !ok {
		return e, false
	}
	if p, ok = plainjson.Skip(p, `,"event_type":`); !ok {
		return e, false
	}
	if e.EventType, p, ok = plainjson.StringAs(p, tok.typ); !ok {
		return e, false
	}
	if p, ok = plainjson.Skip(p, `,"command_id":`); !ok {
		return e, false
	}
	if e.CommandID, p, ok = plainjson.String(p); !ok {
		return e, false
	}
	if q, found := plainjson.Skip(p, `,"request_id":`); found {
		if e.RequestID, p, ok = plainjson.String(q); !ok {
			return e, false
		}
	}
	if p, ok = plainjson.Skip(p, `,"occurred_at_ms":`); !ok {
		return e, false
	}
	if e.OccurredAtMs, p, ok = plainjson.Int(p); !ok {
		return e, false
	}
	if q, found := plainjson.Skip(p, `,"payload":`); found {
		// The payload is the last field: its value runs to the closing brace.
		if len(q) < 2 || q[len(q)-1] != '}' || (q[0] != '{' && q[0] != '[' && q[0] != '"') {
			return e, false
		}
		e.Payload = q[:len(q)-1]
		return e, true
	}
	return e, len(p) == 1 && p[0] == '}'
}
