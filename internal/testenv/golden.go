package testenv

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update makes Golden rewrite the files instead of comparing:
// go test ./pkg -run Golden -update. Review the diff: a changed golden
// file is a changed wire format.
var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Golden fails tb unless got equals the bytes of testdata/name (a final
// newline in the file is not part of them), or, under -update, writes got
// there. Golden files pin what crosses a boundary (the stream, Redis,
// clients), so a renamed Go field cannot change it unseen.
func Golden(tb testing.TB, name string, got []byte) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, append(bytes.Clone(got), '\n'), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run the test with -update to write it)", err)
	}
	if want = bytes.TrimSuffix(want, []byte("\n")); !bytes.Equal(got, want) {
		tb.Errorf("%s changed: it is a wire format (rewrite it with -update only on purpose)\n got: %s\nwant: %s", path, got, want)
	}
}
