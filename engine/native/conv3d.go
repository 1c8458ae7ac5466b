package native

// 3-D convolution as matrix products
//
// Volumes are CNDHW (layout.d set), so a 3-D convolution is conv.go's
// scheme with vol2col in place of im2col and chunks of whole output depth
// planes. convKernel and convTKernel run volumes through these functions
// when their vol geometry is set, with a flattened 2-D view in geo, so
// bias, fused batchnorm and activation, and evaluation's folding are
// shared with the 2-D kernels. Dilation and groups are 1.
//
// Derivation: docs/design/native-conv.md (3-D).

import (
	"math"

	"gonum.org/v1/gonum/blas"

	"pipe/stdlib"
)

// volGeom is a 3-D convolution's shape: input [ci, d, h, w], output
// [co, do, ho, wo], cubic kernel k, stride s, padding p.
type volGeom struct {
	ci, d, h, w    int
	co, do, ho, wo int
	k, s, p        int
	ckk            int // cig·k³
	pointwise      bool
	chunk          int // output planes per chunk
}

func newVolGeom(ci, d, h, w, co, do, ho, wo, k, s, p int) *volGeom {
	g := &volGeom{ci: ci, d: d, h: h, w: w, co: co, do: do, ho: ho, wo: wo, k: k, s: s, p: p}
	g.ckk = ci * k * k * k
	g.pointwise = k == 1 && s == 1 && p == 0 && d == do && h == ho && w == wo
	g.chunk = max(1, colBudget/(g.ckk*ho*wo))
	return g
}

// volGeomOf is the geometry of the 3-D convolution from in to out with
// the node's arguments; a transposed convolution passes them swapped.
func volGeomOf(in, out layout, a stdlib.OpArgs) *volGeom {
	return newVolGeom(in.c, in.d, in.h, in.w, out.c, out.d, out.h, out.w, int(a.Kernel), int(max(a.Stride, 1)), int(a.Padding))
}

// flat is the 2-D view whose sizes the conv kernels read: channels,
// D·H rows of W (no column buffer of its own).
func (g *volGeom) flat() convGeom {
	return convGeom{ci: g.ci, h: g.d * g.h, w: g.w, co: g.co, ho: g.do * g.ho, wo: g.wo, k: 1, s: 1, d: 1, g: 1,
		cig: g.ci, cog: g.co, ckk: g.ckk, pointwise: true}
}

func (g *volGeom) scratchNeed() int {
	if g.pointwise {
		return 0
	}
	return g.ckk * g.chunk * g.ho * g.wo
}

// workerScratch is one worker's column buffer and partial weight
// gradient for this convolution (see convGeom.workerScratch).
func (g *volGeom) workerScratch() (col, part int) {
	return g.scratchNeed(), g.co * g.ckk
}

// forPlanes calls fn(nn, a, b, off) for the pieces of output planes
// [ra, rb) (counted over the batch, sample-major) inside one sample.
func (g *volGeom) forPlanes(ra, rb int, fn func(nn, a, b, off int)) {
	pl := g.ho * g.wo
	for r := ra; r < rb; {
		nn := r / g.do
		a := r - nn*g.do
		b := min(g.do, a+rb-r)
		fn(nn, a, b, (r-ra)*pl)
		r += b - a
	}
}

// vol2col writes the column matrix for output planes [ra, rb) into col,
// [ckk × (rb-ra)·Ho·Wo] row-major; with add it instead adds col into x
// (col2vol).
func vol2col(g *volGeom, x []float32, n, ra, rb int, col []float32, add bool) {
	pl := g.ho * g.wo
	ld := (rb - ra) * pl
	dhw, hw := g.d*g.h*g.w, g.h*g.w
	r := 0
	for ch := 0; ch < g.ci; ch++ {
		for kd := 0; kd < g.k; kd++ {
			for kh := 0; kh < g.k; kh++ {
				for kw := 0; kw < g.k; kw++ {
					row := col[r*ld : (r+1)*ld]
					r++
					g.forPlanes(ra, rb, func(nn, a, b, off int) {
						vol := x[(ch*n+nn)*dhw : (ch*n+nn+1)*dhw]
						for od := a; od < b; od++ {
							blk := row[off+(od-a)*pl : off+(od-a+1)*pl]
							id := od*g.s - g.p + kd
							if id < 0 || id >= g.d {
								if !add {
									clear(blk)
								}
								continue
							}
							for oh := 0; oh < g.ho; oh++ {
								dst := blk[oh*g.wo : (oh+1)*g.wo]
								ih := oh*g.s - g.p + kh
								if ih < 0 || ih >= g.h {
									if !add {
										clear(dst)
									}
									continue
								}
								src := vol[id*hw+ih*g.w : id*hw+(ih+1)*g.w]
								for ow := range dst {
									iw := ow*g.s - g.p + kw
									inside := iw >= 0 && iw < g.w
									switch {
									case add && inside:
										src[iw] += dst[ow]
									case add:
									case inside:
										dst[ow] = src[iw]
									default:
										dst[ow] = 0
									}
								}
							}
						}
					})
				}
			}
		}
	}
}

// conv3Forward computes y = conv3d(x, w) + beta·y for n samples.
func (m *model) conv3Forward(g *volGeom, w, x, y []float32, n int, beta float32) {
	pl := g.ho * g.wo
	P, Q, R := n*g.do*pl, n*g.d*g.h*g.w, n*g.do
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(R, wk)
		col := m.scratch[wk]
		for ra := lo; ra < hi; ra += g.chunk {
			rb := min(ra+g.chunk, hi)
			p0, cols := ra*pl, (rb-ra)*pl
			b, ldb := col, cols
			if g.pointwise {
				b, ldb = x[p0:], Q
			} else {
				vol2col(g, x, n, ra, rb, col, false)
			}
			blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, g.co, cols, g.ckk, 1, w, g.ckk, b, ldb, beta, y[p0:], P)
		}
	})
}

// conv3BackwardWeight adds dY·vol2col(X)ᵀ into dw.
func (m *model) conv3BackwardWeight(g *volGeom, dy, x, dw []float32, n int) {
	pl := g.ho * g.wo
	P, Q, R := n*g.do*pl, n*g.d*g.h*g.w, n*g.do
	wsize := g.co * g.ckk
	one := m.pool.n == 1
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(R, wk)
		col := m.scratch[wk]
		dst := dw
		var beta float32 = 1
		if !one {
			dst, beta = m.partial[wk][:wsize], 0
			if lo >= hi {
				clear(dst)
			}
		}
		for ra := lo; ra < hi; ra += g.chunk {
			rb := min(ra+g.chunk, hi)
			p0, cols := ra*pl, (rb-ra)*pl
			b, ldb := col, cols
			if g.pointwise {
				b, ldb = x[p0:], Q
			} else {
				vol2col(g, x, n, ra, rb, col, false)
			}
			blasImpl.Sgemm(blas.NoTrans, blas.Trans, g.co, g.ckk, cols, 1, dy[p0:], P, b, ldb, beta, dst, g.ckk)
			beta = 1
		}
	})
	if !one {
		m.sumPartials(dw, wsize)
	}
}

// conv3BackwardData computes dx (= or += when acc) col2vol(Wᵀ·dY).
func (m *model) conv3BackwardData(g *volGeom, w, dy, dx []float32, n int, acc bool) {
	pl := g.ho * g.wo
	P, Q := n*g.do*pl, n*g.d*g.h*g.w
	dhw := g.d * g.h * g.w
	m.pool.run(func(wk int) {
		n0, n1 := m.pool.span(n, wk)
		dcol := m.scratch[wk]
		for nn := n0; nn < n1; nn++ {
			if g.pointwise {
				var beta float32
				if acc {
					beta = 1
				}
				blasImpl.Sgemm(blas.Trans, blas.NoTrans, g.ci, g.do*pl, g.co, 1, w, g.ckk, dy[nn*g.do*pl:], P, beta, dx[nn*dhw:], Q)
				continue
			}
			if !acc {
				for ch := 0; ch < g.ci; ch++ {
					clear(dx[(ch*n+nn)*dhw : (ch*n+nn+1)*dhw])
				}
			}
			for ra := nn * g.do; ra < (nn+1)*g.do; ra += g.chunk {
				rb := min(ra+g.chunk, (nn+1)*g.do)
				p0, cols := ra*pl, (rb-ra)*pl
				blasImpl.Sgemm(blas.Trans, blas.NoTrans, g.ckk, cols, g.co, 1, w, g.ckk, dy[p0:], P, 0, dcol, cols)
				vol2col(g, dx, n, ra, rb, dcol, true)
			}
		}
	})
}

// pool3Kernel is maxpool over cubic windows of volumes, keeping the index
// of each window's maximum within its volume; workers split the volumes
// (one per channel and sample).
type pool3Kernel struct {
	c, k, s, p int
	d, h, w    int
	do, ho, wo int
}

func (k *pool3Kernel) spec() kspec {
	return kspec{saveIn: []bool{false}, aux: []bsize{{perSample: k.c * k.do * k.ho * k.wo}}}
}

func (k *pool3Kernel) forward(e *env) {
	vols := k.c * e.n
	in, out := k.d*k.h*k.w, k.do*k.ho*k.wo
	x, y, idx := e.in[0], e.out, asInt32(e.aux[0])
	hw := k.h * k.w
	e.m.pool.forRange(vols, 1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			src, dst, ix := x[v*in:(v+1)*in], y[v*out:(v+1)*out], idx[v*out:(v+1)*out]
			o := 0
			for od := 0; od < k.do; od++ {
				for oh := 0; oh < k.ho; oh++ {
					for ow := 0; ow < k.wo; ow++ {
						best, bi := float32(math.Inf(-1)), int32(-1)
						for kd := 0; kd < k.k; kd++ {
							id := od*k.s - k.p + kd
							if id < 0 || id >= k.d {
								continue
							}
							for kh := 0; kh < k.k; kh++ {
								ih := oh*k.s - k.p + kh
								if ih < 0 || ih >= k.h {
									continue
								}
								for kw := 0; kw < k.k; kw++ {
									iw := ow*k.s - k.p + kw
									if iw < 0 || iw >= k.w {
										continue
									}
									// NaN wins and ties go to the first, as in PyTorch.
									j := id*hw + ih*k.w + iw
									if vv := src[j]; bi < 0 || vv > best || (vv != vv && best == best) {
										best, bi = vv, int32(j)
									}
								}
							}
						}
						dst[o], ix[o] = best, bi
						o++
					}
				}
			}
		}
	})
}

func (k *pool3Kernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	in, out := k.d*k.h*k.w, k.do*k.ho*k.wo
	g, idx, acc := e.dout, asInt32(e.aux[0]), e.acc[0]
	e.m.pool.forRange(k.c*e.n, 1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			d := dx[v*in : (v+1)*in]
			if !acc {
				clear(d)
			}
			for o, j := range idx[v*out : (v+1)*out] {
				d[j] += g[v*out+o]
			}
		}
	})
}

// upsample3Kernel resizes volumes: nearest, or trilinear with PyTorch's
// align_corners false rule, from per-axis tables (upTable).
type upsample3Kernel struct {
	d, h, w, do, ho, wo int
	linear              bool
	d0, d1, h0, h1      []int
	w0, w1              []int
	dw, hw, ww          []float32
}

func newUpsample3(in, out layout, linear bool) *upsample3Kernel {
	k := &upsample3Kernel{d: in.d, h: in.h, w: in.w, do: out.d, ho: out.h, wo: out.w, linear: linear}
	k.d0, k.d1, k.dw = upTable(in.d, out.d, linear, false)
	k.h0, k.h1, k.hw = upTable(in.h, out.h, linear, false)
	k.w0, k.w1, k.ww = upTable(in.w, out.w, linear, false)
	return k
}

func (k *upsample3Kernel) spec() kspec { return kspec{saveIn: []bool{false}} }

// taps calls fn with the 8 source offsets and weights of output (od, oh,
// ow); nearest uses the first with weight 1.
func (k *upsample3Kernel) each(fn func(o int, src [8]int, wt [8]float32)) {
	hw := k.h * k.w
	o := 0
	for od := 0; od < k.do; od++ {
		for oh := 0; oh < k.ho; oh++ {
			for ow := 0; ow < k.wo; ow++ {
				var src [8]int
				var wt [8]float32
				ds, hs, ws := [2]int{k.d0[od], k.d1[od]}, [2]int{k.h0[oh], k.h1[oh]}, [2]int{k.w0[ow], k.w1[ow]}
				dl, hl, wl := k.dw[od], k.hw[oh], k.ww[ow]
				for t := 0; t < 8; t++ {
					a, b, c := t>>2, t>>1&1, t&1
					src[t] = ds[a]*hw + hs[b]*k.w + ws[c]
					wt[t] = lerpW(dl, a) * lerpW(hl, b) * lerpW(wl, c)
				}
				fn(o, src, wt)
				o++
			}
		}
	}
}

func lerpW(l float32, hi int) float32 {
	if hi == 1 {
		return l
	}
	return 1 - l
}

func (k *upsample3Kernel) forward(e *env) {
	in, out := k.d*k.h*k.w, k.do*k.ho*k.wo
	x, y := e.in[0], e.out
	e.m.pool.forRange(e.u.out.c*e.n, 1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			src, dst := x[v*in:(v+1)*in], y[v*out:(v+1)*out]
			k.each(func(o int, at [8]int, wt [8]float32) {
				if !k.linear {
					dst[o] = src[at[0]]
					return
				}
				var s float32
				for t := range at {
					s += wt[t] * src[at[t]]
				}
				dst[o] = s
			})
		}
	})
}

func (k *upsample3Kernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	in, out := k.d*k.h*k.w, k.do*k.ho*k.wo
	g, acc := e.dout, e.acc[0]
	e.m.pool.forRange(e.u.out.c*e.n, 1, func(lo, hi int) {
		for v := lo; v < hi; v++ {
			d, gv := dx[v*in:(v+1)*in], g[v*out:(v+1)*out]
			if !acc {
				clear(d)
			}
			k.each(func(o int, at [8]int, wt [8]float32) {
				if !k.linear {
					d[at[0]] += gv[o]
					return
				}
				for t := range at {
					d[at[t]] += wt[t] * gv[o]
				}
			})
		}
	})
}

// conv3Kernel is the convolution kernel of a conv node on a volume, with
// the batchnorm and activation the plan fuses into it.
func (m *model) conv3Kernel(n, bnNode *stdlib.Node, in, out layout, act actKind) (kernel, error) {
	a := n.Args
	if max(a.Dilation, 1) != 1 || max(a.Groups, 1) != 1 {
		return nil, unsupported(n, "over a volume takes dilation and groups 1")
	}
	vg := volGeomOf(in, out, a)
	k := &convKernel{geo: vg.flat(), vol: vg, act: act}
	k.w = m.newParam(n.Name+".weight", []int64{int64(out.c), int64(in.c), a.Kernel, a.Kernel, a.Kernel})
	if a.Bias {
		k.b = m.newParam(n.Name+".bias", []int64{int64(out.c)})
	}
	if bnNode != nil {
		k.bn = m.newBN(bnNode.Name, out.c, eps(bnNode.Args.Eps), bnNode.Args.Momentum)
		for _, f := range m.cfg.Folds {
			if f[0] == n.Name && f[1] == bnNode.Name {
				k.fold = k.bn
			}
		}
	}
	return k, nil
}

// convT3Kernel is a transposed convolution on a volume: weight [in, out,
// k, k, k], eq the convolution from its output back to its input.
func (m *model) convT3Kernel(n *stdlib.Node, in, out layout) *convTKernel {
	a := n.Args
	eq := volGeomOf(out, in, a)
	k := &convTKernel{eq: eq.flat(), vol: eq}
	k.w = m.newParam(n.Name+".weight", []int64{int64(in.c), int64(out.c), a.Kernel, a.Kernel, a.Kernel})
	if a.Bias {
		k.b = m.newParam(n.Name+".bias", []int64{int64(out.c)})
	}
	return k
}
