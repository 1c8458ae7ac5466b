package cmd_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEveryPackageHasADoc: every package of the module says what it is in
// a package comment that begins "Package NAME" ("Command NAME" for a
// command), so that go doc and a newcomer find its role. A comment placed
// after the package clause, or a blank line between, is no package doc.
func TestEveryPackageHasADoc(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{if or .GoFiles .CgoFiles}}{{.ImportPath}}|{{.Name}}|{{.Doc}}{{end}}", "pipe/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "|", 3)
		if len(f) != 3 {
			t.Fatalf("go list printed %q", line)
		}
		n++
		path, name, words := f[0], f[1], strings.Fields(f[2])
		want := []string{"Package", name}
		if name == "main" {
			want = []string{"Command"}
		}
		if len(words) < len(want) || strings.Join(words[:len(want)], " ") != strings.Join(want, " ") {
			t.Errorf("%s: package doc %q; want one beginning %q", path, f[2], strings.Join(want, " "))
		}
	}
	if n < 50 {
		t.Fatalf("go list found %d packages: the pattern is stale", n)
	}
}
