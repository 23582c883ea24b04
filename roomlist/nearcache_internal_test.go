package roomlist

import (
	"testing"
	"time"

	"voiceroom/listprojector"
)

// TestTrackedFills: a fill keeps its value unless the key was invalidated
// while it was in flight (its value may predate the write); the map never
// holds more than its bound; entries age out.
func TestTrackedFills(t *testing.T) {
	var tr tracked[string, int]
	tr.init(2)
	now := time.Now()

	tr.begin("a")
	tr.end("a", 1, true, now)
	if v, ok := tr.get("a", now, time.Minute); !ok || v != 1 {
		t.Fatalf("a kept: %v %v", v, ok)
	}

	tr.begin("b")
	tr.drop("b") // the invalidation arrives during the read
	tr.end("b", 2, true, now)
	if _, ok := tr.get("b", now, time.Minute); ok {
		t.Fatal("a value read before its invalidation was kept")
	}
	tr.begin("b") // a later fill is not held back by the old mark
	tr.end("b", 3, true, now)
	if v, ok := tr.get("b", now, time.Minute); !ok || v != 3 {
		t.Fatalf("b after a clean fill: %v %v", v, ok)
	}

	// Two fills of one key, the invalidation between their reads: neither
	// keeps (the mark lasts while any fill of the key is in flight).
	tr.begin("a")
	tr.begin("a")
	tr.drop("a")
	tr.end("a", 4, true, now)
	tr.end("a", 5, true, now)
	if _, ok := tr.get("a", now, time.Minute); ok {
		t.Fatal("a fill in flight across an invalidation kept its value")
	}

	for i, k := range []string{"c", "d", "e"} {
		tr.begin(k)
		tr.end(k, i, true, now)
	}
	if len(tr.m) > 2 {
		t.Fatalf("%d entries held, bound 2", len(tr.m))
	}
	if _, ok := tr.get("e", now.Add(2*time.Minute), time.Minute); ok {
		t.Fatal("an entry older than the max age was served")
	}
	tr.begin("f")
	tr.end("f", 0, false, now)
	if _, ok := tr.get("f", now, time.Minute); ok || len(tr.inflight) != 0 || len(tr.dirty) != 0 {
		t.Fatalf("an unkept fill left state: %v %v %v", ok, tr.inflight, tr.dirty)
	}
}

// TestNearInvalidateKeys: card and hide-set keys of the prefix drop their
// entries; the hide gen key and other prefixes' keys drop nothing.
func TestNearInvalidateKeys(t *testing.T) {
	n := &nearCache{c: &cache{keys: listprojector.Keys{Prefix: "p:"}}}
	n.cards.init(10)
	n.hides.init(10)
	now := time.Now()
	put := func() {
		for _, r := range []cardRef{{"app", "room:1"}, {"app", "r2"}} {
			n.cards.begin(r)
			n.cards.end(r, &listprojector.Card{}, true, now)
		}
		n.hides.begin(hideRegion{"app", 7})
		n.hides.end(hideRegion{"app", 7}, hideSet{}, true, now)
	}
	put()
	n.invalidate("p:room:card:{app:room:1}")
	n.invalidate("q:room:card:{app:r2}")
	n.invalidate("p:room:hides:{app:7}:gen")
	if _, ok := n.cards.get(cardRef{"app", "room:1"}, now, time.Minute); ok {
		t.Fatal("room:1 kept after its invalidation")
	}
	if _, ok := n.cards.get(cardRef{"app", "r2"}, now, time.Minute); !ok {
		t.Fatal("another prefix's key dropped r2")
	}
	if _, ok := n.hides.get(hideRegion{"app", 7}, now, time.Minute); !ok {
		t.Fatal("the gen key dropped the hide set")
	}
	n.invalidate("p:room:hides:{app:7}")
	if _, ok := n.hides.get(hideRegion{"app", 7}, now, time.Minute); ok {
		t.Fatal("hide set kept after its invalidation")
	}
	put()
	n.flush()
	if len(n.cards.m)+len(n.hides.m) != 0 || n.epoch.Load() != 1 {
		t.Fatal("flush kept entries or did not start an epoch")
	}
}
