package voiceroom

import "testing"

func TestRoomKeyHashIsHashOfString(t *testing.T) {
	for _, k := range []RoomKey{{}, {AppCode: "a"}, {RoomID: "r"}, {AppCode: "bencha", RoomID: "bencha_0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"}, {AppCode: "é", RoomID: "中"}} {
		if got, want := k.Hash(), Hash(k.String()); got != want {
			t.Errorf("%+v: Hash() = %d, Hash(String()) = %d", k, got, want)
		}
	}
	// FNV-1a's published test vectors: the workers and partitions rooms
	// map to depend on the values staying the same.
	for s, want := range map[string]uint32{"": 0x811c9dc5, "a": 0xe40c292c, "foobar": 0xbf9cf968} {
		if got := Hash(s); got != want {
			t.Errorf("Hash(%q) = %#x, want %#x", s, got, want)
		}
	}
}
