package bus

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Envelope is the event that crosses the bus. Sinks de-duplicate by
// EventID and order by RoomVersion.
type Envelope struct {
	// EventID is the de-duplication key; it becomes the Nats-Msg-Id.
	EventID string `json:"event_id"`
	// AppCode is the tenant; the first subject token after the prefix.
	AppCode string `json:"app_code"`
	// RoomID identifies the room; events of one room are handled in order.
	RoomID string `json:"room_id"`
	// RoomVersion is the per-room monotonic version the event produced.
	RoomVersion int64 `json:"room_version"`
	// EventType names the event, e.g. "seat_changed".
	EventType string `json:"event_type"`
	// CommandID is the idempotency key of the command that made the event.
	CommandID string `json:"command_id"`
	// RequestID is for tracing only.
	RequestID string `json:"request_id,omitempty"`
	// OccurredAtMs is when the command committed, Unix milliseconds.
	OccurredAtMs int64 `json:"occurred_at_ms"`
	// Payload is the event body, owned by the producer and its sinks.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Validate reports whether e can cross the bus: event_id is non-empty, at
// most MaxTokenLen bytes and free of whitespace and control characters (it
// travels as a header); app_code, room_id and event_type are valid subject
// tokens; room_version is positive. Errors wrap ErrInvalidEnvelope and,
// for tokens, ErrInvalidSubjectToken.
func (e Envelope) Validate() error {
	_, err := e.validate()
	return err
}

// validate checks e and returns its subject.
func (e Envelope) validate() (string, error) {
	if err := e.check(); err != nil {
		return "", err
	}
	return joinSubject(e.AppCode, e.RoomID, e.EventType), nil
}

// check is Validate without building the subject.
func (e Envelope) check() error {
	if err := checkEventID(e.EventID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	if err := checkEventTokens(e.AppCode, e.RoomID, e.EventType); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidEnvelope, err)
	}
	if e.RoomVersion <= 0 {
		return fmt.Errorf("%w: room_version %d: must be positive", ErrInvalidEnvelope, e.RoomVersion)
	}
	return nil
}

// Subject returns the subject e is published on,
// room.events.<app_code>.<room_id>.<event_type>. Errors wrap
// ErrInvalidSubjectToken and name the field.
func (e Envelope) Subject() (string, error) {
	return e.subject()
}

func (e Envelope) subject() (string, error) {
	return Subject(e.AppCode, e.RoomID, e.EventType)
}

// Marshal validates e and returns its JSON encoding, through
// encoding/json: Payload is checked and compacted. Message makes the same
// bytes from a compact Payload, faster.
func (e Envelope) Marshal() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("%w: encode event %s: %w", ErrInvalidEnvelope, e.EventID, err)
	}
	return data, nil
}

// Message validates and encodes e into a Message ready to publish. Its
// Payload must be compact JSON, as json.Marshal makes it (the producer's,
// roomevent.EncodePayload): it is copied as it is, the one encoding of the
// event that the outbox row, the fast path and the stream all carry.
func (e Envelope) Message() (Message, error) {
	subject, err := e.validate()
	if err != nil {
		return Message{}, err
	}
	return Message{Subject: subject, ID: e.EventID, Data: e.appendJSON(make([]byte, 0, e.encodedSize()))}, nil
}

// DecodeEnvelope decodes JSON data and validates the result. Unknown
// fields are ignored so producers can add fields before sinks know them.
// Errors wrap ErrInvalidEnvelope.
//
// Data in the shape Message makes (its field order, strings without
// escapes) is read without reflection, and its Payload is the bytes of
// data, not checked here: the sink that decodes the payload checks it.
// Anything else goes through encoding/json.
func DecodeEnvelope(data []byte) (Envelope, error) {
	return decodeEnvelope(data, eventTokens{})
}

// decodeDelivered is DecodeEnvelope of a message delivered on subject (a
// room.events subject): the envelope's app_code, room_id and event_type
// share the subject's strings when they are the same.
func decodeDelivered(subject string, data []byte) (Envelope, error) {
	var tok eventTokens
	if rest, ok := strings.CutPrefix(subject, SubjectPrefix+"."); ok {
		var ok1, ok2 bool
		tok.app, rest, ok1 = strings.Cut(rest, ".")
		tok.room, tok.typ, ok2 = strings.Cut(rest, ".")
		if !ok1 || !ok2 {
			tok = eventTokens{}
		}
	}
	return decodeEnvelope(data, tok)
}

func decodeEnvelope(data []byte, tok eventTokens) (Envelope, error) {
	e, ok := decodeEnvelopeFast(data, tok)
	if !ok {
		e = Envelope{}
		if err := json.Unmarshal(data, &e); err != nil {
			return Envelope{}, fmt.Errorf("%w: decode: %w", ErrInvalidEnvelope, err)
		}
	}
	if err := e.check(); err != nil {
		return Envelope{}, err
	}
	return e, nil
}

// checkEventID applies the event_id rule.
func checkEventID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("event_id: empty")
	case len(id) > MaxTokenLen:
		return fmt.Errorf("event_id %s: longer than %d bytes", quoteShort(id), MaxTokenLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("event_id %s: not valid UTF-8", quoteShort(id))
	}
	for _, r := range id {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return fmt.Errorf("event_id %s: contains whitespace or control character %q", quoteShort(id), r)
		}
	}
	return nil
}

// Message is an encoded envelope ready to publish. It lets the outbox
// relay publish the bytes it stored without decoding and encoding again.
type Message struct {
	// Subject is room.events.<app_code>.<room_id>.<event_type>.
	Subject string
	// ID is the event_id; it becomes the Nats-Msg-Id header.
	ID string
	// Data is the JSON-encoded Envelope.
	Data []byte
}

// Validate reports whether m can be published: its subject is a room
// event subject with valid tokens, its ID passes the event_id rule and
// Data is not empty. It does not decode Data. Errors wrap ErrInvalidMessage.
func (m Message) Validate() error {
	if _, _, _, err := splitSubject(m.Subject); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err := checkEventID(m.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if len(m.Data) == 0 {
		return fmt.Errorf("%w: event %s: empty data", ErrInvalidMessage, m.ID)
	}
	return nil
}

// natsMsg builds the wire message with the de-duplication header.
func (m Message) natsMsg() *nats.Msg {
	return &nats.Msg{
		Subject: m.Subject,
		Data:    m.Data,
		Header:  nats.Header{jetstream.MsgIDHeader: []string{m.ID}},
	}
}
