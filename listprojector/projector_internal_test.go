package listprojector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"voiceroom/bus"
	"voiceroom/internal/testenv"
)

// TestCoalescing: one batch with many events of a room writes its newest
// card once; older events, in the batch or after it, change nothing.
func TestCoalescing(t *testing.T) {
	db := testenv.NewDB(t)
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	p := &Projector{db: db, cfg: Config{}.WithDefaults(), log: testenv.Logger(t), metrics: m, mirror: make(chan mirrored, 10)}
	delivery := func(room string, version int64, title string) bus.Delivery {
		raw, _ := json.Marshal(map[string]any{"room": map[string]any{"room_id": room, "status": "active", "title": title,
			"created_at_ms": 1, "visible_region_id": 1, "room_version": version}})
		return bus.Delivery{Envelope: bus.Envelope{EventID: fmt.Sprint(room, version), AppCode: "a1", RoomID: room,
			RoomVersion: version, EventType: "RoomUserJoined", Payload: raw}}
	}
	ctx := context.Background()
	batch := []bus.Delivery{delivery("r1", 2, "v2"), delivery("r1", 4, "v4"), delivery("r2", 1, "x"), delivery("r1", 3, "v3"), delivery("r1", 4, "v4")}
	for i, err := range p.handle(ctx, batch) {
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
	p.handle(ctx, []bus.Delivery{delivery("r1", 3, "v3 late"), delivery("r2", 1, "x again")})
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

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
