package native

// Convolution as matrix products
//
// Activations are CNHW, so for one group of channels a convolution over
// the whole batch is W [Cout × Cin·K·K] times the im2col matrix
// [Cin·K·K × N·Ho·Wo], written straight into the output with no
// transposes. The columns go in cache-sized chunks, each worker calling a
// single-threaded sgemm on its own range; the weight gradient adds one
// partial sum per worker in worker order (so it does not depend on timing),
// and the input gradient's col2im gives each worker whole images. A 1×1
// convolution needs no im2col, and a transposed convolution reuses these
// functions with the roles swapped (convTGeom).
//
// Derivation: docs/design/native-conv.md.

import (
	"gonum.org/v1/gonum/blas"

	"pipe/stdlib"
)

// convGeom is a convolution's shape: input [ci, h, w], output [co, ho, wo],
// square kernel k, stride s, padding p, dilation d, groups g.
type convGeom struct {
	ci, h, w   int
	co, ho, wo int
	k, s, p, d int
	g          int
	cig, cog   int
	ckk        int // rows of the column matrix of one group: cig·k·k
	pointwise  bool
	depthwise  bool // runs as depthwise.go's direct kernel
	// same: stride 1 and an output row as wide as an input row, so a
	// kernel tap's column row is the input shifted by a constant offset,
	// copied in whole blocks.
	same  bool
	chunk int // output rows (of wo positions) per chunk
	// flip is the convolution that computes this one's input gradient
	// as a forward pass over dY with the kernel flipped and transposed,
	// when one exists (stride 1, one group): an im2col gather instead
	// of a col2im scatter, and a product whose inner dimension is
	// co·k·k rather than co.
	flip *convGeom
	// wino: the convolution runs as Winograd (winograd.go) on wm×wm
	// output tiles (F(2×2, 3×3) or F(4×4, 3×3)), wtb tiles per block.
	wino bool
	wm   int
	wtb  int
}

func newConvGeom(ci, h, w, co, ho, wo, k, s, p, d, g int) convGeom {
	c := geomOnly(ci, h, w, co, ho, wo, k, s, p, d, g)
	// Measured on this machine (U-Net and Fashion-MNIST convs): the flip
	// wins when the input has more channels than the output (its im2col
	// reads co·k·k rows against col2im's ci·k·k), ties at equal channels
	// on 16×16 maps and wins above; col2im wins when co > ci.
	// A Winograd convolution's flip is one too, and always wins.
	if pf := d*(k-1) - p; s == 1 && g == 1 && !c.pointwise && pf >= 0 {
		f := geomOnly(co, ho, wo, ci, h, w, k, 1, pf, d, 1)
		if ci > co || ci == co && h*w >= 1024 || f.wino && c.wino {
			c.flip = &f
		}
	}
	return c
}

// convGeomOf is the geometry of the convolution from in to out with the
// node's arguments; a transposed convolution passes them swapped, as it
// runs the convolution from its output to its input. The kernel builder
// and the cost model (cost.go) both take a conv's geometry from here.
func convGeomOf(in, out layout, a stdlib.OpArgs) convGeom {
	return newConvGeom(in.c, in.h, in.w, out.c, out.h, out.w, int(a.Kernel), int(max(a.Stride, 1)), int(a.Padding), int(max(a.Dilation, 1)), int(max(a.Groups, 1)))
}

// skConvGeomOf is a sketched convolution's geometry: from the input to
// its 2·terms·rank sketch channels, dilation and groups 1.
func skConvGeomOf(in, out layout, a stdlib.OpArgs) convGeom {
	mid := int(2 * a.Terms * a.Rank)
	return newConvGeom(in.c, in.h, in.w, mid, out.h, out.w, int(a.Kernel), int(max(a.Stride, 1)), int(a.Padding), 1, 1)
}

func geomOnly(ci, h, w, co, ho, wo, k, s, p, d, g int) convGeom {
	c := convGeom{ci: ci, h: h, w: w, co: co, ho: ho, wo: wo, k: k, s: s, p: p, d: d, g: g}
	c.cig, c.cog = ci/g, co/g
	c.ckk = c.cig * k * k
	c.pointwise = k == 1 && s == 1 && p == 0 && h == ho && w == wo
	c.same = s == 1 && w == wo
	c.depthwise = c.isDepthwise()
	c.chunk = max(1, colBudget/(c.ckk*wo))
	if c.wino = winoEligible(ci, h, w, co, ho, wo, k, s, p, d, g); c.wino {
		c.wm = winoTile(ci, co)
		c.wtb = winoTiles(ci, co, c.wm)
	}
	return c
}

// flipWeights writes w (co × ci × k × k) flipped in both spatial axes and
// transposed to ci × co × k × k: the weights of c.flip, split among the
// workers by c's input channel (c.flip's output channel).
func (m *model) flipWeights(c *convGeom, w, wt []float32) {
	m.pool.forRange(c.ci, max(1, grain/(c.co*c.k*c.k)), func(lo, hi int) {
		c.flipWeights(w, wt, lo, hi)
	})
}

// flipWeights writes the flipped weights of input channels [i0, i1): rows
// i0 to i1 of wt.
func (c *convGeom) flipWeights(w, wt []float32, i0, i1 int) {
	kk := c.k * c.k
	for i := i0; i < i1; i++ {
		for o := 0; o < c.co; o++ {
			src := w[(o*c.ci+i)*kk : (o*c.ci+i+1)*kk]
			dst := wt[(i*c.co+o)*kk : (i*c.co+o+1)*kk]
			for t := range src {
				dst[kk-1-t] = src[t]
			}
		}
	}
}

// colBudget is the number of float32 values of one worker's column
// buffer: 512 KiB, a quarter of this machine's L2 per core.
var colBudget = 128 << 10

// scratchNeed is the column buffer this convolution needs per worker.
func (c *convGeom) scratchNeed() int {
	if c.depthwise {
		return c.dwScratch()
	}
	if c.wino {
		return c.winoScratch()
	}
	if c.pointwise {
		return 0
	}
	return c.ckk * c.chunk * c.wo
}

// workerScratch is what one worker holds for this convolution: its
// column buffer (the larger of the forward's and, where the input
// gradient runs as the flipped convolution, that one's), and the partial
// weight gradient it sums into (none for the depthwise kernel, whose
// workers own channels). allocScratch and the cost model (cost.go) both
// size from it.
func (c *convGeom) workerScratch() (col, part int) {
	col = c.scratchNeed()
	if c.flip != nil {
		col = max(col, c.flip.scratchNeed())
	}
	if !c.depthwise {
		part = c.co * c.ckk
	}
	return col, part
}

// forRows calls fn(nn, a, b, off) for the pieces of output rows [ra, rb)
// (rows count over the batch, image-major) that lie in one image: rows
// [a, b) of image nn, starting at column off of the chunk.
func (c *convGeom) forRows(ra, rb int, fn func(nn, a, b, off int)) {
	for r := ra; r < rb; {
		nn := r / c.ho
		a := r - nn*c.ho
		b := min(c.ho, a+rb-r)
		fn(nn, a, b, (r-ra)*c.wo)
		r += b - a
	}
}

// tapRows returns the output rows [a, b) whose input row ho·s - p + kh·d
// lies inside the image, clipped to [lo, hi).
func (c *convGeom) tapRows(kh, lo, hi int) (int, int) {
	dh := kh*c.d - c.p
	// ho·s + dh in [0, h)
	a := 0
	if dh < 0 {
		a = (-dh + c.s - 1) / c.s
	}
	b := 0
	if c.h-1-dh >= 0 {
		b = (c.h-1-dh)/c.s + 1
	}
	return max(a, lo), min(b, hi)
}

// im2col writes the column matrix of group grp for the output rows
// [ra, rb) into col, a [ckk × (rb-ra)·wo] row-major matrix.
func im2col(c *convGeom, x []float32, n, grp, ra, rb int, col []float32) {
	ld := (rb - ra) * c.wo
	hw := c.h * c.w
	r := 0
	for ch := grp * c.cig; ch < (grp+1)*c.cig; ch++ {
		for kh := 0; kh < c.k; kh++ {
			for kw := 0; kw < c.k; kw++ {
				dst := col[r*ld : (r+1)*ld]
				dh, dw := kh*c.d-c.p, kw*c.d-c.p
				c.forRows(ra, rb, func(nn, a, b, off int) {
					plane := x[(ch*n+nn)*hw : (ch*n+nn+1)*hw]
					d := dst[off : off+(b-a)*c.wo]
					va, vb := c.tapRows(kh, a, b)
					if vb <= va {
						clear(d)
						return
					}
					clear(d[:(va-a)*c.wo])
					clear(d[(vb-a)*c.wo:])
					if c.same && (dw <= -c.w || dw >= c.w) {
						// A tap dilated past the whole row (an
						// ASPP rate larger than the map) reads
						// only padding.
						clear(d[(va-a)*c.wo : (vb-a)*c.wo])
						return
					}
					if c.same {
						// One block: rows va..vb of the output are input
						// rows va+dh.. shifted by dw; the columns that
						// fall outside the row are zeroed after.
						blk := d[(va-a)*c.wo : (vb-a)*c.wo]
						src := (va+dh)*c.w + dw
						switch {
						case dw < 0:
							copy(blk[-dw:], plane[src-dw:src+len(blk)])
						case dw > 0:
							copy(blk[:len(blk)-dw], plane[src:src+len(blk)-dw])
						default:
							copy(blk, plane[src:src+len(blk)])
						}
						zeroEdges(blk, c.w, dw)
						return
					}
					for ho := va; ho < vb; ho++ {
						row := plane[(ho*c.s+dh)*c.w : (ho*c.s+dh+1)*c.w]
						dd := d[(ho-a)*c.wo : (ho-a+1)*c.wo]
						for wo := range dd {
							if iw := wo*c.s + dw; iw >= 0 && iw < c.w {
								dd[wo] = row[iw]
							} else {
								dd[wo] = 0
							}
						}
					}
				})
				r++
			}
		}
	}
}

// zeroEdges zeroes, in each row of width w of blk, the columns a shift by
// dw took outside the row.
func zeroEdges(blk []float32, w, dw int) {
	switch {
	case dw < 0:
		for i := 0; i < len(blk); i += w {
			clear(blk[i : i+min(-dw, w)])
		}
	case dw > 0:
		for i := 0; i < len(blk); i += w {
			clear(blk[i+max(0, w-dw) : i+w])
		}
	}
}

// col2im adds the column matrix col of group grp, output rows [ra, rb),
// into x. col is scratch and is modified.
func col2im(c *convGeom, col []float32, n, grp, ra, rb int, x []float32) {
	ld := (rb - ra) * c.wo
	hw := c.h * c.w
	r := 0
	for ch := grp * c.cig; ch < (grp+1)*c.cig; ch++ {
		for kh := 0; kh < c.k; kh++ {
			for kw := 0; kw < c.k; kw++ {
				srcRow := col[r*ld : (r+1)*ld]
				dh, dw := kh*c.d-c.p, kw*c.d-c.p
				c.forRows(ra, rb, func(nn, a, b, off int) {
					plane := x[(ch*n+nn)*hw : (ch*n+nn+1)*hw]
					s := srcRow[off : off+(b-a)*c.wo]
					va, vb := c.tapRows(kh, a, b)
					if vb <= va || c.same && (dw <= -c.w || dw >= c.w) {
						return
					}
					if c.same {
						blk := s[(va-a)*c.wo : (vb-a)*c.wo]
						zeroEdges(blk, c.w, dw)
						dst := (va+dh)*c.w + dw
						switch {
						case dw < 0:
							addTo(plane[dst-dw:dst+len(blk)], blk[-dw:])
						case dw > 0:
							addTo(plane[dst:dst+len(blk)-dw], blk[:len(blk)-dw])
						default:
							addTo(plane[dst:dst+len(blk)], blk)
						}
						return
					}
					for ho := va; ho < vb; ho++ {
						row := plane[(ho*c.s+dh)*c.w : (ho*c.s+dh+1)*c.w]
						ss := s[(ho-a)*c.wo : (ho-a+1)*c.wo]
						for wo, v := range ss {
							if iw := wo*c.s + dw; iw >= 0 && iw < c.w {
								row[iw] += v
							}
						}
					}
				})
				r++
			}
		}
	}
}

// convForward computes y = conv(x, w) for n samples, without bias.
func (m *model) convForward(c *convGeom, w, x, y []float32, n int) {
	m.convForwardBeta(c, w, x, y, n, 0)
}

// convForwardBeta computes y = conv(x, w) + beta·y.
func (m *model) convForwardBeta(c *convGeom, w, x, y []float32, n int, beta float32) {
	if c.depthwise {
		m.dwForward(c, w, x, y, n, beta)
		return
	}
	if c.wino {
		m.winoForward(c, w, x, y, n, beta)
		return
	}
	P := n * c.ho * c.wo
	Q := n * c.h * c.w
	R := n * c.ho
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(R, wk)
		col := m.scratch[wk]
		for ra := lo; ra < hi; ra += c.chunk {
			rb := min(ra+c.chunk, hi)
			p0, cols := ra*c.wo, (rb-ra)*c.wo
			for grp := 0; grp < c.g; grp++ {
				var b []float32
				ldb := cols
				if c.pointwise {
					b, ldb = x[grp*c.cig*Q+p0:], Q
				} else {
					im2col(c, x, n, grp, ra, rb, col)
					b = col
				}
				blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, c.cog, cols, c.ckk, 1,
					w[grp*c.cog*c.ckk:], c.ckk, b, ldb, beta, y[grp*c.cog*P+p0:], P)
			}
		}
	})
}

// convBackwardWeight adds dY·im2col(X)ᵀ into dw.
func (m *model) convBackwardWeight(c *convGeom, dy, x, dw []float32, n int) {
	if c.depthwise {
		m.dwBackwardWeight(c, dy, x, dw, n)
		return
	}
	if c.wino {
		m.winoBackwardWeight(c, dy, x, dw, n)
		return
	}
	P := n * c.ho * c.wo
	Q := n * c.h * c.w
	R := n * c.ho
	wsize := c.co * c.ckk
	one := m.pool.n == 1
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(R, wk)
		col := m.scratch[wk]
		dst := dw
		var beta float32 = 1
		if !one {
			dst = m.partial[wk][:wsize]
			beta = 0
			if lo >= hi {
				clear(dst)
			}
		}
		for ra := lo; ra < hi; ra += c.chunk {
			rb := min(ra+c.chunk, hi)
			p0, cols := ra*c.wo, (rb-ra)*c.wo
			for grp := 0; grp < c.g; grp++ {
				var b []float32
				ldb := cols
				if c.pointwise {
					b, ldb = x[grp*c.cig*Q+p0:], Q
				} else {
					im2col(c, x, n, grp, ra, rb, col)
					b = col
				}
				blasImpl.Sgemm(blas.NoTrans, blas.Trans, c.cog, c.ckk, cols, 1,
					dy[grp*c.cog*P+p0:], P, b, ldb, beta, dst[grp*c.cog*c.ckk:], c.ckk)
			}
			beta = 1
		}
	})
	if !one {
		m.sumPartials(dw, wsize)
	}
}

// sumPartials adds the workers' partial sums into dst, in worker order.
func (m *model) sumPartials(dst []float32, size int) {
	m.pool.forRange(size, 4096, func(lo, hi int) {
		d := dst[lo:hi]
		for wk := 0; wk < m.pool.n; wk++ {
			addTo(d, m.partial[wk][lo:hi])
		}
	})
}

// convBackwardData computes dx (= or += when acc) col2im(Wᵀ·dY).
func (m *model) convBackwardData(c *convGeom, w, dy, dx []float32, n int, acc bool) {
	if c.depthwise {
		m.dwBackwardData(c, w, dy, dx, n, acc)
		return
	}
	P := n * c.ho * c.wo
	Q := n * c.h * c.w
	howo := c.ho * c.wo
	hw := c.h * c.w
	m.pool.run(func(wk int) {
		n0, n1 := m.pool.span(n, wk)
		dcol := m.scratch[wk]
		for nn := n0; nn < n1; nn++ {
			if c.pointwise {
				var beta float32
				if acc {
					beta = 1
				}
				for grp := 0; grp < c.g; grp++ {
					blasImpl.Sgemm(blas.Trans, blas.NoTrans, c.cig, howo, c.cog, 1,
						w[grp*c.cog*c.ckk:], c.ckk, dy[grp*c.cog*P+nn*howo:], P, beta, dx[grp*c.cig*Q+nn*hw:], Q)
				}
				continue
			}
			if !acc {
				for ch := 0; ch < c.ci; ch++ {
					clear(dx[(ch*n+nn)*hw : (ch*n+nn+1)*hw])
				}
			}
			for ra := nn * c.ho; ra < (nn+1)*c.ho; ra += c.chunk {
				rb := min(ra+c.chunk, (nn+1)*c.ho)
				p0, cols := ra*c.wo, (rb-ra)*c.wo
				for grp := 0; grp < c.g; grp++ {
					blasImpl.Sgemm(blas.Trans, blas.NoTrans, c.ckk, cols, c.cog, 1,
						w[grp*c.cog*c.ckk:], c.ckk, dy[grp*c.cog*P+p0:], P, 0, dcol, cols)
					col2im(c, dcol, n, grp, ra, rb, dx)
				}
			}
		}
	})
}
