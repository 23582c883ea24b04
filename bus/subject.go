package bus

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"voiceroom"
)

// Stream names and subject spaces. The two subject spaces must never
// overlap: a stream refuses subjects another stream already holds.
const (
	// StreamName is the stream holding room events.
	StreamName = "ROOM_EVENTS"
	// DLQStreamName is the stream holding dead letters of every consumer.
	DLQStreamName = "ROOM_EVENTS_DLQ"
	// SubjectPrefix starts every room event subject.
	SubjectPrefix = "room.events"

	// dlqPrefix starts every dead-letter subject.
	dlqPrefix = "dlq"
	// allEventsSubject matches every room event.
	allEventsSubject = SubjectPrefix + ".>"
	// allDLQSubject matches every dead letter.
	allDLQSubject = dlqPrefix + ".>"
)

// MaxTokenLen is the longest subject token, in bytes, that Subject accepts.
// It keeps subjects (and the per-subject index of the stream) small.
const MaxTokenLen = 128

// Subject returns room.events.<appCode>.<roomID>.<eventType>. Each token
// must pass the token rule (see ErrInvalidSubjectToken); the error names
// the field, e.g. `room_id "a.b": invalid subject token: contains '.'`.
//
// Non-ASCII letters are accepted: NATS subjects are UTF-8 and room ids or
// event types are opaque to the bus. Unicode whitespace and control
// characters are rejected like their ASCII cousins, since they break
// subject parsing or header transport.
func Subject(appCode, roomID, eventType string) (string, error) {
	if err := checkEventTokens(appCode, roomID, eventType); err != nil {
		return "", err
	}
	return joinSubject(appCode, roomID, eventType), nil
}

// checkEventTokens applies the token rule to a room event subject's
// three tokens, naming the field in the error.
func checkEventTokens(appCode, roomID, eventType string) error {
	if err := checkToken("app_code", appCode); err != nil {
		return err
	}
	if err := checkToken("room_id", roomID); err != nil {
		return err
	}
	return checkToken("event_type", eventType)
}

// joinSubject builds room.events.<appCode>.<roomID>.<eventType> from
// checked tokens.
func joinSubject(appCode, roomID, eventType string) string {
	var b strings.Builder
	b.Grow(len(SubjectPrefix) + 3 + len(appCode) + len(roomID) + len(eventType))
	b.WriteString(SubjectPrefix)
	b.WriteByte('.')
	b.WriteString(appCode)
	b.WriteByte('.')
	b.WriteString(roomID)
	b.WriteByte('.')
	b.WriteString(eventType)
	return b.String()
}

// checkToken applies the token rule and names field in the error.
func checkToken(field, tok string) error {
	if err := tokenProblem(tok); err != nil {
		return fmt.Errorf("%s %s: %w", field, quoteShort(tok), err)
	}
	return nil
}

// quoteShort quotes s for an error message, cut to 64 bytes so a hostile
// value cannot blow up logs.
func quoteShort(s string) string {
	const max = 64
	if len(s) <= max {
		return fmt.Sprintf("%q", s)
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%q...", s[:cut])
}

// tokenProblem returns why tok is not a valid subject token, or nil.
func tokenProblem(tok string) error {
	if tok == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSubjectToken)
	}
	if len(tok) > MaxTokenLen {
		return fmt.Errorf("%w: longer than %d bytes", ErrInvalidSubjectToken, MaxTokenLen)
	}
	for i := 0; i < len(tok); {
		c := tok[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '.' || c == '*' || c == '>':
				return fmt.Errorf("%w: contains %q", ErrInvalidSubjectToken, rune(c))
			case c <= ' ' || c == 0x7f:
				return fmt.Errorf("%w: contains whitespace or control character %q", ErrInvalidSubjectToken, rune(c))
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(tok[i:])
		if r == utf8.RuneError && size == 1 {
			return fmt.Errorf("%w: not valid UTF-8", ErrInvalidSubjectToken)
		}
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("%w: contains whitespace or control character %q", ErrInvalidSubjectToken, r)
		}
		i += size
	}
	return nil
}

// splitSubject checks that subject is room.events.<app>.<room>.<type>
// with valid tokens and returns the three tokens.
func splitSubject(subject string) (appCode, roomID, eventType string, err error) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		return "", "", "", fmt.Errorf("subject %s: not under %s", quoteShort(subject), SubjectPrefix)
	}
	appCode, rest, ok1 := strings.Cut(rest, ".")
	roomID, eventType, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return "", "", "", fmt.Errorf("subject %s: want %s.<app_code>.<room_id>.<event_type>", quoteShort(subject), SubjectPrefix)
	}
	if err := checkEventTokens(appCode, roomID, eventType); err != nil {
		return "", "", "", err
	}
	return appCode, roomID, eventType, nil
}

// dlqSubject is the subject a dead letter of durable is stored on.
func dlqSubject(durable, original string) string {
	return dlqPrefix + "." + durable + "." + original
}

// RoomKeyOf returns the room of a room event subject
// room.events.<app_code>.<room_id>.<event_type> without checking its tokens
// (Subject did when it built it): the per-room ordering key of a Message.
// ok is false for any other subject.
func RoomKeyOf(subject string) (key voiceroom.RoomKey, ok bool) {
	rest, ok := strings.CutPrefix(subject, SubjectPrefix+".")
	if !ok {
		return key, false
	}
	app, rest, ok1 := strings.Cut(rest, ".")
	room, _, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 {
		return key, false
	}
	return voiceroom.RoomKey{AppCode: app, RoomID: room}, true
}

// ReplayPrefix starts every replay subject:
// room.replay.<durable>.<app_code>.<room_id>.<event_type>. A replayed
// dead letter is stored in ROOM_EVENTS on such a subject, which only that
// durable's filter covers, so it reaches one sink and no other.
const ReplayPrefix = "room.replay"

// allReplaySubject matches every replay.
const allReplaySubject = ReplayPrefix + ".>"

// replaySubject is the subject a replay of original (a room.events
// subject) to durable is stored on.
func replaySubject(durable, original string) (string, error) {
	rest, ok := strings.CutPrefix(original, SubjectPrefix+".")
	if !ok {
		return "", fmt.Errorf("subject %s: not under %s", quoteShort(original), SubjectPrefix)
	}
	return ReplayPrefix + "." + durable + "." + rest, nil
}

// durableReplaySubject matches the replays of durable.
func durableReplaySubject(durable string) string {
	return ReplayPrefix + "." + durable + ".>"
}

// eventSubjectOf returns the room.events subject a delivered subject
// stands for: subject itself, or for a replay subject the original one,
// with the durable the replay is for.
func eventSubjectOf(subject string) (original, replayFor string) {
	rest, ok := strings.CutPrefix(subject, ReplayPrefix+".")
	if !ok {
		return subject, ""
	}
	durable, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return subject, ""
	}
	return SubjectPrefix + "." + rest, durable
}

// dlqSinkFilter matches the dead letters of durable, of one app if
// appCode is not empty.
func dlqSinkFilter(durable, appCode string) string {
	if appCode == "" {
		return dlqPrefix + "." + durable + ".>"
	}
	return dlqPrefix + "." + durable + "." + SubjectPrefix + "." + appCode + ".>"
}
