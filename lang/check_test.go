package lang_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"pipe/internal/chunkedfile"
	"pipe/internal/golden"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/render"
	"pipe/stdlib"
)

func check(name string, src []byte) (*lang.Program, diag.Diagnostics) {
	f, ds := lang.Parse(name, src)
	p, cds := lang.Check(f, stdlib.Schema())
	ds = append(ds, cds...)
	ds.Sort()
	return p, ds
}

func TestExamplesCheck(t *testing.T) {
	paths, _ := filepath.Glob("../examples/*.pipe")
	if len(paths) < 6 {
		t.Fatalf("want at least six examples, found %d", len(paths))
	}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		prog, ds := check(p, src)
		if len(ds) > 0 {
			var b bytes.Buffer
			_ = render.Text(&b, ds, render.Sources{p: src}, render.Options{})
			t.Errorf("%s:\n%s", p, b.String())
		}
		if prog == nil || len(prog.Models) == 0 {
			t.Errorf("%s: no model checked", p)
		}
	}
}

// TestChunkedErrors runs the chunked files under testdata/errors: every
// line marked ### "regexp" must get a matching diagnostic, and no other line
// any (see internal/chunkedfile).
func TestChunkedErrors(t *testing.T) {
	chunkedfile.Run(t, "testdata/errors/*.pipe", func(name string, src []byte) diag.Diagnostics {
		_, ds := check(name, src)
		return ds
	})
}

// TestGolden renders the diagnostics of each testdata/golden/x.pipe into
// x.diag.
func TestGolden(t *testing.T) {
	paths, _ := filepath.Glob("testdata/golden/*.pipe")
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(p)
		_, ds := check(name, src)
		var b bytes.Buffer
		_ = render.Text(&b, ds, render.Sources{name: src}, render.Options{})
		golden.Check(t, strings.TrimSuffix(p, ".pipe")+".diag", b.Bytes())
	}
}

// TestThreeMistakes: three independent mistakes in one file are all
// reported, each at its own line and column.
func TestThreeMistakes(t *testing.T) {
	src := "pipeline three\n" +
		"precision bf61\n" +
		"source train idx { images \"a.gz\"  labels \"b.gz\" }\n" +
		"model m {\n" +
		"  input [1, 28, 28]\n" +
		"  conv 32 k3 -> rleu -> flatten -> dense 10\n" +
		"}\n" +
		"train { epochs -2  optimizer adam lr 1e-3  loss cross_entropy }\n"
	_, ds := check("three.pipe", []byte(src))
	type at struct{ line, col int }
	var got []at
	for _, d := range ds {
		got = append(got, at{d.Subject.Start.Line, d.Subject.Start.Column})
	}
	want := []at{{2, 11}, {6, 17}, {8, 16}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("positions %v, want %v\n%v", got, want, ds)
	}
	if ds[0].Suggestion != "bf16" || ds[1].Suggestion != "relu" {
		t.Errorf("suggestions: %q %q", ds[0].Suggestion, ds[1].Suggestion)
	}
}

// TestLangImports keeps lang free of the runtime: no gorgonia, godal,
// OpenBLAS, engine, run, dataset, export, planner or stdlib.
func TestLangImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "pipe/lang/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"gorgonia", "godal", "netlib", "pipe/engine", "pipe/run", "pipe/dataset", "pipe/export", "pipe/planner", "pipe/stdlib"} {
			if strings.Contains(dep, banned) {
				t.Errorf("lang depends on %s", dep)
			}
		}
	}
}
