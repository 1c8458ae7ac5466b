package sweep

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotOnePointLogAxis: a sweep of one completed trial on a log
// parameter (gonum widens an axis of one point by ±1, below 0 on a log
// scale, and panicked) and one of a single value draw a PNG.
func TestPlotOnePointLogAxis(t *testing.T) {
	for _, p := range []Param{
		{Path: "train.lr", Kind: "loguniform", Low: 1e-4, High: 1e-1},
		{Path: "train.lr", Kind: "loguniform", Low: 0.01364, High: 0.01364},
		{Path: "model.m.dense[0].units", Kind: "int", Low: 1, High: 1, Log: true},
		{Path: "model.m.dropout.p", Kind: "uniform", Low: 0.2, High: 0.2},
	} {
		v := "0.01364"
		if p.Kind == "int" {
			v = "1"
		} else if p.Kind == "uniform" {
			v = "0.2"
		}
		st := &State{Metric: "accuracy", Goal: "max", Trials: 1, Params: []Param{p},
			Runs: []*Trial{{ID: 1, Values: []string{v}, Status: Done, Metrics: []float64{0.28}}}}
		path := filepath.Join(t.TempDir(), "sweep.png")
		wrote, err := Plot(st, path)
		if err != nil || !wrote {
			t.Fatalf("%+v: wrote %v, %v", p, wrote, err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// TestPlotNothingToDraw: no trial with a metric, no plot and no file.
func TestPlotNothingToDraw(t *testing.T) {
	st := &State{Metric: "accuracy", Goal: "max", Trials: 2, Params: ParamsOf(testParams[:1]),
		Runs: []*Trial{{ID: 1, Values: []string{"0.1"}, Status: Failed, Reason: "x", Metrics: []float64{}}}}
	path := filepath.Join(t.TempDir(), "sweep.png")
	if wrote, err := Plot(st, path); wrote || err != nil {
		t.Fatalf("wrote %v, %v", wrote, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("stat: %v", err)
	}
}

// TestLogTicksLabelled: a log axis has at least two labels within it,
// over several decades or within one (gonum's LogTicks labels powers of
// ten alone and starts a decade late below 1, so lr 1e-3 to 9e-3 had
// none), and the lowest power of ten of 1e-4 to 1e-1 is labelled.
func TestLogTicksLabelled(t *testing.T) {
	for _, r := range [][2]float64{{1e-4, 1e-1}, {1e-5, 1}, {1.3e-3, 9e-3}, {1.3e-3, 1.9e-3}, {8, 512}, {0.5, 1.5}, {1e-3, 1e-2}} {
		ticks := logTicks{}.Ticks(r[0], r[1])
		var labels []string
		for _, tk := range ticks {
			if tk.Label != "" && tk.Value >= r[0]*(1-1e-9) && tk.Value <= r[1]*(1+1e-9) {
				labels = append(labels, tk.Label)
			}
		}
		if len(labels) < 2 || (r[0] == 1e-4 && labels[0] != "0.0001") {
			t.Errorf("[%g, %g]: labels %v", r[0], r[1], labels)
		}
		t.Logf("[%g, %g]: %s", r[0], r[1], strings.Join(labels, " "))
	}
}
