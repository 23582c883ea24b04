package listprojector_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"voiceroom/listprojector"
	"voiceroom/roomevent"
)

// update rewrites the golden files: go test ./listprojector -run Golden -update.
var update = flag.Bool("update", false, "rewrite the golden files")

var goldenCard = listprojector.Card{
	AppCode: "demo",
	Card: roomevent.Card{Listing: roomevent.Listing{RoomID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", RoomShortID: "48213",
		IMGroupID: "demo_0192a3b4-c5d6-7e8f-9a0b-1c2d3e4f5a6b", OwnerUserID: 1001, HostUserID: 1002, VisibleRegionID: 3,
		Title: "Friday night", CoverURL: "https://cdn.example.com/c.png", Mode: "chat", Status: roomevent.StatusActive,
		Locked: true, Heat: 120, OnlineCount: 7, SeatCount: 8, OccupiedSeatCount: 3, CreatedAtMs: 1764590400000},
		RoomVersion: 42},
	SortScore:   125730,
	UpdatedAtMs: 1764590460000,
}

// TestCardCacheGolden pins the card as the Redis cache stores it (the list
// item that clients read is made from it: roomlist's TestListItemGolden).
func TestCardCacheGolden(t *testing.T) {
	b, err := json.Marshal(goldenCard)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "cache_card.json", b)
	var back listprojector.Card
	if err := json.Unmarshal(b, &back); err != nil || back != goldenCard {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./listprojector -run Golden -update writes it)", err)
	}
	if want = bytes.TrimSuffix(want, []byte("\n")); !bytes.Equal(got, want) {
		t.Errorf("%s changed: what Redis holds is a contract\n got: %s\nwant: %s", name, got, want)
	}
}
