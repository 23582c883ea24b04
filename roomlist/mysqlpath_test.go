package roomlist_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"voiceroom/internal/testenv"
	"voiceroom/roomlist"
)

// TestMySQLPathHeldCards: without Redis, first pages are served from the
// cards a frozen order holds while it is younger than FreezeEvery, and
// still a hide or an unhide applies to the very next request, a chain
// returns every room once, and a room closed since the freeze is gone
// once FreezeEvery passed, on first pages and on later pages of older
// orders (recent cards) alike.
func TestMySQLPathHeldCards(t *testing.T) {
	for _, tt := range []string{"no redis", "redis stopped"} {
		t.Run(tt, func(t *testing.T) {
			db := testenv.NewDB(t)
			clk := newClock()
			cfg := roomlist.Config{CursorSecret: testSecret, FreezeEvery: time.Second, Now: clk.now}
			var rdb redis.UniversalClient
			if tt == "redis stopped" {
				down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
				t.Cleanup(func() { down.Close() })
				rdb = down
			}
			all := seedRooms(t, db, "a1", 1, 0, 30, func(i int) int64 { return int64(1000 - i) })
			seedRooms(t, db, "a1", 2, 30, 3, func(i int) int64 { return 5000 })
			l := newTestLister(t, db, rdb, "", cfg, nil)
			hides, err := roomlist.NewHides(db, l, nil, cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 10}
			first := func() []string {
				t.Helper()
				p, err := l.List(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				return roomIDs(p.Rooms)
			}
			if got := first(); !slices.Equal(got, all[:10]) {
				t.Fatalf("first page %v, want %v", got, all[:10])
			}
			if seen := noRepeat(t, walkLister(t, l, req, nil)); len(seen) != len(all) {
				t.Errorf("chain: %d rooms, want %d", len(seen), len(all))
			}

			// The clock stands still: the order and its cards stay fresh, the
			// hide applies anyway.
			h, err := hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: all[3], VisibleRegionID: 1, Reason: "spam"})
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Concat(all[:3], all[4:11])
			if got := first(); !slices.Equal(got, want) {
				t.Errorf("after the hide %v, want %v", got, want)
			}
			if seen := noRepeat(t, walkLister(t, l, req, nil)); len(seen) != len(all)-1 || seen[all[3]] {
				t.Errorf("chain after the hide: %d rooms, hidden one shown: %v", len(seen), seen[all[3]])
			}
			if _, err := hides.Delete(ctx, "a1", "op", h.HideID, ""); err != nil {
				t.Fatal(err)
			}
			if got := first(); !slices.Equal(got, all[:10]) {
				t.Errorf("after the unhide %v, want %v", got, all[:10])
			}

			// A closed room is gone once the cards held are FreezeEvery old.
			if _, err := db.Exec(`UPDATE room_list_entries SET status = 'closed' WHERE app_code = 'a1' AND room_id = ?`, all[0]); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Second)
			for range 2 { // the previous order (rebuilt meanwhile), then the new one
				if got := first(); !slices.Equal(got, all[1:11]) {
					t.Errorf("after the close %v, want %v", got, all[1:11])
				}
			}

			// A later page of an order older than FreezeEvery reads its
			// cards (recent ones, at most FreezeEvery old too): a room
			// closed since is gone once FreezeEvery passed, and a hide
			// applies at the very next request.
			p1, err := l.List(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			next := req
			next.Cursor = p1.NextCursor
			second := func() []string {
				t.Helper()
				p, err := l.List(ctx, next)
				if err != nil {
					t.Fatal(err)
				}
				return roomIDs(p.Rooms)
			}
			clk.add(2 * time.Second)
			if got := second(); !slices.Equal(got, all[11:21]) {
				t.Fatalf("second page %v, want %v", got, all[11:21])
			}
			if _, err := db.Exec(`UPDATE room_list_entries SET status = 'closed' WHERE app_code = 'a1' AND room_id = ?`, all[12]); err != nil {
				t.Fatal(err)
			}
			clk.add(time.Second)
			want = slices.Concat(all[11:12], all[13:22]) // the page refills to its limit
			if got := second(); !slices.Equal(got, want) {
				t.Errorf("second page after the close %v, want %v", got, want)
			}
			if _, err := hides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: all[14], VisibleRegionID: 1, Reason: "spam"}); err != nil {
				t.Fatal(err)
			}
			want = slices.Concat(all[11:12], all[13:14], all[15:23])
			if got := second(); !slices.Equal(got, want) {
				t.Errorf("second page after the hide %v, want %v", got, want)
			}
		})
	}
}
