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

// TestSetReadsMovesTheLagTolerantReads: after SetReads, the MySQL path's
// pages (first and later, Redis stopped) and the operators' pin and hide
// listings read the reads pool (here another database, standing in for a
// replica: the rows are only there), while the writes stay on the
// primary.
func TestSetReadsMovesTheLagTolerantReads(t *testing.T) {
	primary, reads := testenv.NewDB(t), testenv.NewDB(t)
	ctx := context.Background()
	cfg := roomlist.Config{CursorSecret: testSecret}
	down := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { down.Close() })
	onReads := seedRooms(t, reads, "a1", 1, 0, 12, func(i int) int64 { return int64(1000 - i) })
	seedRooms(t, primary, "a1", 1, 100, 3, func(i int) int64 { return int64(1000 - i) })

	l := newTestLister(t, primary, down, "", cfg, nil)
	l.SetReads(reads)
	req := roomlist.ListRequest{AppCode: "a1", RegionID: 1, Limit: 5}
	if seen := roomIDs(walkLister(t, l, req, nil)); !slices.Equal(sorted(seen...), sorted(onReads...)) {
		t.Fatalf("pages read %v, want the reads pool's rooms %v", seen, onReads)
	}

	// A pin and a hide made on the reads pool's database show in the
	// listings of pins and hides over the primary with SetReads.
	readPins, err := roomlist.NewPins(reads, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readPins.Create(ctx, "a1", "op", roomlist.NewPin{RoomID: onReads[2], VisibleRegionID: 1, Weight: 1,
		ExpiresAtMs: time.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	readHides, err := roomlist.NewHides(reads, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readHides.Create(ctx, "a1", "op", roomlist.NewHide{RoomID: onReads[3], VisibleRegionID: 1, Reason: "spam"}); err != nil {
		t.Fatal(err)
	}
	pins, err := roomlist.NewPins(primary, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	hides, err := roomlist.NewHides(primary, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pins.SetReads(reads)
	hides.SetReads(reads)
	if ps, err := pins.List(ctx, "a1", 1); err != nil || len(ps) != 1 || ps[0].RoomID != onReads[2] {
		t.Fatalf("pins listed %+v, %v: want the reads pool's pin of %s", ps, err, onReads[2])
	}
	if hs, err := hides.List(ctx, "a1", 1); err != nil || len(hs) != 1 || hs[0].RoomID != onReads[3] {
		t.Fatalf("hides listed %+v, %v: want the reads pool's hide of %s", hs, err, onReads[3])
	}
}
