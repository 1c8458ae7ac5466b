package native

import (
	"math"
	"testing"
)

// silu and hardswish alone, as a fused conv's and dense's epilogue and
// after a fused batchnorm, through the parameters of the layers before
// them. The inputs of hardswish are scaled (conv weights of a few units)
// so that values fall on all three of its pieces.
var swishGradCases = []gcase{
	{name: "silu", model: "input [6]\ndense 8 -> silu -> dense 2", loss: "mse"},
	{name: "swish_alias", model: "input [2, 4, 4]\nconv 3 k3 pad1 -> swish -> flatten -> dense 2", loss: "mse"},
	{name: "hardswish", model: "input [6]\ndense 8 -> hardswish -> dense 2", loss: "mse"},
	{name: "fused_conv_bn_silu", model: "input [2, 5, 5]\nconv 3 k3 pad1 -> batchnorm -> silu -> conv 3 k3 bias false -> batchnorm -> hardswish -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_conv_silu", model: "input [2, 6, 6]\nconv 3 k3 pad1 -> silu -> conv 3 k3 -> hardswish -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_dense_silu", model: "input [6]\ndense 8 -> silu -> dense 8 -> hardswish -> dense 2", loss: "mse", fuse: true},
}

func TestGradientsSwish(t *testing.T) { checkGradCases(t, swishGradCases) }

// TestSwishReference checks silu and hardswish against their float64
// definitions on values spanning hardswish's pieces, its ends ±3
// included, and the derivatives against PyTorch's formulas.
func TestSwishReference(t *testing.T) {
	xs := []float32{-40, -6, -3.5, -3, -2.9, -1, -0.25, 0, 0.3, 1, 2.5, 3, 3.01, 7, 40}
	y := make([]float32, len(xs))
	applyAct(actSiLU, y, xs)
	for i, x := range xs {
		want := float64(x) / (1 + math.Exp(-float64(x)))
		if d := math.Abs(float64(y[i]) - want); d > 2e-7*math.Max(1, math.Abs(want)) {
			t.Errorf("silu(%v) = %v, want %v", x, y[i], want)
		}
		s := 1 / (1 + math.Exp(-float64(x)))
		if d := math.Abs(float64(actDeriv(actSiLU, x, 0)) - s*(1+float64(x)*(1-s))); d > 1e-6 {
			t.Errorf("silu'(%v) = %v", x, actDeriv(actSiLU, x, 0))
		}
	}
	applyAct(actHardswish, y, xs)
	for i, x := range xs {
		v := float64(x)
		want := v * math.Min(math.Max(v+3, 0), 6) / 6
		if d := math.Abs(float64(y[i]) - want); d > 2e-7*math.Max(1, math.Abs(want)) {
			t.Errorf("hardswish(%v) = %v, want %v", x, y[i], want)
		}
		dwant := 1.0
		switch {
		case v < -3:
			dwant = 0
		case v <= 3:
			dwant = v/3 + 0.5
		}
		if d := math.Abs(float64(actDeriv(actHardswish, x, 0)) - dwant); d > 1e-6 {
			t.Errorf("hardswish'(%v) = %v, want %v", x, actDeriv(actHardswish, x, 0), dwant)
		}
	}
}
