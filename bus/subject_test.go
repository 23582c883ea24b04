package bus_test

import (
	"errors"
	"strings"
	"testing"

	"voiceroom/bus"
)

// Unicode decision: NATS subjects are UTF-8, so letters outside ASCII are
// valid tokens; Unicode whitespace, control characters and invalid UTF-8
// are not.
func TestSubjectTokens(t *testing.T) {
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"plain", "room_42-A", true},
		{"digits", "123456", true},
		{"uuid", "0f8fad5b-d9cb-469f-a165-70867728950e", true},
		{"unicode letters", "房间", true},
		{"emoji", "🎤", true},
		{"exactly max length", strings.Repeat("r", bus.MaxTokenLen), true},
		{"too long", strings.Repeat("r", bus.MaxTokenLen+1), false},
		{"empty", "", false},
		{"dot", "a.b", false},
		{"star", "a*", false},
		{"greater than", ">", false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"newline", "a\n", false},
		{"carriage return", "a\rb", false},
		{"nul", "a\x00b", false},
		{"del", "a\x7fb", false},
		{"no-break space", "a\u00a0b", false},
		{"ideographic space", "a\u3000b", false},
		{"unicode control", "a\u0085b", false},
		{"invalid utf-8", "a\xffb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			subject, err := bus.Subject("app1", tt.token, "created")
			if tt.ok {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				if want := "room.events.app1." + tt.token + ".created"; subject != want {
					t.Fatalf("subject %q, want %q", subject, want)
				}
				return
			}
			if !errors.Is(err, bus.ErrInvalidSubjectToken) {
				t.Fatalf("err %v, want ErrInvalidSubjectToken", err)
			}
			if !strings.HasPrefix(err.Error(), "room_id ") {
				t.Errorf("err %q does not start with the field name", err)
			}
			if len(err.Error()) > 200 {
				t.Errorf("error message %d bytes long; the token should be cut", len(err.Error()))
			}
		})
	}
}

func TestSubjectNamesEachField(t *testing.T) {
	for field, args := range map[string][3]string{
		"app_code":   {"a.b", "r", "t"},
		"room_id":    {"a", "", "t"},
		"event_type": {"a", "r", "t>"},
	} {
		_, err := bus.Subject(args[0], args[1], args[2])
		if !errors.Is(err, bus.ErrInvalidSubjectToken) || !strings.HasPrefix(err.Error(), field+" ") {
			t.Errorf("%s: err %v", field, err)
		}
	}
}

func FuzzSubject(f *testing.F) {
	f.Add("room1")
	f.Add("a.b")
	f.Add("房间 1")
	f.Fuzz(func(t *testing.T, token string) {
		subject, err := bus.Subject("app", token, "t")
		if err != nil {
			return
		}
		// A valid token yields exactly five tokens and no wildcard.
		if parts := strings.Split(subject, "."); len(parts) != 5 || strings.ContainsAny(subject, "*> \t\r\n") {
			t.Fatalf("token %q gave subject %q", token, subject)
		}
	})
}
