package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionOf: the version comes from -X main.version, else the module's
// version; "dev" only when there is neither; the revision follows when the
// build recorded one.
func TestVersionOf(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "73f2698d651912a4226fc5d9f4c41e05b9cd228c"},
		{Key: "vcs.time", Value: "2026-12-04T11:07:47Z"}, {Key: "vcs.modified", Value: "false"}}
	modified := append(vcs[:3:3], debug.BuildSetting{Key: "vcs.modified", Value: "true"})
	info := func(version string, settings []debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "voiceroom", Version: version}, Settings: settings}
	}
	for _, tc := range []struct {
		name, stamped string
		info          *debug.BuildInfo
		want          string
	}{
		{"no build info", "", nil, "voiceroom dev"},
		{"devel, no VCS", "", info("(devel)", nil), "voiceroom dev"},
		{"go install of a tag", "", info("v1.4.0", nil), "voiceroom v1.4.0"},
		{"a checkout", "", info("v0.0.0-20261204110747-73f2698d6519", vcs),
			"voiceroom v0.0.0-20261204110747-73f2698d6519 (revision 73f2698d651912a4226fc5d9f4c41e05b9cd228c, 2026-12-04T11:07:47Z)"},
		{"a modified checkout", "", info("v0.0.0-20261204110747-73f2698d6519+dirty", modified),
			"voiceroom v0.0.0-20261204110747-73f2698d6519+dirty (revision 73f2698d651912a4226fc5d9f4c41e05b9cd228c, 2026-12-04T11:07:47Z, modified)"},
		{"devel with a revision", "", info("(devel)", vcs),
			"voiceroom dev (revision 73f2698d651912a4226fc5d9f4c41e05b9cd228c, 2026-12-04T11:07:47Z)"},
		{"stamped wins", "v1.5.0", info("v0.0.0-20261204110747-73f2698d6519", vcs),
			"voiceroom v1.5.0 (revision 73f2698d651912a4226fc5d9f4c41e05b9cd228c, 2026-12-04T11:07:47Z)"},
		{"stamped, no build info", "v1.5.0", nil, "voiceroom v1.5.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionOf(tc.stamped, tc.info).String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestVersionOfABuild builds the binary twice and runs `voiceroom version`:
// from a git checkout of the working tree (a commit of the test's own) it
// prints Go's pseudo-version for that commit and the commit's revision;
// without VCS information it prints dev.
func TestVersionOfABuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary twice; skipped with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The files git would commit from the working tree, in a repository of
	// the test's own (a worktree's .git is a file Go does not read).
	files, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		} else if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com"}, args...)...)
		cmd.Dir = src
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "version test")
	rev := git("rev-parse", "HEAD")

	versionOfBuild := func(flags ...string) string {
		t.Helper()
		bin := filepath.Join(t.TempDir(), "voiceroom")
		build := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, "./cmd/voiceroom")...)
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %v: %v\n%s", flags, err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("version: %v", err)
		}
		return string(out)
	}
	// No -trimpath: with the module cache's paths unchanged, only this
	// copy's own packages compile; the dependencies come from the build
	// cache (a -trimpath build compiles them all again, minutes under load).
	got := versionOfBuild("-buildvcs=true")
	want := regexp.MustCompile(`^voiceroom v0\.0\.0-\d{14}-` + rev[:12] + ` \(revision ` + rev + `, \d{4}-\d\d-\d\dT[\d:]+Z\)\n$`)
	if !want.MatchString(got) {
		t.Errorf("from a checkout: %q, want %s", got, want)
	}
	if got := versionOfBuild("-buildvcs=false"); got != "voiceroom dev\n" {
		t.Errorf("without VCS information: %q, want %q", got, "voiceroom dev\n")
	}
}
