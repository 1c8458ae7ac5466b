package torch

import (
	"math"
	"testing"

	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/run"
)

// TestGANOpsAgree trains small models made of leakyrelu, instancenorm
// (with and without affine), groupnorm, pixelshuffle and a scaled add on
// both engines in lockstep (see lossTol): the same loss on the same batch from the same state, and
// the same update of every tensor. pixelshuffle's permutation is checked
// here: a wrong one would pass the finite-difference check.
func TestGANOpsAgree(t *testing.T) {
	py := testPython(t)
	models := map[string]string{
		"leaky_instancenorm": "input [3, 8, 8]\n  conv 8 k3 pad1 -> instancenorm affine -> leakyrelu 0.2 -> conv 4 k3 s2 pad1 -> instancenorm -> leakyrelu -> conv 1 k1",
		"pixelshuffle":       "input [3, 4, 6]\n  conv 16 k3 pad1 -> pixelshuffle 2 -> leakyrelu 0.1 -> conv 12 k1 -> pixelshuffle 2 -> conv 2 k3 pad1",
		"add_scaled":         "input [3, 8, 8]\n  x = conv 8 k3 pad1\n  conv 8 k3 pad1 -> leakyrelu 0.2 -> add x scale 0.2 -> conv 2 k3 pad1",
		"groupnorm":          "input [3, 8, 8]\n  conv 8 k3 pad1 -> groupnorm 4 -> relu -> conv 6 k3 s2 pad1 -> groupnorm 2 eps 1e-3 -> conv 1 k1",
	}
	shapes := map[string]string{"leaky_instancenorm": "[3, 8, 8]", "pixelshuffle": "[3, 4, 6]", "add_scaled": "[3, 8, 8]", "groupnorm": "[3, 8, 8]"}
	for name, body := range models {
		t.Run(name, func(t *testing.T) { trainInLockstep(t, py, name, shapes[name], body) })
	}
}

// trainInLockstep trains a model of body on inputs of shape for three
// Adam steps on both engines from the same state and batch, and checks
// that the losses agree within lossTol, the updates within maxTol and the
// outputs after each step within 1e-4.
func trainInLockstep(t *testing.T, py, name, shape, body string) {
	t.Helper()
	src := "pipeline p\nsource s synthetic { samples 16  shape " + shape + " }\nmodel m {\n  " + body + "\n}\ntrain { epochs 1  batch 4  optimizer adam lr 1e-2  loss mse }\n"
	prog, p, g := loadSrc(t, name+".pipe", []byte(src))
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Threads = 2
	native, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	tm := buildTorch(t, g, cfg, Backend{Python: py})
	for step := range 3 {
		before := native.State()
		if err := tm.SetState(before); err != nil {
			t.Fatal(err)
		}
		b := randomBatch(g, "mse", cfg.Batch, uint64(step+1))
		native.ZeroGrad()
		ln, err := native.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := native.Step(1e-2); err != nil {
			t.Fatal(err)
		}
		tm.ZeroGrad()
		lt, err := tm.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := tm.Step(1e-2); err != nil {
			t.Fatal(err)
		}
		if d := math.Abs(lt-ln) / math.Max(math.Abs(ln), 1e-6); d > lossTol {
			t.Errorf("step %d: loss native %.8g, torch %.8g (%.2e)", step+1, ln, lt, d)
		}
		_, mx, where := updateDiffs(t, before, native.State(), tm.State())
		if mx > maxTol {
			t.Errorf("step %d: the updates of %s differ by %.2e", step+1, where, mx)
		}
		out := make([]float32, cfg.Batch*int(numel(g.OutShape())))
		out2 := make([]float32, len(out))
		if _, err := native.Eval(b, out); err != nil {
			t.Fatal(err)
		}
		tm.SetState(native.State())
		if _, err := tm.Eval(b, out2); err != nil {
			t.Fatal(err)
		}
		for i := range out {
			if math.Abs(float64(out[i]-out2[i])) > 1e-4*(1+math.Abs(float64(out[i]))) {
				t.Fatalf("step %d: output %d native %v, torch %v", step+1, i, out[i], out2[i])
			}
		}
	}
}
