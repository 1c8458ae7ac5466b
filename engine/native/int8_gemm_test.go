package native

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestInt8GemmExact checks the packed int8 product, assembly and Go,
// against a plain integer loop over the unpacked operands: the int32 sums
// must be equal, for shapes whose K and channel counts are not multiples
// of the kernel's blocks, at the operands' extremes.
func TestInt8GemmExact(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	shapes := []struct{ rows, co, k int }{{4, 32, 4}, {8, 10, 9}, {12, 64, 288}, {4, 70, 147}, {16, 33, 4608}}
	for range 40 {
		shapes = append(shapes, struct{ rows, co, k int }{4 * (1 + r.IntN(6)), 1 + r.IntN(100), 1 + r.IntN(600)})
	}
	for _, sh := range shapes {
		q := make([]int8, sh.co*sh.k)
		for i := range q {
			q[i] = int8(r.IntN(255) - 127)
		}
		q[0] = -127
		w := packWeights(q, make([]float32, sh.co), sh.co, sh.k)
		lda := w.lda()
		a := make([]uint8, sh.rows*lda)
		for p := 0; p < sh.rows; p++ {
			for i := 0; i < sh.k; i++ {
				a[p*lda+i] = uint8(r.IntN(256))
			}
		}
		a[0] = 255
		want := make([]int32, sh.rows*sh.co)
		for p := 0; p < sh.rows; p++ {
			for o := 0; o < sh.co; o++ {
				var s int32
				for i := 0; i < sh.k; i++ {
					s += int32(a[p*lda+i]) * int32(q[o*sh.k+i])
				}
				want[p*sh.co+o] = s
			}
		}
		for _, k := range qkernels(t) {
			c := make([]int32, sh.rows*w.cop)
			for i := range c {
				c[i] = math.MinInt32 // the kernel writes, never adds
			}
			withQPath(k, func() { w.gemm(a, lda, sh.rows, c, w.cop) })
			for p := 0; p < sh.rows; p++ {
				for o := 0; o < sh.co; o++ {
					if got := c[p*w.cop+o]; got != want[p*sh.co+o] {
						t.Fatalf("rows %d co %d k %d kernel %v: c[%d][%d] = %d, want %d", sh.rows, sh.co, sh.k, k, p, o, got, want[p*sh.co+o])
					}
				}
			}
		}
	}
}

// qkernels are the int8 kernels this CPU runs, slowest first; it logs
// those it cannot test.
func qkernels(t testing.TB) []qkernel {
	ks := []qkernel{qGo}
	for _, k := range []struct {
		k  qkernel
		ok bool
	}{{qAVX2, hasAVX2}, {qVNNI, hasVNNI}} {
		if k.ok {
			ks = append(ks, k.k)
		} else {
			t.Logf("this CPU cannot run the %v kernel: not tested", k.k)
		}
	}
	return ks
}

// withQPath runs f with the int8 layers on kernel k.
func withQPath(k qkernel, f func()) {
	saved := qpath
	qpath = k
	defer func() { qpath = saved }()
	f()
}

// TestDotAVX2Exact calls dotAVX2 itself, whatever kernel this CPU would
// pick, on random shapes and operands (extremes included, -128 too,
// which quantisation never makes) against dotGo: the int32 sums equal bit
// for bit, and the channels beyond the block and rows beyond the tiles
// untouched. Rows of a lie apart by more than K, as in a chunk.
func TestDotAVX2Exact(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 here")
	}
	r := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 300; trial++ {
		k4 := 1 + r.IntN(80)
		if trial%10 == 0 {
			k4 = 1 + r.IntN(1200)
		}
		tiles := 1 + r.IntN(5)
		lda := 4*k4 + 4*r.IntN(3)
		ldc := 32 + r.IntN(40)
		a := make([]uint8, 4*tiles*lda)
		w := make([]int8, k4*128)
		for i := range a {
			a[i] = uint8(r.IntN(256))
		}
		for i := range w {
			w[i] = int8(r.IntN(256) - 128)
		}
		switch trial % 4 { // the extremes: every product at its largest
		case 1:
			fillU8(a, 255)
			for i := range w {
				w[i] = -128
			}
		case 2:
			fillU8(a, 255)
			for i := range w {
				w[i] = 127
			}
		}
		want := make([]int32, 4*tiles*ldc)
		got := make([]int32, 4*tiles*ldc)
		for i := range got {
			got[i] = math.MinInt32 + 7
			want[i] = got[i]
		}
		dotGo(a, lda, w, k4, want, ldc, tiles)
		dotAVX2(&a[0], lda, &w[0], k4, &got[0], ldc, tiles)
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("trial %d (k4 %d tiles %d lda %d ldc %d): c[%d][%d] = %d, dotGo's %d", trial, k4, tiles, lda, ldc, i/ldc, i%ldc, got[i], want[i])
			}
		}
	}
}

// TestQuantizeWeightsRoundTrip bounds the per-channel round trip: every
// weight comes back within half its channel's step (max|w|/254), each
// channel's largest exactly, and a channel of small weights keeps its own
// resolution beside one of large weights.
func TestQuantizeWeightsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	co, k := 6, 50
	w := make([]float32, co*k)
	for o := 0; o < co; o++ {
		mag := float32(math.Pow(10, float64(o-3))) // 1e-3 .. 1e2
		for i := 0; i < k; i++ {
			w[o*k+i] = mag * float32(r.NormFloat64())
		}
	}
	w[2*k+7] = 0
	q, s := quantizeWeights(w, co, k)
	for o := 0; o < co; o++ {
		var mx float32
		for _, v := range w[o*k : (o+1)*k] {
			mx = max(mx, abs32(v))
		}
		if got := s[o]; math.Abs(float64(got-mx/127)) > 1e-6*float64(mx) {
			t.Fatalf("channel %d: scale %g, want max|w|/127 = %g", o, got, mx/127)
		}
		for i := 0; i < k; i++ {
			v, back := w[o*k+i], float32(q[o*k+i])*s[o]
			if err := abs32(v - back); err > s[o]/2*(1+1e-6) {
				t.Fatalf("channel %d weight %d: %g comes back as %g, error %g above half a step %g", o, i, v, back, err, s[o]/2)
			}
			if abs32(v) == mx && abs32(float32(q[o*k+i])) != 127 {
				t.Fatalf("channel %d: its largest weight quantises to %d, not ±127", o, q[o*k+i])
			}
		}
	}
	if q[2*k+7] != 0 {
		t.Fatalf("zero quantised to %d", q[2*k+7])
	}
	zq, zs := quantizeWeights(make([]float32, 8), 2, 4)
	if zs[0] != 1 || zq[0] != 0 {
		t.Fatalf("an all-zero channel: scale %g, q %d; want 1 and 0", zs[0], zq[0])
	}
}

// TestRequantVNNI checks the assembly requantisation against the Go loop
// on a tile whose rows are not a multiple of 16, with and without a relu:
// equal within one rounding (the assembly fuses the multiply and add).
func TestRequantVNNI(t *testing.T) {
	if !hasVNNI {
		t.Skip("no AVX-512 VNNI here")
	}
	r := rand.New(rand.NewPCG(5, 6))
	co, k, rows, P, p0 := 40, 64, 37, 100, 13
	q := make([]int8, co*k)
	ws := make([]float32, co)
	bias := make([]float32, co)
	for o := range ws {
		ws[o] = float32(r.Float64()) * 0.01
		bias[o] = float32(r.NormFloat64())
	}
	for _, act := range []actKind{actNone, actReLU} {
		l := newQLayer(nil, q, ws, bias, co, k, newActQuant(3, true), act, 1)
		s := &l.ws[0]
		s.c = make([]int32, rows*l.w.cop)
		for i := range s.c {
			s.c[i] = int32(r.IntN(1<<20) - 1<<19)
		}
		got, want := make([]float32, co*P), make([]float32, co*P)
		withQPath(qVNNI, func() { l.requantT(s, rows, got, P, p0) })
		withQPath(qGo, func() { l.requantT(s, rows, want, P, p0) })
		for i := range got {
			if d := math.Abs(float64(got[i] - want[i])); d > 1e-6*math.Abs(float64(want[i]))+1e-6 {
				t.Fatalf("act %d: y[%d] = %g, the Go loop's %g", act, i, got[i], want[i])
			}
		}
		if act == actReLU && want[p0] == 0 && got[p0] != 0 {
			t.Fatalf("relu not applied")
		}
	}
}
