package apperr

import (
	"errors"
	"fmt"
	"testing"
)

func TestCodeOf(t *testing.T) {
	cause := errors.New("dial tcp 127.0.0.1:3306: connection refused")
	tests := []struct {
		name     string
		err      error
		wantCode Code
		wantMsg  string
	}{
		{"nil", nil, "", "internal error"},
		{"plain error is internal", cause, Internal, "internal error"},
		{"kind", New(NotFound, "room not found"), NotFound, "room not found"},
		{"wrapped kind", fmt.Errorf("load room: %w", New(NotFound, "room not found")), NotFound, "room not found"},
		{"cause hidden", Wrap(Unavailable, "database unavailable", cause), Unavailable, "database unavailable"},
		{"field", Invalid("room_name", "is required"), InvalidArgument, "room_name: is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.wantCode {
				t.Errorf("CodeOf = %q, want %q", got, tt.wantCode)
			}
			if got := MessageOf(tt.err); got != tt.wantMsg {
				t.Errorf("MessageOf = %q, want %q", got, tt.wantMsg)
			}
		})
	}
	if !errors.Is(Wrap(Unavailable, "x", cause), cause) {
		t.Error("Wrap must keep the cause for errors.Is")
	}
	if FieldOf(Invalid("seat_index", "out of range")) != "seat_index" {
		t.Error("FieldOf lost the field")
	}
}
