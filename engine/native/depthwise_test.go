package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/run"
	"pipe/stdlib"
)

// TestDepthwiseMatchesGEMM runs each depthwise geometry through
// depthwise.go's direct kernel and through conv.go's im2col and GEMM path,
// and compares the forward (overwriting and accumulating), the weight
// gradient and the input gradient (overwriting and accumulating), at one
// and two threads and batches of 1 and 3.
func TestDepthwiseMatchesGEMM(t *testing.T) {
	geos := []struct{ c, h, w, k, p, d int }{
		{3, 6, 5, 3, 1, 1},
		{4, 8, 8, 3, 2, 2},
		{2, 4, 4, 3, 12, 12}, // every tap but the centre past the map
		{2, 5, 7, 3, 3, 3},   // some rows and columns past it
		{3, 9, 4, 5, 2, 1},
		{5, 1, 6, 3, 1, 1},
	}
	for _, gc := range geos {
		for _, threads := range []int{1, 2} {
			for _, n := range []int{1, 3} {
				t.Run(fmt.Sprintf("c%d_%dx%d_k%d_p%d_d%d/threads%d/n%d", gc.c, gc.h, gc.w, gc.k, gc.p, gc.d, threads, n), func(t *testing.T) {
					g := graphOf(t, fmt.Sprintf("input [%d, %d, %d]\nconv %d k%d pad%d d%d groups %d bias false", gc.c, gc.h, gc.w, gc.c, gc.k, gc.p, gc.d, gc.c))
					cfg := cfgOf(n, "mse", "sgd")
					cfg.Threads = threads
					m := mustBuild(t, g, cfg)
					direct := m.units[1].k.(*convKernel).geo
					if !direct.depthwise {
						t.Fatal("the geometry does not run as the depthwise kernel")
					}
					gemm := direct
					gemm.depthwise = false
					for w := range m.scratch {
						m.scratch[w] = make([]float32, max(direct.scratchNeed(), gemm.scratchNeed()))
						m.partial[w] = make([]float32, gemm.co*gemm.ckk)
					}
					r := rand.New(rand.NewPCG(uint64(n), 5))
					vec := func(k int) []float32 {
						v := make([]float32, k)
						for i := range v {
							v[i] = float32(r.NormFloat64())
						}
						return v
					}
					size := gc.c * n * gc.h * gc.w
					x, dy, w, y0, dx0 := vec(size), vec(size), vec(gc.c*gc.k*gc.k), vec(size), vec(size)
					run := func(c *convGeom) (outs [5][]float32) {
						outs[0] = make([]float32, size)
						m.convForward(c, w, x, outs[0], n)
						outs[1] = append([]float32(nil), y0...)
						m.convForwardBeta(c, w, x, outs[1], n, 1)
						outs[2] = make([]float32, len(w))
						m.convBackwardWeight(c, dy, x, outs[2], n)
						outs[3] = make([]float32, size)
						m.convBackwardData(c, w, dy, outs[3], n, false)
						outs[4] = append([]float32(nil), dx0...)
						m.convBackwardData(c, w, dy, outs[4], n, true)
						return outs
					}
					dyCopy := append([]float32(nil), dy...)
					got, want := run(&direct), run(&gemm)
					for i, v := range dy {
						if v != dyCopy[i] {
							t.Fatalf("the weight gradient left dY changed at %d", i)
						}
					}
					names := []string{"forward", "forward += ", "weight gradient", "input gradient", "input gradient +="}
					for j := range got {
						for i := range got[j] {
							if d := math.Abs(float64(got[j][i] - want[j][i])); d > 1e-5*math.Max(1, math.Abs(float64(want[j][i]))) {
								t.Fatalf("%s[%d]: direct %v, im2col %v", names[j], i, got[j][i], want[j][i])
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkDepthwise times the depthwise convs of DeepLabV3+ at 512×512
// input (batch 2): forward, weight gradient and input gradient, through
// depthwise.go's kernel and through the im2col and GEMM path, alternating
// iteration by iteration on the same model so that the shared machine's
// load falls on both; gemm/direct is the ratio of their times.
//
//	CGO_LDFLAGS=-lopenblas go test ./engine/native -run NONE -bench Depthwise
func BenchmarkDepthwise(b *testing.B) {
	for _, c := range []struct{ name, model string }{
		{"decoder_304x128x128", "input [304, 128, 128]\nconv 304 k3 pad1 groups 304 bias false"},
		{"aspp_2048x32x32_d12", "input [2048, 32, 32]\nconv 2048 k3 pad12 d12 groups 2048 bias false"},
	} {
		b.Run(c.name, func(b *testing.B) {
			const n = 2
			m := mustBuild(b, graphOf(b, c.model), cfgOf(n, "mse", "sgd"))
			direct := m.units[1].k.(*convKernel).geo
			gemm := direct
			gemm.depthwise = false
			for w := range m.scratch {
				m.scratch[w] = make([]float32, max(direct.scratchNeed(), gemm.scratchNeed()))
				m.partial[w] = make([]float32, gemm.co*gemm.ckk)
			}
			size := direct.ci * n * direct.h * direct.w
			x, y, dy, dx := make([]float32, size), make([]float32, size), make([]float32, size), make([]float32, size)
			for i := range x {
				x[i], dy[i] = float32(i%7)-3, float32(i%5)-2
			}
			w, dw := make([]float32, direct.co*direct.ckk), make([]float32, direct.co*direct.ckk)
			pass := func(c *convGeom) time.Duration {
				t0 := time.Now()
				m.convForward(c, w, x, y, n)
				m.convBackwardWeight(c, dy, x, dw, n)
				m.convBackwardData(c, w, dy, dx, n, false)
				return time.Since(t0)
			}
			pass(&direct)
			pass(&gemm)
			var td, tg time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				td += pass(&direct)
				tg += pass(&gemm)
			}
			b.ReportMetric(float64(td.Microseconds())/1e3/float64(b.N), "direct-ms")
			b.ReportMetric(float64(tg.Microseconds())/1e3/float64(b.N), "gemm-ms")
			b.ReportMetric(float64(tg)/float64(td), "gemm/direct")
		})
	}
}

// TestDepthwiseScratchIsPlanned: the planner sizes a depthwise
// convolution's scratch as this backend allocates it (a tap's wrapping
// columns per worker, no column buffer, no partial weight gradient), on a
// model whose only convolutions are depthwise, so that theirs is the
// largest.
func TestDepthwiseScratchIsPlanned(t *testing.T) {
	src := "pipeline dw\nsource s synthetic { samples 16  shape [8, 12, 10] }\nmodel m {\n  input [8, 12, 10]\n  conv 8 k3 pad2 d2 groups 8 bias false -> conv 8 k5 pad2 groups 8 -> conv 8 k3 pad9 d9 groups 8\n}\ntrain { epochs 1  batch 4  optimizer adam lr 1e-3  loss mse }\n"
	f, ds := lang.Parse("dw.pipe", []byte(src))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	p := planCPU(t, prog, planHost)
	ms := buildAt(t, prog, p, run.ConfigFromPlan(p, progtest.Decoded(t, prog)))
	if ms.Scratch == 0 || ms.Scratch != p.Memory.Workspace {
		t.Errorf("scratch: planned %d bytes, allocated %d", p.Memory.Workspace, ms.Scratch)
	}
}
