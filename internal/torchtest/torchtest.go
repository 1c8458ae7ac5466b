// Package torchtest finds the Python that tests drive PyTorch with.
package torchtest

import (
	"os"
	"os/exec"
	"testing"
)

// Python is $PIPE_PYTHON, else Debian's /usr/bin/python3 (python3 where
// there is none), once it imports torch and each of modules. Where it
// cannot, the test is skipped, or fails when PIPE_REQUIRE_TORCH is set
// (make test sets it, and installs Debian's python3-torch and
// python3-torchvision).
func Python(t testing.TB, modules ...string) string {
	t.Helper()
	py := os.Getenv("PIPE_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			py = "python3"
		}
	}
	for _, m := range append([]string{"torch"}, modules...) {
		if err := exec.Command(py, "-c", "import "+m).Run(); err != nil {
			if os.Getenv("PIPE_REQUIRE_TORCH") != "" {
				t.Fatalf("%s cannot import %s, and PIPE_REQUIRE_TORCH is set (make test installs Debian's python3-torch and python3-torchvision): %v", py, m, err)
			}
			t.Skipf("%s cannot import %s (install Debian's python3-%s, or set PIPE_PYTHON)", py, m, m)
		}
	}
	return py
}
