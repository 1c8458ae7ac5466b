package lang_test

import (
	"strings"
	"testing"

	"pipe/lang"
	"pipe/stdlib"
)

// TestSweepParams reads a sweep block's parameter lines (repeated
// fields) and resolves their paths as --set does: a good block gives its
// parameters in order, each mistake a diagnostic at its own line.
func TestSweepParams(t *testing.T) {
	base := string(fashionSource(t))
	good := base + `
sweep {
  trials 4  parallel 2  metric accuracy max  sampler tpe startup 2  early_stop asha rung 1 eta 3
  loguniform "train.lr" 1e-4 1e-2
  uniform "model.fashion.dropout.p" 0 0.5
  choice "model.fashion.dense[0].units" [64, 128, 256]
  int "model.fashion.conv[0].out" 8 64 log
  choice "train.optimizer" [adam, sgd]
}
`
	f, ds := lang.Parse("f.pipe", []byte(good))
	p, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds.Error())
	}
	params, pds := lang.SweepParams(p, []byte(good), stdlib.Schema())
	if len(pds) > 0 {
		t.Fatal(pds.Error())
	}
	var got []string
	for _, sp := range params {
		got = append(got, sp.Kind+" "+sp.Path)
	}
	want := "loguniform train.lr, uniform model.fashion.dropout.p, choice model.fashion.dense[0].units, int model.fashion.conv[0].out, choice train.optimizer"
	if strings.Join(got, ", ") != want {
		t.Fatalf("params %q, want %q", strings.Join(got, ", "), want)
	}
	if c := params[2].Choices; strings.Join(c, " ") != "64 128 256" || !params[3].Log {
		t.Errorf("choices %v, log %v", c, params[3].Log)
	}

	bad := base + `
sweep {
  trials 4
  loguniform "train.lrr" 1e-4 1e-2
  uniform "model.fashion.dropout.p" 0 1.5
  choice "model.fashon.dense[0].units" [64, 128]
  int "model.fashion.conv[0].out" 64 8
}
`
	f, _ = lang.Parse("f.pipe", []byte(bad))
	p, cds = lang.Check(f, stdlib.Schema())
	if cds.HasErrors() {
		t.Fatal(cds.Error())
	}
	_, pds = lang.SweepParams(p, []byte(bad), stdlib.Schema())
	lines := map[int]string{}
	for _, d := range pds {
		lines[d.Subject.Start.Line] = d.Summary + " " + d.Detail
	}
	first := strings.Count(base, "\n") + 4 // the loguniform line
	for i, frag := range []string{"did you mean lr", "out of range", "did you mean fashion", "reversed"} {
		if !strings.Contains(lines[first+i], frag) {
			t.Errorf("line %d: %q, want %q (all: %v)", first+i, lines[first+i], frag, lines)
		}
	}
}

// TestSweepMetricMeasured: a sweep may rank by loss or by a metric train
// measures, and by nothing when no data is held out; the refusal names
// what the trials measure.
func TestSweepMetricMeasured(t *testing.T) {
	base := string(fashionSource(t)) // train measures accuracy; source train has a split
	noSplit := strings.Replace(base, "split 0.95 seed 1", "", 1)
	if noSplit == base {
		t.Fatal("fashion.pipe's split moved; update the test")
	}
	noEval := noSplit[:strings.Index(noSplit, "evaluate {")]
	block := func(metric string) string {
		return "\nsweep {\n  trials 2  " + metric + "\n  loguniform \"train.lr\" 1e-4 1e-2\n}\n"
	}
	for _, c := range []struct {
		name, src, want string
	}{
		{"accuracy", base + block("metric accuracy"), ""},
		{"loss by default", base + block(""), ""},
		{"loss", base + block("metric loss min"), ""},
		{"f1 not measured", base + block("metric f1 max"), "do not measure it: The trials measure the validation loss and train's metrics: loss, accuracy"},
		{"no split, evaluate", noSplit + block("metric accuracy"), ""},
		{"no held-out data", noEval + block("metric accuracy"), "measure nothing: Source train has no split"},
		{"no held-out data, loss", noEval + block(""), "sweep metric loss: the trials measure nothing"},
	} {
		f, ds := lang.Parse("f.pipe", []byte(c.src))
		p, cds := lang.Check(f, stdlib.Schema())
		if ds = append(ds, cds...); ds.HasErrors() {
			t.Fatalf("%s: %s", c.name, ds.Error())
		}
		_, pds := lang.SweepParams(p, []byte(c.src), stdlib.Schema())
		got := ""
		for _, d := range pds {
			got += d.Summary + ": " + d.Detail
		}
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
