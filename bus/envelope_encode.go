package bus

import (
	"strconv"
	"unicode/utf8"
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
	b = appendJSONString(b, e.EventID)
	b = append(b, `,"app_code":`...)
	b = appendJSONString(b, e.AppCode)
	b = append(b, `,"room_id":`...)
	b = appendJSONString(b, e.RoomID)
	b = append(b, `,"room_version":`...)
	b = strconv.AppendInt(b, e.RoomVersion, 10)
	b = append(b, `,"event_type":`...)
	b = appendJSONString(b, e.EventType)
	b = append(b, `,"command_id":`...)
	b = appendJSONString(b, e.CommandID)
	if e.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = appendJSONString(b, e.RequestID)
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

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping (json.Marshal's default): <, > and & as \u003c etc.,
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// decodeEnvelopeFast reads data in the exact shape appendJSON writes,
// with strings that need no unescaping; ok is false for anything else
// (DecodeEnvelope then uses encoding/json). Payload aliases data.
func decodeEnvelopeFast(data []byte) (e Envelope, ok bool) {
	p := data
	if p, ok = skip(p, `{"event_id":`); !ok {
		return e, false
	}
	if e.EventID, p, ok = plainString(p); !ok {
		return e, false
	}
	if p, ok = skip(p, `,"app_code":`); !ok {
		return e, false
	}
	if e.AppCode, p, ok = plainString(p); !ok {
		return e, false
	}
	if p, ok = skip(p, `,"room_id":`); !ok {
		return e, false
	}
	if e.RoomID, p, ok = plainString(p); !ok {
		return e, false
	}
	if p, ok = skip(p, `,"room_version":`); !ok {
		return e, false
	}
	if e.RoomVersion, p, ok = plainInt(p); !ok {
		return e, false
	}
	if p, ok = skip(p, `,"event_type":`); !ok {
		return e, false
	}
	if e.EventType, p, ok = plainString(p); !ok {
		return e, false
	}
	if p, ok = skip(p, `,"command_id":`); !ok {
		return e, false
	}
	if e.CommandID, p, ok = plainString(p); !ok {
		return e, false
	}
	if q, found := skip(p, `,"request_id":`); found {
		if e.RequestID, p, ok = plainString(q); !ok {
			return e, false
		}
	}
	if p, ok = skip(p, `,"occurred_at_ms":`); !ok {
		return e, false
	}
	if e.OccurredAtMs, p, ok = plainInt(p); !ok {
		return e, false
	}
	if q, found := skip(p, `,"payload":`); found {
		// The payload is the last field: its value runs to the closing brace.
		if len(q) < 2 || q[len(q)-1] != '}' || (q[0] != '{' && q[0] != '[' && q[0] != '"') {
			return e, false
		}
		e.Payload = q[:len(q)-1]
		return e, true
	}
	return e, len(p) == 1 && p[0] == '}'
}

func skip(p []byte, prefix string) ([]byte, bool) {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return p, false
	}
	return p[len(prefix):], true
}

// plainString reads a JSON string that needs no unescaping: valid UTF-8,
// no backslash, no control character.
func plainString(p []byte) (string, []byte, bool) {
	if len(p) == 0 || p[0] != '"' {
		return "", p, false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			s := p[1:i]
			if !utf8.Valid(s) {
				return "", p, false
			}
			return string(s), p[i+1:], true
		case c == '\\' || c < 0x20:
			return "", p, false
		}
	}
	return "", p, false
}

// plainInt reads a JSON integer (digits, optionally a minus sign) that
// fits an int64.
func plainInt(p []byte) (int64, []byte, bool) {
	i := 0
	if i < len(p) && p[i] == '-' {
		i++
	}
	start := i
	for i < len(p) && p[i] >= '0' && p[i] <= '9' {
		i++
	}
	if i == start || (p[start] == '0' && i > start+1) {
		return 0, p, false
	}
	n, err := strconv.ParseInt(string(p[:i]), 10, 64)
	if err != nil {
		return 0, p, false
	}
	return n, p[i:], true
}
