package rooms

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/internal/testenv"
)

// TestAlertSeriesExistAtZero: every command kind's success and server
// failure series, and every load outcome, exist at 0 before the first
// command, so that alerts on their rates read 0, not nothing.
func TestAlertSeriesExistAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := newMetrics(reg, func() float64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	for _, k := range allKinds {
		for _, outcome := range []string{"OK", "UNAVAILABLE", "INTERNAL"} {
			if v, ok := testenv.Metric(t, reg, "voiceroom_rooms_commands_total", "kind", string(k), "outcome", outcome); !ok || v != 0 {
				t.Errorf("voiceroom_rooms_commands_total{kind=%s,outcome=%s}: %v, exists %v; want 0 from the start", k, outcome, v, ok)
			}
		}
	}
	if v, ok := testenv.Metric(t, reg, "voiceroom_rooms_commits_in_doubt_total"); !ok || v != 0 {
		t.Errorf("voiceroom_rooms_commits_in_doubt_total: %v, exists %v; want 0 from the start", v, ok)
	}
	for _, outcome := range []string{"ok", "error", "corrupt"} {
		if _, ok := testenv.Metric(t, reg, "voiceroom_rooms_loads_total", "outcome", outcome); !ok {
			t.Errorf("voiceroom_rooms_loads_total{outcome=%s} missing at start", outcome)
		}
	}
}
