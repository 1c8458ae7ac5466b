package native

import (
	"math"
	"testing"
)

// dropPathGradCases check drop_path by finite differences in a residual
// branch of images and of vectors (the draws are the same in the loss's
// re-evaluations: they hash the micro-step), where some of the 6 samples
// are dropped, and at p 0.
var dropPathGradCases = []gcase{
	{name: "drop_path_image", model: "input [2, 4, 4]\nx = conv 3 k3 pad1\nconv 3 k3 pad1 -> drop_path 0.5 -> add x -> flatten -> dense 2", loss: "mse", batch: 6},
	{name: "drop_path_vector", model: "input [5]\nx = dense 4\ndense 4 -> tanh -> drop_path 0.4 -> add x -> dense 2", loss: "mse", batch: 6},
	{name: "drop_path_zero", model: "input [2, 3, 3]\nconv 3 k3 pad1 -> drop_path 0 -> flatten -> dense 2", loss: "mse"},
}

func TestGradientsDropPath(t *testing.T) { checkGradCases(t, dropPathGradCases) }

// TestDropPathDraws: each sample's factor is 0 or 1/(1-p), about a
// fraction p of 4096 samples is dropped (the binomial's standard
// deviation is 0.008 at p 0.3), the draws change with the micro-step, and
// evaluation is the identity.
func TestDropPathDraws(t *testing.T) {
	g := graphOf(t, "input [2, 3, 3]\ndrop_path 0.3")
	m := mustBuild(t, g, cfgOf(4, "mse", "sgd"))
	k := m.units[1].k.(*dropPathKernel)
	f := k.scales(m, 4096)
	dropped := 0
	for _, v := range f {
		switch v {
		case 0:
			dropped++
		case float32(1 / 0.7):
		default:
			t.Fatalf("factor %v", v)
		}
	}
	if r := float64(dropped) / 4096; math.Abs(r-0.3) > 0.05 {
		t.Errorf("dropped %.3f of the samples, want 0.3", r)
	}
	m.microStep++
	same := 0
	for i, v := range k.scales(m, 4096) {
		if v == f[i] {
			same++
		}
	}
	if same == 4096 {
		t.Error("the next micro-step draws the same samples")
	}
	b := randomBatch(m, 4, 3)
	out := make([]float32, len(b.X))
	if _, err := m.Eval(b, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		if out[i] != b.X[i] {
			t.Fatalf("evaluation changes value %d: %v to %v", i, b.X[i], out[i])
		}
	}
}
