package diag

import "testing"

func TestDiagnosticsNilIsEmpty(t *testing.T) {
	var ds Diagnostics
	if ds.HasErrors() || len(ds) != 0 || ds.Error() != "" {
		t.Fatalf("nil Diagnostics should be empty, got %q", ds.Error())
	}
	ds = ds.Append(Warnf(Range{File: "a.pipe", Start: Pos{1, 1, 0}}, "W1", "w", ""))
	if ds.HasErrors() {
		t.Fatal("a warning alone is not an error")
	}
	ds = ds.Append(Errorf(Range{File: "a.pipe", Start: Pos{1, 1, 0}}, "E1", "bad thing", "fix %s", "it"))
	if !ds.HasErrors() {
		t.Fatal("an error should count")
	}
	if got := ds[1].Error(); got != "a.pipe:1:1: error [E1]: bad thing: fix it" {
		t.Fatalf("Error() = %q", got)
	}
}

func TestSortOrdersByPosition(t *testing.T) {
	at := func(b int) *Diagnostic {
		r := Range{File: "f", Start: Pos{Line: b + 1, Column: 1, Byte: b}}
		return &Diagnostic{Subject: &r}
	}
	ds := Diagnostics{at(5), {Summary: "no subject"}, at(1)}
	ds.Sort()
	if ds[0].Subject.Start.Byte != 1 || ds[1].Subject.Start.Byte != 5 || ds[2].Subject != nil {
		t.Fatalf("unexpected order")
	}
}
