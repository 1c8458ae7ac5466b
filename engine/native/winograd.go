package native

// Winograd F(2×2, 3×3) convolution
//
// A 3×3 convolution at stride 1 with padding 1 (the U-Net's and the
// Fashion CNN's) is computed on 2×2 output tiles, each from the 4×4
// input patch around it (Lavin and Gray, "Fast Algorithms for
// Convolutional Neural Networks", 2015):
//
//	Y_tile = Aᵀ · [ (G·g·Gᵀ) ⊙ (Bᵀ·d·B) ] · A
//
// summed over input channels, so that for each of the 16 positions ξ of
// the transformed tile the sum over channels is one matrix product:
//
//	M[ξ] (co × tiles) = U[ξ] (co × ci) · V[ξ] (ci × tiles)
//
// 16·co·ci multiplications per tile of 4 outputs instead of 36·co·ci:
// 2.25 times fewer. The weight gradient is the same algebra transposed:
//
//	dU[ξ] (co × ci) += M'[ξ] (co × tiles) · V[ξ]ᵀ,  M' = A·dY_tile·Aᵀ
//	dW = Gᵀ · dU · G
//
// and the input gradient is the forward of the flipped convolution
// (convGeom.flip), itself 3×3, stride 1, padding 1. The transforms
// (winograd.c) run over blocks of wtb tiles per worker, so that a
// block's V and M stay in the core's cache between the transform and
// the products; workers own ranges of tiles, and the weight gradient's
// per-worker dU is turned into a partial dW and added in worker order,
// as conv.go does, so the result does not depend on timing.
//
// G has entries ½ and A, B only ±1 and 0, so the transforms are exact
// but the sums are taken in another order than im2col's: the outputs
// differ from the direct convolution by rounding, within 1e-5 of the
// outputs' scale in winograd_test.go.

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

// winoEligible says whether the convolution runs as Winograd F(2×2, 3×3).
func winoEligible(ci, h, w, co, ho, wo, k, s, p, d, g int) bool {
	return winograd.Built && k == 3 && s == 1 && p == 1 && d == 1 && g == 1 && h == ho && w == wo &&
		ci >= winoMinChannels && co >= winoMinChannels
}

// winoTiles is the tiles of a worker's block: as many as fit winoBudget,
// at least 16.
func winoTiles(ci, co int) int {
	return max(16, winoBudget/(16*(ci+co)))
}

// winoScratch is the values of one worker's scratch for a Winograd
// convolution: V, M, the transforms' row buffers and U (or dU).
func (c *convGeom) winoScratch() int {
	return 16*(c.ci+c.co)*c.wtb + 4*(c.w+4) + 16*c.ci*c.co
}

// winoParts cuts a worker's scratch into V, M, the row buffers and U.
func (c *convGeom) winoParts(s []float32) (v, mm, rows, u []float32) {
	nv, nm, nr := 16*c.ci*c.wtb, 16*c.co*c.wtb, 4*(c.w+4)
	return s[:nv], s[nv : nv+nm], s[nv+nm : nv+nm+nr], s[nv+nm+nr : nv+nm+nr+16*c.ci*c.co]
}

// winoForward computes y = conv(x, w) + beta·y.
func (m *model) winoForward(c *convGeom, w, x, y []float32, n int, beta float32) {
	_, _, _, u := c.winoParts(m.scratch[0])
	winograd.Weights(w, u, c.co, c.ci)
	T := n * ((c.h + 1) / 2) * ((c.w + 1) / 2)
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(T, wk)
		v, mm, rows, _ := c.winoParts(m.scratch[wk])
		for t0 := lo; t0 < hi; t0 += c.wtb {
			t1 := min(t0+c.wtb, hi)
			nb := t1 - t0
			winograd.In(x, v, c.ci, n, c.h, c.w, t0, t1, c.wtb, rows)
			for xi := 0; xi < 16; xi++ {
				blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, c.co, nb, c.ci, 1,
					u[xi*c.co*c.ci:], c.ci, v[xi*c.ci*c.wtb:], c.wtb, 0, mm[xi*c.co*c.wtb:], c.wtb)
			}
			winograd.Out(mm, y, c.co, n, c.h, c.w, t0, t1, c.wtb, beta, rows)
		}
	})
}

// winoBackwardWeight adds the weight gradient of the convolution into dw.
func (m *model) winoBackwardWeight(c *convGeom, dy, x, dw []float32, n int) {
	T := n * ((c.h + 1) / 2) * ((c.w + 1) / 2)
	wsize := c.co * c.ci * 9
	one := m.pool.n == 1
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(T, wk)
		v, mm, rows, du := c.winoParts(m.scratch[wk])
		clear(du)
		for t0 := lo; t0 < hi; t0 += c.wtb {
			t1 := min(t0+c.wtb, hi)
			nb := t1 - t0
			winograd.In(x, v, c.ci, n, c.h, c.w, t0, t1, c.wtb, rows)
			winograd.Dy(dy, mm, c.co, n, c.h, c.w, t0, t1, c.wtb, rows)
			for xi := 0; xi < 16; xi++ {
				blasImpl.Sgemm(blas.NoTrans, blas.Trans, c.co, c.ci, nb, 1,
					mm[xi*c.co*c.wtb:], c.wtb, v[xi*c.ci*c.wtb:], c.wtb, 1, du[xi*c.co*c.ci:], c.ci)
			}
		}
		dst := dw
		if !one {
			dst = m.partial[wk][:wsize]
			clear(dst)
		}
		winograd.WeightGrad(du, dst, c.co, c.ci)
	})
	if !one {
		m.sumPartials(dw, wsize)
	}
}
