package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	changelogVersion = regexp.MustCompile(`(?m)^## \[(Unreleased|(\d+)\.(\d+)\.(\d+))\]( - (\d{4}-\d\d-\d\d))?$`)
	migrationFile    = regexp.MustCompile(`^(\d{5})_.*\.sql$`)
)

// TestChangelogHasUpgradeNotes: CHANGELOG.md lists its versions newest
// first, each with its upgrade notes, and names every migration of
// deploy/migrations in the notes of some version (a migration landing
// without a note fails here).
func TestChangelogHasUpgradeNotes(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	heads := changelogVersion.FindAllStringSubmatchIndex(text, -1)
	if len(heads) < 2 {
		t.Fatalf("CHANGELOG.md has %d version headings (## [x.y.z] - date): the pattern is wrong", len(heads))
	}
	var notes strings.Builder
	var prev []int // the previous heading's major, minor, patch
	prevDate := ""
	for i, h := range heads {
		end := len(text)
		if i+1 < len(heads) {
			end = heads[i+1][0]
		}
		name := text[h[2]:h[3]]
		section := text[h[1]:end]
		if next := strings.Index(section, "\n## "); next >= 0 {
			section = section[:next] // a heading that is no version ends it
		}
		_, after, ok := strings.Cut(section, "\n### Upgrade notes\n")
		if !ok {
			t.Errorf("[%s] has no ### Upgrade notes", name)
		}
		notes.WriteString(after)
		if name == "Unreleased" {
			if i != 0 {
				t.Errorf("[Unreleased] is not the first version")
			}
			continue
		}
		v := make([]int, 3)
		for k := range v {
			v[k], _ = strconv.Atoi(text[h[4+2*k]:h[5+2*k]])
		}
		date := ""
		if h[12] >= 0 {
			date = text[h[12]:h[13]]
		} else {
			t.Errorf("[%s] has no date", name)
		}
		if prev != nil && !(v[0] < prev[0] || v[0] == prev[0] && (v[1] < prev[1] || v[1] == prev[1] && v[2] < prev[2])) {
			t.Errorf("[%s] follows a version no newer than itself: newest first", name)
		}
		if prevDate != "" && date > prevDate {
			t.Errorf("[%s] of %s follows a version of %s: newest first", name, date, prevDate)
		}
		prev, prevDate = v, date
	}

	entries, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		n++
		if !strings.Contains(notes.String(), "**"+m[1]+"**") {
			t.Errorf("migration %s: no version's upgrade notes name it (**%s**)", e.Name(), m[1])
		}
	}
	if n == 0 {
		t.Fatal("no migrations found")
	}
}
