package spec

import (
	"os/exec"
	"strings"
	"testing"
)

// goList runs go list -f FORMAT on patterns; a pattern that matches no
// package (a folder since moved) lists nothing.
func goList(t *testing.T, format string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", format}, patterns...)...).Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestLeaf keeps spec a leaf: the standard library and diag only, so
// that lang, stdlib, the plan and the data readers can all import it.
func TestLeaf(t *testing.T) {
	for _, imp := range goList(t, `{{join .Imports "\n"}}`, ".") {
		if strings.HasPrefix(imp, "pipe/") && imp != "pipe/diag" || strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
			t.Errorf("spec imports %s", imp)
		}
	}
}

// TestExecutorReadsNoSyntax: no non-test file of the engines, the run
// loop, the data readers, the reports, export or serve imports pipe/lang
// or a package under it; they take specs (this package), graphs (stdlib)
// and speak diagnostics (pipe/diag).
func TestExecutorReadsNoSyntax(t *testing.T) {
	pkgs := goList(t, `{{.ImportPath}} {{join .Imports " "}}`,
		"pipe/engine/...", "pipe/run/...", "pipe/dataset/...", "pipe/export/...", "pipe/serve/...")
	checked := 0
	for _, line := range pkgs {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		checked++
		for _, imp := range f[1:] {
			if imp == "pipe/lang" || strings.HasPrefix(imp, "pipe/lang/") {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
	if checked < 12 {
		t.Fatalf("go list found %d executor packages; the patterns are stale", checked)
	}
}
