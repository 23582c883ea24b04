package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docsBlock is a shell block of a docs page marked for a test:
// "<!-- docs-test: NAME -->" on the line above its ```sh fence.
var docsBlock = regexp.MustCompile("(?s)<!-- docs-test: ([a-z0-9-]+) -->\n```sh\n(.*?)\n```")

// statusLine is the status a walk-through's curl prints at a line's end.
var statusLine = regexp.MustCompile(`(?m) (\d{3})$`)

// TestAuthDocBlocks runs docs/auth.md's walk-throughs against a serve of
// the test's own with per-app keys only (no single secret), from the
// repository root, with the serve's database, sealing key and platform
// key: every answer is the one its comment promises.
func TestAuthDocBlocks(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "auth.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range docsBlock.FindAllStringSubmatch(string(page), -1) {
		blocks[m[1]] = m[2]
	}
	if len(blocks) != 2 || blocks["auth-platform"] == "" || blocks["auth-cli"] == "" {
		t.Fatalf("docs/auth.md marks blocks %v, want auth-platform and auth-cli", slices.Collect(maps.Keys(blocks)))
	}
	base, vars := startKeyedServe(t)
	bin, err := buildBinary()
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "VOICEROOM_JWT_SECRET=")
	for _, k := range []string{"VOICEROOM_DATA_DIR", "VOICEROOM_MYSQL_DSN", "VOICEROOM_APPS_SECRET_KEY", "VOICEROOM_PLATFORM_KEYS"} {
		env = append(env, k+"="+vars[k])
	}
	run := func(name string) string {
		t.Helper()
		out, err := runBlock(root, env, blockScript(blocks[name], base, bin))
		if err != nil {
			t.Fatalf("docs/auth.md block %q: %v\n%s", name, err, out)
		}
		t.Logf("docs/auth.md block %q:\n%s", name, out)
		return out
	}

	out := run("auth-platform")
	var got []string
	for _, m := range statusLine.FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	if want := []string{"200", "200", "403", "200", "200", "200", "401", "200", "200"}; !slices.Equal(got, want) {
		t.Errorf("auth-platform answered %v, want %v", got, want)
	}
	if !strings.Contains(out, `"new_key":{"key_id":"shop`) || !strings.Contains(out, `"status":"retiring"`) || !strings.Contains(out, `"message":"invalid token"`) {
		t.Errorf("auth-platform: no new key, retiring key or refusal shown")
	}

	out = run("auth-cli")
	for _, want := range []string{`"new_key": {`, `"status": "retiring"`, `"status": "disabled"`, `"status": "active"`, `"apps": [`} {
		if !strings.Contains(out, want) {
			t.Errorf("auth-cli lacks %q", want)
		}
	}
	if !regexp.MustCompile(`(?m)^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$`).MatchString(out) {
		t.Errorf("auth-cli printed no token")
	}
}

// blockScript is a docs or README block made to run against the test's
// serve (base) and binary (bin) in place of localhost:8080 and
// ./bin/voiceroom.
func blockScript(script, base, bin string) string {
	script = strings.ReplaceAll(script, "localhost:8080", strings.TrimPrefix(base, "http://"))
	return strings.ReplaceAll(script, "./bin/voiceroom", bin)
}
