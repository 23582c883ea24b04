package gateway

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/authtoken"
	"voiceroom/internal/testenv"
	"voiceroom/outboxrelay"
)

func TestAdminOutboxIsScopedToTheTokensApp(t *testing.T) {
	db := testenv.NewDB(t)
	testenv.InsertOutbox(t, db, testenv.RoomEnvelopes("appA", "room1", 1, 3)...)
	testenv.InsertOutbox(t, db, testenv.RoomEnvelopes("appB", "room2", 1, 5)...)
	testenv.InsertOutboxRaw(t, db, "appA", "ev-broken", "room1", 4, "seat_changed", []byte("{"))
	testenv.InsertOutboxRaw(t, db, "appB", "ev-broken-b", "room2", 6, "seat_changed", []byte("{"))
	if _, err := db.Exec(`UPDATE room_outbox SET retry_count = 3, last_error = 'undecodable envelope: bad' WHERE event_id LIKE 'ev-broken%'`); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	s, err := New(Config{Addr: "127.0.0.1:0", JWTSecret: testSecret}, slog.New(slog.DiscardHandler), reg, reg, nil,
		OutboxRoutes(outboxrelay.NewInspector(db, nil)))
	if err != nil {
		t.Fatal(err)
	}

	status, env, _ := do(t, s, "GET", "/admin/v1/outbox", mustToken(t, "appA", 0, authtoken.RoleAdmin, time.Hour), "")
	if status != http.StatusOK {
		t.Fatalf("status %d: %+v", status, env)
	}
	raw, err := json.Marshal(env.Data)
	if err != nil {
		t.Fatal(err)
	}
	var report outboxrelay.Report
	if err := json.Unmarshal(raw, &report); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", raw)
	if report.AppCode != "appA" || report.PendingCount != 4 || len(report.Undecodable) != 1 || report.Undecodable[0].EventID != "ev-broken" ||
		len(report.TopRetries) != 1 || report.TopRetries[0].RetryCount != 3 {
		t.Fatalf("report %+v", report)
	}

	if status, _, _ := do(t, s, "GET", "/admin/v1/outbox", mustToken(t, "appA", 7, "", time.Hour), ""); status != http.StatusForbidden {
		t.Fatalf("a user token got %d", status)
	}
	if status, _, _ := do(t, s, "GET", "/admin/v1/outbox", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("no token got %d", status)
	}
}
