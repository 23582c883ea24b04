// Package plainjson reads and writes JSON in the exact shapes the product's
// own encoders make, without reflection: the room event's envelope (bus)
// and its room card (roomevent). A reader here accepts only the plain case
// (fields in the writer's order, strings that need no unescaping) and says
// so with ok; its caller then falls back to encoding/json, which reads
// everything else.
package plainjson

import (
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way encoding/json does with
// HTML escaping (json.Marshal's default): <, > and & as \u003c etc.,
// control characters escaped, invalid UTF-8 as \ufffd, U+2028 and U+2029
// escaped.
func AppendString(b []byte, s string) []byte {
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

// Skip returns p after prefix; ok is false (and p unchanged) when p does
// not start with it.
func Skip(p []byte, prefix string) ([]byte, bool) {
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return p, false
	}
	return p[len(prefix):], true
}

// String reads a JSON string that needs no unescaping (valid UTF-8, no
// backslash, no control character) at the start of p and returns it with
// the rest of p.
func String(p []byte) (string, []byte, bool) {
	end, ok := plainEnd(p)
	if !ok {
		return "", p, false
	}
	return string(p[1 : end-1]), p[end:], true
}

// StringAs is String, returning known itself (no copy) when the string
// read is equal to it.
func StringAs(p []byte, known string) (string, []byte, bool) {
	end, ok := plainEnd(p)
	if !ok {
		return "", p, false
	}
	if s := p[1 : end-1]; string(s) != known {
		return string(s), p[end:], true
	}
	return known, p[end:], true
}

// plainEnd returns the end of the plain JSON string at the start of p:
// the index after its closing quote.
func plainEnd(p []byte) (int, bool) {
	if len(p) == 0 || p[0] != '"' {
		return 0, false
	}
	for i := 1; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"':
			return i + 1, utf8.Valid(p[1:i])
		case c == '\\' || c < 0x20:
			return 0, false
		}
	}
	return 0, false
}

// Int reads a JSON integer (digits, optionally a minus sign, no leading
// zero) that fits an int64 at the start of p.
func Int(p []byte) (int64, []byte, bool) {
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

// Bool reads true or false at the start of p.
func Bool(p []byte) (bool, []byte, bool) {
	if q, ok := Skip(p, "true"); ok {
		return true, q, true
	}
	if q, ok := Skip(p, "false"); ok {
		return false, q, true
	}
	return false, p, false
}
