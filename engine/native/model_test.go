package native

import (
	"errors"
	"math"
	"slices"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/stdlib"
)

// trainSteps runs steps optimizer steps on fresh random batches and
// returns the losses.
func trainSteps(t *testing.T, m *model, steps, batch int, lr float64) []float64 {
	t.Helper()
	var losses []float64
	for i := 0; i < steps; i++ {
		b := randomBatch(m, batch, uint64(100+i))
		m.ZeroGrad()
		l, err := m.TrainStep(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Step(lr); err != nil {
			t.Fatal(err)
		}
		losses = append(losses, l)
	}
	return losses
}

func TestDeterminism(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(16, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Seed = 42
	run := func(seed uint64) ([]float64, []float32) {
		c := cfg
		c.Seed = seed
		m := mustBuild(t, g, c)
		l := trainSteps(t, m, 4, 16, 1e-3)
		return l, slices.Clone(m.flat.params)
	}
	l1, p1 := run(42)
	l2, p2 := run(42)
	if !slices.Equal(l1, l2) || !slices.Equal(p1, p2) {
		t.Errorf("same seed, different runs: losses %v and %v", l1, l2)
	}
	l3, _ := run(43)
	if slices.Equal(l1, l3) {
		t.Errorf("seeds 42 and 43 gave the same losses %v", l1)
	}
	if !(l1[3] < l1[0]) {
		t.Logf("losses %v", l1)
	}
}

// TestInitialisation checks PyTorch's default bounds and that a tensor's
// initial values depend only on the seed and its name.
func TestInitialisation(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	m := mustBuild(t, g, cfgOf(4, "cross_entropy", "sgd"))
	for _, p := range m.params {
		var bound float64
		switch p.name {
		case "conv1.weight", "conv1.bias":
			bound = 1 / math.Sqrt(9)
		case "conv2.weight", "conv2.bias":
			bound = 1 / math.Sqrt(32*9)
		case "dense1.weight", "dense1.bias":
			bound = 1 / math.Sqrt(3136)
		case "batchnorm1.weight", "batchnorm2.weight":
			for _, v := range p.data {
				if v != 1 {
					t.Fatalf("%s holds %v, want ones", p.name, v)
				}
			}
			continue
		default:
			continue
		}
		var mx float64
		for _, v := range p.data {
			mx = math.Max(mx, math.Abs(float64(v)))
		}
		if mx > bound || mx < 0.8*bound {
			t.Errorf("%s: largest |value| %v, want just under %v", p.name, mx, bound)
		}
	}
	// A model with an extra layer at the end keeps the others' values.
	g2 := graphOf(t, "input [1, 28, 28]\nconv 32 k3 pad1 -> batchnorm -> relu -> maxpool 2\nconv 64 k3 pad1 -> batchnorm -> relu -> maxpool 2\nflatten -> dense 128 -> relu -> dropout 0.25 -> dense 10 -> relu -> dense 3")
	m2 := mustBuild(t, g2, cfgOf(4, "cross_entropy", "sgd"))
	if !slices.Equal(m.params[0].data, m2.params[0].data) {
		t.Error("conv1.weight changed when a layer was added elsewhere")
	}
}

// TestAccumulation compares the gradient of one batch of 8 with the sum of
// two micro-batches of 4 at scale 1/2.
func TestAccumulation(t *testing.T) {
	g := graphOf(t, "input [2, 8, 8]\nconv 4 k3 pad1 -> relu -> maxpool 2 -> conv 4 k3 pad1 -> gelu -> flatten -> dense 3")
	for _, loss := range []string{"cross_entropy", "mse"} {
		big := mustBuild(t, g, cfgOf(8, loss, "sgd"))
		small := mustBuild(t, g, cfgOf(4, loss, "sgd"))
		b := randomBatch(big, 8, 3)
		big.ZeroGrad()
		if _, err := big.TrainStep(b, 1); err != nil {
			t.Fatal(err)
		}
		small.ZeroGrad()
		in, out := big.units[0].out.size(), len(b.Y)/8
		for k := 0; k < 2; k++ {
			mb := &dataset.Batch{N: 4, X: b.X[k*4*in : (k+1)*4*in], Y: b.Y[k*4*out : (k+1)*4*out]}
			if _, err := small.TrainStep(mb, 0.5); err != nil {
				t.Fatal(err)
			}
		}
		var worst float64
		for i, v := range big.flat.grads {
			w := small.flat.grads[i]
			d := math.Abs(float64(v - w))
			if d > 1e-5*math.Max(1, math.Abs(float64(v))) {
				t.Fatalf("%s: gradient %d: batch of 8 %v, two micro-batches %v", loss, i, v, w)
			}
			worst = math.Max(worst, d)
		}
		t.Logf("%s: largest difference %.2g over %d gradients", loss, worst, len(big.flat.grads))
	}
}

// checkpointModel is a small U-Net with batchnorm and dropout inside the
// recomputed segments, and skips that jump over them.
const checkpointModel = `input [3, 32, 32]
e1 = conv 16 k3 pad1 -> batchnorm -> relu -> conv 16 k3 pad1 -> batchnorm -> relu
maxpool 2
e2 = conv 32 k3 pad1 -> batchnorm -> relu -> dropout 0.2 -> conv 32 k3 pad1 -> batchnorm -> relu
maxpool 2
conv 64 k3 pad1 -> batchnorm -> relu -> conv 64 k3 pad1 -> batchnorm -> relu
upsample 2 -> concat e2 -> conv 32 k3 pad1 -> batchnorm -> relu
upsample 2 -> concat e1 -> conv 16 k3 pad1 -> batchnorm -> relu
conv 1 k1 -> sigmoid`

func TestCheckpointing(t *testing.T) {
	g := graphOf(t, checkpointModel)
	n := len(g.Nodes)
	segs := []engine.Segment{{From: 1, To: 6}, {From: 8, To: 15}, {From: 17, To: 22}, {From: 23, To: n - 4}}
	for _, fuse := range []bool{false, true} {
		cfg := cfgOf(4, "dice", "adam")
		if fuse {
			cfg.Fusion = fuseAll(g)
		}
		plain := mustBuild(t, g, cfg)
		cfg.Checkpoint = segs
		ck := mustBuild(t, g, cfg)
		rec := 0
		for _, ev := range ck.train.events {
			if ev.kind == evRecompute {
				rec++
			}
		}
		if rec == 0 {
			t.Fatal("nothing is recomputed")
		}
		for step := 0; step < 3; step++ {
			b := randomBatch(plain, 4, uint64(step))
			plain.ZeroGrad()
			ck.ZeroGrad()
			l1, err1 := plain.TrainStep(b, 1)
			l2, err2 := ck.TrainStep(b, 1)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if l1 != l2 || !slices.Equal(plain.flat.grads, ck.flat.grads) {
				t.Fatalf("fuse %v step %d: loss %v vs %v; gradients differ", fuse, step, l1, l2)
			}
			plain.Step(1e-3)
			ck.Step(1e-3)
		}
		if !slices.Equal(plain.flat.buffers, ck.flat.buffers) {
			t.Error("running statistics differ with checkpointing")
		}
		mp, mc := plain.Memory(), ck.Memory()
		t.Logf("fuse %v: arena %d → %d bytes, peak live %d → %d, saved %d → %d, heap in use %+d → %+d, %d recomputations",
			fuse, mp.Arena, mc.Arena, mp.PeakLive, mc.PeakLive, mp.Saved, mc.Saved, mp.HeapInuseDelta, mc.HeapInuseDelta, rec)
		if mc.PeakLive >= mp.PeakLive || mc.Arena >= mp.Arena {
			t.Errorf("checkpointing does not lower memory: peak %d → %d, arena %d → %d", mp.PeakLive, mc.PeakLive, mp.Arena, mc.Arena)
		}
	}
}

func TestEval(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(8, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	plain := mustBuild(t, g, cfg)
	cfg.Folds = foldsOf(g)
	folded := mustBuild(t, g, cfg)
	for i := 0; i < 3; i++ {
		b := randomBatch(plain, 8, uint64(i))
		for _, m := range []*model{plain, folded} {
			m.ZeroGrad()
			if _, err := m.TrainStep(b, 1); err != nil {
				t.Fatal(err)
			}
			m.Step(1e-2)
		}
	}
	// Eval: any batch size, deterministic, dropout off, folds equal.
	b := randomBatch(plain, 13, 99)
	o1 := make([]float32, 13*10)
	o2 := make([]float32, 13*10)
	l1, err := plain.Eval(b, o1)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := folded.Eval(b, o2)
	if err != nil {
		t.Fatal(err)
	}
	for i := range o1 {
		if math.Abs(float64(o1[i]-o2[i])) > 1e-4*math.Max(1, math.Abs(float64(o1[i]))) {
			t.Fatalf("output %d: %v unfolded, %v folded", i, o1[i], o2[i])
		}
	}
	if math.Abs(l1-l2) > 1e-5 {
		t.Errorf("loss %v unfolded, %v folded", l1, l2)
	}
	o3 := make([]float32, 13*10)
	if _, err := plain.Eval(b, o3); err != nil || !slices.Equal(o1, o3) {
		t.Errorf("eval is not repeatable (%v)", err)
	}
	// The first rows of a bigger batch do not depend on the others.
	small := &dataset.Batch{N: 2, X: b.X[:2*784], Y: b.Y[:2]}
	o4 := make([]float32, 20)
	if _, err := plain.Eval(small, o4); err != nil {
		t.Fatal(err)
	}
	for i := range o4 {
		if math.Abs(float64(o4[i]-o1[i])) > 1e-5 {
			t.Fatalf("output %d of a 2-sample batch %v, of a 13-sample batch %v", i, o4[i], o1[i])
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(8, "cross_entropy", "adamw")
	cfg.Fusion = fuseAll(g)
	a := mustBuild(t, g, cfg)
	trainSteps(t, a, 2, 8, 1e-3)
	st := a.State()
	if st.Counters["optimizer.step"] != 2 || st.Counters["batchnorm1.num_batches_tracked"] != 2 {
		t.Errorf("counters %v", st.Counters)
	}
	if st.Lookup("optimizer.conv1.weight.exp_avg_sq") == nil || st.Lookup("batchnorm2.running_var") == nil {
		t.Fatal("state lacks optimizer or batchnorm tensors")
	}
	cfg.Seed = 999
	b := mustBuild(t, g, cfg)
	if err := b.SetState(st); err != nil {
		t.Fatal(err)
	}
	la := trainSteps(t, a, 3, 8, 1e-3)
	lb := trainSteps(t, b, 3, 8, 1e-3)
	if !slices.Equal(la, lb) {
		t.Errorf("resumed run differs: %v vs %v", la, lb)
	}
	bad := st
	bad.Tensors = append(slices.Clone(st.Tensors[:len(st.Tensors)-1]), engine.Tensor{Name: "nope", Shape: []int64{1}, Data: []float32{0}})
	if err := b.SetState(bad); err == nil {
		t.Error("SetState accepted an unknown tensor")
	}
	short := engine.State{Tensors: st.Tensors[:3], Counters: st.Counters}
	if err := b.SetState(short); err == nil {
		t.Error("SetState accepted a partial state")
	}
}

func TestBadBatches(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	m := mustBuild(t, g, cfgOf(8, "cross_entropy", "adam"))
	good := randomBatch(m, 8, 1)
	cases := map[string]*dataset.Batch{
		"too many":      randomBatch(m, 9, 1),
		"short inputs":  {N: 8, X: good.X[:100], Y: good.Y},
		"short targets": {N: 8, X: good.X, Y: good.Y[:3]},
		"label 10":      {N: 8, X: good.X, Y: append([]float32{10}, good.Y[1:]...)},
		"label 1.5":     {N: 8, X: good.X, Y: append([]float32{1.5}, good.Y[1:]...)},
		"empty":         {N: 0},
		"short mask":    {N: 8, X: good.X, Y: good.Y, Mask: []float32{1}},
	}
	for name, b := range cases {
		if _, err := m.TrainStep(b, 1); !errors.Is(err, engine.ErrBadBatch) {
			t.Errorf("%s: %v, want ErrBadBatch", name, err)
		}
	}
	if _, err := m.TrainStep(nil, 1); err == nil {
		t.Error("nil batch accepted")
	}
	if _, err := m.TrainStep(good, 1); err != nil {
		t.Errorf("good batch after bad ones: %v", err)
	}
}

func TestNonFinite(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(8, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	m := mustBuild(t, g, cfg)
	trainSteps(t, m, 1, 8, 1e-3)
	b := randomBatch(m, 8, 5)
	check := func(what string, want func(*engine.NonFiniteError) bool) {
		t.Helper()
		m.ZeroGrad()
		before := slices.Clone(m.flat.buffers)
		_, err := m.TrainStep(b, 1)
		var nf *engine.NonFiniteError
		if !errors.As(err, &nf) || !want(nf) {
			t.Fatalf("%s: %v", what, err)
		}
		if slices.ContainsFunc(m.flat.grads, func(v float32) bool { return v != 0 }) {
			t.Errorf("%s: the failed step left gradients", what)
		}
		if !slices.Equal(before, m.flat.buffers) {
			t.Errorf("%s: the failed step changed running statistics", what)
		}
		t.Logf("%s: %v", what, err)
	}
	// A weight that overflows the second conv's output.
	w := m.params[3] // conv2.weight after conv1.weight, conv1.bias, batchnorm1…
	for _, p := range m.params {
		if p.name == "conv2.weight" {
			w = p
		}
	}
	old := slices.Clone(w.data)
	for i := range w.data {
		w.data[i] = 3e38
	}
	check("overflow", func(e *engine.NonFiniteError) bool { return e.Node == "conv2" && e.Op == "conv" })
	copy(w.data, old)
	w.data[5] = float32(math.NaN())
	check("nan weight", func(e *engine.NonFiniteError) bool { return e.Param == "conv2.weight" })
	w.data[5] = old[5]
	x := b.X[7]
	b.X[7] = float32(math.Inf(1))
	check("input", func(e *engine.NonFiniteError) bool { return e.Input })
	b.X[7] = x
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatalf("after the failures: %v", err)
	}
	m.flat.grads[3] = float32(math.NaN())
	var nf *engine.NonFiniteError
	if err := m.Step(1e-3); !errors.As(err, &nf) || nf.Param == "" {
		t.Errorf("NaN gradient: %v", err)
	}
}

// TestOptimizers follows one parameter through torch.optim's update rules,
// written out in float64.
func TestOptimizers(t *testing.T) {
	type ref func(p, g float64, st *[2]float64, step int) float64
	lr := 0.1
	cases := []struct {
		opt engine.Optimizer
		ref ref
	}{
		{engine.Optimizer{Kind: "sgd", WeightDecay: 0.1}, func(p, g float64, st *[2]float64, _ int) float64 {
			return p - lr*(g+0.1*p)
		}},
		{engine.Optimizer{Kind: "sgd", Momentum: 0.9, WeightDecay: 0.01}, func(p, g float64, st *[2]float64, _ int) float64 {
			d := g + 0.01*p
			st[0] = 0.9*st[0] + d
			return p - lr*st[0]
		}},
		{engine.Optimizer{Kind: "sgd", Momentum: 0.9, Nesterov: true}, func(p, g float64, st *[2]float64, _ int) float64 {
			st[0] = 0.9*st[0] + g
			return p - lr*(g+0.9*st[0])
		}},
		{engine.Optimizer{Kind: "adam", WeightDecay: 0.1}, func(p, g float64, st *[2]float64, t int) float64 {
			d := g + 0.1*p
			st[0] = 0.9*st[0] + 0.1*d
			st[1] = 0.999*st[1] + 0.001*d*d
			mh := st[0] / (1 - math.Pow(0.9, float64(t)))
			vh := math.Sqrt(st[1]) / math.Sqrt(1-math.Pow(0.999, float64(t)))
			return p - lr*mh/(vh+1e-8)
		}},
		{engine.Optimizer{Kind: "adamw", WeightDecay: 0.1}, func(p, g float64, st *[2]float64, t int) float64 {
			p *= 1 - lr*0.1
			st[0] = 0.9*st[0] + 0.1*g
			st[1] = 0.999*st[1] + 0.001*g*g
			mh := st[0] / (1 - math.Pow(0.9, float64(t)))
			vh := math.Sqrt(st[1]) / math.Sqrt(1-math.Pow(0.999, float64(t)))
			return p - lr*mh/(vh+1e-8)
		}},
	}
	for _, c := range cases {
		g := graphOf(t, "input [3]\ndense 2")
		cfg := cfgOf(1, "mse", c.opt.Kind)
		cfg.Optimizer = c.opt
		m := mustBuild(t, g, cfg)
		p := m.params[0]
		want := float64(p.data[0])
		var st [2]float64
		for step := 1; step <= 5; step++ {
			grad := float64(step) * 0.3
			m.ZeroGrad()
			p.grad[0] = float32(grad)
			if err := m.Step(lr); err != nil {
				t.Fatal(err)
			}
			want = c.ref(want, grad, &st, step)
			if got := float64(p.data[0]); math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
				t.Fatalf("%+v step %d: %v, want %v", c.opt, step, got, want)
			}
		}
	}
}

func TestClipGradNorm(t *testing.T) {
	g := graphOf(t, "input [3]\ndense 2")
	m := mustBuild(t, g, cfgOf(1, "mse", "sgd"))
	m.ZeroGrad()
	m.flat.grads[0], m.flat.grads[1] = 3, 4
	n, err := m.ClipGradNorm(1)
	if err != nil || n != 5 {
		t.Fatalf("norm %v, %v", n, err)
	}
	if got := math.Hypot(float64(m.flat.grads[0]), float64(m.flat.grads[1])); math.Abs(got-1) > 1e-5 {
		t.Errorf("clipped norm %v, want 1", got)
	}
}

func TestUnsupported(t *testing.T) {
	// A model ending in tokens has no loss; softmax runs on vectors and
	// images only.
	for _, src := range []string{"input [1, 8, 8]\npatches 4 dim 4", "input [1, 8, 8]\npatches 4 dim 4 -> softmax -> select_token"} {
		_, err := build(graphOf(t, src), cfgOf(2, "mse", "adam"), false)
		if !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("%q: %v, want ErrUnsupported", src, err)
		}
	}
	for _, c := range []engine.Config{
		{Batch: 2, Loss: engine.Loss{Kind: "hinge"}, Optimizer: engine.Optimizer{Kind: "adam"}},
		{Batch: 2, Loss: engine.Loss{Kind: "mse"}, Optimizer: engine.Optimizer{Kind: "lbfgs"}},
	} {
		if _, err := build(graphOf(t, "input [3]\ndense 2"), c, false); !errors.Is(err, engine.ErrUnsupported) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := build(&stdlib.Graph{}, cfgOf(2, "mse", "sgd"), false); err == nil {
		t.Error("empty graph accepted")
	}
}
