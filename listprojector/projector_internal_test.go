package listprojector

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// TestCoalescing: one batch with many events of a room writes its newest
// card once; older events, in the batch or after it, change nothing.
func TestCoalescing(t *testing.T) {
	p, m, db := newTestProjector(t, Config{})
	delivery := func(room string, version int64, title string) bus.Delivery {
		raw, _ := json.Marshal(map[string]any{"room": map[string]any{"room_id": room, "status": "active", "title": title,
			"created_at_ms": 1, "visible_region_id": 1, "room_version": version}})
		return bus.Delivery{Envelope: bus.Envelope{EventID: fmt.Sprint(room, version), AppCode: "a1", RoomID: room,
			RoomVersion: version, EventType: "RoomUserJoined", Payload: raw}}
	}
	ctx := context.Background()
	batch := []bus.Delivery{delivery("r1", 2, "v2"), delivery("r1", 4, "v4"), delivery("r2", 1, "x"), delivery("r1", 3, "v3"), delivery("r1", 4, "v4")}
	for i, err := range handled(p, ctx, batch) {
		if err != nil {
			t.Errorf("delivery %d: %v", i, err)
		}
	}
	if got := (<-p.mirror).cards; len(got) != 2 {
		t.Errorf("%d cards mirrored, want 2", len(got))
	}
	if a, c := value(m.applied), value(m.coalesced); a != 2 || c != 3 {
		t.Errorf("applied %v coalesced %v, want 2 and 3", a, c)
	}
	handled(p, ctx, []bus.Delivery{delivery("r1", 3, "v3 late"), delivery("r2", 1, "x again")})
	<-p.mirror
	if s := value(m.stale); s != 2 {
		t.Errorf("stale %v, want 2", s)
	}
	var title string
	var version int64
	if err := db.QueryRow(`SELECT title, room_version FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'r1'`).Scan(&title, &version); err != nil || title != "v4" || version != 4 {
		t.Errorf("r1: %q v%d %v", title, version, err)
	}
}

// TestUnchangedListing: an event whose listing equals the stored card's is
// not written (the row keeps its older version and write time); a changed
// listing is, and a late event older than the stored version stays stale.
func TestUnchangedListing(t *testing.T) {
	nowMs := int64(1000)
	p, m, db := newTestProjector(t, Config{Now: func() time.Time { return time.UnixMilli(nowMs) }})
	ctx := context.Background()
	apply := func(version int64, title string) int {
		t.Helper()
		nowMs += 1000
		raw, _ := json.Marshal(map[string]any{"room": map[string]any{"room_id": "r1", "status": "active", "title": title,
			"created_at_ms": 1, "visible_region_id": 1, "online_count": 3, "room_version": version}})
		d := bus.Delivery{Envelope: bus.Envelope{EventID: fmt.Sprint("e", version), AppCode: "a1", RoomID: "r1",
			RoomVersion: version, EventType: "RoomSeatMuteChanged", Payload: raw}}
		for _, err := range handled(p, ctx, []bus.Delivery{d}) {
			if err != nil {
				t.Fatalf("v%d: %v", version, err)
			}
		}
		return len((<-p.mirror).cards)
	}
	stored := func() (title string, version, updatedMs int64) {
		t.Helper()
		if err := db.QueryRow(`SELECT title, room_version, updated_at_ms FROM room_list_entries WHERE app_code = 'a1' AND room_id = 'r1'`).
			Scan(&title, &version, &updatedMs); err != nil {
			t.Fatal(err)
		}
		return
	}
	if n := apply(1, "a"); n != 1 {
		t.Fatalf("v1: %d cards mirrored, want 1", n)
	}
	_, _, firstWrite := stored()
	for _, v := range []int64{2, 3, 3} {
		if n := apply(v, "a"); n != 0 {
			t.Errorf("v%d, same listing: %d cards mirrored, want 0", v, n)
		}
	}
	if title, version, updated := stored(); title != "a" || version != 1 || updated != firstWrite {
		t.Errorf("after unchanged listings: %q v%d written at %d, want \"a\" v1 at %d", title, version, updated, firstWrite)
	}
	if n := apply(4, "b"); n != 1 {
		t.Errorf("v4, new title: %d cards mirrored, want 1", n)
	}
	if n := apply(2, "a"); n != 0 {
		t.Errorf("late v2: %d cards mirrored, want 0", n)
	}
	if title, version, _ := stored(); title != "b" || version != 4 {
		t.Errorf("stored %q v%d, want \"b\" v4", title, version)
	}
	if a, u, s := value(m.applied), value(m.unchanged), value(m.stale); a != 2 || u != 3 || s != 1 {
		t.Errorf("applied %v unchanged %v stale %v, want 2, 3 and 1", a, u, s)
	}
}

// newTestProjector is a Projector on a fresh database, without a consumer
// or Redis: a test calls handle and reads the mirror channel.
func newTestProjector(t *testing.T, cfg Config) (*Projector, *Metrics, *sql.DB) {
	t.Helper()
	db := testenv.NewDB(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return newProjector(db, cfg.WithDefaults(), testenv.Logger(t), m, 10), m, db
}

// errHeld is handled's result for a delivery the projector still holds.
var errHeld = errors.New("held")

// handled runs p.handle over ds and returns each delivery's result as it
// returns: errHeld for a delivery not settled yet.
func handled(p *Projector, ctx context.Context, ds []bus.Delivery) []error {
	errs := make([]error, len(ds))
	for i := range errs {
		errs[i] = errHeld
	}
	var mu sync.Mutex
	p.handle(ctx, ds, func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if errs[i] == errHeld {
			errs[i] = err
		}
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(errs)
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
