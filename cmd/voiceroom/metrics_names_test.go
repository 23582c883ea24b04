package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"voiceroom/internal/testenv"
)

// scrapeFamilies runs serve (every role) and returns the families its
// operators' listener exports.
func scrapeFamilies(t *testing.T, extraEnv ...string) map[string]*dto.MetricFamily {
	t.Helper()
	p, vars := startServe(t, extraEnv...)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	return scrapeOps(t, vars)
}

// scrapeOps returns the families the operators' listener of a running
// serve exports.
func scrapeOps(t *testing.T, vars map[string]string) map[string]*dto.MetricFamily {
	t.Helper()
	status, _, body := testenv.Fetch(t, "GET", opsURL(vars)+"/metrics")
	if status != 200 {
		t.Fatalf("ops /metrics: %d %.300s", status, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestSeriesNames holds every series serve exports to the naming rule
// (promreg.Namespace): voiceroom_<subsystem>_<name>, base units, _total
// on counters and on nothing else. The Go runtime's and the process's
// standard collectors (go_, process_, promhttp_) keep their own names.
func TestSeriesNames(t *testing.T) {
	fams := scrapeFamilies(t)
	unit := regexp.MustCompile(`_(ms|milliseconds|us|microseconds|minutes|hours|kb|mb|kilobytes|megabytes)(_|$)`)
	n := 0
	for name, f := range fams {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		n++
		if !strings.HasPrefix(name, "voiceroom_") || strings.Count(name, "_") < 2 {
			t.Errorf("%s: not voiceroom_<subsystem>_<name>", name)
		}
		if unit.MatchString(name) {
			t.Errorf("%s: not in base units (seconds, bytes)", name)
		}
		counter := f.GetType() == dto.MetricType_COUNTER
		if total := strings.HasSuffix(name, "_total"); counter != total {
			t.Errorf("%s: a %s; _total is for counters and only counters", name, f.GetType())
		}
	}
	if n < 40 {
		t.Fatalf("only %d voiceroom series: is every role's metrics registered?", n)
	}
}

// alertTable returns the operating guide's section "Metrics and when to
// alert" (docs/operating.md): the alert table, the runbooks and the
// dashboards' list.
func alertTable(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	_, s, ok := strings.Cut(string(raw), "\n## Metrics and when to alert\n")
	if !ok {
		t.Fatal(`docs/operating.md has no "## Metrics and when to alert"`)
	}
	s, _, _ = strings.Cut(s, "\n## ")
	return s
}

// checkAlertSectionNames: every series the operating guide's "Metrics and
// when to alert" names in backquotes (its runbooks, the dashboard list)
// exists on the running serve, with every label it names, and every label
// value it names (alerted series are created at 0, so a fresh server has
// them). The alert table's expressions are checked with the rules they
// come from (TestRulesAndDashboardsMatchServer).
func checkAlertSectionNames(t *testing.T, fams map[string]*dto.MetricFamily) {
	ref := regexp.MustCompile("`(voiceroom_[a-z_]+\\*?)(\\{[^}`]*\\})?`")
	refs := ref.FindAllStringSubmatch(alertTable(t), -1)
	if len(refs) < 20 {
		t.Fatalf("found %d series in the alert section", len(refs))
	}
	for _, m := range refs {
		name, labels := m[1], strings.Trim(m[2], "{}")
		if prefix, glob := strings.CutSuffix(name, "*"); glob {
			if !anyPrefix(fams, prefix) {
				t.Errorf("docs/operating.md names %s: no series starts so", name)
			}
			continue
		}
		f, ok := fams[name]
		if !ok {
			t.Errorf("docs/operating.md names %s: serve has no such series", name)
			continue
		}
		if labels == "" {
			continue
		}
		for _, l := range strings.Split(labels, ",") {
			key, value, withValue := strings.Cut(strings.TrimSpace(l), "=")
			value = strings.Trim(value, `"`)
			if !hasLabel(f, key, value, withValue) {
				t.Errorf("docs/operating.md names %s{%s}: serve's %s has %v", name, l, name, labelsOf(f))
			}
		}
	}
}

// TestDependencySeries: voiceroom_{mysql,nats,redis}_up say whether each
// answers at the scrape (here Redis is a closed port), and
// voiceroom_cluster_partitions is the configured P.
func TestDependencySeries(t *testing.T) {
	fams := scrapeFamilies(t, "VOICEROOM_REDIS_ADDR="+testenv.ClosedAddr(t), "VOICEROOM_ROOMS_PARTITIONS=64")
	for name, want := range map[string]float64{
		"voiceroom_mysql_up": 1, "voiceroom_nats_up": 1, "voiceroom_redis_up": 0, "voiceroom_cluster_partitions": 64,
	} {
		f, ok := fams[name]
		if !ok || len(f.GetMetric()) != 1 {
			t.Errorf("%s: %v, want one series", name, f)
			continue
		}
		if got := f.GetMetric()[0].GetGauge().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

func anyPrefix(fams map[string]*dto.MetricFamily, prefix string) bool {
	for name := range fams {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// hasLabel reports whether a sample of f has label key (with value, when
// withValue).
func hasLabel(f *dto.MetricFamily, key, value string, withValue bool) bool {
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == key && (!withValue || lp.GetValue() == value) {
				return true
			}
		}
	}
	return false
}

// labelsOf lists f's label names and values, for a failure message.
func labelsOf(f *dto.MetricFamily) []string {
	seen := map[string]bool{}
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			seen[lp.GetName()+"="+lp.GetValue()] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) > 12 {
		out = append(out[:12], "...")
	}
	return out
}
