package roomlist_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"voiceroom/listprojector"
	"voiceroom/roomlist"
)

// TestListItemGolden pins the list item as GET /api/v1/rooms answers it,
// made from the card as the Redis cache stores it (listprojector's golden
// card, pinned there by TestCardCacheGolden): a renamed Go field changes
// neither what clients read nor how it follows from the cache.
func TestListItemGolden(t *testing.T) {
	raw, err := os.ReadFile("../listprojector/testdata/cache_card.json")
	if err != nil {
		t.Fatal(err)
	}
	var card listprojector.Card
	if err := json.Unmarshal(raw, &card); err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(roomlist.Item{Listing: card.Listing, Pinned: true})
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("testdata/list_item.json")
	if err != nil {
		t.Fatal(err)
	}
	if want = bytes.TrimSuffix(want, []byte("\n")); !bytes.Equal(got, want) {
		t.Errorf("list_item.json changed: what clients read is a contract (docs/openapi.yaml, RoomListItem)\n got: %s\nwant: %s", got, want)
	}
}
