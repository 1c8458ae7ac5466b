package native

// Winograd F(2×2, 3×3) and F(4×4, 3×3) convolutions
//
// A 3×3 convolution at stride 1 with padding 1 is computed on m×m output
// tiles (m = 2 or 4) from (m+2)×(m+2) input patches (Lavin and Gray,
// 2015): for each of the (m+2)² positions of the transformed tile the sum
// over channels is one matrix product, 2.25 (m = 2) or 4 (m = 4) times
// fewer multiplications than direct. The weight gradient is the same
// algebra transposed, and the input gradient the forward of the flipped
// convolution. Outputs differ from im2col's by rounding only, F(4×4)'s
// more than F(2×2)'s; winoTile chooses between them per convolution.
//
// Derivation: docs/design/native-winograd.md.

import (
	"gonum.org/v1/gonum/blas"

	"pipe/engine/native/internal/winograd"
)

// winoMinChannels is the fewest input and output channels a convolution
// runs Winograd with: below, the transforms cost more than the products
// they save (the Fashion CNN's first conv has one input channel).
const winoMinChannels = 8

// winoBudget is the float32 values of one worker's block of V and M:
// 1 MiB, a core's L2, the best of 128 Ki to 1 Mi values on the U-Net's
// and the Fashion CNN's training steps (timed in interleaved rounds on a
// quiet machine: 0.92 and 0.97 of the step at 1 Mi).
var winoBudget = 256 << 10

// winoEligible says whether the convolution runs as Winograd.
func winoEligible(ci, h, w, co, ho, wo, k, s, p, d, g int) bool {
	return winograd.Built && k == 3 && s == 1 && p == 1 && d == 1 && g == 1 && h == ho && w == wo &&
		ci >= winoMinChannels && co >= winoMinChannels
}

// winoTile is the output tile side a Winograd convolution runs with: 4
// (F(4×4, 3×3)) up to winoF4MaxChannels input and output channels
// together, else 2 (F(2×2, 3×3)). The kernel builder and the cost model
// both take it from convGeom.
func winoTile(ci, co int) int {
	if ci+co <= winoF4MaxChannels {
		return 4
	}
	return 2
}

// winoF4MaxChannels is the most channels, in and out together, that run
// F(4×4, 3×3): 0, none. BenchmarkWinogradTile found it faster up to 256
// (0.47–0.95 of F(2×2)'s CPU time at 8 to 128 channels a side: 4–8% of
// unet_small's step, 8–18% of fashion's), but its rounding (4 to 7 times
// direct's) moved two engine comparisons past bounds still fixed on one
// CPU under emulated ones (olinda's lockstep median under OpenBLAS's
// Prescott kernels, the DeepLab example twin under oneDNN's AVX2): off
// until those are held to PyTorch's own float32 error
// (docs/design/native-winograd.md).
const winoF4MaxChannels = 0

// winoTiles is the tiles of a worker's block for tile side m: as many as
// fit winoBudget, at least 16.
func winoTiles(ci, co, m int) int {
	return max(16, winoBudget/((m+2)*(m+2)*(ci+co)))
}

// winoXi is the positions of a transformed tile, (m+2)².
func (c *convGeom) winoXi() int { return (c.wm + 2) * (c.wm + 2) }

// winoCount is the tiles of n images.
func (c *convGeom) winoCount(n int) int {
	return n * ((c.h + c.wm - 1) / c.wm) * ((c.w + c.wm - 1) / c.wm)
}

// winoScratch is the values of one worker's scratch for a Winograd
// convolution: V, M, the transforms' row buffers and U (or dU).
func (c *convGeom) winoScratch() int {
	xi := c.winoXi()
	return xi*(c.ci+c.co)*c.wtb + (c.wm+2)*(c.w+c.wm+2) + xi*c.ci*c.co
}

// winoParts cuts a worker's scratch into V, M, the row buffers and U.
func (c *convGeom) winoParts(s []float32) (v, mm, rows, u []float32) {
	xi := c.winoXi()
	nv, nm, nr := xi*c.ci*c.wtb, xi*c.co*c.wtb, (c.wm+2)*(c.w+c.wm+2)
	return s[:nv], s[nv : nv+nm], s[nv+nm : nv+nm+nr], s[nv+nm+nr : nv+nm+nr+xi*c.ci*c.co]
}

// The transforms of the convolution's tile side.

// winoWeights writes U for output channels [o0, o1).
func (c *convGeom) winoWeights(w, u []float32, o0, o1 int) {
	if c.wm == 4 {
		winograd.Weights4(w, u, c.co, c.ci, o0, o1)
	} else {
		winograd.Weights(w, u, c.co, c.ci, o0, o1)
	}
}

func (c *convGeom) winoWeightGrad(du, dw []float32) {
	if c.wm == 4 {
		winograd.WeightGrad4(du, dw, c.co, c.ci)
	} else {
		winograd.WeightGrad(du, dw, c.co, c.ci)
	}
}

func (c *convGeom) winoIn(x, v []float32, n, t0, t1 int, rows []float32) {
	if c.wm == 4 {
		winograd.In4(x, v, c.ci, n, c.h, c.w, t0, t1, c.wtb, rows)
	} else {
		winograd.In(x, v, c.ci, n, c.h, c.w, t0, t1, c.wtb, rows)
	}
}

func (c *convGeom) winoOut(mm, y []float32, n, t0, t1 int, beta float32, rows []float32) {
	if c.wm == 4 {
		winograd.Out4(mm, y, c.co, n, c.h, c.w, t0, t1, c.wtb, beta, rows)
	} else {
		winograd.Out(mm, y, c.co, n, c.h, c.w, t0, t1, c.wtb, beta, rows)
	}
}

func (c *convGeom) winoDy(dy, mm []float32, n, t0, t1 int, rows []float32) {
	if c.wm == 4 {
		winograd.Dy4(dy, mm, c.co, n, c.h, c.w, t0, t1, c.wtb, rows)
	} else {
		winograd.Dy(dy, mm, c.co, n, c.h, c.w, t0, t1, c.wtb, rows)
	}
}

// winoForward computes y = conv(x, w) + beta·y. The weight transform
// (U, in worker 0's scratch) is split by output channel among the
// workers: on the caller alone it was 1–3 ms of serial time in each of
// the U-Net's 128- to 256-channel units (docs/design/native-threads.md).
func (m *model) winoForward(c *convGeom, w, x, y []float32, n int, beta float32) {
	_, _, _, u := c.winoParts(m.scratch[0])
	m.pool.forRange(c.co, max(1, grain/(c.ci*c.winoXi())), func(lo, hi int) {
		c.winoWeights(w, u, lo, hi)
	})
	T, xis := c.winoCount(n), c.winoXi()
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(T, wk)
		v, mm, rows, _ := c.winoParts(m.scratch[wk])
		for t0 := lo; t0 < hi; t0 += c.wtb {
			t1 := min(t0+c.wtb, hi)
			nb := t1 - t0
			c.winoIn(x, v, n, t0, t1, rows)
			for xi := 0; xi < xis; xi++ {
				blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, c.co, nb, c.ci, 1,
					u[xi*c.co*c.ci:], c.ci, v[xi*c.ci*c.wtb:], c.wtb, 0, mm[xi*c.co*c.wtb:], c.wtb)
			}
			c.winoOut(mm, y, n, t0, t1, beta, rows)
		}
	})
}

// winoBackwardWeight adds the weight gradient of the convolution into dw.
func (m *model) winoBackwardWeight(c *convGeom, dy, x, dw []float32, n int) {
	T, xis := c.winoCount(n), c.winoXi()
	wsize := c.co * c.ci * 9
	one := m.pool.n == 1
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(T, wk)
		v, mm, rows, du := c.winoParts(m.scratch[wk])
		clear(du)
		for t0 := lo; t0 < hi; t0 += c.wtb {
			t1 := min(t0+c.wtb, hi)
			nb := t1 - t0
			c.winoIn(x, v, n, t0, t1, rows)
			c.winoDy(dy, mm, n, t0, t1, rows)
			for xi := 0; xi < xis; xi++ {
				blasImpl.Sgemm(blas.NoTrans, blas.Trans, c.co, c.ci, nb, 1,
					mm[xi*c.co*c.wtb:], c.wtb, v[xi*c.ci*c.wtb:], c.wtb, 1, du[xi*c.co*c.ci:], c.ci)
			}
		}
		dst := dw
		if !one {
			dst = m.partial[wk][:wsize]
			clear(dst)
		}
		c.winoWeightGrad(du, dst)
	})
	if !one {
		m.sumPartials(dw, wsize)
	}
}
