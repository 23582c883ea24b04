package listprojector_test

import (
	"encoding/json"
	"testing"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
	"voiceroom/roomevent"
)

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
	testenv.Golden(t, "cache_card.json", b)
	var back listprojector.Card
	if err := json.Unmarshal(b, &back); err != nil || back != goldenCard {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}
