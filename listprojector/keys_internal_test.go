package listprojector

import (
	"testing"

	"voiceroom/internal/redisconn"
)

// TestKeysOfOneScriptShareASlot: the keys written together (a region's
// sets and ready key in fillRegion's MULTI; a hide set and its gen in
// fillHidesScript and the hide's MULTI) are in one cluster slot, and a
// room's card and a region's sets are not pinned to the app's slot.
func TestKeysOfOneScriptShareASlot(t *testing.T) {
	k := Keys{Prefix: "p:"}
	for _, app := range []string{"a1", "demo", "app_with-dash"} {
		for _, region := range []int64{0, 1, 42, 1 << 40} {
			if !redisconn.SameSlot(k.List(app, region, TabHot), k.List(app, region, TabNew), k.Ready(app, region)) {
				t.Errorf("the sets and ready key of %s region %d span slots", app, region)
			}
			if !redisconn.SameSlot(k.Hides(app, region), k.hidesGen(app, region)) {
				t.Errorf("the hide set and gen of %s region %d span slots", app, region)
			}
		}
	}
	slots := map[int]bool{}
	for i := range 100 {
		slots[redisconn.Slot(k.Card("a1", "a1_"+string(rune('a'+i%26))+string(rune('a'+i/26))))] = true
		slots[redisconn.Slot(k.List("a1", int64(i), TabHot))] = true
	}
	if len(slots) < 150 {
		t.Errorf("one app's cards and regions fall in %d slots of 200 keys: they do not spread", len(slots))
	}
}

// TestParseKeys: the near cache's parsing of invalidated keys.
func TestParseKeys(t *testing.T) {
	k := Keys{Prefix: "p:"}
	if app, room, ok := k.ParseCard(k.Card("a1", "a1_x:y")); !ok || app != "a1" || room != "a1_x:y" {
		t.Errorf("ParseCard: %q %q %v", app, room, ok)
	}
	if app, region, ok := k.ParseHides(k.Hides("a1", 7)); !ok || app != "a1" || region != 7 {
		t.Errorf("ParseHides: %q %d %v", app, region, ok)
	}
	for _, key := range []string{k.hidesGen("a1", 7), k.List("a1", 7, TabHot), "q:" + k.Card("a1", "r")[2:], "p:room:card:{a1}:r"} {
		if _, _, ok := k.ParseCard(key); ok {
			t.Errorf("ParseCard(%q) ok", key)
		}
		if _, _, ok := k.ParseHides(key); ok {
			t.Errorf("ParseHides(%q) ok", key)
		}
	}
}
