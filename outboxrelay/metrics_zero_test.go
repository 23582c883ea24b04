package outboxrelay

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Alerts on rate(...) need their labelled series before the first event.
func TestLabelledSeriesExistAtZero(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"voiceroom_outbox_publish_failure_total":      {pathFast, pathRelay},
		"voiceroom_outbox_fastpath_handed_over_total": handOverReasons,
		"voiceroom_outbox_db_failure_total":           dbOps,
	}
	for _, f := range families {
		values, ok := want[f.GetName()]
		if !ok {
			continue
		}
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			if m.GetCounter().GetValue() != 0 {
				t.Errorf("%s starts at %v", f.GetName(), m.GetCounter().GetValue())
			}
			seen[m.GetLabel()[0].GetValue()] = true
		}
		for _, v := range values {
			if !seen[v] {
				t.Errorf("%s{%s} missing at start", f.GetName(), v)
			}
		}
		delete(want, f.GetName())
	}
	for name := range want {
		t.Errorf("%s not exported at start", name)
	}
}
