package roomlist_test

import (
	"encoding/json"
	"os"
	"testing"

	"voiceroom/internal/testenv"
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
	testenv.Golden(t, "list_item.json", got)
}
