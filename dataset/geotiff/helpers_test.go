package geotiff

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/lang"
	"pipe/spec"
	"pipe/stdlib"
)

// The real data sets (make data) live in the repository's data folder;
// the tests that read them skip when they are absent.
const repoRoot = "../../.."

func needFiles(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Skipf("%s absent (run make data)", p)
		}
	}
}

// srcSpec checks a .pipe snippet holding one source block and returns its
// decoded spec.
func srcSpec(t testing.TB, src string) *spec.Source {
	t.Helper()
	f, ds := lang.Parse("test.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatalf("parse: %v", ds)
	}
	p, ds := lang.Check(f, stdlib.Schema())
	if ds.HasErrors() {
		t.Fatalf("check: %v", ds)
	}
	s, ds := stdlib.DecodeSource(p.Block("source"))
	if ds.HasErrors() {
		t.Fatalf("decode: %v", ds)
	}
	return s
}

// under is the options of a source whose paths lie under dir.
func under(dir string) *Options { return &Options{Base: dir} }

// writeFile writes data under dir, creating folders.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func prod(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// readAll reads every sample of ds.
func readAll(t testing.TB, ds *Dataset) (xs, ys, ms [][]float32) {
	t.Helper()
	xn, yn := prod(ds.XShape()), prod(ds.YShape())
	for i := range ds.Len() {
		x, y, m := make([]float32, xn), make([]float32, yn), make([]float32, yn)
		if err := ds.Read(i, x, y, m); err != nil {
			t.Fatalf("Read(%d): %v", i, err)
		}
		xs, ys, ms = append(xs, x), append(ys, y), append(ms, m)
	}
	return
}

func wantErr(t testing.TB, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }
