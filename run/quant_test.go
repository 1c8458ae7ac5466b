package run_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"
	"pipe/run"
	"pipe/run/folder"
)

const int8Pipe = `pipeline q8
seed 3
source blobs synthetic { samples 160  shape [4, 8, 8]  classes 3  seed 5 }
model small {
  input [4, 8, 8]
  conv 8 k3 pad1 -> batchnorm -> relu -> maxpool 2
  flatten -> dense 16 -> relu -> dense 3
}
train { epochs 2  batch 16  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
evaluate { source blobs }
predict { source blobs  write "p.csv"  precision int8  calibrate 2 }
`

// A run whose predict says int8 quantises after training and predicts in
// int8; --precision int8 with --skip-train evaluates in int8 too; a
// Trained model quantises, predicts in int8 and refuses to train.
func TestRunPredictsInInt8(t *testing.T) {
	j := newJob(t, int8Pipe)
	ckdir := filepath.Join(j.dir, "ckpt")
	runJobWith := func(opts ...run.Option) *run.Result {
		t.Helper()
		res, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, append([]run.Option{run.WithBackend(native.Backend{}),
			run.WithBase(j.dir), run.WithCheckpointDir(ckdir), run.WithThreads(1)}, opts...)...)
		if ds.HasErrors() {
			t.Fatalf("run failed:\n%v", ds)
		}
		return res
	}
	res := runJobWith()
	q := res.Int8
	if q == nil {
		t.Fatal("predict precision int8, but the run reports no int8 model")
	}
	// conv1 (K = 36), dense1 and dense2; the batchnorm folds.
	if q.Int8Layers() != 3 || q.CalibBatches != 2 || q.CalibSamples != 32 {
		t.Fatalf("int8 report: %d layers, %d batches, %d samples; want 3, 2, 32: %+v", q.Int8Layers(), q.CalibBatches, q.CalibSamples, q.Layers)
	}
	if res.Precision != "fp32" || res.Memory.Model.Gradients == 0 {
		t.Fatalf("the run reports precision %s and gradients %d: the fp32 model did not come back", res.Precision, res.Memory.Model.Gradients)
	}
	csv, err := os.ReadFile(filepath.Join(j.dir, "p.csv"))
	if err != nil || strings.Count(string(csv), "\n") != 161 {
		t.Fatalf("predictions: %d lines, %v", strings.Count(string(csv), "\n"), err)
	}
	fp := runJobWith(run.WithResume(""), run.WithSkipTrain(), run.WithEvalPrecision("fp32"))
	i8 := runJobWith(run.WithResume(""), run.WithSkipTrain(), run.WithEvalPrecision("int8"))
	if fp.Int8 != nil || i8.Int8 == nil {
		t.Fatalf("--precision fp32 reported int8 %v; --precision int8 %v", fp.Int8 != nil, i8.Int8 != nil)
	}
	a32, _ := fp.Final.Metric("accuracy")
	a8, _ := i8.Final.Metric("accuracy")
	t.Logf("accuracy fp32 %.4f, int8 %.4f", a32, a8)
	if a8 < a32-0.05 {
		t.Errorf("int8 accuracy %.4f is more than 0.05 under fp32's %.4f", a8, a32)
	}

	tr, err := run.LoadTrained(j.plan, j.prog, filepath.Join(ckdir, folder.LastCheckpoint), native.Backend{}, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	x := make([]float32, 20*256)
	for i := range x {
		x[i] = float32(i%13)/6 - 1
	}
	want := make([]float32, 20*3)
	if err := tr.Predict(x, 20, want); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.QuantizeInt8(nil); err == nil {
		t.Fatal("no calibration batches was accepted")
	}
	if _, err := tr.QuantizeInt8([]*dataset.Batch{{N: 20, X: x}}, engine.WithPercentile(101)); err == nil {
		t.Fatal("percentile 101 was accepted")
	}
	rep, err := tr.QuantizeInt8([]*dataset.Batch{{N: 20, X: x}}, engine.WithPercentile(0))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Calibration != "minmax" || tr.Model.Precision() != "int8" {
		t.Fatalf("calibration %q, precision %q", rep.Calibration, tr.Model.Precision())
	}
	got := make([]float32, 20*3)
	if err := tr.Predict(x, 20, got); err != nil {
		t.Fatal(err)
	}
	var worst, scale float32
	for i := range got {
		worst = max(worst, abs(got[i]-want[i]))
		scale = max(scale, abs(want[i]))
	}
	if worst > 0.05*scale {
		t.Fatalf("int8 outputs within %g of fp32's, above 5%% of %g", worst, scale)
	}
	if _, err := tr.Model.TrainStep(&dataset.Batch{N: 1, X: x[:256], Y: []float32{0}}, 1); !errors.Is(err, engine.ErrInt8Training) {
		t.Fatalf("TrainStep on the int8 model: %v", err)
	}
}

func abs(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// A run on another engine (the fake one) that predicts in int8 fails with
// the reason.
func TestInt8NeedsTheNativeEngine(t *testing.T) {
	j := newJob(t, int8Pipe)
	_, ds := j.run(t, context.Background(), nil, run.Hooks{})
	if !ds.HasErrors() || !strings.Contains(ds.Error(), "int8 needs the native engine") {
		t.Fatalf("a run on the fake engine predicting in int8: %v", ds)
	}
}
