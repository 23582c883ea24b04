package roomlist

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"voiceroom/listprojector"
)

// TestFreezerSharesWhatOrdersHaveInCommon: a list's new order that is
// the same as the one before holds the same entries, and one that differs
// holds the same strings for the rooms it shares with it, instead of
// copies of its own (a read list is frozen every FreezeEvery and each
// order is held for ChainTTL).
func TestFreezerSharesWhatOrdersHaveInCommon(t *testing.T) {
	ms := int64(1_800_000_000_000)
	cfg := Config{FreezeEvery: time.Second, Now: func() time.Time { return time.UnixMilli(ms) }}.WithDefaults()
	z := newFreezer(cfg)
	id := listID{"a1", 1, listprojector.TabHot}
	next := [][]string{{"ra", "rb", "rc"}, {"ra", "rb", "rc"}, {"rc", "ra", "rd"}}
	build := func(context.Context) (*frozenOrder, error) {
		f := &frozenOrder{app: id.app, region: id.region, tab: id.tab}
		for i, room := range next[0] {
			f.entries = append(f.entries, entry{id: strings.Clone(room), key: int64(i)}) // as each read from Redis
		}
		next = next[1:]
		return f, nil
	}
	var orders []*frozenOrder
	for range 3 {
		f, err := z.current(context.Background(), id, build)
		if err != nil {
			t.Fatal(err)
		}
		orders = append(orders, f)
		ms += (2 * time.Second).Milliseconds() // the next request waits for its build
	}
	if orders[0] == orders[1] || orders[1] == orders[2] {
		t.Fatal("want a new order each time")
	}
	if &orders[1].entries[0] != &orders[0].entries[0] {
		t.Error("an order the same as the one before holds entries of its own")
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if e, prev := orders[2].entries, orders[1].entries; !same(e[0].id, prev[2].id) || !same(e[1].id, prev[0].id) {
		t.Errorf("the rooms an order shares with the one before are copies: %v against %v", e, prev)
	}
	if got := orders[2].entries; got[0].id != "rc" || got[1].id != "ra" || got[2].id != "rd" || got[2].key != 2 {
		t.Errorf("order %v, want rc, ra, rd as built", got)
	}
}
