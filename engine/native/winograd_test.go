package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pipe/engine/native/internal/winograd"
)

// TestWinogradMatchesIm2col runs 3×3 stride-1 convolutions through
// winograd.go and through conv.go's im2col and GEMM path, and compares
// the forward (overwriting and accumulating), the weight gradient and
// the input gradient (the Winograd forward of the flipped convolution,
// overwriting and accumulating, against col2im), at one and two threads,
// on maps with odd sides (a last row or column of half tiles), blocks of
// tiles cut inside a tile row, and batches of 1 and 3. Winograd sums in
// another order: each value agrees within 1e-5 of the largest magnitude
// of its output (float32 rounding of sums of a few hundred terms).
func TestWinogradMatchesIm2col(t *testing.T) {
	if !winograd.Built {
		t.Skip("built without cgo: no Winograd transforms")
	}
	geos := []struct{ ci, co, h, w int }{
		{8, 8, 4, 4},
		{8, 16, 7, 5},
		{16, 8, 9, 12},
		{32, 64, 14, 14},
		{12, 10, 1, 3},
	}
	for _, gc := range geos {
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 3} {
				t.Run(fmt.Sprintf("ci%d_co%d_%dx%d/threads%d/n%d", gc.ci, gc.co, gc.h, gc.w, threads, n), func(t *testing.T) {
					g := graphOf(t, fmt.Sprintf("input [%d, %d, %d]\nconv %d k3 pad1 bias false", gc.ci, gc.h, gc.w, gc.co))
					cfg := cfgOf(n, "mse", "sgd")
					cfg.Threads = threads
					m := mustBuild(t, g, cfg)
					wg := m.units[1].k.(*convKernel).geo
					if !wg.wino || wg.flip == nil || !wg.flip.wino {
						t.Fatal("the geometry does not run as Winograd, with a Winograd flip")
					}
					// Blocks of 5 tiles: cut inside tile rows and images.
					wg.wtb, wg.flip.wtb = 5, 5
					direct := wg
					direct.wino, direct.flip = false, nil
					for w := range m.scratch {
						m.scratch[w] = make([]float32, max(wg.scratchNeed(), wg.flip.scratchNeed(), direct.scratchNeed()))
						m.partial[w] = make([]float32, direct.co*direct.ckk)
					}
					r := rand.New(rand.NewPCG(uint64(n), 7))
					vec := func(k int) []float32 {
						v := make([]float32, k)
						for i := range v {
							v[i] = float32(r.NormFloat64())
						}
						return v
					}
					xs, ys := gc.ci*n*gc.h*gc.w, gc.co*n*gc.h*gc.w
					x, dy, w, y0, dx0 := vec(xs), vec(ys), vec(gc.co*gc.ci*9), vec(ys), vec(xs)
					wt := make([]float32, len(w))
					wg.flipWeights(w, wt)
					run := func(c *convGeom) (outs [5][]float32) {
						outs[0] = make([]float32, ys)
						m.convForward(c, w, x, outs[0], n)
						outs[1] = append([]float32(nil), y0...)
						m.convForwardBeta(c, w, x, outs[1], n, 1)
						outs[2] = make([]float32, len(w))
						m.convBackwardWeight(c, dy, x, outs[2], n)
						outs[3] = make([]float32, xs)
						outs[4] = append([]float32(nil), dx0...)
						if c.flip != nil {
							m.convForwardBeta(c.flip, wt, dy, outs[3], n, 0)
							m.convForwardBeta(c.flip, wt, dy, outs[4], n, 1)
						} else {
							m.convBackwardData(c, w, dy, outs[3], n, false)
							m.convBackwardData(c, w, dy, outs[4], n, true)
						}
						return outs
					}
					got, want := run(&wg), run(&direct)
					names := []string{"forward", "forward +=", "weight gradient", "input gradient", "input gradient +="}
					for j := range got {
						scale := 0.0
						for _, v := range want[j] {
							scale = math.Max(scale, math.Abs(float64(v)))
						}
						for i := range got[j] {
							if d := math.Abs(float64(got[j][i] - want[j][i])); d > 1e-5*scale || math.IsNaN(d) {
								t.Fatalf("%s[%d]: winograd %g, im2col %g (scale %g)", names[j], i, got[j][i], want[j][i], scale)
							}
						}
					}
				})
			}
		}
	}
}
