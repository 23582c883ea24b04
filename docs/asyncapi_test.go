package docs_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"voiceroom/docs"
	"voiceroom/roomevent"
)

// TestAsyncAPIDocumentsEveryEventType keeps docs/asyncapi.yaml's list of
// messages equal to the event types the rooms package emits.
func TestAsyncAPIDocumentsEveryEventType(t *testing.T) {
	got, err := docs.EventTypes()
	if err != nil {
		t.Fatal(err)
	}
	want := roomevent.Types()
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("asyncapi.yaml documents %v\nthe code emits %v", got, want)
	}
	text := string(docs.AsyncAPI)
	for _, typ := range want {
		if !strings.Contains(text, "- $ref: '#/channels/roomEvents/messages/"+typ+"'") {
			t.Errorf("operation consumeRoomEvents does not list %s", typ)
		}
	}
}

// TestAsyncAPIMatchesGoldenEvents checks the golden event of every type
// (roomevent/testdata, the exact bytes the outbox stores and ROOM_EVENTS
// carries) against the document: every field documented, of its type,
// and every required field present.
func TestAsyncAPIMatchesGoldenEvents(t *testing.T) {
	for _, typ := range roomevent.Types() {
		raw, err := os.ReadFile(filepath.Join("..", "roomevent", "testdata", typ+".json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := docs.CheckEvent(raw); err != nil {
			t.Errorf("%s: %v", typ, err)
		}
	}
}

// TestCheckEventRefuses shows the check can fail: each change of a
// golden event that the document does not allow is caught.
func TestCheckEventRefuses(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "roomevent", "testdata", "RoomUserLeft.json"))
	if err != nil {
		t.Fatal(err)
	}
	golden := string(raw)
	for name, ev := range map[string]string{
		"undocumented field":      strings.Replace(golden, `"reason":"stale"`, `"reason":"stale","mood":"happy"`, 1),
		"undocumented card field": strings.Replace(golden, `"heat":120`, `"heat":120,"likes":3`, 1),
		"missing required":        strings.Replace(golden, `"user_id":2001,`, ``, 1),
		"wrong type":              strings.Replace(golden, `"seat_index":2`, `"seat_index":"2"`, 1),
		"not in the enum":         strings.Replace(golden, `"reason":"stale"`, `"reason":"bored"`, 1),
		"unknown type":            strings.Replace(golden, `"event_type":"RoomUserLeft"`, `"event_type":"RoomDanced"`, 1),
		"other type's body":       strings.Replace(golden, `"event_type":"RoomUserLeft"`, `"event_type":"RoomUserJoined"`, 1),
		"not JSON":                golden[:20],
	} {
		if ev == golden {
			t.Fatalf("%s: the replacement did not apply", name)
		}
		if err := docs.CheckEvent([]byte(ev)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
