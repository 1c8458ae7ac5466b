package run_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine/native"
	"pipe/run"
)

// TestGANAccumulation: in gan mode an optimizer step of two accumulated
// micro-batches of 8 trains what one batch of 16 does, the
// discriminator's step included (it steps once per optimizer step, with
// the gradients of both micro-batches), so the losses agree step by step.
// The loss is the generator's objective: at least l1 × its L1 distance.
func TestGANAccumulation(t *testing.T) {
	scene, err := filepath.Abs("../data/L7_ETMs.tif")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scene); err != nil {
		t.Skip("the Landsat scene is not in data/ (make run fetches it)")
	}
	src := `pipeline tinygan
seed 7
source scene geotiff {
  path         "` + scene + `"
  bands        [1, 2, 3]
  target_bands [4]
  tile         8x8 stride 8
  split        0.8 seed 7 blocks 16
  normalize    per_band
}
model g {
  input [3, 8, 8]
  conv 8 k3 pad1 -> leakyrelu 0.2 -> conv 1 k3 pad1
}
model d {
  input [4, 8, 8]
  conv 8 k4 s2 pad1 -> instancenorm affine -> leakyrelu 0.2 -> conv 1 k3 pad1
}
train {
  mode            gan
  generator       g
  discriminator   d conditional
  epochs          1
  batch           BATCH
  effective_batch 16
  optimizer       adam lr LR beta1 0.5
  schedule        constant warmup 1  // the warm-up the scaled learning rate would add, in both
  adversarial     bce
  l1              10
}
`
	runJobWith := func(batch string) *run.Result {
		t.Helper()
		// The written learning rate is for the written batch: the planner
		// scales it to the effective batch's.
		lr := map[string]string{"16": "2e-3", "8": "1e-3"}[batch]
		j := newJob(t, strings.NewReplacer("BATCH", batch, "LR", lr).Replace(src))
		if j.plan.Optimizer.LR != 2e-3 || j.plan.GAN.Optimizer.LR != 2e-3 {
			t.Fatalf("batch %s: planned learning rates %g and %g, want 2e-3", batch, j.plan.Optimizer.LR, j.plan.GAN.Optimizer.LR)
		}
		res, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, run.WithBackend(native.Backend{}),
			run.WithBase(j.dir), run.WithCheckpointDir(filepath.Join(j.dir, "ckpt")), run.WithThreads(1), run.WithMaxSteps(4))
		if ds.HasErrors() {
			t.Fatalf("run failed:\n%v", ds)
		}
		return res
	}
	one, two := runJobWith("16"), runJobWith("8")
	// The checkpoint keeps the input's normalisation, 3 bands, not the
	// target band's beside them.
	j := newJob(t, strings.NewReplacer("BATCH", "16", "LR", "2e-3").Replace(src))
	tr, err := run.LoadTrained(j.plan, j.prog, one.Checkpoint, native.Backend{}, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Model.Close()
	if n := tr.Info.InputNorm; len(n.Mean) != 3 || len(n.Std) != 3 {
		t.Errorf("the checkpoint's input normalisation has %d means and %d stds for 3 bands", len(n.Mean), len(n.Std))
	}
	if len(one.StepLosses) != 4 || len(two.StepLosses) != 4 {
		t.Fatalf("%d and %d step losses", len(one.StepLosses), len(two.StepLosses))
	}
	for i := range 4 {
		a, b := one.StepLosses[i], two.StepLosses[i]
		if d := math.Abs(a-b) / a; !(d < 1e-5) {
			t.Errorf("step %d: loss %.7g at batch 16, %.7g at 2 × 8", i+1, a, b)
		}
		if a < 10*one.Final.Loss/4 {
			t.Errorf("step %d: loss %.4g is not the generator's objective (l1 10 × an L1 distance near %.4g)", i+1, a, one.Final.Loss)
		}
	}
}
