package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pipe/engine/native/internal/cvec"
)

// TestMax2x2C holds internal/cvec's C max-pool to pool2d.go's max2x2, bit
// for bit and index for index, on planes with ties, signed zeros,
// infinities and NaNs, of even and odd sides, on each path this CPU runs
// (AVX-512, AVX2, the compiler's loop), rows of outputs shorter and
// longer than a vector.
func TestMax2x2C(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001)}
	for _, sz := range [][2]int{{2, 2}, {4, 6}, {5, 7}, {28, 28}, {14, 14}, {3, 33}, {4, 34}, {2, 67}, {6, 96}} {
		h, w := sz[0], sz[1]
		ho, wo := h/2, w/2
		for trial := 0; trial < 20; trial++ {
			src := make([]float32, h*w)
			for i := range src {
				if r.IntN(4) == 0 {
					src[i] = special[r.IntN(len(special))]
				} else {
					src[i] = float32(r.IntN(5) - 2) // many ties
				}
			}
			want, got := make([]float32, ho*wo), make([]float32, ho*wo)
			wi, gi := make([]int32, ho*wo), make([]int32, ho*wo)
			max2x2(src, want, wi, w, ho, wo)
			for _, isa := range []int{2, 1, 0} {
				if !cvec.UseMax2x2(isa) {
					continue
				}
				cvec.Max2x2Planes(src, got, gi, w, h, ho, wo, 1)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(want[i] != want[i] && got[i] != got[i]) || gi[i] != wi[i] {
						t.Fatalf("%s, path %d: [%d] C %v at %d, Go %v at %d", fmt.Sprint(sz), isa, i, got[i], gi[i], want[i], wi[i])
					}
				}
			}
			cvec.UseMax2x2(-2)
		}
	}
}

// TestMax2x2PlanesC holds the C max-pool over several planes in one call
// to max2x2 plane by plane, odd heights (a row left over per plane)
// included.
func TestMax2x2PlanesC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, sz := range [][3]int{{28, 28, 5}, {5, 7, 3}, {14, 14, 9}, {7, 35, 4}} {
		h, w, n := sz[0], sz[1], sz[2]
		ho, wo := h/2, w/2
		src := make([]float32, n*h*w)
		for i := range src {
			src[i] = float32(r.IntN(7) - 3)
		}
		src[len(src)/2] = float32(math.NaN())
		want, got := make([]float32, n*ho*wo), make([]float32, n*ho*wo)
		wi, gi := make([]int32, n*ho*wo), make([]int32, n*ho*wo)
		for p := range n {
			max2x2(src[p*h*w:(p+1)*h*w], want[p*ho*wo:(p+1)*ho*wo], wi[p*ho*wo:(p+1)*ho*wo], w, ho, wo)
		}
		for _, isa := range []int{2, 1, 0} {
			if !cvec.UseMax2x2(isa) {
				continue
			}
			cvec.Max2x2Planes(src, got, gi, w, h, ho, wo, n)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || gi[i] != wi[i] {
					t.Fatalf("%v, path %d: [%d] C %v at %d, Go %v at %d", sz, isa, i, got[i], gi[i], want[i], wi[i])
				}
			}
		}
		cvec.UseMax2x2(-2)
	}
}

// vecInputs are slices of lengths around the C loops' widths and cMin,
// with NaNs, signed zeros, infinities and values that nearly cancel.
func vecInputs(r *rand.Rand, n int) []float32 {
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e-30, -1e30}
	x := make([]float32, n)
	for i := range x {
		if r.IntN(16) == 0 {
			x[i] = special[r.IntN(len(special))]
		} else {
			x[i] = float32(r.NormFloat64()) * float32(1+r.IntN(1000))
		}
	}
	return x
}

func sameBits32(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
			return i
		}
	}
	return -1
}

func sameBits64(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b)
}

// TestBatchnormLoopsC holds the C twins of the batchnorm and relu loops
// (internal/cvec) to the Go loops bit for bit: the elementwise ones
// value by value, the reductions in their result (the same accumulators
// in the same order), with and without relu, accumulating or not, dx
// aliasing g, on lengths that leave every tail.
func TestBatchnormLoopsC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 63, 64, 65, 511, 512, 513, 1000, 1025, 4099} {
		for trial := range 3 {
			src, x, g := vecInputs(r, n), vecInputs(r, n), vecInputs(r, n)
			a, b := float32(r.NormFloat64()), float32(r.NormFloat64())
			want, got := make([]float32, n), make([]float32, n)
			affineReluGo(want, src, a, b)
			cvec.AffineRelu(got, src, a, b)
			if i := sameBits32(want, got); i >= 0 {
				t.Fatalf("affineRelu n=%d: [%d] C %v, Go %v", n, i, got[i], want[i])
			}
			out := want // a relu's output: no negatives
			if w, c := sum64Go(x), cvec.Sum64(x); !sameBits64(w, c) {
				t.Fatalf("sum64 n=%d: C %v, Go %v", n, c, w)
			}
			m := float32(r.NormFloat64())
			if w, c := sumSqDevGo(x, m), cvec.SumSqDev(x, m); !sameBits64(w, c) {
				t.Fatalf("sumSqDev n=%d: C %v, Go %v", n, c, w)
			}
			for _, relu := range []bool{false, true} {
				ws, wt := sumCenteredGo(g, x, out, m, relu)
				cs, ct := cvec.SumCentered(g, x, out, m, relu)
				if !sameBits64(ws, cs) || !sameBits64(wt, ct) {
					t.Fatalf("sumCentered n=%d relu %v: C %v %v, Go %v %v", n, relu, cs, ct, ws, wt)
				}
				for _, acc := range []bool{false, true} {
					k, fn, sg, xk := float32(r.NormFloat64()), float32(n), float32(ws), float32(wt)
					wd, cd := vecInputs(r, n), make([]float32, n)
					copy(cd, wd)
					bnDxGo(wd, g, x, out, m, k, fn, sg, xk, relu, acc)
					cvec.BnDx(cd, g, x, out, m, k, fn, sg, xk, relu, acc)
					if i := sameBits32(wd, cd); i >= 0 {
						t.Fatalf("bnDx n=%d relu %v acc %v: [%d] C %v, Go %v", n, relu, acc, i, cd[i], wd[i])
					}
					// dx aliasing g.
					wg, cg := append([]float32(nil), g...), append([]float32(nil), g...)
					bnDxGo(wg, wg, x, out, m, k, fn, sg, xk, relu, acc)
					cvec.BnDx(cg, cg, x, out, m, k, fn, sg, xk, relu, acc)
					if i := sameBits32(wg, cg); i >= 0 {
						t.Fatalf("bnDx in place n=%d relu %v acc %v: [%d] C %v, Go %v", n, relu, acc, i, cg[i], wg[i])
					}
				}
			}
			_ = trial
		}
	}
}

// TestInt8LoopsC holds internal/cvec's int8 loops to their Go twins in
// int8.go bit for bit: the quantisation (ties, the clamps, ±0, infinities
// and NaN, signed and unsigned), pixel-major quantisation over ranges of
// pixels, and the requantisations with and without a relu, sums that
// wrap included.
func TestInt8LoopsC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(9, 10))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e30, -1e30}
	input := func(n int, q *actQuant) []float32 {
		x := make([]float32, n)
		for i := range x {
			switch r.IntN(4) {
			case 0:
				x[i] = special[r.IntN(len(special))]
			case 1: // a tie, or next to one
				x[i] = (float32(r.IntN(600)-300) + 0.5) * q.scale
				x[i] = math.Float32frombits(math.Float32bits(x[i]) + uint32(r.IntN(3)) - 1)
			default:
				x[i] = float32(r.NormFloat64()) * 200 * q.scale
			}
		}
		return x
	}
	for _, signed := range []bool{false, true} {
		q := newActQuant(3.7, signed)
		for _, n := range []int{1, 63, 64, 100, 1000} {
			x := input(n, &q)
			got, want := make([]uint8, n), make([]uint8, n)
			cvec.QuantU8(got, x, q.inv, q.lo, q.hi, q.zero)
			q.quantRowGo(want, x)
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("signed %v: u8(%g) is %d in C, %d in Go", signed, x[i], got[i], want[i])
				}
			}
		}
		for _, sh := range [][4]int{{300, 3, 0, 300}, {1000, 32, 256, 700}, {17, 5, 3, 17}} {
			pix, ci, p0, p1 := sh[0], sh[1], sh[2], sh[3]
			k := &qconvKernel{qlayer: &qlayer{in: q}, g: convGeom{ci: ci}}
			x := input(pix*ci, &q)
			got, want := make([]uint8, pix*ci), make([]uint8, pix*ci)
			cvec.QuantNHWC(got, x, pix, ci, p0, p1, q.inv, q.lo, q.hi, q.zero)
			k.quantNHWCGo(want, x, pix, p0, p1)
			if !slices.Equal(got, want) {
				t.Fatalf("signed %v, %v: pixel-major quantisation differs", signed, sh)
			}
		}
	}
	co, k, rows, P, p0 := 40, 64, 37, 100, 13
	ws, bias := make([]float32, co), make([]float32, co)
	for o := range ws {
		ws[o] = float32(r.Float64()) * 0.01
		bias[o] = float32(r.NormFloat64())
	}
	for _, act := range []actKind{actNone, actReLU} {
		l := newQLayer(nil, make([]int8, co*k), ws, bias, co, k, newActQuant(3, true), act, 1)
		for o := range l.corr {
			l.corr[o] = int32(r.IntN(1<<20) - 1<<19)
		}
		l.corr[0] = math.MinInt32
		s := &l.ws[0]
		s.c = make([]int32, rows*l.w.cop)
		for i := range s.c {
			s.c[i] = int32(r.IntN(1<<20) - 1<<19)
		}
		s.c[0] = math.MaxInt32
		got, want := make([]float32, co*P), make([]float32, co*P)
		cvec.RequantT(got[p0+5:], P, s.c[5*l.w.cop:], l.w.cop, rows-5, co, l.mul, l.bias, l.corr, act == actReLU)
		l.requantGo(s, 5, rows, want, P, p0)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("act %d: y[%d] is %g in C, %g in Go", act, i, got[i], want[i])
			}
		}
		d := &qdenseKernel{qlayer: l, out: co}
		gr, wr := make([]float32, co), make([]float32, co)
		cvec.RequantRow(gr, s.c[:co], l.mul, l.bias, l.corr, act == actReLU)
		d.requantRowGo(wr, s.c[:co])
		for i := range wr {
			if math.Float32bits(gr[i]) != math.Float32bits(wr[i]) {
				t.Fatalf("act %d: dense y[%d] is %g in C, %g in Go", act, i, gr[i], wr[i])
			}
		}
	}
}

// TestMax2x2PlanesEvalC holds the index-free C max-pool to max2x2's
// maxima, NaNs and signed zeros included, on each path this CPU runs
// (AVX-512, AVX2, the compiler's loop).
func TestMax2x2PlanesEvalC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(11, 12))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	// Chunks of row pairs across planes, odd sides, and rows too long for
	// a chunk.
	for _, sz := range [][3]int{{28, 28, 64}, {5, 7, 3}, {14, 14, 9}, {4, 4200, 2}, {6, 33, 4}, {2, 2, 5}, {8, 64, 3}, {4, 18, 2}} {
		h, w, n := sz[0], sz[1], sz[2]
		ho, wo := h/2, w/2
		src := make([]float32, n*h*w)
		for i := range src {
			if r.IntN(5) == 0 {
				src[i] = special[r.IntN(len(special))]
			} else {
				src[i] = float32(r.IntN(7) - 3)
			}
		}
		want, got := make([]float32, n*ho*wo), make([]float32, n*ho*wo)
		wi := make([]int32, n*ho*wo)
		for p := range n {
			max2x2(src[p*h*w:(p+1)*h*w], want[p*ho*wo:(p+1)*ho*wo], wi[p*ho*wo:(p+1)*ho*wo], w, ho, wo)
		}
		for _, isa := range []int{2, 1, 0} {
			if !cvec.UseMax2x2Eval(isa) {
				continue
			}
			clear(got)
			cvec.Max2x2PlanesEval(src, got, w, h, ho, wo, n)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v, path %d: [%d] C %v, Go %v", sz, isa, i, got[i], want[i])
				}
			}
		}
		cvec.UseMax2x2Eval(-2)
	}
}

// BenchmarkMax2x2Eval times the index-free max-pool on each path this
// CPU runs, on the fashion net's two pools at batch 64, one thread:
//
//	go test ./engine/native -run NONE -bench Max2x2Eval
func BenchmarkMax2x2Eval(b *testing.B) {
	if !cvec.Built {
		b.Skip("built without cgo")
	}
	defer cvec.UseMax2x2Eval(-2)
	for _, sz := range [][3]int{{28, 28, 64 * 32}, {14, 14, 64 * 64}} {
		h, w, n := sz[0], sz[1], sz[2]
		src := make([]float32, n*h*w)
		for i := range src {
			src[i] = float32(i%97) - 48
		}
		dst := make([]float32, n*(h/2)*(w/2))
		for _, isa := range []int{2, 1, 0} {
			if !cvec.UseMax2x2Eval(isa) {
				continue
			}
			b.Run(fmt.Sprintf("%dx%d/path%d", h, w, isa), func(b *testing.B) {
				for b.Loop() {
					cvec.Max2x2PlanesEval(src, dst, w, h, h/2, w/2, n)
				}
				b.SetBytes(int64(4 * len(src)))
			})
		}
	}
}

// TestGeluC holds the C twins of gelu and its gradient (cvec.Gelu,
// cvec.GeluGrad) to the Go loops bit for bit: ordinary values, values
// around exp32's range ends, where erf32's exp underflows, and the
// special ones, on lengths that leave every tail.
func TestGeluC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(7, 8))
	edges := []float32{88.37626, 88.3762626647949, 88.38, -87.33654, -87.3365447504, -87.34, 13.2, -13.2, 18.7, -18.7, 1e-7, -1e-7}
	for _, n := range []int{1, 3, 7, 8, 15, 16, 17, 63, 64, 65, 513, 1025, 4099} {
		for trial := range 3 {
			x := vecInputs(r, n)
			for i := range x {
				switch r.IntN(4) {
				case 0:
					x[i] = edges[r.IntN(len(edges))]
				case 1:
					x[i] = float32(r.NormFloat64() * 3)
				}
			}
			want, got := make([]float32, n), make([]float32, n)
			for i, v := range x {
				want[i] = 0.5 * v * (1 + erf32(v*geluC1))
			}
			cvec.Gelu(got, x, geluC1)
			if i := sameBits32(want, got); i >= 0 {
				t.Fatalf("gelu n=%d trial %d: gelu(%v): C %v, Go %v", n, trial, x[i], got[i], want[i])
			}
			g := vecInputs(r, n)
			wg, cg := slices.Clone(g), slices.Clone(g)
			for i, v := range x {
				wg[i] *= actDeriv(actGELU, v, 0)
			}
			cvec.GeluGrad(cg, x, geluC1, geluC2)
			if i := sameBits32(wg, cg); i >= 0 {
				t.Fatalf("gelu grad n=%d trial %d: at %v, g %v: C %v, Go %v", n, trial, x[i], g[i], cg[i], wg[i])
			}
		}
	}
}

// TestExpSubC holds cvec.ExpSub, the exponentials of the softmax and
// FAVOR+ rows, to exp32 bit for bit, in place and not.
func TestExpSubC(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, 7, 16, 17, 64, 65, 1025} {
		x := vecInputs(r, n)
		for i := range x {
			if r.IntN(3) == 0 {
				x[i] = float32(r.NormFloat64() * 40)
			}
		}
		sub := float32(r.NormFloat64() * 10)
		want := make([]float32, n)
		for i, v := range x {
			want[i] = exp32(v - sub)
		}
		got := make([]float32, n)
		cvec.ExpSub(got, x, sub)
		if i := sameBits32(want, got); i >= 0 {
			t.Fatalf("n=%d: exp32(%v - %v): C %v, Go %v", n, x[i], sub, got[i], want[i])
		}
		cvec.ExpSub(x, x, sub)
		if i := sameBits32(want, x); i >= 0 {
			t.Fatalf("n=%d in place: C %v, Go %v", n, x[i], want[i])
		}
	}
}

// TestSoftmaxBlock holds the attention's block softmax (rows shifted in
// Go, exponentiated in one call, maxima by compare) to the row-by-row
// softmax it replaced, bit for bit, causal or not, with NaN, ±0, ±Inf
// and rows whose maximum is a zero of either sign.
func TestSoftmaxBlock(t *testing.T) {
	rowRef := func(row []float32) {
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float32
		for j, v := range row {
			ev := exp32(v - mx)
			row[j] = ev
			s += ev
		}
		inv := 1 / s
		for j := range row {
			row[j] *= inv
		}
	}
	r := rand.New(rand.NewPCG(11, 12))
	negz := float32(math.Copysign(0, -1))
	for _, n := range []int{1, 2, 5, 9, 17} {
		for _, causal := range []bool{false, true} {
			for trial := range 20 {
				p := make([]float32, n*n)
				for i := range p {
					switch r.IntN(10) {
					case 0:
						p[i] = 0
					case 1:
						p[i] = negz
					case 2:
						p[i] = -float32(r.IntN(3)) - 0.5
					default:
						p[i] = float32(r.NormFloat64() * 5)
					}
				}
				if trial%5 == 1 {
					p[r.IntN(len(p))] = float32(math.NaN())
				}
				if trial%5 == 2 {
					p[r.IntN(len(p))] = float32(math.Inf(1 - 2*r.IntN(2)))
				}
				want := slices.Clone(p)
				for row := 0; row < n; row++ {
					if causal {
						rowRef(want[row*n : row*n+row+1])
						clear(want[row*n+row+1 : (row+1)*n])
					} else {
						rowRef(want[row*n : (row+1)*n])
					}
				}
				got := slices.Clone(p)
				softmaxBlock(got, n, causal)
				if i := sameBits32(want, got); i >= 0 {
					t.Fatalf("t=%d causal=%v trial %d: [%d] %v, row by row %v (input %v)", n, causal, trial, i, got[i], want[i], p)
				}
			}
		}
	}
}
