package voiceroom

import (
	"os/exec"
	"strings"
	"testing"
)

// The package doc's promise, checked: the root package depends on the
// standard library alone (every other package may import it without
// pulling in anything else of ours, nor a driver or a migration), and on
// none of the standard library's packages that do I/O.
func TestRootImportsOnlyTheStandardLibrary(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list the imports with: %v", err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var listed int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, standard, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("go list -deps: unexpected line %q", line)
		}
		listed++
		switch {
		case path == "voiceroom":
		case standard != "true":
			t.Errorf("the root package depends on %s, which is not in the standard library", path)
		case doesIO(path):
			t.Errorf("the root package depends on %s, which does I/O", path)
		}
	}
	if listed == 0 {
		t.Fatal("go list -deps listed nothing, not even the package itself")
	}
}

// doesIO reports whether the standard library package path reaches files,
// the network, processes or a database.
func doesIO(path string) bool {
	for _, p := range []string{"os", "net", "database", "syscall", "io/fs", "io/ioutil", "log", "plugin", "crypto/rand", "runtime/cgo"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
