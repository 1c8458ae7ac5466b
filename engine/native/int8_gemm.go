package native

import "pipe/planner/cost"

// The int8 product: C[p][o] = Σ_k A[p][k]·W[o][k] over int32, A the input
// quantised to unsigned bytes (unpacked rows: im2row or dense's input), W
// the weights to signed bytes, packed once per 32 output channels as
// [K/4][32][4]. dotVNNI (AVX-512 VNNI), dotAVX2 and dotGo (the plain loop)
// give the same sums bit for bit; qpath picks. The packing, the tiles and
// why the sums are exact: docs/design/int8-inference.md.

// qkernel names a kernel of the int8 product.
type qkernel uint8

const (
	qGo   qkernel = iota // dotGo, anywhere
	qAVX2                // dotAVX2: AVX2, no AVX-512 (AMD Zen 2 and 3, Intel before Ice Lake)
	qVNNI                // dotVNNI: AVX-512 VNNI
)

func (k qkernel) String() string { return [...]string{"Go", "AVX2", "AVX-512 VNNI"}[k] }

// qpath is the kernel the int8 layers run: the fastest this CPU has.
// Tests set it to run a slower one on the same CPU.
var qpath = bestQKernel()

func bestQKernel() qkernel {
	switch {
	case hasVNNI:
		return qVNNI
	case hasAVX2:
		return qAVX2
	}
	return qGo
}

// Int8Kernel is the kernel int8 inference runs on this CPU and its speed
// against fp32 as measured on the fashion net's forward pass at batch 64
// (BenchmarkEvalFashion; the figures and the machine in the commit that
// set them and in docs/design/int8-inference.md), for the planner.
func Int8Kernel() cost.Int8Kernel {
	k := cost.Int8Kernel{Name: qpath.String()}
	switch qpath {
	case qVNNI:
		k.Speedup = 2.33
	case qAVX2:
		k.Speedup = 1.36
	default:
		k.Speedup = 0.08
	}
	k.Measured = "the fashion example's forward pass, batch 64, on an AMD EPYC (Zen 4), 2 threads"
	return k
}

// qweights are a layer's weights quantised per output channel and packed
// for dotVNNI.
type qweights struct {
	co, k   int // output channels; K, the products' inner dimension
	k4, cop int // K/4 and co rounded up to whole blocks of 32
	packed  []int8
	// scale is each channel's weight scale (max|w|/127); wsum the sum of
	// its int8 weights, which a nonzero input zero point needs.
	scale []float32
	wsum  []int32
}

// quantizeWeights quantises w ([co][k] row-major, fp32) symmetrically per
// row: q = round(w/s) with s = max|w|/127 (1 for an all-zero row).
func quantizeWeights(w []float32, co, k int) (q []int8, scale []float32) {
	q = make([]int8, co*k)
	scale = make([]float32, co)
	for o := 0; o < co; o++ {
		row := w[o*k : (o+1)*k]
		var mx float32
		for _, v := range row {
			mx = max(mx, abs32(v))
		}
		s := mx / 127
		if s == 0 {
			s = 1
		}
		scale[o] = s
		inv := 1 / s
		for i, v := range row {
			q[o*k+i] = int8(clampRound(v*inv, -127, 127))
		}
	}
	return q, scale
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}

// clampRound rounds v to the nearest integer (halves away from zero) and
// clamps it to [lo, hi].
func clampRound(v float32, lo, hi int32) int32 {
	var r int32
	if v >= 0 {
		if v >= float32(hi) {
			return hi
		}
		r = int32(v + 0.5)
	} else {
		if v <= float32(lo) {
			return lo
		}
		r = -int32(-v + 0.5)
	}
	return min(max(r, lo), hi)
}

// packWeights packs q ([co][k] int8) for dotVNNI.
func packWeights(q []int8, scale []float32, co, k int) *qweights {
	w := &qweights{co: co, k: k, k4: (k + 3) / 4, cop: (co + 31) / 32 * 32, scale: scale}
	w.packed = make([]int8, w.cop*w.k4*4)
	w.wsum = make([]int32, co)
	for o := 0; o < co; o++ {
		blk, j := o/32, o%32
		base := blk * w.k4 * 128
		for i := 0; i < k; i++ {
			v := q[o*k+i]
			w.wsum[o] += int32(v)
			w.packed[base+(i/4)*128+j*4+i%4] = v
		}
	}
	return w
}

// lda is the row stride of A: K rounded up to whole groups of 4, the
// padding zero.
func (w *qweights) lda() int { return w.k4 * 4 }

// gemm computes c[r][o] (ldc int32 apart, o < cop) for rows r < rows, a
// multiple of 4, of a (lda bytes apart).
func (w *qweights) gemm(a []uint8, lda, rows int, c []int32, ldc int) {
	if rows%4 != 0 || lda < w.k4*4 || len(a) < (rows-1)*lda+w.k4*4 || ldc < w.cop || len(c) < (rows-1)*ldc+w.cop {
		panic("cpu: int8 product operands too small")
	}
	tiles := rows / 4
	for blk := 0; blk < w.cop/32; blk++ {
		pw := w.packed[blk*w.k4*128 : (blk+1)*w.k4*128]
		switch qpath {
		case qVNNI:
			dotVNNI(&a[0], lda, &pw[0], w.k4, &c[blk*32], ldc, tiles)
		case qAVX2:
			dotAVX2(&a[0], lda, &pw[0], w.k4, &c[blk*32], ldc, tiles)
		default:
			dotGo(a, lda, pw, w.k4, c[blk*32:], ldc, tiles)
		}
	}
}

// dotGo is dotVNNI in Go: the same sums over the same packing. It is the
// reference the assembly kernels are tested against, and the kernel where
// there is no AVX2.
func dotGo(a []uint8, lda int, w []int8, k4 int, c []int32, ldc int, tiles int) {
	var acc [32]int32
	for r := 0; r < 4*tiles; r++ {
		row := a[r*lda : r*lda+4*k4]
		acc = [32]int32{}
		for q := 0; q < k4; q++ {
			a0, a1, a2, a3 := int32(row[4*q]), int32(row[4*q+1]), int32(row[4*q+2]), int32(row[4*q+3])
			blk := w[q*128 : q*128+128]
			for j := range acc {
				acc[j] += a0*int32(blk[4*j]) + a1*int32(blk[4*j+1]) + a2*int32(blk[4*j+2]) + a3*int32(blk[4*j+3])
			}
		}
		copy(c[r*ldc:r*ldc+32], acc[:])
	}
}
