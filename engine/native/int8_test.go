package native

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native/internal/cvec"
)

// int8Net is a small conv net with what int8 meets in the examples: a
// fused conv+batchnorm+relu, a conv with a batchnorm folded from a
// separate unit, a strided conv with a signed input, a residual add,
// pooling, and dense layers with and without an activation.
const int8Net = `input [3, 12, 12]
conv 16 k3 pad1 -> batchnorm -> relu
conv 16 k3 pad1 -> batchnorm -> relu -> maxpool 2
conv 24 k3 stride2 pad1 -> relu
flatten -> dense 40 -> relu -> dense 10`

// int8Net2 has a dilated conv (im2row's tap by tap path), a 1×1 conv
// over enough channels for int8, and a dense layer with a gelu.
const int8Net2 = `input [8, 10, 10]
conv 32 k3 pad2 d2 -> relu
conv 16 k1 -> batchnorm -> relu -> flatten
dense 24 -> gelu -> dense 10`

// trainedNet trains int8Net a few steps so that batchnorm's running
// statistics and the weights are not their initial values.
func trainedNet(t *testing.T, threads int) *model {
	return trainedOf(t, int8Net, threads)
}

func trainedOf(t *testing.T, net string, threads int) *model {
	t.Helper()
	g := graphOf(t, net)
	cfg := cfgOf(16, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Folds = foldsOf(g)
	cfg.Threads = threads
	m := mustBuild(t, g, cfg)
	for s := 0; s < 5; s++ {
		m.ZeroGrad()
		if _, err := m.TrainStep(randomBatch(m, 16, uint64(s)), 1); err != nil {
			t.Fatal(err)
		}
		if err := m.Step(1e-3); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func calibBatches(m *model, k int) []*dataset.Batch {
	var bs []*dataset.Batch
	for i := 0; i < k; i++ {
		b := randomBatch(m, 16, uint64(100+i))
		b.Y = nil
		bs = append(bs, b)
	}
	return bs
}

// TestInt8AgreesWithFP32 runs the nets in fp32 and in int8 on 256 samples
// the calibration did not see: every output within 5% of the largest
// output's magnitude of its fp32 value (int8 keeps about 2 significant
// digits per layer over 5 layers) and the argmax the same on at least 90%
// of the samples, on each int8 kernel this CPU runs.
func TestInt8AgreesWithFP32(t *testing.T) {
	for i, c := range []struct {
		net    string
		layers int
		pct    float64
	}{{int8Net, 4, 0}, {int8Net, 4, 99.99}, {int8Net2, 4, 99.99}} {
		pct := c.pct
		m := trainedOf(t, c.net, 2)
		for _, k := range qkernels(t) {
			t.Run(fmt.Sprintf("%d/%v", i, k), func(t *testing.T) {
				withQPath(k, func() { agreesWithFP32(t, m, c.layers, pct) })
			})
		}
	}
}

// agreesWithFP32 quantises m and compares it with m, on qpath.
func agreesWithFP32(t *testing.T, m *model, layers int, pct float64) {
	qm, rep, err := m.QuantizeInt8(calibBatches(m, 4), engine.QuantOptions{Percentile: pct})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	if rep.Kernel != qpath.String() {
		t.Fatalf("the report says kernel %q, the layers run %v", rep.Kernel, qpath)
	}
	if got := rep.Int8Layers(); got != layers {
		t.Fatalf("%d int8 layers, want %d (every conv with ci·k·k ≥ 32, every dense): %+v", got, layers, rep.Layers)
	}
	if rep.WeightBytesInt8*3 > rep.WeightBytesFP32 {
		t.Fatalf("int8 weights %d bytes against fp32 %d: not under a third", rep.WeightBytesInt8, rep.WeightBytesFP32)
	}
	agree, n := 0, 0
	var worst, scale float64
	for i := 0; i < 16; i++ {
		b := randomBatch(m, 16, uint64(1000+i))
		b.Y = nil
		want := make([]float32, 16*10)
		got := make([]float32, 16*10)
		if _, err := m.Eval(b, want); err != nil {
			t.Fatal(err)
		}
		if _, err := qm.Eval(b, got); err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 16; s++ {
			w, g := want[s*10:(s+1)*10], got[s*10:(s+1)*10]
			if argmax(w) == argmax(g) {
				agree++
			}
			n++
			for j := range w {
				worst = max(worst, math.Abs(float64(w[j]-g[j])))
				scale = max(scale, math.Abs(float64(w[j])))
			}
		}
	}
	t.Logf("percentile %g: worst |int8 − fp32| %.4g of max |fp32| %.4g (%.2f%%), argmax agreement %d/%d", pct, worst, scale, 100*worst/scale, agree, n)
	if worst > 0.05*scale {
		t.Errorf("percentile %g: worst error %.4g is above 5%% of %.4g", pct, worst, scale)
	}
	if agree*10 < n*9 {
		t.Errorf("percentile %g: argmax agrees on %d of %d samples, under 90%%", pct, agree, n)
	}
}

// TestInt8KernelsAgree runs one int8 model (signed and unsigned inputs,
// relu, none and gelu after the products, channels and K off the
// kernels' blocks) on each kernel this CPU runs: AVX2's outputs equal
// Go's bit for bit (equal sums, the same requantisation), and VNNI's
// within a few roundings (its requantisation fuses the multiply-add).
func TestInt8KernelsAgree(t *testing.T) {
	for _, net := range []string{int8Net, int8Net2} {
		m := trainedOf(t, net, 2)
		qm, _, err := m.QuantizeInt8(calibBatches(m, 2), engine.QuantOptions{})
		if err != nil {
			t.Fatal(err)
		}
		b := randomBatch(m, 16, 11)
		b.Y = nil
		outs := map[qkernel][]float32{}
		for _, k := range qkernels(t) {
			out := make([]float32, 16*10)
			withQPath(k, func() { _, err = qm.Eval(b, out) })
			if err != nil {
				t.Fatal(err)
			}
			outs[k] = out
		}
		qm.Close()
		want := outs[qGo]
		for k, got := range outs {
			for i := range want {
				d := math.Abs(float64(got[i] - want[i]))
				if k == qAVX2 && d != 0 || d > 1e-4*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("%v: output %d is %g, Go's %g", k, i, got[i], want[i])
				}
			}
		}
	}
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestInt8Deterministic quantises the same trained weights in three
// models built alike: the same input scales, and int8 outputs equal bit
// for bit. (With another thread count the fp32 activations the
// calibration measures, and so the scales, can move in their last bits:
// the fp32 products split their work differently.)
func TestInt8Deterministic(t *testing.T) {
	src := trainedNet(t, 2)
	var outs [][]float32
	var scales [][]float32
	for _, threads := range []int{2, 2, 2} {
		cfg := src.cfg
		cfg.Threads = threads
		m := mustBuild(t, src.g, cfg)
		if err := m.SetState(src.State()); err != nil {
			t.Fatal(err)
		}
		qm, rep, err := m.QuantizeInt8(calibBatches(m, 3), engine.QuantOptions{Percentile: 99.9})
		if err != nil {
			t.Fatal(err)
		}
		var s []float32
		for _, l := range rep.Layers {
			s = append(s, l.InScale)
		}
		out := make([]float32, 16*10)
		b := randomBatch(m, 16, 7)
		b.Y = nil
		if _, err := qm.Eval(b, out); err != nil {
			t.Fatal(err)
		}
		qm.Close()
		outs, scales = append(outs, out), append(scales, s)
	}
	for i := 1; i < len(outs); i++ {
		for j := range scales[0] {
			if scales[i][j] != scales[0][j] {
				t.Fatalf("run %d: layer %d's input scale %g, run 0's %g", i, j, scales[i][j], scales[0][j])
			}
		}
		for j := range outs[0] {
			if outs[i][j] != outs[0][j] {
				t.Fatalf("run %d: output %d is %g, run 0's %g", i, j, outs[i][j], outs[0][j])
			}
		}
	}
}

// TestInt8InferenceOnly: an int8 model refuses to train, reports its
// precision, and the fp32 model it came from is unchanged.
func TestInt8InferenceOnly(t *testing.T) {
	m := trainedNet(t, 1)
	b := randomBatch(m, 4, 9)
	before := make([]float32, 40)
	if _, err := m.Eval(b, before); err != nil {
		t.Fatal(err)
	}
	qm, _, err := m.QuantizeInt8(calibBatches(m, 1), engine.QuantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	if _, err := qm.TrainStep(b, 1); !errors.Is(err, engine.ErrInt8Training) {
		t.Fatalf("TrainStep: %v, want ErrInt8Training", err)
	}
	if err := qm.Step(1e-3); !errors.Is(err, engine.ErrInt8Training) {
		t.Fatalf("Step: %v", err)
	}
	if qm.Precision() != "int8" {
		t.Fatalf("precision %q", qm.Precision())
	}
	after := make([]float32, 40)
	if _, err := m.Eval(b, after); err != nil {
		t.Fatal(err)
	}
	for i := range before {
		if before[i] != after[i] {
			t.Fatalf("the fp32 model's output %d moved from %g to %g", i, before[i], after[i])
		}
	}
	if _, err := qm.Eval(&dataset.Batch{N: 2, X: make([]float32, 5)}, nil); !errors.Is(err, engine.ErrBadBatch) {
		t.Fatalf("a batch of the wrong size: %v, want ErrBadBatch", err)
	}
}

// int8PoolNet has a max-pool over an odd map (its last row and column
// dropped) after a fused conv+batchnorm+relu, and one after a conv whose
// output a residual add reads too, which must not be taken.
const int8PoolNet = `input [8, 11, 11]
conv 16 k3 pad1 -> batchnorm -> relu -> maxpool 2
c = conv 16 k3 pad1 -> relu
maxpool 2 -> concat (c -> conv 16 k3 stride2 -> relu) -> flatten -> dense 10`

// TestInt8PoolTakenOnSums holds an int8 convolution that takes the
// max-pool after it on its int32 sums to the same bits as the separate
// pool, on every int8 kernel this CPU runs, and checks which pools were
// taken.
func TestInt8PoolTakenOnSums(t *testing.T) {
	defer func() { int8PoolFusion = true }()
	for _, c := range []struct {
		net   string
		taken int
	}{{int8Net, 1}, {int8PoolNet, 1}} {
		m := trainedOf(t, c.net, 2)
		b := randomBatch(m, 16, 11)
		b.Y = nil
		outs := [2]map[qkernel][]float32{}
		for i, fuse := range []bool{false, true} {
			int8PoolFusion = fuse
			qm, rep, err := m.QuantizeInt8(calibBatches(m, 2), engine.QuantOptions{})
			if err != nil {
				t.Fatal(err)
			}
			taken := 0
			for _, l := range rep.Layers {
				if strings.HasPrefix(l.Why, "max-pool taken") {
					taken++
				}
			}
			if want := map[bool]int{true: c.taken}[fuse]; taken != want {
				t.Errorf("fusion %v: %d pools taken, want %d: %+v", fuse, taken, want, rep.Layers)
			}
			outs[i] = map[qkernel][]float32{}
			for _, k := range qkernels(t) {
				out := make([]float32, 16*10)
				withQPath(k, func() { _, err = qm.Eval(b, out) })
				if err != nil {
					t.Fatal(err)
				}
				outs[i][k] = out
			}
			qm.Close()
		}
		for k, want := range outs[0] {
			got := outs[1][k]
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: output %d is %g with the pool taken, %g without", k, i, got[i], want[i])
				}
			}
		}
	}
}

// TestMaxOf4RowsC holds the C window maximum to the Go loop's.
func TestMaxOf4RowsC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for _, sh := range [][3]int{{1, 3, 4}, {5, 64, 64}, {16, 70, 80}, {3, 1, 16}} {
		m, co, ldc := sh[0], sh[1], sh[2]
		c := make([]int32, 4*m*ldc)
		for i := range c {
			c[i] = int32(r.Uint32())
		}
		want := append([]int32(nil), c...)
		maxOf4RowsGo(want, m, co, ldc)
		cvec.MaxOf4Rows(c, m, co, ldc)
		for i := 0; i < m; i++ {
			for o := 0; o < co; o++ {
				if c[i*ldc+o] != want[i*ldc+o] {
					t.Fatalf("%v: row %d channel %d: C %d, Go %d", sh, i, o, c[i*ldc+o], want[i*ldc+o])
				}
			}
		}
	}
}

// TestSmallEvalOnOneWorker: a batch below evalSerialFLOPs runs on one
// worker, and its outputs are what a large batch split over two workers
// gives its first samples, within float32 rounding in fp32 (OpenBLAS's
// blocking follows the product's size, so a sum's order may differ) and
// within one 8-bit step of the output's range in int8 (whose first conv
// is fp32: a value on a rounding edge may quantise one step apart).
func TestSmallEvalOnOneWorker(t *testing.T) {
	g := exampleGraph(t, "fashion.pipe")
	cfg := cfgOf(64, "cross_entropy", "adam")
	cfg.Fusion = fuseAll(g)
	cfg.Folds = foldsOf(g)
	cfg.Threads = 2
	m := mustBuild(t, g, cfg)
	if n := 4; int64(n)*g.FLOPs() >= evalSerialFLOPs || int64(64)*g.FLOPs() < evalSerialFLOPs {
		t.Fatalf("the fashion net's %d FLOPs a sample: batch 4 must run serial, 64 split", g.FLOPs())
	}
	bt := randomBatch(m, 64, 1)
	bt.Y = nil
	c := randomBatch(m, 64, 2)
	c.Y = nil
	qm, _, err := m.QuantizeInt8([]*dataset.Batch{c}, engine.QuantOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer qm.Close()
	for name, mm := range map[string]engine.Model{"fp32": m, "int8": qm} {
		big := make([]float32, 64*10)
		if _, err := mm.Eval(bt, big); err != nil {
			t.Fatal(err)
		}
		small := make([]float32, 4*10)
		if _, err := mm.Eval(&dataset.Batch{N: 4, X: bt.X[:4*len(bt.X)/64]}, small); err != nil {
			t.Fatal(err)
		}
		var scale float64
		for _, v := range big[:len(small)] {
			scale = math.Max(scale, math.Abs(float64(v)))
		}
		for i, v := range small {
			d := math.Abs(float64(v - big[i]))
			if tol := map[string]float64{"fp32": 1e-5, "int8": 1.0 / 255}[name]; d > tol*scale {
				t.Fatalf("%s: output %d is %g alone on one worker, %g in the batch of 64", name, i, v, big[i])
			}
		}
	}
	if m.serial == nil {
		t.Error("the small batch did not run on the serial pool")
	}
}
