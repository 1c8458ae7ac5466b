package native

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"pipe/dataset"
	"pipe/internal/progtest"
	"pipe/run"
)

// TestRandomAttentionGolden: random_attention's parameter and buffer counts,
// its random features (orthogonal within a block, chi-distributed norms),
// and its outputs for seed 1 against the formula of stdlib/randattn.go
// computed here in float64 from the model's own tensors, for each feature
// map, causal or not.
func TestRandomAttentionGolden(t *testing.T) {
	const tk, d, h, mf = 5, 6, 2, 7 // M > d: a full block and a cut one
	dh := d / h
	for _, c := range []struct {
		opts   string
		causal bool
		relu   bool
	}{{"", false, false}, {" causal", true, false}, {" kernel relu", false, true}, {" causal kernel relu", true, true}} {
		t.Run("features"+c.opts, func(t *testing.T) {
			// patches 1 is a 1×1 conv, set to the identity below: the
			// tokens are the input's columns.
			g := graphOf(t, "input [6, 5, 1]\npatches 1 dim 6 -> random_attention heads 2 features 7"+c.opts+" -> flatten")
			nd := g.Nodes[len(g.Nodes)-2]
			if nd.Params != 4*d*d+4*d || nd.Buffers != mf*int64(dh) {
				t.Fatalf("%d parameters and %d buffer values, want %d and %d", nd.Params, nd.Buffers, 4*d*d+4*d, mf*dh)
			}
			m := mustBuild(t, g, cfgOf(3, "mse", "sgd"))
			st := m.State()
			get := func(s string) []float64 {
				x := st.Lookup("random_attention1." + s)
				if x == nil {
					t.Fatalf("the state has no %s", s)
				}
				out := make([]float64, len(x.Data))
				for i, v := range x.Data {
					out[i] = float64(v)
				}
				return out
			}
			var np int
			for _, p := range m.params {
				np += p.n
			}
			if np != 4*d*d+4*d+d*d+d {
				t.Errorf("the model has %d parameters", np)
			}
			w := get("projection_matrix")
			norms := map[float64]bool{}
			for i := 0; i < mf; i++ {
				ni := math.Sqrt(dot64(w[i*dh:(i+1)*dh], w[i*dh:(i+1)*dh]))
				norms[math.Round(ni*1e4)] = true
				for j := i - i%dh; j < i; j++ { // earlier rows of its block
					nj := math.Sqrt(dot64(w[j*dh:(j+1)*dh], w[j*dh:(j+1)*dh]))
					if cos := dot64(w[i*dh:(i+1)*dh], w[j*dh:(j+1)*dh]) / (ni * nj); math.Abs(cos) > 1e-5 {
						t.Errorf("features %d and %d of a block are not orthogonal: cos %.2g", i, j, cos)
					}
				}
			}
			if len(norms) < mf {
				t.Errorf("the features' norms repeat: %v", norms)
			}
			// Biases start at zero; give them values so that they count.
			for _, p := range m.params {
				if len(p.shape) == 4 { // the patches' conv
					clear(p.data)
					for i := 0; i < d; i++ {
						p.data[i*d+i] = 1
					}
				} else if p.shape[0] == d && len(p.shape) == 1 && p.name[:7] == "patches" {
					clear(p.data)
				} else if len(p.shape) == 1 {
					for i := range p.data {
						p.data[i] = 0.1 * float32(i%3-1)
					}
				}
			}
			st = m.State()
			wq, wk, wv, w0 := get("Wq"), get("Wk"), get("Wv"), get("W0")
			bq, bk, bv, b0 := get("bq"), get("bk"), get("bv"), get("b0")
			b := randomBatch(m, 3, 4)
			out := make([]float32, 3*tk*d)
			if _, err := m.Eval(b, out); err != nil {
				t.Fatal(err)
			}
			worst, big := 0.0, 0.0
			for n := 0; n < 3; n++ {
				x := make([]float64, tk*d)
				for i := 0; i < tk; i++ {
					for ch := 0; ch < d; ch++ {
						x[i*d+ch] = float64(b.X[n*tk*d+ch*tk+i])
					}
				}
				want := favorRef(x, wq, wk, wv, w0, bq, bk, bv, b0, w, tk, d, h, mf, c.causal, c.relu)
				for i, v := range want {
					worst = math.Max(worst, math.Abs(v-float64(out[n*tk*d+i])))
					big = math.Max(big, math.Abs(v))
				}
			}
			if worst > 1e-5*big {
				t.Errorf("outputs differ from the formula by %.2g (largest %.3g)", worst, big)
			}
			t.Logf("worst difference %.2g of %.3g", worst, big)
		})
	}
}

func dot64(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// favorRef is random_attention on one sample's tokens x [t, d], in
// float64, written from the definition: for each token and head,
// o_t = Σ_s φ(q_t)·φ(k_s) v_s / Σ_s φ(q_t)·φ(k_s) over s (s ≤ t when causal).
func favorRef(x, wq, wk, wv, w0, bq, bk, bv, b0, om []float64, t, d, h, mf int, causal, relu bool) []float64 {
	dh := d / h
	lin := func(w, b, x []float64) []float64 { // x [t, d] · wᵀ + b
		y := make([]float64, t*d)
		for i := 0; i < t; i++ {
			for o := 0; o < d; o++ {
				y[i*d+o] = b[o] + dot64(x[i*d:(i+1)*d], w[o*d:(o+1)*d])
			}
		}
		return y
	}
	q, k, v := lin(wq, bq, x), lin(wk, bk, x), lin(wv, bv, x)
	r := 1 / math.Sqrt(float64(mf))
	phi := func(z []float64, hd int, query bool) [][]float64 {
		f := make([][]float64, t)
		c := math.Pow(float64(dh), -0.25)
		dash := make([][]float64, t)
		gmax := math.Inf(-1)
		for i := 0; i < t; i++ {
			u := z[i*d+hd*dh : i*d+hd*dh+dh]
			dash[i] = make([]float64, mf)
			for m := 0; m < mf; m++ {
				s := dot64(u, om[m*dh:(m+1)*dh])
				if relu {
					dash[i][m] = r * s
				} else {
					dash[i][m] = c * s
				}
				gmax = math.Max(gmax, dash[i][m])
			}
		}
		for i := 0; i < t; i++ {
			u := z[i*d+hd*dh : i*d+hd*dh+dh]
			f[i] = make([]float64, mf)
			mx := gmax
			if query {
				mx = math.Inf(-1)
				for _, v := range dash[i] {
					mx = math.Max(mx, v)
				}
			}
			for m, v := range dash[i] {
				if relu {
					f[i][m] = math.Max(v, 0) + 1e-5
				} else {
					f[i][m] = r * (math.Exp(v-c*c*dot64(u, u)/2-mx) + 1e-5)
				}
			}
		}
		return f
	}
	o := make([]float64, t*d)
	for hd := 0; hd < h; hd++ {
		a, bb := phi(q, hd, true), phi(k, hd, false)
		for i := 0; i < t; i++ {
			var den float64
			last := t - 1
			if causal {
				last = i
			}
			for s := 0; s <= last; s++ {
				wgt := dot64(a[i], bb[s])
				den += wgt
				for j := 0; j < dh; j++ {
					o[i*d+hd*dh+j] += wgt * v[s*d+hd*dh+j]
				}
			}
			for j := 0; j < dh; j++ {
				o[i*d+hd*dh+j] /= den
			}
		}
	}
	return lin(w0, b0, o)
}

// TestPerformerExampleTrains: examples/performer_fashion.pipe plans on the
// CPU and trains on Fashion-MNIST's first images: ten steps on one batch
// of 16 bring its loss down, and the random features do not move.
func TestPerformerExampleTrains(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "data", "fashion-mnist", "train-images-idx3-ubyte.gz")); err != nil {
		t.Skip("Fashion-MNIST absent (run make data)")
	}
	prog := loadProgram(t, filepath.Join(root, "examples", "performer_fashion.pipe"))
	p := planCPU(t, prog, planHost)
	if !p.Fits {
		t.Fatal("the example does not fit the plan's host")
	}
	g := exampleGraph(t, "performer_fashion.pipe")
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads = 16, 2
	m := mustBuild(t, g, cfg)
	src, err := dataset.Open(progtest.Decoded(t, prog).Spec.Source("train"), dataset.WithBase(root))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	it := dataset.NewLoader(src, dataset.LoaderOptions{BatchSize: 16, Workers: 1}).Epoch(0)
	defer it.Close()
	b, err := it.Next(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	feat := append([]float32(nil), m.State().Lookup("random_attention1.projection_matrix").Data...)
	var first, last float64
	for step := 0; step < 10; step++ {
		m.ZeroGrad()
		l, err := m.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1e-3); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			first = l
		}
		last = l
	}
	if !(last < 0.7*first) {
		t.Errorf("ten steps on one batch: loss %.4f to %.4f", first, last)
	}
	for i, v := range m.State().Lookup("random_attention1.projection_matrix").Data {
		if v != feat[i] {
			t.Fatal("the random features moved")
		}
	}
	t.Logf("loss %.4f to %.4f in ten steps", first, last)
}
