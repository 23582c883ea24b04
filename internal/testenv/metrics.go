package testenv

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric returns the value of the series name{labels...} in g (labels are
// name, value pairs; the series may have more labels) and whether such a
// series exists. A counter's or gauge's value is returned; a histogram's
// sample count.
func Metric(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) (float64, bool) {
	tb.Helper()
	families, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
						found = true
						break
					}
				}
				if !found {
					continue series
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue(), true
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue(), true
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount()), true
			case m.GetUntyped() != nil:
				return m.GetUntyped().GetValue(), true
			}
		}
	}
	return 0, false
}

// MustMetric is Metric's value, failing the test when the series does not
// exist: where the value a test expects is 0, a missing series (a renamed
// metric, a label never created) would otherwise pass for it.
func MustMetric(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := Metric(tb, g, name, labels...)
	if !ok {
		tb.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// MetricValue is Metric's value, 0 for a missing series.
func MetricValue(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	v, _ := Metric(tb, g, name, labels...)
	return v
}
