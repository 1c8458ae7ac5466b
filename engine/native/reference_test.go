package native

import (
	"math"
	"testing"

	"pipe/dataset"
)

// The gradient checks prove that each backward matches its forward; these
// prove that the forwards compute PyTorch's functions, against direct,
// unoptimised implementations on NCHW samples.

// t3 is one sample [C, H, W] in NCHW order.
type t3 struct {
	c, h, w int
	v       []float64
}

func newT3(c, h, w int) *t3           { return &t3{c, h, w, make([]float64, c*h*w)} }
func (t *t3) at(c, i, j int) *float64 { return &t.v[(c*t.h+i)*t.w+j] }
func (t *t3) get(c, i, j int) float64 { return t.v[(c*t.h+i)*t.w+j] }
func (t *t3) inside(i, j int) bool    { return i >= 0 && i < t.h && j >= 0 && j < t.w }
func sample(b *dataset.Batch, i, c, h, w int) *t3 {
	t := newT3(c, h, w)
	for k := range t.v {
		t.v[k] = float64(b.X[i*c*h*w+k])
	}
	return t
}

func refConv(x *t3, w, b []float32, co, k, s, p, d, g, ho, wo int) *t3 {
	y := newT3(co, ho, wo)
	cig, cog := x.c/g, co/g
	for o := 0; o < co; o++ {
		grp := o / cog
		for i := 0; i < ho; i++ {
			for j := 0; j < wo; j++ {
				var sum float64
				if b != nil {
					sum = float64(b[o])
				}
				for ci := 0; ci < cig; ci++ {
					for kh := 0; kh < k; kh++ {
						for kw := 0; kw < k; kw++ {
							ii, jj := i*s-p+kh*d, j*s-p+kw*d
							if x.inside(ii, jj) {
								sum += x.get(grp*cig+ci, ii, jj) * float64(w[((o*cig+ci)*k+kh)*k+kw])
							}
						}
					}
				}
				*y.at(o, i, j) = sum
			}
		}
	}
	return y
}

func refConvT(x *t3, w, b []float32, co, k, s, p, ho, wo int) *t3 {
	y := newT3(co, ho, wo)
	for o := 0; o < co; o++ {
		for i := 0; i < ho; i++ {
			for j := 0; j < wo; j++ {
				if b != nil {
					*y.at(o, i, j) = float64(b[o])
				}
			}
		}
	}
	for ci := 0; ci < x.c; ci++ {
		for i := 0; i < x.h; i++ {
			for j := 0; j < x.w; j++ {
				for o := 0; o < co; o++ {
					for kh := 0; kh < k; kh++ {
						for kw := 0; kw < k; kw++ {
							if ii, jj := i*s-p+kh, j*s-p+kw; y.inside(ii, jj) {
								*y.at(o, ii, jj) += x.get(ci, i, j) * float64(w[((ci*co+o)*k+kh)*k+kw])
							}
						}
					}
				}
			}
		}
	}
	return y
}

func refPool(x *t3, max bool, k, s, p, ho, wo int) *t3 {
	y := newT3(x.c, ho, wo)
	for c := 0; c < x.c; c++ {
		for i := 0; i < ho; i++ {
			for j := 0; j < wo; j++ {
				best, sum := math.Inf(-1), 0.0
				for kh := 0; kh < k; kh++ {
					for kw := 0; kw < k; kw++ {
						if ii, jj := i*s-p+kh, j*s-p+kw; x.inside(ii, jj) {
							best = math.Max(best, x.get(c, ii, jj))
							sum += x.get(c, ii, jj)
						}
					}
				}
				if max {
					*y.at(c, i, j) = best
				} else {
					*y.at(c, i, j) = sum / float64(k*k)
				}
			}
		}
	}
	return y
}

// refBilinear follows PyTorch's upsample_bilinear2d.
func refBilinear(x *t3, ho, wo int, align bool) *t3 {
	y := newT3(x.c, ho, wo)
	src := func(o, in, out int) (int, int, float64) {
		var r float64
		if align {
			if out > 1 {
				r = float64(o) * float64(in-1) / float64(out-1)
			}
		} else {
			r = math.Max((float64(o)+0.5)*float64(in)/float64(out)-0.5, 0)
		}
		a := int(math.Floor(r))
		b := min(a+1, in-1)
		return a, b, r - float64(a)
	}
	for c := 0; c < x.c; c++ {
		for i := 0; i < ho; i++ {
			i0, i1, li := src(i, x.h, ho)
			for j := 0; j < wo; j++ {
				j0, j1, lj := src(j, x.w, wo)
				*y.at(c, i, j) = (1-li)*((1-lj)*x.get(c, i0, j0)+lj*x.get(c, i0, j1)) + li*((1-lj)*x.get(c, i1, j0)+lj*x.get(c, i1, j1))
			}
		}
	}
	return y
}

func refNearest(x *t3, ho, wo int) *t3 {
	y := newT3(x.c, ho, wo)
	for c := 0; c < x.c; c++ {
		for i := 0; i < ho; i++ {
			for j := 0; j < wo; j++ {
				*y.at(c, i, j) = x.get(c, i*x.h/ho, j*x.w/wo)
			}
		}
	}
	return y
}

func (m *model) param(name string) []float32 {
	for _, p := range m.params {
		if p.name == name {
			return p.data
		}
	}
	return nil
}

func TestForwardReference(t *testing.T) {
	cases := []struct {
		model string
		ref   func(m *model, x *t3) *t3
	}{
		{"input [3, 9, 9]\nconv 4 k3 s2 pad1", func(m *model, x *t3) *t3 {
			return refConv(x, m.param("conv1.weight"), m.param("conv1.bias"), 4, 3, 2, 1, 1, 1, 5, 5)
		}},
		{"input [4, 9, 8]\nconv 6 k3 pad2 d2 groups 2", func(m *model, x *t3) *t3 {
			return refConv(x, m.param("conv1.weight"), m.param("conv1.bias"), 6, 3, 1, 2, 2, 2, 9, 8)
		}},
		{"input [3, 6, 5]\nconv 3 k3 pad1 groups 3", func(m *model, x *t3) *t3 { // depthwise.go
			return refConv(x, m.param("conv1.weight"), m.param("conv1.bias"), 3, 3, 1, 1, 1, 3, 6, 5)
		}},
		{"input [2, 4, 5]\nconv 2 k3 pad3 d3 groups 2 bias false", func(m *model, x *t3) *t3 { // some taps past the edges
			return refConv(x, m.param("conv1.weight"), nil, 2, 3, 1, 3, 3, 2, 4, 5)
		}},
		{"input [3, 7, 7]\nconv 5 k1 bias false", func(m *model, x *t3) *t3 {
			return refConv(x, m.param("conv1.weight"), nil, 5, 1, 1, 0, 1, 1, 7, 7)
		}},
		{"input [3, 10, 10]\nconv 4 k5 s3", func(m *model, x *t3) *t3 {
			return refConv(x, m.param("conv1.weight"), m.param("conv1.bias"), 4, 5, 3, 0, 1, 1, 2, 2)
		}},
		{"input [3, 4, 5]\nconvtranspose 2 k2 s2", func(m *model, x *t3) *t3 {
			return refConvT(x, m.param("convtranspose1.weight"), m.param("convtranspose1.bias"), 2, 2, 2, 0, 8, 10)
		}},
		{"input [3, 4, 5]\nconvtranspose 2 k3 s2 pad1", func(m *model, x *t3) *t3 {
			return refConvT(x, m.param("convtranspose1.weight"), m.param("convtranspose1.bias"), 2, 3, 2, 1, 7, 9)
		}},
		{"input [2, 7, 7]\nmaxpool 3 s2 pad1", func(m *model, x *t3) *t3 { return refPool(x, true, 3, 2, 1, 4, 4) }},
		{"input [2, 8, 6]\nmaxpool 2", func(m *model, x *t3) *t3 { return refPool(x, true, 2, 2, 0, 4, 3) }},
		{"input [2, 7, 7]\navgpool 3 s2 pad1", func(m *model, x *t3) *t3 { return refPool(x, false, 3, 2, 1, 4, 4) }},
		{"input [2, 3, 4]\nupsample 2 mode bilinear", func(m *model, x *t3) *t3 { return refBilinear(x, 6, 8, false) }},
		{"input [2, 3, 4]\nupsample 3", func(m *model, x *t3) *t3 { return refNearest(x, 9, 12) }},
	}
	for _, c := range cases {
		g := graphOf(t, c.model)
		m := mustBuild(t, g, cfgOf(3, "mse", "sgd"))
		b := randomBatch(m, 3, 1)
		in, out := m.units[0].out, m.units[m.outUnit].out
		got := make([]float32, 3*out.size())
		if _, err := m.Eval(b, got); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			want := c.ref(m, sample(b, i, in.c, in.h, in.w))
			if want.c != out.c || want.h != out.h || want.w != out.w {
				t.Fatalf("%q: reference shape %d×%d×%d, model %v", c.model, want.c, want.h, want.w, g.OutShape())
			}
			for k, v := range want.v {
				if d := math.Abs(v - float64(got[i*out.size()+k])); d > 1e-4*math.Max(1, math.Abs(v)) {
					t.Fatalf("%q sample %d value %d: %v, want %v", c.model, i, k, got[i*out.size()+k], v)
				}
			}
		}
	}
}

// TestBatchnormReference checks training-mode batchnorm (batch
// statistics, biased variance) and the running statistics' update
// (unbiased variance, momentum 0.1) on images, fused and not.
func TestBatchnormReference(t *testing.T) {
	for _, fuse := range []bool{false, true} {
		g := graphOf(t, "input [2, 3, 3]\nconv 3 k1 -> batchnorm")
		cfg := cfgOf(4, "mse", "sgd")
		if fuse {
			cfg.Fusion = fuseAll(g)
		}
		m := mustBuild(t, g, cfg)
		b := randomBatch(m, 4, 2)
		m.batch = b
		m.runForward(m.train, 4, true, nil)
		out := make([]float32, 4*27)
		toNCHW(out, m.train.predS, m.units[m.outUnit].out, 4)
		w, bias := m.param("conv1.weight"), m.param("conv1.bias")
		var convOut [4]*t3
		for i := range convOut {
			convOut[i] = refConv(sample(b, i, 2, 3, 3), w, bias, 3, 1, 1, 0, 1, 1, 3, 3)
		}
		for c := 0; c < 3; c++ {
			var s, s2 float64
			for i := range convOut {
				for k := 0; k < 9; k++ {
					v := convOut[i].v[c*9+k]
					s += v
					s2 += v * v
				}
			}
			mean := s / 36
			variance := s2/36 - mean*mean
			for i := range convOut {
				for k := 0; k < 9; k++ {
					want := (convOut[i].v[c*9+k] - mean) / math.Sqrt(variance+1e-5)
					if got := float64(out[i*27+c*9+k]); math.Abs(got-want) > 1e-4 {
						t.Fatalf("fuse %v channel %d: %v, want %v", fuse, c, got, want)
					}
				}
			}
			for _, bn := range m.bns {
				bn.commit()
				rm, rv := float64(bn.rm.data[c]), float64(bn.rv.data[c])
				if math.Abs(rm-0.1*mean) > 1e-5 || math.Abs(rv-(0.9+0.1*variance*36/35)) > 1e-5 {
					t.Errorf("fuse %v channel %d: running mean %v var %v, want %v %v", fuse, c, rm, rv, 0.1*mean, 0.9+0.1*variance*36/35)
				}
			}
		}
		m.batch = nil
	}
}

// TestLossReference checks each loss's value against its formula.
func TestLossReference(t *testing.T) {
	g := graphOf(t, "input [2, 2, 2]\nconv 2 k1")
	for _, kind := range []string{"cross_entropy", "bce", "mse", "mae", "dice"} {
		m := mustBuild(t, g, cfgOf(3, kind, "sgd"))
		b := randomBatch(m, 3, 4)
		got := m.lossOnly(b)
		out := make([]float32, 3*8)
		if _, err := m.Eval(b, out); err != nil {
			t.Fatal(err)
		}
		var want float64
		switch kind {
		case "cross_entropy":
			for i := 0; i < 3; i++ {
				for p := 0; p < 4; p++ {
					z0, z1 := float64(out[i*8+p]), float64(out[i*8+4+p])
					lse := math.Log(math.Exp(z0) + math.Exp(z1))
					want += lse - []float64{z0, z1}[int(b.Y[i*4+p])]
				}
			}
			want /= 12
		case "bce":
			for j, z := range out {
				p, y := 1/(1+math.Exp(-float64(z))), float64(b.Y[j])
				want -= y*math.Log(p) + (1-y)*math.Log(1-p)
			}
			want /= 24
		case "mse", "mae":
			for j, z := range out {
				d := float64(z) - float64(b.Y[j])
				if kind == "mse" {
					want += d * d
				} else {
					want += math.Abs(d)
				}
			}
			want /= 24
		case "dice":
			for c := 0; c < 2; c++ {
				var i2, ps, ts float64
				for i := 0; i < 3; i++ {
					for p := 0; p < 4; p++ {
						j := i*8 + c*4 + p
						pr := 1 / (1 + math.Exp(-float64(out[j])))
						i2 += pr * float64(b.Y[j])
						ps += pr
						ts += float64(b.Y[j])
					}
				}
				want += (2*i2 + 1) / (ps + ts + 1)
			}
			want = 1 - want/2
		}
		if math.Abs(got-want) > 1e-5 {
			t.Errorf("%s: %v, want %v", kind, got, want)
		}
	}
}

// TestLossAfterSigmoid checks that bce and dice on a model that ends in
// sigmoid, fused or not, read its probabilities once: the loss equals its
// formula on the model's output.
func TestLossAfterSigmoid(t *testing.T) {
	for _, fuse := range []bool{false, true} {
		for _, kind := range []string{"bce", "dice"} {
			g := graphOf(t, "input [2, 2, 2]\nconv 1 k1 -> sigmoid")
			cfg := cfgOf(3, kind, "sgd")
			if fuse {
				cfg.Fusion = fuseAll(g)
			}
			m := mustBuild(t, g, cfg)
			b := randomBatch(m, 3, 4)
			got := m.lossOnly(b)
			p := make([]float32, 12)
			if _, err := m.Eval(b, p); err != nil {
				t.Fatal(err)
			}
			var want, i2, ps, ts float64
			for j, v := range p {
				pv, y := float64(v), float64(b.Y[j])
				want -= y*math.Log(pv) + (1-y)*math.Log(1-pv)
				i2 += pv * y
				ps += pv
				ts += y
			}
			want /= 12
			if kind == "dice" {
				want = 1 - (2*i2+1)/(ps+ts+1)
			}
			if math.Abs(got-want) > 1e-5 {
				t.Errorf("fuse %v %s: %v, want %v", fuse, kind, got, want)
			}
		}
	}
}
