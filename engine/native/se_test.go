package native

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// seGradCases check se by finite differences through a conv before it
// (its input gradient, both through the gate's product and through the
// pooled mean) and its own fc1 and fc2: squeeze 1, one below C, and one
// above C (fc1's bias rows spread over the channel tasks), an input
// gradient added to another, and one plane of one value.
var seGradCases = []gcase{
	{name: "se", model: "input [2, 4, 5]\nconv 4 k3 pad1 -> se -> conv 2 k1 -> flatten -> dense 2", loss: "mse"},
	{name: "se_squeeze_wide", model: "input [2, 3, 3]\nconv 3 k3 pad1 -> se squeeze 7 -> silu -> flatten -> dense 2", loss: "mse"},
	{name: "se_ratio", model: "input [2, 4, 4]\nconv 8 k3 pad1 -> se ratio 3 -> flatten -> dense 2", loss: "mse"},
	{name: "se_acc", model: "input [2, 4, 4]\nx = conv 4 k3 pad1\nse squeeze 2 -> add x -> flatten -> dense 2", loss: "mse"},
	{name: "se_one_pixel", model: "input [3, 2, 2]\nconv 4 k2 -> se squeeze 2 -> flatten -> dense 2", loss: "mse"},
}

func TestGradientsSE(t *testing.T) {
	// PyTorch's initial fc weights leave gradients too small for the
	// finite differences' absolute tolerance.
	gradCasesPrepared(t, seGradCases, func(m *model) { randomSE(m, 5) })
}

// randomSE draws every se's fc weights and biases from U(-1.5, 1.5).
func randomSE(m *model, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range m.params {
		if strings.HasPrefix(p.name, "se") {
			for i := range p.data {
				p.data[i] = float32(3*r.Float64() - 1.5)
			}
		}
	}
}

// TestSEReference checks the forward pass against a direct float64
// squeeze-and-excitation on random weights.
func TestSEReference(t *testing.T) {
	g := graphOf(t, "input [5, 3, 4]\nse squeeze 3")
	m := mustBuild(t, g, cfgOf(3, "mse", "sgd"))
	randomSE(m, 7)
	b := randomBatch(m, 3, 1)
	for i := range b.X {
		b.X[i] = 1 + 2*b.X[i]
	}
	const c, sq, s = 5, 3, 12
	got := make([]float32, 3*c*s)
	if _, err := m.Eval(b, got); err != nil {
		t.Fatal(err)
	}
	w1, b1, w2, b2 := m.param("se1.fc1.weight"), m.param("se1.fc1.bias"), m.param("se1.fc2.weight"), m.param("se1.fc2.bias")
	for i := 0; i < 3; i++ {
		x := b.X[i*c*s : (i+1)*c*s]
		var p [c]float64
		for ch := range p {
			for _, v := range x[ch*s : (ch+1)*s] {
				p[ch] += float64(v) / s
			}
		}
		var a [sq]float64
		for j := range a {
			z := float64(b1[j])
			for ch := range p {
				z += float64(w1[j*c+ch]) * p[ch]
			}
			a[j] = z / (1 + math.Exp(-z))
		}
		for ch := 0; ch < c; ch++ {
			z := float64(b2[ch])
			for j := range a {
				z += float64(w2[ch*sq+j]) * a[j]
			}
			gate := 1 / (1 + math.Exp(-z))
			for k := ch * s; k < (ch+1)*s; k++ {
				want := float64(x[k]) * gate
				if d := math.Abs(want - float64(got[i*c*s+k])); d > 1e-5*math.Max(1, math.Abs(want)) {
					t.Fatalf("sample %d value %d: %v, want %v", i, k, got[i*c*s+k], want)
				}
			}
		}
	}
}
