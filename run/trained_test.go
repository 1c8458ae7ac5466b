package run_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine/native"
	"pipe/run"
	"pipe/run/folder"
)

// A trained model loaded for inference gives the outputs the run's own
// model gave, and a checkpoint of another model is refused by name.
func TestLoadTrainedPredictsAsTheRunDid(t *testing.T) {
	src := `pipeline tiny
seed 3
source blobs synthetic { samples 120  shape [1, 6, 6]  classes 3  seed 5 }
model small {
  input [1, 6, 6]
  conv 4 k3 pad1 -> batchnorm -> relu -> flatten -> dense 3
}
train { epochs 2  batch 16  optimizer adam lr 0.01  loss cross_entropy  metrics [accuracy] }
evaluate { source blobs }
`
	j := newJob(t, src)
	ckdir := filepath.Join(j.dir, "ckpt")
	if _, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, run.WithBackend(native.Backend{}),
		run.WithBase(j.dir), run.WithCheckpointDir(ckdir), run.WithThreads(1)); ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	tr, err := run.LoadTrained(j.plan, j.prog, filepath.Join(ckdir, folder.LastCheckpoint), native.Backend{}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if got := tr.Info.InputSource; got != "synthetic" {
		t.Errorf("input source %q, want synthetic", got)
	}
	// 7 samples through a batch-5 model run in two chunks; each sample's
	// output must not depend on its chunk.
	x := make([]float32, 7*36)
	for i := range x {
		x[i] = float32(math.Sin(float64(i)))
	}
	out := make([]float32, 7*3)
	if err := tr.Predict(x, 7, out); err != nil {
		t.Fatal(err)
	}
	one := make([]float32, 3)
	for i := range 7 {
		if _, err := tr.Model.Eval(&dataset.Batch{N: 1, X: x[i*36 : (i+1)*36]}, one); err != nil {
			t.Fatal(err)
		}
		for k := range 3 {
			if d := math.Abs(float64(one[k] - out[i*3+k])); d > 1e-5 {
				t.Fatalf("sample %d output %d: %g alone, %g in a chunk", i, k, one[k], out[i*3+k])
			}
		}
	}
	if err := tr.Predict(x[:10], 7, out); err == nil {
		t.Error("a short input was accepted")
	}

	other := newJob(t, strings.Replace(src, "conv 4 k3", "conv 5 k3", 1))
	if _, err := run.LoadTrained(other.plan, other.prog, filepath.Join(ckdir, folder.LastCheckpoint), native.Backend{}, 1, 1); !errors.Is(err, run.ErrCheckpointMismatch) {
		t.Fatalf("a checkpoint of another model's shapes: %v, want ErrCheckpointMismatch", err)
	}
	renamed := newJob(t, strings.Replace(src, "model small", "model big", 1))
	if _, err := run.LoadTrained(renamed.plan, renamed.prog, filepath.Join(ckdir, folder.LastCheckpoint), native.Backend{}, 1, 1); !errors.Is(err, run.ErrCheckpointMismatch) || !strings.Contains(err.Error(), "holds model small") {
		t.Fatalf("a checkpoint of another model's name: %v", err)
	}
}
