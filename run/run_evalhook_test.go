package run_test

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run"
)

// The Evaluated hook sees every batch of every evaluation pass, in order,
// with its inputs, targets and outputs: per pass its samples are the
// Evaluation's, and its sample-weighted losses average to the
// Evaluation's loss.
func TestEvaluatedHookSeesEachBatch(t *testing.T) {
	var csv strings.Builder
	csv.WriteString("a,b,kind\n")
	for i := range 120 {
		kind := "low"
		if i%10+(i*7)%11 > 9 {
			kind = "high"
		}
		csv.WriteString(ftoa(float64(i%10)) + "," + ftoa(float64((i*7)%11)) + "," + kind + "\n")
	}
	j := newJob(t, `pipeline tab
source rows csv { path "rows.csv"  label kind  split 0.75 seed 4 }
model m { input [2]  dense 2 }
train { epochs 2  batch 8  optimizer adam lr 0.1  loss cross_entropy  metrics [accuracy] }
`)
	writeFile(t, filepath.Join(j.dir, "rows.csv"), csv.String())
	type pass struct {
		batches, samples int
		lossSum          float64
	}
	var passes []pass
	hooks := run.Hooks{
		Evaluating: func(string, int) { passes = append(passes, pass{}) },
		Evaluated: func(b run.EvalBatch) {
			p := &passes[len(passes)-1]
			if b.Source != "rows" || b.Part != "validation split" || len(b.X) != 2*b.N || len(b.Y) != b.N || len(b.Out) != 2*b.N {
				t.Errorf("batch %d of pass %d: %s (%s), %d samples, %d inputs, %d targets, %d outputs",
					p.batches, len(passes), b.Source, b.Part, b.N, len(b.X), len(b.Y), len(b.Out))
			}
			p.batches++
			p.samples += b.N
			p.lossSum += b.Loss * float64(b.N)
		},
	}
	res, ds := j.run(t, t.Context(), nil, hooks)
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if len(passes) != 2 {
		t.Fatalf("%d evaluation passes, want one an epoch", len(passes))
	}
	for i, p := range passes {
		v := res.EpochResults[i].Val
		if p.batches != 4 || p.samples != v.Samples || math.Abs(p.lossSum/float64(p.samples)-v.Loss) > 1e-12*max(1, v.Loss) {
			t.Errorf("pass %d: %d batches of %d samples, mean loss %g; the evaluation: %d samples, loss %g",
				i+1, p.batches, p.samples, p.lossSum/float64(p.samples), v.Samples, v.Loss)
		}
	}
}
