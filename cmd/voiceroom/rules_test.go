package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/oasdiff/yaml"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// The Prometheus rule files and Grafana dashboards of deploy/, and the
// alert table of docs/operating.md generated from the alerts.
const (
	alertsFile     = "../../deploy/prometheus/alerts.yml"
	recordingFile  = "../../deploy/prometheus/recording.yml"
	alertTestsFile = "../../deploy/prometheus/alerts_test.yml"
	dashboardsDir  = "../../deploy/grafana/dashboards"
	operatingDoc   = "../../docs/operating.md"
)

// ruleFile is a Prometheus rule file (the fields voiceroom's use).
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

func mustRules(tb testing.TB, path string) []rule {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) < 10 {
		tb.Fatalf("%s: %d rules", path, len(rules))
	}
	return rules
}

// Markers around the generated alert table in docs/operating.md.
const (
	tableBegin = "<!-- alerts:begin: generated from deploy/prometheus/alerts.yml; VOICEROOM_UPDATE_DOCS=1 go test -run TestAlertTableIsTheRules ./cmd/voiceroom/ rewrites it -->\n"
	tableEnd   = "<!-- alerts:end -->\n"
)

// alertsTable renders the alerts as the operating guide's table: each
// alert linked to its runbook section, its severity, its expression and
// for, and its description.
func alertsTable(alerts []rule) string {
	var b strings.Builder
	b.WriteString("| alert | severity | fires when | what it means, where to look |\n| --- | --- | --- | --- |\n")
	cell := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, a := range alerts {
		_, anchor, _ := strings.Cut(a.Annotations["runbook_url"], "#")
		expr := strings.Join(strings.Fields(a.Expr), " ")
		fmt.Fprintf(&b, "| [%s](#%s) | %s | `%s` for %s | %s |\n",
			a.Alert, anchor, a.Labels["severity"], cell.Replace(expr), a.For, cell.Replace(a.Annotations["description"]))
	}
	return b.String()
}

// TestAlertTableIsTheRules: the alert table of docs/operating.md is the
// one alertsTable makes of deploy/prometheus/alerts.yml (set
// VOICEROOM_UPDATE_DOCS=1 to rewrite it); every alert has a for, a
// severity, a summary, a description and a runbook that is a section of
// the operating guide; and alerts_test.yml has, for each alert, a case
// where it fires and one where it stays quiet.
func TestAlertTableIsTheRules(t *testing.T) {
	var alerts []rule
	for _, r := range mustRules(t, alertsFile) {
		if r.Alert == "" {
			t.Errorf("alerts.yml: rule %q is no alert (recording rules go to recording.yml)", r.Record)
			continue
		}
		alerts = append(alerts, r)
	}
	raw, err := os.ReadFile(operatingDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	anchors := headingAnchors(doc)
	names := map[string]bool{}
	for _, a := range alerts {
		if names[a.Alert] {
			t.Errorf("alert %s twice", a.Alert)
		}
		names[a.Alert] = true
		if a.For == "" {
			t.Errorf("%s: no for", a.Alert)
		}
		if s := a.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", a.Alert, s)
		}
		if a.Annotations["summary"] == "" || a.Annotations["description"] == "" {
			t.Errorf("%s: no summary or no description", a.Alert)
		}
		page, anchor, _ := strings.Cut(a.Annotations["runbook_url"], "#")
		if page != "docs/operating.md" || !anchors[anchor] {
			t.Errorf("%s: runbook_url %q is no section of docs/operating.md", a.Alert, a.Annotations["runbook_url"])
		}
	}

	_, rest, ok1 := strings.Cut(doc, tableBegin)
	table, _, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 {
		t.Fatalf("docs/operating.md has no alert table between\n%s and\n%s", tableBegin, tableEnd)
	}
	if want := alertsTable(alerts); table != want {
		if os.Getenv("VOICEROOM_UPDATE_DOCS") == "1" {
			doc = strings.Replace(doc, tableBegin+table+tableEnd, tableBegin+want+tableEnd, 1)
			if err := os.WriteFile(operatingDoc, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Log("rewrote the alert table of docs/operating.md")
		} else {
			t.Errorf("the alert table of docs/operating.md is not alerts.yml's: run VOICEROOM_UPDATE_DOCS=1 go test -run TestAlertTableIsTheRules ./cmd/voiceroom/\nwant:\n%s", want)
		}
	}

	fires, quiet := alertCases(t)
	for name := range names {
		if !fires[name] || !quiet[name] {
			t.Errorf("alerts_test.yml: %s fires in a case: %v, stays quiet in one: %v; want both", name, fires[name], quiet[name])
		}
	}
	for name := range fires {
		if !names[name] {
			t.Errorf("alerts_test.yml tests %s, which alerts.yml lacks", name)
		}
	}
}

// alertCases reads alerts_test.yml: the alerts some case expects firing,
// and those some case expects quiet.
func alertCases(tb testing.TB) (fires, quiet map[string]bool) {
	tb.Helper()
	raw, err := os.ReadFile(alertTestsFile)
	if err != nil {
		tb.Fatal(err)
	}
	var f struct {
		Tests []struct {
			AlertRuleTest []struct {
				AlertName string            `json:"alertname"`
				ExpAlerts []json.RawMessage `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil {
		tb.Fatalf("alerts_test.yml: %v", err)
	}
	fires, quiet = map[string]bool{}, map[string]bool{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	return fires, quiet
}

var (
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)
	notSlug   = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// headingAnchors are a page's GitHub anchors (as docs' link test makes them).
func headingAnchors(page string) map[string]bool {
	anchors := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(page, -1) {
		slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		anchors[strings.ReplaceAll(slug, " ", "-")] = true
	}
	return anchors
}

// dashboardQueries returns every query ("expr") of the committed Grafana
// dashboards, by dashboard file.
func dashboardQueries(tb testing.TB) map[string][]string {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(dashboardsDir, "*.json"))
	if err != nil || len(files) < 4 {
		tb.Fatalf("dashboards: %v %v", files, err)
	}
	out := map[string][]string{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				out[filepath.Base(path)] = append(out[filepath.Base(path)], tg.Expr)
			}
		}
	}
	return out
}

// selector is a series an expression reads: its name and label matchers.
type selector struct {
	name     string
	matchers []*labels.Matcher
}

// selectors parses a PromQL expression with Prometheus's own parser (a
// dashboard's $__rate_interval read as 5m, as Grafana substitutes it)
// and returns the series it reads.
func selectors(expr string) ([]selector, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(strings.ReplaceAll(expr, "$__rate_interval", "5m"))
	if err != nil {
		return nil, err
	}
	var out []selector
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			var ms []*labels.Matcher
			for _, m := range vs.LabelMatchers {
				if m.Name != labels.MetricName {
					ms = append(ms, m)
				}
			}
			out = append(out, selector{name: vs.Name, matchers: ms})
		}
		return nil
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("reads no series")
	}
	return out, nil
}

// scrapeWithTraffic runs serve, sends it a few room commands (so that the
// series created at first use exist too, such as the commands' latency by
// kind) and returns what its operators' listener exports.
func scrapeWithTraffic(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	p, vars := startServe(t)
	base := p.waitServing(t, vars)
	waitReady(t, p, base)
	c := &client{t: t, base: base, secret: []byte(vars["VOICEROOM_JWT_SECRET"])}
	var region struct {
		RegionID int64 `json:"region_id"`
	}
	c.ok("POST", "/admin/v1/regions", "admin", `{"region_code":"SEA","name":"South-East Asia"}`, &region)
	c.ok("POST", "/admin/v1/countries", "admin", fmt.Sprintf(`{"country_code":"SG","name":"Singapore","region_id":%d}`, region.RegionID), nil)
	c.ok("PUT", "/api/v1/users/me", "11", `{"display_user_id":"user11","country":"SG"}`, nil)
	var room roomView
	c.ok("POST", "/api/v1/rooms/create", "11", `{"room_name":"Metrics"}`, &room)
	c.ok("POST", "/api/v1/rooms/"+room.RoomID+"/join", "11", ``, nil)
	c.ok("GET", "/api/v1/rooms", "11", ``, nil)
	return scrapeOps(t, vars)
}

// TestRulesAndDashboardsMatchServer: every series the Prometheus rules and
// the Grafana dashboards read exists on a running serve with the labels
// (and label values, for an equality) they match on, every recorded
// series a dashboard reads is recorded by recording.yml (and every
// recording rule is read by some dashboard), and every query parses. So a
// renamed metric breaks the build, not the pager. The series the operating
// guide's alert section names in its text are checked too.
func TestRulesAndDashboardsMatchServer(t *testing.T) {
	fams := scrapeWithTraffic(t)

	recorded := map[string]bool{}
	read := map[string]bool{}
	exprs := map[string][]string{} // where → expressions
	for _, r := range mustRules(t, recordingFile) {
		if r.Record == "" || !strings.HasPrefix(r.Record, "voiceroom:") {
			t.Errorf("recording.yml: rule %q: want a record named voiceroom:…", r.Record)
		}
		recorded[r.Record] = true
		exprs["recording.yml "+r.Record] = []string{r.Expr}
	}
	for _, r := range mustRules(t, alertsFile) {
		exprs["alerts.yml "+r.Alert] = []string{r.Expr}
	}
	for file, qs := range dashboardQueries(t) {
		exprs[file] = qs
	}
	checked := 0
	for where, list := range exprs {
		for _, expr := range list {
			sels, err := selectors(expr)
			if err != nil {
				t.Errorf("%s: %q: %v", where, expr, err)
				continue
			}
			for _, s := range sels {
				checked++
				if strings.Contains(s.name, ":") {
					read[s.name] = true
					if !recorded[s.name] || !strings.HasPrefix(where, "voiceroom-") {
						t.Errorf("%s reads %s: want a series recording.yml records, read by dashboards only", where, s.name)
					}
					continue
				}
				checkSelector(t, fams, where, s)
			}
		}
	}
	for name := range recorded {
		if !read[name] {
			t.Errorf("recording.yml records %s, which no dashboard reads", name)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d series: are the files read?", checked)
	}

	t.Run("operating guide", func(t *testing.T) { checkAlertSectionNames(t, fams) })
}

// checkSelector checks one series an expression reads against the
// server's families: the name (a histogram's _bucket, _sum or _count
// included), each label matched on, and the value of each equality.
func checkSelector(t *testing.T, fams map[string]*dto.MetricFamily, where string, s selector) {
	t.Helper()
	f, ok := fams[s.name]
	histogram := false
	if !ok {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, cut := strings.CutSuffix(s.name, suffix); cut {
				if f, ok = fams[base]; ok && f.GetType() == dto.MetricType_HISTOGRAM {
					histogram = suffix == "_bucket"
					break
				}
				ok = false
			}
		}
	}
	if !ok {
		t.Errorf("%s reads %s: serve has no such series", where, s.name)
		return
	}
	for _, m := range s.matchers {
		if m.Name == "instance" || m.Name == "job" || (histogram && m.Name == "le") {
			continue // Prometheus's target labels, and the buckets' bound
		}
		withValue := m.Type == labels.MatchEqual && m.Value != ""
		if !hasLabel(f, m.Name, m.Value, withValue) {
			t.Errorf("%s reads %s{%s}: serve's %s has %v", where, s.name, m, s.name, labelsOf(f))
		}
	}
}
