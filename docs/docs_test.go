package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

var (
	mdLink    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading = regexp.MustCompile(`(?m)^#{1,6} +(.+)$`)
	notSlug   = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// pages are the README, the CHANGELOG and every page of docs/, as paths relative to this
// directory.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 {
		t.Fatalf("docs/ has %d pages: the pattern is wrong", len(docs))
	}
	return append([]string{filepath.Join("..", "README.md"), filepath.Join("..", "CHANGELOG.md")}, docs...)
}

// anchorsOf returns the GitHub anchors of a page's headings: lower case,
// punctuation dropped, spaces to '-'.
func anchorsOf(page string) map[string]bool {
	anchors := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(page, -1) {
		slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		anchors["#"+strings.ReplaceAll(slug, " ", "-")] = true
	}
	return anchors
}

// TestLinksStayInTheRepository keeps the README and the docs/ pages usable
// from a clone: every link is a file of the repository, or a heading of the
// page itself or of the page it names.
func TestLinksStayInTheRepository(t *testing.T) {
	all := pages(t)
	text := map[string]string{}
	for _, p := range all {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		text[filepath.Clean(p)] = string(raw)
	}
	seen := 0
	for _, p := range all {
		links := mdLink.FindAllStringSubmatch(text[filepath.Clean(p)], -1)
		seen += len(links)
		for _, m := range links {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "/") {
				t.Errorf("%s links to %s, outside the repository", p, target)
				continue
			}
			path, anchor, hasAnchor := strings.Cut(target, "#")
			dest := filepath.Clean(p)
			if path != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(p), path))
				if strings.HasPrefix(dest, filepath.Join("..", "..")) {
					t.Errorf("%s links to %s, outside the repository", p, target)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s links to %s, which the repository does not have", p, target)
					continue
				}
			}
			if !hasAnchor {
				continue
			}
			page, ok := text[dest]
			if !ok {
				continue // a heading of a file that is no page: not checked
			}
			if !anchorsOf(page)["#"+anchor] {
				t.Errorf("%s links to %s, which is no heading of %s", p, target, dest)
			}
		}
	}
	if seen < 20 {
		t.Errorf("found %d links in all the pages: the pattern is wrong", seen)
	}
}

// TestREADMEIsAFrontDoor keeps the README short: what, run, test, demo, a
// tour; the rest belongs on a page of docs/.
func TestREADMEIsAFrontDoor(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n > 400 {
		t.Errorf("README.md is %d lines, more than 400: move the detail to a page of docs/", n)
	}
	if !strings.HasPrefix(string(raw), "# voiceroom\n") || !strings.Contains(string(raw), "```sh\ngo tool -modfile=tools.mod task run\ngo tool -modfile=tools.mod task test\n```") {
		t.Error("README.md no longer starts with its two commands (run, test)")
	}
}

// TestOpenAPIIsValid checks the document against the OpenAPI 3 rules (no
// server needed; cmd/voiceroom's TestOpenAPIMatchesServer checks it against
// the server).
func TestOpenAPIIsValid(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(t.Context()); err != nil {
		t.Fatal(err)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.OperationID == "" || op.Summary == "" {
				t.Errorf("%s %s has no operationId or summary", method, path)
			}
			if op.Responses.Status(200) == nil {
				t.Errorf("%s %s documents no 200 answer", method, path)
			}
		}
	}
}

// TestOpenAPIIsEmbedded guards the embedding: the served document is the
// repository's file.
func TestOpenAPIIsEmbedded(t *testing.T) {
	raw, err := os.ReadFile("openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != string(OpenAPI) || !strings.HasPrefix(string(OpenAPI), "openapi: 3.") {
		t.Fatal("docs.OpenAPI is not docs/openapi.yaml")
	}
}

// TestArchitectureNamesEveryPackage: the package table of
// architecture.md has a row for every Go package of the repository, so a
// new package is placed on the map when it is added.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules" || n == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir, _ := filepath.Rel("..", filepath.Dir(path))
		if dir == "." {
			dir = "voiceroom"
		}
		if seen[dir] {
			return nil
		}
		seen[dir] = true
		if row := "| `" + filepath.ToSlash(dir) + "`"; !strings.Contains(string(doc), row) {
			t.Errorf("architecture.md's package table has no row for %s", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 30 {
		t.Fatalf("found %d packages: the walk is wrong", len(seen))
	}
}
