package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pipe/engine/native/internal/cvec"
)

// TestMax2x2C holds internal/cvec's C max-pool to pool2d.go's max2x2, bit
// for bit and index for index, on planes with ties, signed zeros,
// infinities and NaNs, of even and odd sides.
func TestMax2x2C(t *testing.T) {
	if !cvec.Built {
		t.Skip("built without cgo")
	}
	r := rand.New(rand.NewPCG(1, 2))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001)}
	for _, sz := range [][2]int{{2, 2}, {4, 6}, {5, 7}, {28, 28}, {14, 14}, {3, 33}} {
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
			cvec.Max2x2Planes(src, got, gi, w, h, ho, wo, 1)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(want[i] != want[i] && got[i] != got[i]) || gi[i] != wi[i] {
					t.Fatalf("%s: [%d] C %v at %d, Go %v at %d", fmt.Sprint(sz), i, got[i], gi[i], want[i], wi[i])
				}
			}
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
	for _, sz := range [][3]int{{28, 28, 5}, {5, 7, 3}, {14, 14, 9}} {
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
		cvec.Max2x2Planes(src, got, gi, w, h, ho, wo, n)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) || gi[i] != wi[i] {
				t.Fatalf("%v: [%d] C %v at %d, Go %v at %d", sz, i, got[i], gi[i], want[i], wi[i])
			}
		}
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
