package bus_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"voiceroom/bus"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	env := newTestEnvelope("r42", 7)
	data, err := env.Marshal()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	got, err := bus.DecodeEnvelope(data)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !reflect.DeepEqual(got, env) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, env)
	}

	// The wire names are a contract with every sink.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"app_code", "command_id", "event_id", "event_type", "occurred_at_ms", "payload", "request_id", "room_id", "room_version"}
	if !slices.Equal(keys, want) {
		t.Fatalf("json fields %v, want %v", keys, want)
	}

	// Optional fields are left out when empty.
	env.RequestID, env.Payload = "", nil
	data, err = env.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, "request_id") || strings.Contains(s, "payload") {
		t.Fatalf("empty optional fields encoded: %s", s)
	}
}

func TestEnvelopeMessage(t *testing.T) {
	env := newTestEnvelope("r1", 3)
	m, err := env.Message()
	if err != nil {
		t.Fatal(err)
	}
	if m.Subject != "room.events.app1.r1.seat_changed" {
		t.Errorf("subject %q", m.Subject)
	}
	if m.ID != env.EventID {
		t.Errorf("id %q, want event_id %q", m.ID, env.EventID)
	}
	if err := m.Validate(); err != nil {
		t.Errorf("validate: %v", err)
	}
	back, err := bus.DecodeEnvelope(m.Data)
	if err != nil || back.EventID != env.EventID {
		t.Errorf("decode message data: %v %+v", err, back)
	}
}

func TestEnvelopeValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*bus.Envelope)
		field  string // named in the error
		token  bool   // wraps ErrInvalidSubjectToken
	}{
		{"no event id", func(e *bus.Envelope) { e.EventID = "" }, "event_id", false},
		{"event id with newline", func(e *bus.Envelope) { e.EventID = "a\nb" }, "event_id", false},
		{"event id too long", func(e *bus.Envelope) { e.EventID = strings.Repeat("e", 129) }, "event_id", false},
		{"zero room version", func(e *bus.Envelope) { e.RoomVersion = 0 }, "room_version", false},
		{"negative room version", func(e *bus.Envelope) { e.RoomVersion = -1 }, "room_version", false},
		{"no app code", func(e *bus.Envelope) { e.AppCode = "" }, "app_code", true},
		{"dotted room", func(e *bus.Envelope) { e.RoomID = "a.b" }, "room_id", true},
		{"wildcard event type", func(e *bus.Envelope) { e.EventType = "*" }, "event_type", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnvelope("r1", 1)
			tt.change(&env)
			err := env.Validate()
			if !errors.Is(err, bus.ErrInvalidEnvelope) {
				t.Fatalf("err %v, want ErrInvalidEnvelope", err)
			}
			if errors.Is(err, bus.ErrInvalidSubjectToken) != tt.token {
				t.Errorf("err %v: wraps ErrInvalidSubjectToken = %v, want %v", err, !tt.token, tt.token)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("err %q does not name %s", err, tt.field)
			}
			if _, err := env.Marshal(); !errors.Is(err, bus.ErrInvalidEnvelope) {
				t.Errorf("marshal err %v, want ErrInvalidEnvelope", err)
			}
			if _, err := env.Message(); !errors.Is(err, bus.ErrInvalidEnvelope) {
				t.Errorf("message err %v, want ErrInvalidEnvelope", err)
			}
		})
	}
}

func TestDecodeEnvelopeRejects(t *testing.T) {
	for name, data := range map[string]string{
		"not json":        `{"event_id":`,
		"array":           `[1,2]`,
		"missing version": `{"event_id":"e1","app_code":"a","room_id":"r","event_type":"t"}`,
		"bad subject":     `{"event_id":"e1","app_code":"a b","room_id":"r","event_type":"t","room_version":1}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := bus.DecodeEnvelope([]byte(data)); !errors.Is(err, bus.ErrInvalidEnvelope) {
				t.Fatalf("err %v, want ErrInvalidEnvelope", err)
			}
		})
	}
	// Unknown fields are fine: producers may add fields first.
	if _, err := bus.DecodeEnvelope([]byte(`{"event_id":"e1","app_code":"a","room_id":"r","event_type":"t","room_version":1,"new_field":true}`)); err != nil {
		t.Fatalf("unknown field rejected: %v", err)
	}
}

func TestMessageValidate(t *testing.T) {
	good := bus.Message{Subject: "room.events.app1.r1.created", ID: "e1", Data: []byte(`{}`)}
	if err := good.Validate(); err != nil {
		t.Fatalf("good message: %v", err)
	}
	tests := map[string]bus.Message{
		"other subject space": {Subject: "dlq.x.room.events.a.r.t", ID: "e1", Data: []byte(`{}`)},
		"too few tokens":      {Subject: "room.events.app1.r1", ID: "e1", Data: []byte(`{}`)},
		"too many tokens":     {Subject: "room.events.app1.r1.t.x", ID: "e1", Data: []byte(`{}`)},
		"wildcard":            {Subject: "room.events.app1.*.t", ID: "e1", Data: []byte(`{}`)},
		"empty token":         {Subject: "room.events.app1..t", ID: "e1", Data: []byte(`{}`)},
		"no id":               {Subject: "room.events.app1.r1.t", Data: []byte(`{}`)},
		"no data":             {Subject: "room.events.app1.r1.t", ID: "e1"},
	}
	for name, m := range tests {
		t.Run(name, func(t *testing.T) {
			if err := m.Validate(); !errors.Is(err, bus.ErrInvalidMessage) {
				t.Fatalf("err %v, want ErrInvalidMessage", err)
			}
		})
	}
}
