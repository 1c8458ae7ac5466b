package native

// Winograd F(2×2, 3×3) convolution
//
// A 3×3 convolution at stride 1 with padding 1 is computed on 2×2 output
// tiles from 4×4 input patches (Lavin and Gray, 2015): for each of the 16
// positions of the transformed tile the sum over channels is one matrix
// product, 2.25 times fewer multiplications than direct. The weight
// gradient is the same algebra transposed, and the input gradient the
// forward of the flipped convolution. Outputs differ from im2col's by
// rounding only (the sums run in another order).
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
