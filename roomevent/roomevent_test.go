package roomevent_test

import (
	"errors"
	"strings"
	"testing"

	"voiceroom/roomevent"
)

func TestLookup(t *testing.T) {
	seen := map[string]bool{}
	for _, typ := range roomevent.Types() {
		if seen[typ] {
			t.Errorf("%s listed twice", typ)
		}
		seen[typ] = true
		s, ok := roomevent.Lookup(typ)
		if !ok || s.Type != typ {
			t.Errorf("Lookup(%s) = %+v, %v", typ, s, ok)
		}
	}
	if _, ok := roomevent.Lookup("RoomSomethingNew"); ok {
		t.Error("an unknown type was found")
	}
	if s, _ := roomevent.Lookup(roomevent.RoomClosed); s.IM != roomevent.IMCloseGroup || !s.IMHigh {
		t.Errorf("RoomClosed: %+v", s)
	}
	if s, _ := roomevent.Lookup(roomevent.RoomHeatChanged); s.IM != roomevent.IMSkip {
		t.Errorf("RoomHeatChanged: %+v", s)
	}
}

func TestEncodePayload(t *testing.T) {
	card := []byte(`{"room_id":"r"}`)
	for _, tc := range []struct {
		body any
		want string
	}{
		{nil, `{"room":{"room_id":"r"}}`},
		{struct{}{}, `{"room":{"room_id":"r"}}`},
		{roomevent.UserJoined{UserID: 5}, `{"room":{"room_id":"r"},"user_id":5}`},
	} {
		got, err := roomevent.EncodePayload(card, tc.body)
		if err != nil || string(got) != tc.want {
			t.Errorf("EncodePayload(%#v) = %s, %v; want %s", tc.body, got, err, tc.want)
		}
	}
	if _, err := roomevent.EncodePayload(card, []int{1}); err == nil {
		t.Error("a body that is not an object was accepted")
	}
}

func TestDecodeCard(t *testing.T) {
	if _, err := roomevent.DecodeCard([]byte(`{"user_id":1}`)); !errors.Is(err, roomevent.ErrNoCard) {
		t.Errorf("no card: %v", err)
	}
	if _, err := roomevent.DecodeCard([]byte(`{`)); err == nil {
		t.Error("bad JSON accepted")
	}
	c, err := roomevent.DecodeCard([]byte(`{"room":{"room_id":"r","status":"active","created_at_ms":5,"room_version":3,"new_field":1}}`))
	if err != nil || c.RoomID != "r" || c.RoomVersion != 3 {
		t.Fatalf("DecodeCard = %+v, %v", c, err)
	}
	for _, tc := range []struct {
		room    string
		version int64
		want    string
	}{
		{"r", 3, ""},
		{"x", 3, "card of room"},
		{"r", 4, "card at version"},
	} {
		err := c.Check(tc.room, tc.version)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%s, %d) = %v, want %q", tc.room, tc.version, err, tc.want)
		}
	}
	c.Status = ""
	if c.Check("r", 3) == nil {
		t.Error("a card without status passed")
	}
}

func TestIMGroupID(t *testing.T) {
	app32 := strings.Repeat("a", 32)
	long := app32 + "_0196a3c4-8c55-7d2e-9b1f-3c5a7e9d1b2f"
	for _, tc := range []struct {
		name, app, room string
		same            bool
	}{
		{"short room id is kept", "demo", "demo_0196a3c4-8c55-7d2e-9b1f-3c5a7e9d1b2f", true},
		{"long room id is derived", app32, long, false},
		{"invalid characters are derived", "demo", "demo_a.b", false},
		{"our own prefix is derived", "demo", "vr-abc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := roomevent.IMGroupID(tc.app, tc.room)
			if !roomevent.ValidIMGroupID(g) || len(g) > roomevent.MaxIMGroupIDLen {
				t.Fatalf("IMGroupID = %q (%d bytes): not a valid GroupId", g, len(g))
			}
			if (g == tc.room) != tc.same {
				t.Fatalf("IMGroupID = %q, room %q, want same=%v", g, tc.room, tc.same)
			}
			if g != roomevent.IMGroupID(tc.app, tc.room) {
				t.Fatal("not stable")
			}
		})
	}
	if roomevent.IMGroupID(app32, long) == roomevent.IMGroupID(app32, long+"x") || roomevent.IMGroupID("a", long) == roomevent.IMGroupID("b", long) {
		t.Fatal("derived ids collide")
	}
}
