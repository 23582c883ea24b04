package roomlist

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voiceroom/internal/testenv"
	"voiceroom/listprojector"
)

// TestFreezerRebuildsBehind: past FreezeEvery the request that finds the
// order old starts one build and every request gets the previous order
// meanwhile; past twice FreezeEvery (or for the list's first order)
// requests wait for the build.
func TestFreezerRebuildsBehind(t *testing.T) {
	var ms atomic.Int64
	ms.Store(1_800_000_000_000)
	cfg := Config{FreezeEvery: time.Second, Now: func() time.Time { return time.UnixMilli(ms.Load()) }}.WithDefaults()
	z := newFreezer(cfg)
	id := listID{"a1", 1, listprojector.TabHot}
	var builds atomic.Int64
	release := make(chan struct{})
	build := func(ctx context.Context) (*frozenOrder, error) {
		n := builds.Add(1)
		if n == 2 {
			<-release
		}
		return &frozenOrder{app: id.app, region: id.region, tab: id.tab, entries: []entry{{id: "r", key: n}}}, nil
	}
	ctx := context.Background()
	f1, err := z.current(ctx, id, build)
	if err != nil || f1 == nil || builds.Load() != 1 {
		t.Fatalf("first order: %v %v, %d builds", f1, err, builds.Load())
	}
	ms.Add(1500) // older than FreezeEvery, younger than twice
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if f, err := z.current(ctx, id, build); err != nil || f != f1 {
				t.Errorf("during the rebuild: %v %v, want the previous order", f, err)
			}
		})
	}
	wg.Wait()
	// The rebuild runs in the background: wait until it has started.
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := builds.Load(); n < 2 {
			return fmt.Errorf("%d builds, want the rebuild to start", n)
		}
		return nil
	})
	if n := builds.Load(); n != 2 {
		t.Errorf("%d builds, want 2", n)
	}
	close(release)
	var f2 *frozenOrder
	testenv.Eventually(t, 10*time.Second, func() error {
		if f2, err = z.current(ctx, id, build); err != nil {
			t.Fatal(err)
		}
		if f2 == f1 {
			return errors.New("still the previous order")
		}
		return nil
	})
	if f2.entries[0].key != 2 || f2.at.UnixMilli() != ms.Load() {
		t.Errorf("rebuilt order %+v at %v", f2.entries, f2.at)
	}
	ms.Add(2000) // twice FreezeEvery: the request waits for the build
	if f3, err := z.current(ctx, id, build); err != nil || f3.entries[0].key != 3 {
		t.Errorf("after twice FreezeEvery: %v %v", f3, err)
	}
	failing := listID{"a1", 2, listprojector.TabHot}
	if _, err := z.current(ctx, failing, func(context.Context) (*frozenOrder, error) { return nil, errors.New("down") }); err == nil {
		t.Error("a failed first build gave an order")
	}
}
