package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// TestDashboardsAreGenerated: the committed dashboards are exactly what
// the generator writes (after a change to dashboards.go, run
// `go generate ./deploy/grafana/` and commit the JSON).
func TestDashboardsAreGenerated(t *testing.T) {
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("dashboards", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range committed {
		names = append(names, filepath.Base(path))
	}
	var wantNames []string
	for name := range want {
		wantNames = append(wantNames, name)
	}
	slices.Sort(wantNames)
	if !slices.Equal(names, wantNames) {
		t.Fatalf("dashboards/ holds %v, the generator writes %v: run go generate ./deploy/grafana/", names, wantNames)
	}
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join("dashboards", name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, b) {
			t.Errorf("dashboards/%s differs from what the generator writes: run go generate ./deploy/grafana/", name)
		}
	}
}

// TestDashboardsRead: the SDK reads each file back as a dashboard, every
// panel has a unique id, a title and a description, and every query goes
// to the dashboard's Prometheus variable.
func TestDashboardsRead(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	files, err := render()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("%d dashboards, want overview, event bus, rooms cluster and sinks", len(files))
	}
	for name, b := range files {
		var d dashboard.Dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if d.Templating.List == nil || len(d.Templating.List) != 1 || d.Templating.List[0].Name != "datasource" {
			t.Errorf("%s: variables %+v, want the datasource variable alone", name, d.Templating.List)
		}
		ids := map[uint32]bool{}
		queries := 0
		for _, pr := range d.Panels {
			if pr.RowPanel != nil {
				if ids[pr.RowPanel.Id] {
					t.Errorf("%s: id %d twice", name, pr.RowPanel.Id)
				}
				ids[pr.RowPanel.Id] = true
				continue
			}
			p := pr.Panel
			if p.Id == nil || ids[*p.Id] {
				t.Errorf("%s: panel %v: no id or one used twice", name, p.Title)
				continue
			}
			ids[*p.Id] = true
			if p.Title == nil || *p.Title == "" || p.Description == nil || *p.Description == "" {
				t.Errorf("%s: panel %d has no title or no description", name, *p.Id)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", name, *p.Title)
			}
			for _, tg := range p.Targets {
				pq, ok := tg.(*prometheus.Dataquery)
				if !ok {
					t.Errorf("%s: panel %q: query %T, want a Prometheus query", name, *p.Title, tg)
					continue
				}
				queries++
				if pq.Expr == "" || pq.Datasource == nil || pq.Datasource.Uid == nil || *pq.Datasource.Uid != "${datasource}" {
					t.Errorf("%s: panel %q: query %q on %+v, want one on ${datasource}", name, *p.Title, pq.Expr, pq.Datasource)
				}
			}
		}
		if queries < 10 {
			t.Errorf("%s: %d queries", name, queries)
		}
	}
}

// TestProductDoesNotImportTheSDK: the foundation SDK is in go.mod for this
// generator only; the binary must not link it.
func TestProductDoesNotImportTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped with -short")
	}
	out, err := exec.Command("go", "list", "-deps", "voiceroom/cmd/voiceroom").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps gave %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/grafana/") {
			t.Errorf("cmd/voiceroom imports %s: the dashboards' SDK must stay out of the binary", p)
		}
	}
}
