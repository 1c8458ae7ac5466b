// Package golden compares test output with golden files under testdata/,
// as go-jsonnet's tests do: `go test ./... -update` rewrites only the files
// whose content changed, so a review sees exactly what moved. The tests of
// lang, lang/syntax, lang/format and planner share it.
package golden

import (
	"bytes"
	"flag"
	"os"
)

// Update is the -update flag of every test binary that imports this
// package.
var Update = flag.Bool("update", false, "rewrite the golden files that changed")

// T is the part of testing.T Check needs.
type T interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Check compares got with the file at path. Under -update it rewrites the
// file when it differs (or is missing) and reports nothing.
func Check(t T, path string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(path)
	if *Update && (err != nil || !bytes.Equal(want, got)) {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("%v", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%v (run go test with -update to create it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs from the output; run go test with -update and review the diff.\ngot:\n%s", path, got)
	}
}
