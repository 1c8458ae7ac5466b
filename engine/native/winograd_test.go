package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"pipe/engine/native/internal/winograd"
)

// TestWinogradMatchesIm2col runs 3×3 stride-1 convolutions through
// winograd.go, F(2×2, 3×3) and F(4×4, 3×3), and through conv.go's im2col
// and GEMM path, and holds both against a float64 direct convolution:
// the forward (overwriting and accumulating), the weight gradient and
// the input gradient (the Winograd forward of the flipped convolution,
// overwriting and accumulating, against col2im), at one and two threads,
// on maps with odd sides (a last row or column of part tiles), blocks of
// tiles cut inside a tile row, and batches of 1 and 3. Winograd sums in
// another order and through its transforms, so its error is a multiple
// of im2col's on the same inputs (winoErrRatio); a wrong transform is
// off by the outputs' own scale.
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
		{8, 8, 6, 10},
	}
	worst := map[int]float64{}
	for _, gc := range geos {
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 3} {
				for _, wm := range []int{2, 4} {
					t.Run(fmt.Sprintf("ci%d_co%d_%dx%d/threads%d/n%d/F%d", gc.ci, gc.co, gc.h, gc.w, threads, n, wm), func(t *testing.T) {
						g := graphOf(t, fmt.Sprintf("input [%d, %d, %d]\nconv %d k3 pad1 bias false", gc.ci, gc.h, gc.w, gc.co))
						cfg := cfgOf(n, "mse", "sgd")
						cfg.Threads = threads
						m := mustBuild(t, g, cfg)
						wg := m.units[1].k.(*convKernel).geo
						if !wg.wino || wg.flip == nil || !wg.flip.wino {
							t.Fatal("the geometry does not run as Winograd, with a Winograd flip")
						}
						// Blocks of 5 tiles: cut inside tile rows and images.
						flip := *wg.flip
						wg.flip = &flip
						wg.wm, wg.flip.wm = wm, wm
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
						wg.flipWeights(w, wt, 0, wg.ci)
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
						got, im2col := run(&wg), run(&direct)
						want := conv3x3F64(gc.ci, gc.co, n, gc.h, gc.w, x, w, dy, y0, dx0)
						names := []string{"forward", "forward +=", "weight gradient", "input gradient", "input gradient +="}
						for j := range got {
							eW, eD := relErr(got[j], want[j]), relErr(im2col[j], want[j])
							bound := winoErrRatio[wm] * max(eD, winoErrFloor)
							worst[wm] = max(worst[wm], eW/max(eD, winoErrFloor))
							if !(eW <= bound) {
								t.Errorf("%s: winograd F(%d×%d) is %.3g of its scale from float64, im2col %.3g: past %.3g", names[j], wm, wm, eW, eD, bound)
							}
						}
					})
				}
			}
		}
	}
	t.Logf("largest error against im2col's (floored): F(2×2) %.1f×, F(4×4) %.1f×", worst[2], worst[4])
}

// winoErrRatio bounds a Winograd output's error from float64 as a
// multiple of im2col's float32 error on the same inputs: the transforms'
// sums and their weights grow the rounding (docs/design/native-winograd.md).
// The largest seen here: F(2×2) 2.8×; F(4×4) 20.7× with the points
// 0, ±1, 2, -1/2, where Lavin and Gray's 0, ±1, ±2 gave 44×, past 32.
// winoErrFloor is the float32 rounding of one value, below which
// im2col's error says nothing of the inputs.
var winoErrRatio = map[int]float64{2: 16, 4: 32}

const winoErrFloor = 0x1p-24

// relErr is the largest |got - want| over the largest |want|.
func relErr(got []float32, want []float64) float64 {
	d, scale := 0.0, 0.0
	for i, w := range want {
		scale = math.Max(scale, math.Abs(w))
		if e := math.Abs(float64(got[i]) - w); e > d || math.IsNaN(e) {
			d = e
		}
	}
	return d / scale
}

// conv3x3F64 is the 3×3, stride 1, padding 1 convolution of CNHW x by w
// in float64, directly: the forward, the forward added to y0, the weight
// gradient for dy, and the input gradient for dy, alone and added to
// dx0, in run's order.
func conv3x3F64(ci, co, n, h, w int, x, wt, dy, y0, dx0 []float32) (outs [5][]float64) {
	at := func(v []float32, c, nn, i, j int) float64 {
		if i < 0 || i >= h || j < 0 || j >= w {
			return 0
		}
		return float64(v[((c*n+nn)*h+i)*w+j])
	}
	y, dw, dx := make([]float64, co*n*h*w), make([]float64, co*ci*9), make([]float64, ci*n*h*w)
	for o := 0; o < co; o++ {
		for c := 0; c < ci; c++ {
			for kh := 0; kh < 3; kh++ {
				for kw := 0; kw < 3; kw++ {
					k := float64(wt[((o*ci+c)*3+kh)*3+kw])
					var g float64
					for nn := 0; nn < n; nn++ {
						for i := 0; i < h; i++ {
							for j := 0; j < w; j++ {
								xv := at(x, c, nn, i+kh-1, j+kw-1)
								y[((o*n+nn)*h+i)*w+j] += k * xv
								g += float64(dy[((o*n+nn)*h+i)*w+j]) * xv
								dx[((c*n+nn)*h+i)*w+j] += k * at(dy, o, nn, i-kh+1, j-kw+1)
							}
						}
					}
					dw[((o*ci+c)*3+kh)*3+kw] = g
				}
			}
		}
	}
	plus := func(a []float64, b []float32) []float64 {
		s := make([]float64, len(a))
		for i := range a {
			s[i] = a[i] + float64(b[i])
		}
		return s
	}
	return [5][]float64{y, plus(y, y0), dw, dx, plus(dx, dx0)}
}

// BenchmarkWinogradTile times one training step's work of a 3×3
// convolution with ci = co channels, F(2×2, 3×3) against F(4×4, 3×3):
// the forward, the weight gradient and the input gradient (the flipped
// convolution's forward), over about 8 Ki output positions (a batch of
// 8192/(h·w) images), on one thread. Besides the wall time it reports
// the process's CPU time per step (cpu-ms/op), which a machine shared
// with other work inflates less. winoTile's rule comes from it
// (docs/design/native-winograd.md):
//
//	CGO_LDFLAGS=-lopenblas go test ./engine/native -run NONE -bench WinogradTile -count 3
func BenchmarkWinogradTile(b *testing.B) {
	if !winograd.Built {
		b.Skip("built without cgo: no Winograd transforms")
	}
	for _, ch := range []int{8, 16, 32, 64, 128, 256} {
		for _, hw := range []int{8, 14, 16, 28, 32, 64, 128} {
			n := max(1, 8192/(hw*hw))
			for _, wm := range []int{2, 4} {
				b.Run(fmt.Sprintf("c%d/%dx%d/F%d", ch, hw, hw, wm), func(b *testing.B) {
					g := graphOf(b, fmt.Sprintf("input [%d, %d, %d]\nconv %d k3 pad1 bias false", ch, hw, hw, ch))
					cfg := cfgOf(n, "mse", "sgd")
					cfg.Threads = 1
					m := mustBuild(b, g, cfg)
					wg := m.units[1].k.(*convKernel).geo
					flip := *wg.flip
					wg.flip = &flip
					for _, c := range []*convGeom{&wg, wg.flip} {
						c.wm, c.wtb = wm, winoTiles(c.ci, c.co, wm)
					}
					for w := range m.scratch {
						m.scratch[w] = make([]float32, max(wg.scratchNeed(), wg.flip.scratchNeed()))
					}
					r := rand.New(rand.NewPCG(1, 2))
					vec := func(k int) []float32 {
						v := make([]float32, k)
						for i := range v {
							v[i] = float32(r.NormFloat64())
						}
						return v
					}
					size := ch * n * hw * hw
					x, dy, w, y, dx, dw := vec(size), vec(size), vec(ch*ch*9), vec(size), vec(size), vec(ch*ch*9)
					cpu0 := cpuTime()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						m.convForward(&wg, w, x, y, n)
						m.convBackwardWeight(&wg, dy, x, dw, n)
						m.convForward(wg.flip, w, dy, dx, n)
					}
					b.StopTimer()
					b.ReportMetric(float64(cpuTime()-cpu0)/1e6/float64(b.N), "cpu-ms/op")
				})
			}
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWeightPrepSplitByChannel holds the weight preparation that the
// workers split by output channel to the caller's whole-range
// transforms, bit for bit: the Winograd forward's U (F(2×2) and
// F(4×4)), read back from worker 0's scratch after the forward, and the
// input gradient's flipped weights, on 1 to 3 threads, with channel
// counts that do not divide among them. The buffers start as NaN, so a
// channel no worker wrote fails; with two threads or more each worker
// takes a share of the transform and one of the products.
func TestWeightPrepSplitByChannel(t *testing.T) {
	if !winograd.Built {
		t.Skip("built without cgo: no Winograd transforms")
	}
	const ci, co, h, w, n = 67, 131, 5, 7, 2
	nan := float32(math.NaN())
	for _, threads := range []int{1, 2, 3} {
		for _, wm := range []int{2, 4} {
			t.Run(fmt.Sprintf("threads%d/F%d", threads, wm), func(t *testing.T) {
				g := graphOf(t, fmt.Sprintf("input [%d, %d, %d]\nconv %d k3 pad1 bias false", ci, h, w, co))
				cfg := cfgOf(n, "mse", "sgd")
				cfg.Threads = threads
				m := mustBuild(t, g, cfg)
				wg := m.units[1].k.(*convKernel).geo
				if !wg.wino || wg.flip == nil {
					t.Fatal("the geometry does not run as Winograd with a flip")
				}
				wg.wm, wg.wtb = wm, winoTiles(ci, co, wm)
				for wk := range m.scratch {
					m.scratch[wk] = make([]float32, wg.scratchNeed())
					for i := range m.scratch[wk] {
						m.scratch[wk][i] = nan
					}
				}
				r := rand.New(rand.NewPCG(uint64(threads), uint64(wm)))
				wts := make([]float32, co*ci*9)
				for i := range wts {
					wts[i] = float32(r.NormFloat64())
				}
				x, y := make([]float32, ci*n*h*w), make([]float32, co*n*h*w)
				var shares [3]int
				poolShare = func(wk int) func() { shares[wk]++; return func() {} }
				m.convForward(&wg, wts, x, y, n)
				poolShare = nil
				if want := [3]int{2, 2, 2 * (threads - 2)}; threads > 1 && shares != want {
					t.Errorf("forward: runs per worker %v, want %v (the transform's share and the products')", shares, want)
				}
				_, _, _, got := wg.winoParts(m.scratch[0])
				want := make([]float32, len(got))
				wg.winoWeights(wts, want, 0, co)
				if i := sameBits32(got, want); i >= 0 {
					t.Errorf("U[%d] = %v, want %v", i, got[i], want[i])
				}

				wt, wantT := make([]float32, len(wts)), make([]float32, len(wts))
				for i := range wt {
					wt[i] = nan
				}
				shares = [3]int{}
				poolShare = func(wk int) func() { shares[wk]++; return func() {} }
				m.flipWeights(&wg, wts, wt)
				poolShare = nil
				if want := [3]int{1, 1, threads - 2}; threads > 1 && shares != want {
					t.Errorf("flip: runs per worker %v, want %v", shares, want)
				}
				wg.flipWeights(wts, wantT, 0, ci)
				if i := sameBits32(wt, wantT); i >= 0 {
					t.Errorf("flipped weight %d = %v, want %v", i, wt[i], wantT[i])
				}
			})
		}
	}
}
