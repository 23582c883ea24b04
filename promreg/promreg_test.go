package promreg_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"voiceroom/promreg"
)

func TestRegister(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "x_total", Help: "x"})
	}
	a, err := promreg.Register(reg, newCounter())
	if err != nil {
		t.Fatal(err)
	}
	b, err := promreg.Register(reg, newCounter())
	if err != nil || b != a {
		t.Fatalf("same collector twice: got %v, %v; want the first one shared", b, err)
	}
	r := promreg.On(reg)
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "x_total", Help: "another shape"})
	promreg.Add(r, &g)
	if r.Err() == nil {
		t.Fatal("a gauge under a counter's name: want an error")
	}
	if _, err := promreg.Register(nil, newCounter()); err != nil {
		t.Fatalf("nil registry: %v", err)
	}
}
