package imbridge

import (
	"testing"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
	"voiceroom/roomevent"
)

// TestMessageGolden pins the send_group_msg bodies clients' messages come
// from: one event (Data is the event, Desc its type) and a batch (Data is
// {"events": [...]}, Desc RoomEventBatch), with the High priority a seat
// event brings.
func TestMessageGolden(t *testing.T) {
	card := []byte(`{"room_id":"demo_r1","room_short_id":"48213","im_group_id":"demo_r1","status":"active","created_at_ms":1764590400000,"room_version":7}`)
	env := func(id, typ string, version int64, body any) bus.Envelope {
		p, err := roomevent.EncodePayload(card, body)
		if err != nil {
			t.Fatal(err)
		}
		return bus.Envelope{EventID: id, AppCode: "demo", RoomID: "demo_r1", RoomVersion: version, EventType: typ,
			CommandID: "cmd-" + id, OccurredAtMs: 1764590460000 + version, Payload: p}
	}
	joined := env("e1", roomevent.RoomUserJoined, 7, roomevent.UserJoined{UserID: 2001})
	micUp := env("e2", roomevent.RoomMicUp, 8, roomevent.MicMoved{UserID: 2001, SeatIndex: 1})
	for _, tc := range []struct {
		name string
		evs  []bus.Envelope
	}{
		{"im_single.json", []bus.Envelope{joined}},
		{"im_batch.json", []bus.Envelope{joined, micUp}},
	} {
		body, _, err := buildMessage("demo_r1", "administrator", tc.evs)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Golden(t, tc.name, body)
	}
}
