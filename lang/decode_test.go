package lang_test

import (
	"testing"

	"pipe/lang"
	"pipe/spec"
)

// TestDecode fills tagged structs from checked blocks: main arguments,
// named ones, a field's arguments into a struct, defaults kept for what
// the block leaves out, auto left undecided; a Go type that does not fit
// the value is an error at the value.
func TestDecode(t *testing.T) {
	src := "source s csv {\n  path \"a.csv\"\n  label y\n  header false\n}\n" +
		"model m {\n  input [2]\n  dense 1\n}\n" +
		"train {\n  epochs 3\n  batch auto\n  optimizer sgd lr 0.1 momentum 0.9\n}\n"
	p, ds := check("d.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	var s struct {
		Path      string  `pipe:"path"`
		Header    bool    `pipe:"header"`
		Delimiter *string `pipe:"delimiter"`
		Normalize string  `pipe:"normalize"`
		Ignored   string
	}
	s.Normalize = "standard"
	if ds := lang.Decode(p.Block("source"), &s); len(ds) > 0 {
		t.Fatal(ds)
	}
	if s.Path != "a.csv" || s.Header || s.Delimiter != nil || s.Normalize != "standard" {
		t.Errorf("source decoded as %+v", s)
	}

	type opt struct {
		Kind     string   `pipe:"kind"`
		Momentum *float64 `pipe:"momentum"`
		Eps      *float64 `pipe:"eps"`
	}
	var tr struct {
		Epochs   int64    `pipe:"epochs"`
		Batch    *int64   `pipe:"batch"`
		Opt      *opt     `pipe:"optimizer"`
		LR       float64  `pipe:"optimizer.lr"`
		Schedule *opt     `pipe:"schedule"`
		Metrics  []string `pipe:"metrics"`
	}
	if ds := lang.Decode(p.Block("train"), &tr); len(ds) > 0 {
		t.Fatal(ds)
	}
	switch {
	case tr.Epochs != 3 || tr.Batch != nil || tr.LR != 0.1 || tr.Schedule != nil || tr.Metrics != nil:
		t.Errorf("train decoded as %+v", tr)
	case tr.Opt == nil || tr.Opt.Kind != "sgd" || tr.Opt.Momentum == nil || *tr.Opt.Momentum != 0.9 || tr.Opt.Eps != nil:
		t.Errorf("optimizer decoded as %+v", tr.Opt)
	}

	var bad struct {
		Path int64 `pipe:"path"`
	}
	ds = lang.Decode(p.Block("source"), &bad)
	if len(ds) != 1 || !ds.HasErrors() || ds[0].Subject == nil || ds[0].Subject.Start.Line != 2 {
		t.Fatalf("a string decoded into an int64: %v", ds)
	}
	if ds := lang.Decode(p.Block("source"), bad); !ds.HasErrors() {
		t.Error("Decode took a struct that is not a pointer")
	}
}

// TestDecodeAuto: a spec.Auto field records auto with its bounds, or the
// value written, with the value's range; a setting left out stays nil.
func TestDecodeAuto(t *testing.T) {
	src := "source s csv {\n  path \"a.csv\"\n  label y\n}\n" + "model m {\n  input [2]\n  dense 1\n}\n" +
		"train {\n  epochs 1\n  batch auto(min 8 max 64)\n  workers 3\n}\n"
	p, ds := check("a.pipe", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	var tr struct {
		Batch    *spec.Auto[int64] `pipe:"batch"`
		Workers  *spec.Auto[int64] `pipe:"workers"`
		Prefetch *spec.Auto[int64] `pipe:"prefetch"`
	}
	if ds := lang.Decode(p.Block("train"), &tr); len(ds) > 0 {
		t.Fatal(ds)
	}
	if tr.Batch == nil || !tr.Batch.IsAuto || tr.Batch.Min == nil || *tr.Batch.Min != 8 || tr.Batch.Max == nil || *tr.Batch.Max != 64 {
		t.Errorf("batch auto(min 8 max 64) decoded as %+v", tr.Batch)
	}
	if _, ok := tr.Batch.Fixed(); ok {
		t.Error("batch auto decoded as fixed")
	}
	if n, ok := tr.Workers.Fixed(); !ok || n != 3 || tr.Workers.Range.Start.Line != 12 || tr.Workers.Range.Start.Column != 11 {
		t.Errorf("workers 3 decoded as %+v", tr.Workers)
	}
	if tr.Prefetch != nil || tr.Prefetch.At() != nil {
		t.Errorf("prefetch, left out, decoded as %+v", tr.Prefetch)
	}
}
