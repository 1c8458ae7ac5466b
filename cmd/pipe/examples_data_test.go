package main

import (
	"os"
	"strings"
	"testing"

	"pipe/lang"
	"pipe/stdlib"
)

// TestExamplesSayWhereTheirDataIs: every path an example reads is either
// one `make data` makes (the Makefile names it) or the file says, in a
// "// Data:" comment that names the path, how to get it, so that no new
// user meets a bare "file not found" (issue 20, item 10).
func TestExamplesSayWhereTheirDataIs(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range examplePaths(t) {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, ds := lang.Parse(path, src)
		prog, cds := lang.Check(f, stdlib.Schema())
		if ds = append(ds, cds...); ds.HasErrors() {
			t.Fatalf("%s: %v", path, ds)
		}
		dec, dds := stdlib.Decode(prog)
		if dds.HasErrors() {
			t.Fatalf("%s: %v", path, dds)
		}
		var note string
		if i := strings.Index(string(src), "// Data:"); i >= 0 {
			note = string(src[i:])
			if j := strings.Index(note, "\npipeline"); j >= 0 {
				note = note[:j]
			}
		}
		for _, s := range dec.Spec.Sources {
			for _, p := range s.Paths() {
				first, _, _ := strings.Cut(strings.TrimPrefix(p, "data/"), "/")
				if strings.Contains(string(mk), "data/"+first) {
					continue
				}
				if !strings.Contains(note, p) {
					t.Errorf("%s: source %s reads %s, which make data does not make, and no \"// Data:\" comment before the pipeline line names it",
						path, s.Name, p)
				}
			}
		}
	}
}
