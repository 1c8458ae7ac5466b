package native

import (
	"math"
	"pipe/engine/weights"
	"testing"

	"pipe/dataset"
)

// The formulas these tests hold the kernels to are Panther's
// (panther/nn/linear.py, conv2d.py and pawX's CPU kernels; its tutorial
// "Sketched Linear Layers" writes SKLinear in column form):
//
//	SKLinear  y = 1/(2L)·Σ_{i<L} (U1_iᵀ·S1_i·x + S2_i·U2_i·x) + b
//	          (row form, Panther's layout: x·S1_i·U1_i + x·U2_i·S2_i)
//	          S1_i = W·U1_iᵀ, S2_i = U2_iᵀ·W, U = ±1/√k
//	SKConv2d  y = 1/(2L)·Σ_{i<2L} U_iᵀ·(S_i ⋆ x) + b,  S_i = K·U_iᵀ
//
// Learned: S1s [L, in, k] and S2s [L, k, out], L·k·(in+out) values, plus
// the bias (Panther's tutorial says 2L·k·(in+out) + out, which counts the
// fixed U1s and U2s with them); SKConv2d's S1s [2L·k, in, kh, kw].

// skInput is a small fixed input: x_j = sin(j+1).
func skInput(n, size, outs int) *dataset.Batch {
	b := &dataset.Batch{N: n, X: make([]float32, n*size), Y: make([]float32, n*outs)}
	for j := range b.X {
		b.X[j] = float32(math.Sin(float64(j + 1)))
	}
	return b
}

func paramOf(m *model, name string) *param {
	for _, p := range append(append([]*param(nil), m.params...), m.buffers...) {
		if p.name == name {
			return p
		}
	}
	return nil
}

func TestSketchedDenseGolden(t *testing.T) {
	const in, out, L, k = 4, 3, 2, 2
	g := graphOf(t, "input [4]\nsketched_dense 3 terms 2 rank 2")
	if p := g.Params(); p != L*k*(in+out)+out {
		t.Errorf("graph: %d parameters, want L·k·(in+out)+out = %d", p, L*k*(in+out)+out)
	}
	if b := g.Nodes[1].Buffers; b != L*k*(in+out) {
		t.Errorf("graph: %d buffer values, want %d", b, L*k*(in+out))
	}
	m := mustBuild(t, g, cfgOf(2, "mse", "sgd"))
	s1, s2, u1, u2, bias := paramOf(m, "sketched_dense1.S1s"), paramOf(m, "sketched_dense1.S2s"),
		paramOf(m, "sketched_dense1.U1s"), paramOf(m, "sketched_dense1.U2s"), paramOf(m, "sketched_dense1.bias")
	if len(m.params) != 3 || len(m.buffers) != 2 || u1 == nil || u2 == nil || s1 == nil || s2 == nil || bias == nil {
		t.Fatalf("tensors: %d parameters, %d buffers", len(m.params), len(m.buffers))
	}
	for _, u := range []*param{u1, u2} {
		for _, v := range u.data {
			if math.Abs(math.Abs(float64(v))-1/math.Sqrt(k)) > 1e-7 {
				t.Fatalf("%s holds %g, not ±1/√k", u.name, v)
			}
		}
	}
	// S is a sketch of the dense initial weight W [in, out].
	w := weights.DenseInit(m.cfg.Seed, "sketched_dense1", in*out, out)
	for i := 0; i < L; i++ {
		for a := 0; a < in; a++ {
			for r := 0; r < k; r++ {
				var s float64
				for o := 0; o < out; o++ {
					s += float64(w[a*out+o]) * float64(u1.data[i*k*out+r*out+o])
				}
				if d := math.Abs(s - float64(s1.data[i*in*k+a*k+r])); d > 1e-6 {
					t.Errorf("S1_%d[%d,%d] = %g, W·U1ᵀ = %g", i, a, r, s1.data[i*in*k+a*k+r], s)
				}
			}
		}
	}
	for i := 0; i < L; i++ {
		for r := 0; r < k; r++ {
			for o := 0; o < out; o++ {
				var s float64
				for a := 0; a < in; a++ {
					s += float64(u2.data[i*in*k+a*k+r]) * float64(w[a*out+o])
				}
				if d := math.Abs(s - float64(s2.data[i*k*out+r*out+o])); d > 1e-6 {
					t.Errorf("S2_%d[%d,%d] = %g, U2ᵀ·W = %g", i, r, o, s2.data[i*k*out+r*out+o], s)
				}
			}
		}
	}
	b := skInput(2, in, out)
	y := make([]float32, 2*out)
	if _, err := m.Eval(b, y); err != nil {
		t.Fatal(err)
	}
	// The formula in float64 from the stored tensors.
	for n := 0; n < 2; n++ {
		x := b.X[n*in : (n+1)*in]
		for o := 0; o < out; o++ {
			want := float64(bias.data[o])
			for i := 0; i < L; i++ {
				for r := 0; r < k; r++ {
					var xs1, xu2 float64
					for a := 0; a < in; a++ {
						xs1 += float64(x[a]) * float64(s1.data[i*in*k+a*k+r])
						xu2 += float64(x[a]) * float64(u2.data[i*in*k+a*k+r])
					}
					want += (xs1*float64(u1.data[i*k*out+r*out+o]) + xu2*float64(s2.data[i*k*out+r*out+o])) / (2 * L)
				}
			}
			if d := math.Abs(want - float64(y[n*out+o])); d > 1e-6 {
				t.Errorf("y[%d,%d] = %g, the formula gives %g", n, o, y[n*out+o], want)
			}
		}
	}
	// Seed 1's outputs, so that a change of initialisation or kernel shows.
	golden := []float32{goldenSKDense0, goldenSKDense1, goldenSKDense2}
	for o, v := range golden {
		if math.Abs(float64(y[o]-v)) > 1e-6 {
			t.Errorf("y[0,%d] = %.7g, golden %.7g", o, y[o], v)
		}
	}
	t.Logf("y = %.7g", y)
	// The sketches are state: a checkpoint carries them.
	names := map[string]bool{}
	for _, tn := range m.State().Tensors {
		names[tn.Name] = true
	}
	if !names["sketched_dense1.U1s"] || !names["sketched_dense1.U2s"] {
		t.Errorf("the state lacks the sketches: %v", names)
	}
}

func TestSketchedConvGolden(t *testing.T) {
	const in, out, L, k, K = 2, 3, 1, 2, 3
	g := graphOf(t, "input [2, 4, 4]\nsketched_conv 3 k3 pad1 terms 1 rank 2")
	if p := g.Params(); p != 2*L*k*in*K*K+out {
		t.Errorf("graph: %d parameters, want 2L·k·in·K²+out = %d", p, 2*L*k*in*K*K+out)
	}
	if b := g.Nodes[1].Buffers; b != 2*L*k*out {
		t.Errorf("graph: %d buffer values, want %d", b, 2*L*k*out)
	}
	m := mustBuild(t, g, cfgOf(1, "mse", "sgd"))
	s, u, bias := paramOf(m, "sketched_conv1.S1s"), paramOf(m, "sketched_conv1.U1s"), paramOf(m, "sketched_conv1.bias")
	if s == nil || u == nil || bias == nil || len(m.buffers) != 1 {
		t.Fatal("missing tensors")
	}
	mid, kk := 2*L*k, in*K*K
	w := weights.DenseInit(m.cfg.Seed, "sketched_conv1", kk*out, K*K*out)
	for j := 0; j < mid; j++ {
		for p := 0; p < kk; p++ {
			var v float64
			for o := 0; o < out; o++ {
				v += float64(w[p*out+o]) * float64(u.data[j*out+o])
			}
			if d := math.Abs(v - float64(s.data[j*kk+p])); d > 1e-6 {
				t.Errorf("S[%d,%d] = %g, K·Uᵀ = %g", j, p, s.data[j*kk+p], v)
			}
		}
	}
	b := skInput(1, in*16, out*16)
	y := make([]float32, out*16)
	if _, err := m.Eval(b, y); err != nil {
		t.Fatal(err)
	}
	// The formula directly: y[o,h,w] = b_o + 1/(2L)·Σ_j U[j,o]·Σ S[j,c,a,b]·x[c,h+a-1,w+b-1].
	for o := 0; o < out; o++ {
		for h := 0; h < 4; h++ {
			for wc := 0; wc < 4; wc++ {
				want := float64(bias.data[o])
				for j := 0; j < mid; j++ {
					var conv float64
					for c := 0; c < in; c++ {
						for a := 0; a < K; a++ {
							for bb := 0; bb < K; bb++ {
								hh, ww := h+a-1, wc+bb-1
								if hh < 0 || hh >= 4 || ww < 0 || ww >= 4 {
									continue
								}
								conv += float64(s.data[j*kk+c*K*K+a*K+bb]) * float64(b.X[c*16+hh*4+ww])
							}
						}
					}
					want += float64(u.data[j*out+o]) * conv / (2 * L)
				}
				if d := math.Abs(want - float64(y[o*16+h*4+wc])); d > 1e-5 {
					t.Errorf("y[%d,%d,%d] = %g, the formula gives %g", o, h, wc, y[o*16+h*4+wc], want)
				}
			}
		}
	}
	golden := []float32{goldenSKConv0, goldenSKConv1, goldenSKConv2}
	for o, v := range golden {
		if math.Abs(float64(y[o*16+5]-v)) > 1e-6 {
			t.Errorf("y[%d,1,1] = %.7g, golden %.7g", o, y[o*16+5], v)
		}
	}
	t.Logf("y[:,1,1] = %.7g %.7g %.7g", y[5], y[16+5], y[32+5])
}

// Outputs at seed 1 on skInput, as first computed.
const (
	goldenSKDense0, goldenSKDense1, goldenSKDense2 = 0.2327337, -0.4807917, 0.3209695
	goldenSKConv0, goldenSKConv1, goldenSKConv2    = -0.4970254, 0.2534651, 0.3090386
)
