package lang_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/lang"
	"pipe/stdlib"
)

func fashionSource(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "examples", "fashion.pipe"))
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func override(t *testing.T, src []byte, flags ...string) ([]byte, diag.Diagnostics) {
	t.Helper()
	sets, ds := lang.ParseSets(flags)
	if ds.HasErrors() {
		return src, ds
	}
	return lang.Override("f.pipe", src, sets, stdlib.Schema())
}

// TestOverrideEdits checks that each kind of path changes the value it
// names, and only it: replaced where the file writes it, added where it
// does not, the result checking clean.
func TestOverrideEdits(t *testing.T) {
	src := fashionSource(t)
	for _, c := range []struct {
		set       string
		old, want string // a fragment of the file before and after
	}{
		{"train.lr=3e-4", "optimizer adam lr 1e-3", "optimizer adam lr 3e-4"},
		{"train.optimizer.lr=5e-4", "optimizer adam lr 1e-3", "optimizer adam lr 5e-4"},
		{"train.optimizer=sgd", "optimizer adam lr 1e-3", "optimizer sgd lr 1e-3"},
		{"train.batch=128", "batch 64", "batch 128"},
		{"train.weight_decay=0.01", "optimizer adam lr 1e-3", "optimizer adam lr 1e-3 weight_decay 0.01"},
		{"train.workers=1", "  loss cross_entropy", "[accuracy]  workers 1 }"},
		{"source.train.split=0.9", "split 0.95 seed 1", "split 0.9 seed 1"},
		{"model.fashion.dense[0].units=256", "dense 128", "dense 256"},
		{"model.dense[1].units=10", "dense 10", "dense 10"},
		{"model.fashion.conv[1].kernel=5", "conv 64 k3 pad1", "conv 64 k5 pad1"},
		{"model.fashion.conv[0].out=16", "conv 32 k3", "conv 16 k3"},
		{"model.fashion.dropout.p=0.5", "dropout 0.25", "dropout 0.5"},
		{"model.fashion.conv[0].stride=1", "conv 32 k3 pad1", "conv 32 k3 pad1 s1"},
		{"model.fashion.input=[1, 32, 32]", "input [1, 28, 28]", "input [1, 32, 32]"},
		{"seed=7", "pipeline fashion", "pipeline fashion\nseed 7"},
	} {
		got, ds := override(t, src, c.set)
		if ds.HasErrors() {
			t.Errorf("--set %s: %v", c.set, ds)
			continue
		}
		if !strings.Contains(string(src), c.old) || !strings.Contains(string(got), c.want) {
			t.Errorf("--set %s: want %q in\n%s", c.set, c.want, got)
		}
		if string(got) == string(src) && c.old != c.want {
			t.Errorf("--set %s changed nothing", c.set)
		}
		// Nothing else moved: the file less the edited line is the same.
		if strings.Count(string(got), "\n") > strings.Count(string(src), "\n") {
			// A field added on a line of its own.
			if strings.Replace(string(got), c.want, c.old, 1) != string(src) {
				t.Errorf("--set %s changed more than its line:\n%s", c.set, got)
			}
		} else if d := lineDiff(string(src), string(got)); d > 1 {
			t.Errorf("--set %s changed %d lines", c.set, d)
		}
	}
}

func lineDiff(a, b string) int {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	n := 0
	for i := 0; i < len(la) || i < len(lb); i++ {
		if i >= len(la) || i >= len(lb) || la[i] != lb[i] {
			n++
		}
	}
	return n
}

// TestOverridesApplyInOrder: later sets see earlier ones.
func TestOverridesApplyInOrder(t *testing.T) {
	got, ds := override(t, fashionSource(t), "train.lr=0.1", "train.optimizer=sgd", "train.momentum=0.9")
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if !strings.Contains(string(got), "optimizer sgd lr 0.1 momentum 0.9") {
		t.Errorf("got\n%s", got)
	}
}

// TestOverrideDiagnostics: a path that names nothing, and a value the
// checker refuses, are errors on the flag, with a did-you-mean.
func TestOverrideDiagnostics(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"trian.lr=1", "did you mean train?"},
		{"train.lrr=1", "did you mean lr?"},
		{"train.optimizer.lrr=1", "did you mean lr?"},
		{"model.fashion.dense[2].units=5", "2 dense layers"},
		{"model.fashion.conv.out=5", "say which"},
		{"model.fashion.dense[0].unit=5", "did you mean units?"},
		{"model.fashion.dense[0]=5", "names a layer"},
		{"model.fashon.dense[0].units=5", "did you mean"},
		{"train.lr=abc", "--set train.lr=abc"},
		{"train.lr=-1", "--set train.lr=-1"},
		{"model.fashion.dense[0].units=0", "--set model.fashion.dense[0].units=0"},
		{"serve.max_batch=4", "no serve block"},
		{"train.lr", "PATH=VALUE"},
		{"train..lr=1", "not a path segment"},
	} {
		_, ds := override(t, fashionSource(t), c.set)
		if !ds.HasErrors() {
			t.Errorf("--set %s: no error", c.set)
			continue
		}
		var all []string
		onFlag := false
		for _, d := range ds {
			all = append(all, d.Summary+" "+d.Detail)
			onFlag = onFlag || (d.Subject != nil && d.Subject.File == lang.CommandLine)
		}
		if s := strings.Join(all, "\n"); !strings.Contains(s, c.want) {
			t.Errorf("--set %s: want %q in\n%s", c.set, c.want, s)
		}
		if !onFlag {
			t.Errorf("--set %s: no diagnostic points at the command line: %v", c.set, ds)
		}
	}
}

// TestOverrideRangesPointAtTheFlag: the subject covers the segment at
// fault in OverrideText.
func TestOverrideRangesPointAtTheFlag(t *testing.T) {
	sets, _ := lang.ParseSets([]string{"train.lr=1", "train.lrr=2"})
	_, ds := lang.Override("f.pipe", fashionSource(t), sets, stdlib.Schema())
	if len(ds) != 1 || ds[0].Subject == nil {
		t.Fatalf("%v", ds)
	}
	line := lang.OverrideText(sets)
	if got := line[ds[0].Subject.Start.Byte:ds[0].Subject.End.Byte]; got != "lrr" {
		t.Errorf("subject %q in %q", got, line)
	}
}
