package promreg_test

import (
	"context"
	"errors"
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

// TestUp: the gauge says whether the ping answered in time, at each
// scrape.
func TestUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		ping func(context.Context) error
		want float64
	}{
		{"answers", func(context.Context) error { return nil }, 1},
		{"fails", func(context.Context) error { return errors.New("connection refused") }, 0},
		{"hangs", func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			if _, err := promreg.Register(reg, promreg.NewUp("mysql", "MySQL answers.", tc.ping)); err != nil {
				t.Fatal(err)
			}
			fams, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			if len(fams) != 1 || fams[0].GetName() != "voiceroom_mysql_up" || len(fams[0].GetMetric()) != 1 {
				t.Fatalf("gathered %v, want voiceroom_mysql_up alone", fams)
			}
			if got := fams[0].GetMetric()[0].GetGauge().GetValue(); got != tc.want {
				t.Errorf("voiceroom_mysql_up %v, want %v", got, tc.want)
			}
		})
	}
	reg := prometheus.NewRegistry()
	first, err := promreg.Register(reg, promreg.NewUp("redis", "Redis answers.", nil))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := promreg.Register(reg, promreg.NewUp("redis", "Redis answers.", nil)); err != nil || again != first {
		t.Errorf("a second voiceroom_redis_up: %v, %v; want the first one shared", again, err)
	}
}
