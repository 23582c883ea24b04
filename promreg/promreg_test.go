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

// TestSub: a subsystem's metrics are named voiceroom_<subsystem>_<name>
// with their help and labels, a second constructor on the registry shares
// the first's collectors, and after a conflict the rest are still made
// (unregistered) and Err reports the conflict.
func TestSub(t *testing.T) {
	reg := prometheus.NewRegistry()
	build := func() (*promreg.Registry, prometheus.Counter, *prometheus.GaugeVec, prometheus.Histogram) {
		r := promreg.On(reg)
		s := r.Sub("outbox")
		return r, s.Counter("sent_total", "Sent."), s.GaugeVec("lag_seconds", "Lag, by path.", "path"),
			s.Histogram("latency_seconds", "Latency.", []float64{.1, 1})
	}
	r1, c1, g1, h1 := build()
	r2, c2, g2, h2 := build()
	if r1.Err() != nil || r2.Err() != nil {
		t.Fatalf("errors: %v, %v", r1.Err(), r2.Err())
	}
	if c1 != c2 || g1 != g2 || h1 != h2 {
		t.Fatal("a second constructor made new collectors; want the first ones shared")
	}
	c1.Inc()
	g1.WithLabelValues("fast").Set(2)
	h1.Observe(0.5)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fams {
		got[f.GetName()] = f.GetHelp()
	}
	want := map[string]string{"voiceroom_outbox_sent_total": "Sent.", "voiceroom_outbox_lag_seconds": "Lag, by path.",
		"voiceroom_outbox_latency_seconds": "Latency."}
	if len(got) != len(want) {
		t.Fatalf("gathered %v, want %v", got, want)
	}
	for name, help := range want {
		if got[name] != help {
			t.Errorf("%s: help %q, want %q", name, got[name], help)
		}
	}

	r := promreg.On(reg)
	s := r.Sub("outbox")
	g := s.Gauge("sent_total", "A gauge under a counter's name.")
	after := s.Counter("other_total", "Made after the conflict.")
	if r.Err() == nil {
		t.Fatal("a gauge under a counter's name: want an error")
	}
	if g == nil || after == nil {
		t.Fatal("collectors after a conflict must still be made")
	}
	if n, _ := reg.Gather(); len(n) != 3 {
		t.Errorf("%d families after the conflict: the one made after it was registered", len(n))
	}
}

// TestSubKinds: each of Sub's makers gives a series of its kind.
func TestSubKinds(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := promreg.On(reg)
	s := r.Sub("x")
	s.Counter("c_total", "c").Inc()
	s.CounterVec("cv_total", "cv", "l").WithLabelValues("a").Inc()
	s.CounterFunc("cf_total", "cf", func() float64 { return 1 })
	s.Gauge("g", "g").Set(1)
	s.GaugeVec("gv", "gv", "l").WithLabelValues("a").Set(1)
	s.GaugeFunc("gf", "gf", func() float64 { return 1 })
	s.Histogram("h_seconds", "h", nil).Observe(1)
	s.HistogramVec("hv_seconds", "hv", []float64{1}, "l").WithLabelValues("a").Observe(1)
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range fams {
		got[f.GetName()] = f.GetType().String()
	}
	want := map[string]string{"voiceroom_x_c_total": "COUNTER", "voiceroom_x_cv_total": "COUNTER", "voiceroom_x_cf_total": "COUNTER",
		"voiceroom_x_g": "GAUGE", "voiceroom_x_gv": "GAUGE", "voiceroom_x_gf": "GAUGE",
		"voiceroom_x_h_seconds": "HISTOGRAM", "voiceroom_x_hv_seconds": "HISTOGRAM"}
	if len(got) != len(want) {
		t.Fatalf("gathered %v, want %v", got, want)
	}
	for n, k := range want {
		if got[n] != k {
			t.Errorf("%s: %s, want %s", n, got[n], k)
		}
	}
}
