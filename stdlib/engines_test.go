package stdlib

import (
	"strings"
	"testing"

	"pipe/diag"
	"pipe/lang"
	"pipe/spec"
)

// checkEngine checks a file whose engine field says name and returns its
// diagnostics about the engine.
func checkEngine(t *testing.T, name string) diag.Diagnostics {
	t.Helper()
	f, ds := lang.Parse("e.pipe", []byte("engine "+name+"\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	_, cds := lang.Check(f, Schema())
	var out diag.Diagnostics
	for _, d := range cds {
		if d.Subject != nil && d.Subject.Start.Line == 1 {
			out = append(out, d)
		}
	}
	return out
}

// TestEngineNamesFromTheRegistry: the engine field accepts the names the
// engines registered (spec.Engines) when the file is checked, not when
// the schema was built, and refuses others in the words it always has.
// The test registers native and torch as their engines do, then a third.
func TestEngineNamesFromTheRegistry(t *testing.T) {
	for _, n := range []string{"native", "torch"} {
		t.Cleanup(spec.RegisterEngine(n))
	}
	for _, tc := range []struct{ name, detail string }{
		{"third", `engine does not accept 'third'. Expected one of 'native', 'torch'.`},
		{"torhc", `engine does not accept 'torhc'. Did you mean 'torch'?`},
	} {
		ds := checkEngine(t, tc.name)
		if len(ds) != 1 || ds[0].Code != "unknown-value" || ds[0].Summary != "unknown engine '"+tc.name+"'" || ds[0].Detail != tc.detail {
			t.Errorf("engine %s: %v", tc.name, ds)
		}
	}
	for _, name := range []string{"native", "torch", "auto"} {
		if ds := checkEngine(t, name); len(ds) != 0 {
			t.Errorf("engine %s: %v", name, ds)
		}
	}
	undo := spec.RegisterEngine("third")
	if ds := checkEngine(t, "third"); len(ds) != 0 {
		t.Errorf("engine third, registered: %v", ds)
	}
	undo()
	if ds := checkEngine(t, "third"); len(ds) != 1 || !strings.HasSuffix(ds[0].Detail, "Expected one of 'native', 'torch'.") {
		t.Errorf("engine third, unregistered again: %v", ds)
	}
}
