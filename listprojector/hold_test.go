package listprojector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"voiceroom/bus"
)

// countsRoom returns a delivery of room r at version with the given title
// and online count.
func countsRoom(room string, version int64, title string, online int) bus.Delivery {
	raw, _ := json.Marshal(map[string]any{"room": map[string]any{"room_id": room, "status": "active", "title": title,
		"created_at_ms": 1, "visible_region_id": 1, "online_count": online, "room_version": version}})
	return bus.Delivery{Envelope: bus.Envelope{EventID: fmt.Sprint(room, "-", version), AppCode: "a1", RoomID: room,
		RoomVersion: version, EventType: "RoomUserJoined", Payload: raw}}
}

// TestCountsWait: a card that changes only counts is held, its deliveries
// unsettled, until CountsDelay after the room's first held change, then
// written at its newest; any other change is written at once and settles
// the held deliveries with it; counts that return to the stored listing
// settle as unchanged; stopping writes what is held and holds no more.
func TestCountsWait(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	p, m, db := newTestProjector(t, Config{CountsDelay: time.Second, Now: func() time.Time { return now }})
	ctx := context.Background()
	var lateErrs []error
	apply := func(ds ...bus.Delivery) []error {
		t.Helper()
		errs := handled(p, ctx, ds)
		for len(p.mirror) > 0 {
			<-p.mirror
		}
		return errs
	}
	stored := func() (version int64, online int) {
		t.Helper()
		if err := db.QueryRow(`SELECT room_version, online_count FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'r1'`).
			Scan(&version, &online); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := func(step string, version int64, online int, heldRooms float64) {
		t.Helper()
		if v, o := stored(); v != version || o != online {
			t.Errorf("%s: stored v%d online %d, want v%d online %d", step, v, o, version, online)
		}
		var g dto.Metric
		_ = m.held.Write(&g)
		if got := g.GetGauge().GetValue(); got != heldRooms {
			t.Errorf("%s: %v rooms held, want %v", step, got, heldRooms)
		}
	}
	if errs := apply(countsRoom("r1", 1, "a", 0)); errs[0] != nil {
		t.Fatalf("v1: %v", errs[0])
	}
	want("created", 1, 0, 0)

	// Joins: held, not written, even after part of the delay; the older
	// join is acked once the newer card covers it, the newer one waits.
	var firstErr error = errHeld
	p.handle(ctx, []bus.Delivery{countsRoom("r1", 2, "a", 1)}, func(_ int, err error) { firstErr = err })
	if firstErr != errHeld {
		t.Fatalf("first join settled at once: %v", firstErr)
	}
	second := apply(countsRoom("r1", 3, "a", 2))
	if firstErr != nil || second[0] != errHeld {
		t.Fatalf("after the second join: first %v, second %v; want the first acked, the second held", firstErr, second[0])
	}
	now = now.Add(900 * time.Millisecond)
	p.writeHeld(false)
	want("joins, before the delay", 1, 0, 1)
	now = now.Add(200 * time.Millisecond)
	p.writeHeld(false)
	<-p.mirror
	want("joins, after the delay", 3, 2, 0)
	if a, c := value(m.applied), value(m.coalesced); a != 2 || c != 1 {
		t.Errorf("applied %v coalesced %v, want 2 and 1", a, c)
	}

	// A join held, then a title change: both written at once.
	var joinErr error = errHeld
	p.handle(ctx, []bus.Delivery{countsRoom("r1", 4, "a", 3)}, func(_ int, err error) { joinErr = err })
	if errs := apply(countsRoom("r1", 5, "b", 3)); errs[0] != nil || joinErr != nil {
		t.Fatalf("title change: %v, the held join: %v", errs[0], joinErr)
	}
	want("title change", 5, 3, 0)

	// A join and a leave: back to the stored listing, but still written
	// (v7 guards against the join redelivered after a lost ack).
	if errs := apply(countsRoom("r1", 6, "b", 4)); errs[0] != errHeld {
		t.Fatalf("join settled at once: %v", errs[0])
	}
	if errs := apply(countsRoom("r1", 7, "b", 3)); errs[0] != errHeld {
		t.Fatalf("leave settled at once: %v", errs[0])
	}
	if errs := apply(countsRoom("r1", 6, "b", 4)); errs[0] != nil {
		t.Fatalf("the join redelivered: %v", errs[0])
	}
	now = now.Add(1100 * time.Millisecond)
	p.writeHeld(false)
	<-p.mirror
	want("join and leave", 7, 3, 0)
	// The same within one batch.
	if errs := apply(countsRoom("r1", 8, "b", 4), countsRoom("r1", 9, "b", 3)); errs[0] != nil || errs[1] != errHeld {
		t.Fatalf("join and leave in one batch: %v, want the join acked and the leave held", errs)
	}
	now = now.Add(1100 * time.Millisecond)
	p.writeHeld(false)
	<-p.mirror
	want("join and leave in one batch", 9, 3, 0)

	// Stop: the held join is written, and the next one at once.
	p.handle(ctx, []bus.Delivery{countsRoom("r1", 10, "b", 4)}, func(_ int, err error) { lateErrs = append(lateErrs, err) })
	p.writeHeld(true)
	<-p.mirror
	want("stop", 10, 4, 0)
	if errs := apply(countsRoom("r1", 11, "b", 5)); errs[0] != nil {
		t.Fatalf("join after stop: %v", errs[0])
	}
	want("join after stop", 11, 5, 0)
	if len(lateErrs) != 1 || lateErrs[0] != nil {
		t.Errorf("the join held at stop settled %v, want once with nil", lateErrs)
	}
}

// TestHeldBound: past MaxHeld events the rooms held longest are written
// before they are due; a newer card stored by another writer settles
// what a room holds as stale.
func TestHeldBound(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	p, m, db := newTestProjector(t, Config{CountsDelay: 5 * time.Second, MaxHeld: 3, Now: func() time.Time { return now }})
	ctx := context.Background()
	rooms := []string{"r1", "r2", "r3", "r4", "r5"}
	for _, r := range rooms {
		handled(p, ctx, []bus.Delivery{countsRoom(r, 1, "a", 0)})
		<-p.mirror
	}
	for _, r := range rooms {
		now = now.Add(time.Millisecond)
		if errs := handled(p, ctx, []bus.Delivery{countsRoom(r, 2, "a", 1)}); errs[0] != errHeld {
			t.Fatalf("%s: join settled at once: %v", r, errs[0])
		}
	}
	p.writeHeld(false)
	got := (<-p.mirror).cards
	if len(got) != 2 || got[0].card.RoomID != "r1" || got[1].card.RoomID != "r2" {
		t.Fatalf("written early: %d cards, want r1 and r2", len(got))
	}
	if len(p.held) != 3 {
		t.Errorf("%d rooms held, want 3", len(p.held))
	}
	// Another instance wrote r3 v3: its held join is covered.
	if _, err := db.Exec(`UPDATE room_list_entries SET room_version = 3, online_count = 7 WHERE app_code = 'a1' AND room_id = 'r3'`); err != nil {
		t.Fatal(err)
	}
	before := value(m.stale)
	handled(p, ctx, []bus.Delivery{countsRoom("r3", 3, "a", 7)})
	<-p.mirror
	if s := value(m.stale) - before; s != 2 {
		t.Errorf("stale %v, want 2 (the held join and the new event)", s)
	}
	if len(p.held) != 2 {
		t.Errorf("%d rooms held, want 2", len(p.held))
	}
}
