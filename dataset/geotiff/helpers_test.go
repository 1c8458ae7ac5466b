package geotiff

import (
	"os"
	"path/filepath"
	"testing"
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

// under is the options of a source whose paths lie under dir.
func under(dir string) *Options { return &Options{Base: dir} }

func prod(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

func near(a, b, tol float64) bool { return a-b <= tol && b-a <= tol }
