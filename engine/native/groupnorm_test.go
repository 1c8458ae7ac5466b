package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// groupnormGradCases check groupnorm by finite differences, through the
// parameters of a layer before it (its input gradient) and its own scale
// and shift, on images and a volume, with groups 1, some and one per
// channel.
var groupnormGradCases = []gcase{
	{name: "groupnorm", model: "input [2, 4, 5]\nconv 4 k3 pad1 -> groupnorm 2 -> conv 2 k1 -> flatten -> dense 2", loss: "mse"},
	{name: "groupnorm_last", model: "input [2, 4, 4]\nconv 6 k3 pad1 -> groupnorm 3 eps 1e-3 -> leakyrelu 0.2 -> flatten -> dense 2", loss: "mse"},
	{name: "groupnorm_one_group", model: "input [2, 3, 3]\nconv 3 k1 -> groupnorm 1 -> flatten -> dense 2", loss: "mse"},
	{name: "groupnorm_per_channel", model: "input [2, 3, 4]\nconv 3 k3 pad1 -> groupnorm 3 -> tanh -> flatten -> dense 2", loss: "mse"},
	{name: "groupnorm_acc", model: "input [2, 4, 4]\nx = conv 4 k3 pad1\ngroupnorm 2 -> add x -> flatten -> dense 2", loss: "mse"},
	{name: "groupnorm3d", model: "input [2, 3, 4, 4]\nconv3d 4 k3 pad1 -> groupnorm 2 -> flatten -> dense 2", loss: "mse"},
}

func TestGradientsGroupnorm(t *testing.T) {
	// γ starts at 1 and β at 0; other values exercise the scale's place
	// in the input gradient.
	gradCasesPrepared(t, groupnormGradCases, func(m *model) { randomAffine(m, 5) })
}

// gradCasesPrepared checks each case's gradients at 1 and 2 threads, a
// batch of 4, after prep sets the layer's parameters.
func gradCasesPrepared(t *testing.T, cases []gcase, prep func(m *model)) {
	for _, c := range cases {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads%d", c.name, threads), func(t *testing.T) {
				g := graphOf(t, c.model)
				cfg := cfgOf(4, c.loss, "sgd")
				cfg.Threads = threads
				m := mustBuild(t, g, cfg)
				prep(m)
				b := randomBatch(m, 4, 9)
				for i := range b.Y {
					b.Y[i] *= 3
				}
				gradCheck(t, m, b)
			})
		}
	}
}

// randomAffine sets every groupnorm's scale and shift to random values.
func randomAffine(m *model, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range m.params {
		if strings.HasPrefix(p.name, "groupnorm") {
			for i := range p.data {
				p.data[i] = float32(0.5 + r.Float64())
			}
		}
	}
}

// TestGroupnormReference checks the forward pass against a direct float64
// GroupNorm: each group of C/groups channels of each sample normalised by
// its mean and biased variance, then scaled and shifted per channel.
func TestGroupnormReference(t *testing.T) {
	for _, c := range []struct {
		model    string
		groups   int
		eps      float64
		channels int
	}{
		{"input [6, 3, 4]\ngroupnorm 3", 3, 1e-5, 6},
		{"input [4, 5, 5]\ngroupnorm 1 eps 0.01", 1, 0.01, 4},
		{"input [3, 2, 2]\ngroupnorm 3", 3, 1e-5, 3},
		{"input [4, 2, 3, 3]\ngroupnorm 2", 2, 1e-5, 4},
	} {
		g := graphOf(t, c.model)
		m := mustBuild(t, g, cfgOf(3, "mse", "sgd"))
		randomAffine(m, 2)
		b := randomBatch(m, 3, 1)
		size := m.units[0].out.size()
		// Offset and scale the inputs so the statistics matter.
		for i := range b.X {
			b.X[i] = 2 + 3*b.X[i]
		}
		got := make([]float32, 3*size)
		if _, err := m.Eval(b, got); err != nil {
			t.Fatal(err)
		}
		gamma, beta := m.param("groupnorm1.weight"), m.param("groupnorm1.bias")
		s, cg := size/c.channels, c.channels/c.groups
		for i := 0; i < 3; i++ {
			x := b.X[i*size : (i+1)*size]
			for grp := 0; grp < c.groups; grp++ {
				vals := x[grp*cg*s : (grp+1)*cg*s]
				var mean, v float64
				for _, e := range vals {
					mean += float64(e)
				}
				mean /= float64(len(vals))
				for _, e := range vals {
					v += (float64(e) - mean) * (float64(e) - mean)
				}
				v /= float64(len(vals))
				for k := grp * cg * s; k < (grp+1)*cg*s; k++ {
					ch := k / s
					want := (float64(x[k])-mean)/math.Sqrt(v+c.eps)*float64(gamma[ch]) + float64(beta[ch])
					if d := math.Abs(want - float64(got[i*size+k])); d > 1e-4*math.Max(1, math.Abs(want)) {
						t.Fatalf("%q sample %d value %d: %v, want %v", c.model, i, k, got[i*size+k], want)
					}
				}
			}
		}
	}
}
