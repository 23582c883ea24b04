package loadgen

import (
	"strings"
	"testing"
	"time"

	"voiceroom/authtoken"
)

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{
		{0.5, 500 * time.Millisecond},
		{0.99, 990 * time.Millisecond},
		{0.999, 999 * time.Millisecond},
		{1, 1000 * time.Millisecond},
	} {
		if got := pct(d, tc.q); got != tc.want {
			t.Errorf("pct(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := pct(nil, 0.99); got != 0 {
		t.Errorf("pct of nothing = %v", got)
	}
}

func TestRecorderCountsByCode(t *testing.T) {
	r := newRecorder()
	r.add("join", time.Millisecond, "", false)
	r.add("join", 3*time.Millisecond, "FAILED_PRECONDITION", false)
	r.add("gift", 2*time.Millisecond, "transport", true)
	n, errs, rej, _ := r.window()
	if n != 3 || errs != 1 || rej != 1 {
		t.Fatalf("window = %d ops, %d errors, %d rejected; want 3, 1, 1", n, errs, rej)
	}
	s := r.stats(time.Second, true)
	if s["join"].OK != 1 || s["join"].Errors["FAILED_PRECONDITION"] != 1 || s["all"].Count != 3 || s["all"].Errors["transport"] != 1 {
		t.Fatalf("stats = %+v", s)
	}
	if s["all"].PerSec != 3 {
		t.Errorf("all per sec = %v, want 3", s["all"].PerSec)
	}
}

func TestResyncFollowsRejections(t *testing.T) {
	for _, tc := range []struct {
		msg            string
		room, seat     int
		wantRoom, want int
	}{
		{"not in the room: join it first", 3, 2, -1, -1},
		{"room is closed", 3, -1, -1, -1},
		{"not on a seat: take one first", 3, 2, 3, -1},
		{"already on seat 4: change seats instead", 3, -1, 3, 4},
		{"already on seat 7", 3, 2, 3, 7},
		{"seat 2 is taken", 3, 1, 3, 1},
	} {
		u := &user{room: tc.room, seat: tc.seat}
		resync(u, answer{code: "FAILED_PRECONDITION", message: tc.msg})
		if u.room != tc.wantRoom || u.seat != tc.want {
			t.Errorf("%q: room %d seat %d, want %d %d", tc.msg, u.room, u.seat, tc.wantRoom, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	good := Config{BaseURL: "http://127.0.0.1:8080", OpsURL: "http://127.0.0.1:9090", Keys: map[string]authtoken.Key{
		"bencha": {Secret: []byte("0123456789abcdef")}, "benchb": {ID: "benchb-1", Secret: []byte("0123456789abcdef")}}}.WithDefaults()
	if err := good.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"no url", func(c *Config) { c.BaseURL = "" }, "base url"},
		{"ftp url", func(c *Config) { c.BaseURL = "ftp://x" }, "base url"},
		{"ops url without host", func(c *Config) { c.OpsURL = "http://" }, "ops url"},
		{"ops url not http", func(c *Config) { c.OpsURL = "127.0.0.1:9090" }, "ops url"},
		{"short secret", func(c *Config) {
			c.Keys = map[string]authtoken.Key{"bencha": {Secret: []byte("x")}, "benchb": c.Keys["benchb"]}
		}, "keys"},
		{"an app without a key", func(c *Config) { c.Apps = []string{"bencha", "benchb", "benchc"} }, "keys"},
		{"fewer rooms than apps", func(c *Config) { c.Rooms = 1 }, "rooms"},
		{"too many regions", func(c *Config) { c.Regions = 100 }, "regions"},
		{"no clients", func(c *Config) { c.Clients = -1 }, "clients"},
		{"negative rate", func(c *Config) { c.Rate = -1 }, "rate"},
		{"short duration", func(c *Config) { c.Duration = time.Millisecond }, "duration"},
		{"bad emulator", func(c *Config) { c.EmulatorURL = "::" }, "emulator url"},
		{"outage without webhooks", func(c *Config) { c.WebhooksOutage = time.Second }, "webhooks outage"},
		{"outage past the load", func(c *Config) { c.Webhooks, c.WebhooksOutage = true, time.Hour }, "webhooks outage"},
	} {
		c := good
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: err = %v, want one naming %q", tc.name, err, tc.field)
		}
	}
}

func TestReportTableNamesWhatIsMissing(t *testing.T) {
	r := &Report{Target: "x", Commands: map[string]OpStats{"all": {Count: 10, PerSec: 5}}, ListNA: "no list", IMNA: "no emulator", StreamAckNA: "no nats", WebhooksNA: "no receiver"}
	var b strings.Builder
	r.Table(&b)
	for _, want := range []string{"n/a: no list", "n/a: no emulator", "n/a: no nats", "n/a: no receiver"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestBucketQuantilesFromTwoReadings(t *testing.T) {
	before := map[float64]float64{1: 10, 5: 20, 10: 20}
	after := map[float64]float64{1: 60, 5: 118, 10: 120} // 100 new: 50 ≤1, 48 in (1,5], 2 in (5,10]
	n, q := bucketQuantiles(before, after, 0.5, 0.98, 0.99, 1)
	if n != 100 {
		t.Fatalf("count = %v, want 100", n)
	}
	want := []float64{1, 5, 10, 10}
	for i := range want {
		if q[i] != want[i] {
			t.Errorf("quantile %d bound = %v, want %v", i, q[i], want[i])
		}
	}
	if n, _ := bucketQuantiles(nil, nil, 0.5); n != 0 {
		t.Errorf("no buckets: count %v", n)
	}
}

func TestBucketLabels(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path string
		le   float64
		ok   bool
	}{
		{`path="fast",le="0.0005"}`, "fast", 0.5, true},
		{`le="0.25",path="relay"}`, "relay", 250, true},
		{`path="fast",le="+Inf"}`, "", 0, false},
		{`le="1"}`, "", 0, false},
	} {
		path, le, ok := bucketLabels(tc.in)
		if path != tc.path || le != tc.le || ok != tc.ok {
			t.Errorf("%s: %q %v %v", tc.in, path, le, ok)
		}
	}
}
