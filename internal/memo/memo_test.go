package memo

import (
	"sync"
	"testing"
)

// TestMap: a value put is got back; at the bound the map starts over; it
// is safe for concurrent use.
func TestMap(t *testing.T) {
	m := Map[string, int]{Bound: 2}
	if _, ok := m.Get("a"); ok {
		t.Fatal("empty map had a")
	}
	m.Put("a", 1)
	m.Put("b", 2)
	if v, ok := m.Get("a"); !ok || v != 1 {
		t.Fatalf("a = %v, %v", v, ok)
	}
	m.Put("c", 3) // full: starts over
	if _, ok := m.Get("a"); ok {
		t.Fatal("a kept past the bound")
	}
	if v, ok := m.Get("c"); !ok || v != 3 {
		t.Fatalf("c = %v, %v", v, ok)
	}

	var d Map[int, int]
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				d.Put(g*1000+i, i)
				d.Get(i)
			}
		})
	}
	wg.Wait()
	if v, ok := d.Get(3999); !ok || v != 999 {
		t.Fatalf("3999 = %v, %v", v, ok)
	}
}
