// Command grafana writes voiceroom's Grafana dashboards, built with
// Grafana's foundation SDK, as JSON files into a directory:
//
//	go generate ./deploy/grafana/    # rewrites deploy/grafana/dashboards/*.json
//
// Each panel's query is code (dashboards.go). The dashboards read the
// recorded rates of deploy/prometheus/recording.yml (voiceroom:…) and
// voiceroom's own gauges, from a Prometheus data source chosen by the
// dashboard's "datasource" variable. The product binary never imports this
// package. TestDashboardsAreGenerated fails when the committed files
// differ from what this writes; cmd/voiceroom's
// TestRulesAndDashboardsMatchServer checks every metric a query names
// against a running serve.
package main

//go:generate go run . -out dashboards

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", "dashboards", "directory to write the dashboards' JSON files into")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "grafana:", err)
		os.Exit(1)
	}
}

// write writes every dashboard to dir as <uid>.json.
func write(dir string) error {
	files, err := render()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// render returns each dashboard's file name and JSON.
func render() (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, d := range dashboards() {
		built, err := d.Build()
		if err != nil {
			return nil, fmt.Errorf("build dashboard: %w", err)
		}
		b, err := json.MarshalIndent(built, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode dashboard %s: %w", *built.Uid, err)
		}
		files[*built.Uid+".json"] = append(b, '\n')
	}
	return files, nil
}
