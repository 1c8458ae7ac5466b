package torch

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/planner"
	"pipe/run"
)

// ganSrc is a tiny pix2pix-like pair on the Landsat scene's 8x8 tiles:
// ADV, COND, EFF and DSTEPS are replaced per case.
const ganSrc = `pipeline tinygan
seed 7
source scene geotiff {
  path         "SCENE"
  bands        [1, 2, 3]
  target_bands [4]
  tile         8x8 stride 8
  split        0.8 seed 7 blocks 16
  normalize    per_band
}
model g {
  input [3, 8, 8]
  conv 8 k3 pad1 -> leakyrelu 0.2 -> conv 8 k4 s2 pad1 -> instancenorm affine -> relu
  convtranspose 1 k4 s2 pad1
}
model d {
  input [DIN, 8, 8]
  conv 8 k4 s2 pad1 -> instancenorm affine -> leakyrelu 0.2 -> conv 1 k3 pad1
}
train {
  mode            gan
  generator       g
  discriminator   d COND
  epochs          1
  batch           8
  effective_batch EFF
  optimizer       adam lr 2e-3 beta1 0.5
  d_optimizer     adam lr 1e-3 beta1 0.5
  adversarial     ADV weight 0.5
  l1              10
  d_steps         DSTEPS
}
`

// TestGANAgree trains gan mode on both engines: the same losses step by
// step (within 1e-4, relative) and the same generator at the end (its
// validation loss), for each adversarial loss, conditional or not, with
// gradient accumulation and an update ratio; one step from the same
// state changes every tensor of both models alike; and a run stopped on the
// native engine resumes on the torch engine from the checkpoint that
// holds both models, as the uninterrupted native run goes on; losses read
// back a step late (as on a GPU) are the same.
func TestGANAgree(t *testing.T) {
	py := testPython(t)
	scene, err := filepath.Abs("../../data/L7_ETMs.tif")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(scene); err != nil {
		t.Skip("the Landsat scene is not in data/ (make run fetches it)")
	}
	const steps = 4
	for _, c := range []struct {
		adv         string
		cond        bool
		eff, dsteps int
		resume      bool
		lagged      bool
	}{
		{adv: "bce", cond: true, eff: 16, dsteps: 1, resume: true},
		{adv: "hinge", eff: 8, dsteps: 2, lagged: true},
		{adv: "lsgan", cond: true, eff: 8, dsteps: 1},
	} {
		t.Run(c.adv, func(t *testing.T) {
			din, cond := "1", ""
			if c.cond {
				din, cond = "4", "conditional"
			}
			src := strings.NewReplacer("SCENE", scene, "ADV", c.adv, "COND", cond, "DIN", din,
				"EFF", strconv.Itoa(c.eff), "DSTEPS", strconv.Itoa(c.dsteps)).Replace(ganSrc)
			if _, p, _ := loadSrc(t, "tinygan.pipe", []byte(src)); p.AccumulationSteps != int64(c.eff/8) || p.GAN == nil {
				t.Fatalf("planned with accumulation %d, want %d", p.AccumulationSteps, c.eff/8)
			}
			native := mustRunJob(t, src, "native", t.TempDir(), py, run.WithMaxSteps(steps))
			torch := mustRunJob(t, src, "torch", t.TempDir(), py, run.WithMaxSteps(steps))
			if len(native.StepLosses) != steps || len(torch.StepLosses) != steps {
				t.Fatalf("%d and %d step losses, want %d", len(native.StepLosses), len(torch.StepLosses), steps)
			}
			for i := range steps {
				a, b := native.StepLosses[i], torch.StepLosses[i]
				if d := math.Abs(a-b) / math.Abs(a); !(d <= 1e-4) {
					t.Errorf("step %d: loss %.7g native, %.7g torch", i+1, a, b)
				}
			}
			if i := 1; native.StepLosses[i] == native.StepLosses[i-1] {
				t.Errorf("the loss did not move: %v", native.StepLosses)
			}
			if native.Final == nil || torch.Final == nil {
				t.Fatal("no final evaluation")
			}
			if a, b := native.Final.Loss, torch.Final.Loss; math.Abs(a-b)/a > 1e-4 {
				t.Errorf("validation loss %.7g native, %.7g torch", a, b)
			}
			if c.lagged {
				// Losses read back a step late (a GPU's way), the steps
				// where the generator does not step included: the same.
				prog, p, _ := loadSrc(t, "tinygan.pipe", []byte(src), planner.WithEngine("torch"))
				p.Engine.LossReadback = "lagged"
				dir := t.TempDir()
				res, ds := run.Run(context.Background(), p, progtest.Decoded(t, prog), run.Hooks{}, run.WithBackend(Backend{Python: py}),
					run.WithBase(dir), run.WithCheckpointDir(filepath.Join(dir, "ckpt")), run.WithThreads(1), run.WithMaxSteps(steps))
				if ds.HasErrors() {
					t.Fatal(ds)
				}
				if !slices.Equal(res.StepLosses, torch.StepLosses) {
					t.Errorf("losses %v read a step late, %v at once", res.StepLosses, torch.StepLosses)
				}
			}
			if !c.resume {
				return
			}
			// Lockstep: from the state of step 2, one step on each engine
			// changes every tensor of both models alike (updateDiffs),
			// within 1e-4 (relative, the median and the largest).
			dir := t.TempDir()
			mustRunJob(t, src, "native", dir, py, run.WithMaxSteps(2))
			before, err := run.ReadCheckpointState(filepath.Join(dir, "ckpt", "last.ckpt"))
			if err != nil {
				t.Fatal(err)
			}
			var states []engine.State
			for _, engine := range []string{"native", "torch"} {
				d := t.TempDir()
				copyFile(t, filepath.Join(dir, "ckpt", "last.ckpt"), filepath.Join(d, "ckpt", "last.ckpt"))
				mustRunJob(t, src, engine, d, py, run.WithResume(""), run.WithMaxSteps(3))
				st, err := run.ReadCheckpointState(filepath.Join(d, "ckpt", "last.ckpt"))
				if err != nil {
					t.Fatal(err)
				}
				states = append(states, st)
			}
			// The conv biases read by instancenorm (Graph.ZeroGradients)
			// stay put on both.
			med, mx, where := updateDiffs(t, before, states[0], states[1])
			if med > 1e-4 || mx > 1e-4 {
				t.Errorf("step 3's updates: median relative difference %.2e, largest %.2e (%s)", med, mx, where)
			}
			dir = t.TempDir()
			mustRunJob(t, src, "native", dir, py, run.WithMaxSteps(2))
			rest := mustRunJob(t, src, "torch", dir, py, run.WithResume(""), run.WithMaxSteps(steps))
			if rest.ResumedFrom == nil || rest.ResumedFrom.Step != 2 || len(rest.StepLosses) != steps {
				t.Fatalf("resumed from %+v with %d losses", rest.ResumedFrom, len(rest.StepLosses))
			}
			for i := 2; i < steps; i++ {
				a, b := native.StepLosses[i], rest.StepLosses[i]
				if d := math.Abs(a-b) / math.Abs(a); !(d <= 1e-4) {
					t.Errorf("step %d: loss %.7g native, %.7g resumed on torch", i+1, a, b)
				}
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
