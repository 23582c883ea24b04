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

// TestREADMELinksOnlyToTheRepository keeps the README usable from a clone:
// every link is a file of the repository or a heading of the README itself.
func TestREADMELinksOnlyToTheRepository(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	anchors := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(readme, -1) {
		// GitHub's anchors: lower case, punctuation dropped, spaces to '-'.
		slug := notSlug.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), "")
		anchors["#"+strings.ReplaceAll(slug, " ", "-")] = true
	}
	links := mdLink.FindAllStringSubmatch(readme, -1)
	if len(links) == 0 {
		t.Fatal("the README has no links: the pattern is wrong")
	}
	for _, m := range links {
		target := m[1]
		switch {
		case strings.HasPrefix(target, "#"):
			if !anchors[target] {
				t.Errorf("README links to %s, which is no heading of it", target)
			}
		case strings.Contains(target, "://") || strings.HasPrefix(target, "/") || strings.Contains(target, ".."):
			t.Errorf("README links to %s, outside the repository", target)
		default:
			path, _, _ := strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join("..", path)); err != nil {
				t.Errorf("README links to %s, which the repository does not have", target)
			}
		}
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
