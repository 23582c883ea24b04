package roomranks

import (
	"testing"

	"voiceroom/internal/redisconn"
)

// TestRoomKeysShareASlot: applyScript's and fillScript's keys (a room's
// journal, floor and sets) are in one cluster slot; two rooms of an app
// are not pinned to one.
func TestRoomKeysShareASlot(t *testing.T) {
	k := newRoomKeys("p:", "a1", "a1_room")
	keys := []string{k.journal(), k.floor()}
	for _, by := range []By{BySender, ByReceiver} {
		for _, w := range []Window{{Period: Day, StartMs: 1}, {Period: Week, StartMs: 1_700_000_000_000}} {
			keys = append(keys, k.set(by, w))
		}
	}
	if !redisconn.SameSlot(keys...) {
		t.Errorf("a room's rank keys span slots: %v", keys)
	}
	slots := map[int]bool{}
	for _, room := range []string{"a1_1", "a1_2", "a1_3", "a1_4", "a1_5", "a1_6", "a1_7", "a1_8"} {
		slots[redisconn.Slot(newRoomKeys("p:", "a1", room).journal())] = true
	}
	if len(slots) < 7 {
		t.Errorf("8 rooms of one app in %d slots", len(slots))
	}
}
