package roomlist

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestFrozenEncoding: an order read back from its encoding is the order
// written, whatever its room ids and keys; a damaged encoding is an error.
func TestFrozenEncoding(t *testing.T) {
	at := time.UnixMilli(1_800_000_123_456)
	u := "a1_" + uuid.NewString()
	for _, tc := range []struct {
		name string
		f    *frozenOrder
	}{
		{"empty", &frozenOrder{app: "a1", region: 3, tab: "hot", complete: true}},
		{"uuid ids, pinned first", &frozenOrder{app: "a1", region: 7, tab: "hot", entries: []entry{
			{id: u, pinned: true}, {id: "a1_" + uuid.NewString(), key: 5_002_340}, {id: "a1_" + uuid.NewString(), key: 5_002_340},
			{id: "a1_" + uuid.NewString(), key: 12}, {id: "a1_" + uuid.NewString(), key: -3},
		}}},
		{"other ids", &frozenOrder{app: "a1", region: -1, tab: "new", entries: []entry{
			{id: "a1_room0001", key: 1_700_000_000_001}, {id: "a2_room", key: 1_700_000_000_000},
			{id: "A1_" + uuid.NewString()[:35] + "G"}, {id: "a1_" + uuid.NewString()[:35]}, {id: "a1_"}, {id: "x"},
			{id: "a1_" + strings36("F")}, {id: "a1_ünï"}, {id: "a1_" + uuid.NewString(), key: -1 << 62}, {id: "z", key: 1<<63 - 1},
		}}},
		{"search", &frozenOrder{app: "app_with_long_code", region: 1 << 40, tab: "hot", query: queryHash("title"), complete: true,
			entries: []entry{{id: "app_with_long_code_" + uuid.NewString(), key: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			f.id, f.at = 0xfeedface, at
			raw := encodeFrozen(f)
			got, err := decodeFrozen(raw, f.app, f.id)
			if err != nil {
				t.Fatal(err)
			}
			if !got.at.Equal(f.at) || got.id != f.id || got.app != f.app || got.region != f.region || got.tab != f.tab ||
				got.query != f.query || got.complete != f.complete || !reflect.DeepEqual(got.entries, f.entries) && len(f.entries) > 0 {
				t.Errorf("read back %+v\nwrote %+v", got, f)
			}
			for n := range len(raw) {
				if _, err := decodeFrozen(raw[:n], f.app, f.id); err == nil {
					t.Errorf("the first %d of %d bytes decode", n, len(raw))
				}
			}
			if _, err := decodeFrozen(append(raw[:len(raw):len(raw)], 0), f.app, f.id); err == nil {
				t.Error("a trailing byte decodes")
			}
			other := append([]byte{frozenV1 + 1}, raw[1:]...)
			if _, err := decodeFrozen(other, f.app, f.id); err == nil {
				t.Error("another version decodes")
			}
		})
	}
}

func strings36(c string) string {
	s := uuid.NewString()
	return s[:35] + c
}

// TestFrozenEncodingSize measures the encoding of a full order (ChainDepth
// rooms of the rooms service's ids, hot and new keys) and holds it to 21
// bytes a room (the ids alone, as text, are 41): busy lists write one
// every FreezeEvery.
func TestFrozenEncodingSize(t *testing.T) {
	depth := Config{}.WithDefaults().ChainDepth
	for _, tab := range []string{"hot", "new"} {
		f := &frozenOrder{id: 1, app: "demo", region: 12, tab: tab, at: time.UnixMilli(1_800_000_000_000)}
		for i := range depth {
			key := int64(4_999_000 - i*4_997) // hot: heat*1000+...
			if tab == "new" {
				key = 1_800_000_000_000 - int64(i)*61_234 // created_at_ms, a room a minute
			}
			f.entries = append(f.entries, entry{id: "demo_" + uuid.NewString(), key: key, pinned: i < 3})
		}
		raw := encodeFrozen(f)
		perRoom := float64(len(raw)) / float64(depth)
		t.Logf("%s: %d rooms in %d bytes, %.1f bytes a room", tab, depth, len(raw), perRoom)
		if perRoom > 21 {
			t.Errorf("%s: %.1f bytes a room, want at most 21", tab, perRoom)
		}
	}
}

// TestFreezerLoad: an order read from Redis is read once however many
// requests want it at the same time, kept within MaxFrozenRooms, and not
// kept once expired.
func TestFreezerLoad(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_800_000_000_000)
	now := func() time.Time { return time.UnixMilli(ms.Load()) }
	cfg := Config{ChainTTL: time.Minute, ChainDepth: 50, MaxFrozenRooms: 120, SearchMaxResults: 50, Now: now}.WithDefaults()
	z := newFreezer(cfg)
	order := func(id uint64, n int) *frozenOrder {
		f := &frozenOrder{id: id, app: "a1", region: 1, tab: "hot", at: now()}
		for i := range n {
			f.entries = append(f.entries, entry{id: fmt.Sprintf("a1_r%d", i), key: int64(-i)})
		}
		return f
	}
	ctx := context.Background()

	var fetches atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			f, err := z.load(ctx, 10, func() (*frozenOrder, error) {
				fetches.Add(1)
				<-release
				return order(10, 50), nil
			})
			if err != nil || f == nil || f.id != 10 {
				t.Errorf("load: %v %v", f, err)
			}
		})
	}
	close(release)
	wg.Wait()
	if n := fetches.Load(); n != 1 {
		t.Fatalf("%d reads of one order, want 1", n)
	}
	// Requests that came while the read was in flight shared it; later
	// ones find the order held.
	before := fetches.Load()
	if f, err := z.load(ctx, 10, func() (*frozenOrder, error) { fetches.Add(1); return nil, nil }); err != nil || f == nil {
		t.Fatalf("held order: %v %v", f, err)
	}
	if fetches.Load() != before {
		t.Error("a held order was read again")
	}

	// Bounds: orders read from Redis count in MaxFrozenRooms like the
	// process's own.
	for id := uint64(11); id < 20; id++ {
		ms.Add(1000)
		if f, _ := z.load(ctx, id, func() (*frozenOrder, error) { return order(id, 50), nil }); f == nil {
			t.Fatalf("order %d not loaded", id)
		}
		z.mu.Lock()
		rooms, held := z.rooms, len(z.byID)
		z.mu.Unlock()
		if rooms > cfg.MaxFrozenRooms || held > 2 {
			t.Fatalf("after order %d: %d rooms in %d orders, bound %d", id, rooms, held, cfg.MaxFrozenRooms)
		}
	}
	if z.get(10) != nil {
		t.Error("the oldest order was not evicted")
	}

	// Expired (frozen over ChainTTL ago by another process's clock): not
	// kept, not answered.
	old := order(30, 5)
	old.at = now().Add(-2 * time.Minute)
	if f, err := z.load(ctx, 30, func() (*frozenOrder, error) { return old, nil }); f != nil || err != nil {
		t.Errorf("expired order: %v %v", f, err)
	}
	// Errors and misses are answered, not kept.
	boom := errors.New("down")
	if f, err := z.load(ctx, 31, func() (*frozenOrder, error) { return nil, boom }); f != nil || !errors.Is(err, boom) {
		t.Errorf("failed read: %v %v", f, err)
	}
	if f, err := z.load(ctx, 32, func() (*frozenOrder, error) { return nil, nil }); f != nil || err != nil {
		t.Errorf("missing order: %v %v", f, err)
	}
	if len(z.loading) != 0 {
		t.Errorf("%d reads left in flight", len(z.loading))
	}
}

// TestFrozenIDsRandom: order ids are not a counter: two freezers (two
// processes) draw unrelated ids.
func TestFrozenIDsRandom(t *testing.T) {
	seen := map[uint64]bool{}
	for range 10000 {
		id := newFrozenID()
		if id == 0 || seen[id] {
			t.Fatalf("id %d twice or zero", id)
		}
		seen[id] = true
	}
}
