package native

import "math"

// The kernels an image-to-image GAN needs: leakyrelu, instancenorm and
// pixelshuffle. Each keeps what autograd keeps (their descriptors in
// stdlib), so the planner's default rule sizes them.

// leakyKernel is x for x > 0, slope·x otherwise; it keeps its input.
type leakyKernel struct{ slope float32 }

func (k *leakyKernel) spec() kspec { return kspec{saveIn: []bool{true}} }

func (k *leakyKernel) forward(e *env) {
	n := e.n * e.u.out.size()
	x, y := e.in[0][:n], e.out[:n]
	e.m.pool.forRange(n, grain, func(lo, hi int) {
		for i, v := range x[lo:hi] {
			if v <= 0 {
				v *= k.slope
			}
			y[lo+i] = v
		}
	})
}

func (k *leakyKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	n := e.n * e.u.out.size()
	x, g, acc := e.in[0][:n], e.dout[:n], e.acc[0]
	e.m.pool.forRange(n, grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := g[i]
			if x[i] <= 0 {
				v *= k.slope
			}
			if acc {
				dx[i] += v
			} else {
				dx[i] = v
			}
		}
	})
}

// inKernel is instance normalisation: each (channel, sample) plane, one
// contiguous block of H·W values in the CNHW layout, normalised by its own
// mean and variance (biased, as PyTorch's). It keeps its input and, in
// aux, the mean and inverse deviation of each plane.
type inKernel struct {
	c           int
	eps         float64
	gamma, beta *param // nil without affine
}

func (k *inKernel) spec() kspec {
	return kspec{saveIn: []bool{true}, aux: []bsize{{perSample: 2 * k.c}}}
}

func (k *inKernel) forward(e *env) {
	c, s := e.u.out.c, e.u.out.s()
	x, y, st := e.in[0], e.out, e.aux[0]
	n := e.n
	e.m.pool.forRange(c*n, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			row := x[pl*s : (pl+1)*s]
			mean, v := meanVar(row)
			invstd := 1 / math.Sqrt(v+k.eps)
			st[2*pl], st[2*pl+1] = float32(mean), float32(invstd)
			a, b := float32(invstd), float32(-mean*invstd)
			if k.gamma != nil {
				gm := k.gamma.data[pl/n]
				a, b = a*gm, b*gm+k.beta.data[pl/n]
			}
			out := y[pl*s : (pl+1)*s]
			for j, xv := range row {
				out[j] = xv*a + b
			}
		}
	})
}

func (k *inKernel) backward(e *env) {
	c, s, n := e.u.out.c, e.u.out.s(), e.n
	x, g, st, dx := e.in[0], e.dout, e.aux[0], e.din[0]
	if dx == nil && k.gamma == nil {
		return
	}
	acc := len(e.acc) > 0 && e.acc[0]
	// One worker per channel: its planes and its scale and shift.
	e.m.pool.forRange(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			gm := float32(1)
			if k.gamma != nil {
				gm = k.gamma.data[ch]
			}
			var dg, db float64
			for i := 0; i < n; i++ {
				pl := ch*n + i
				mean, invstd := st[2*pl], st[2*pl+1]
				row, gr := x[pl*s:(pl+1)*s], g[pl*s:(pl+1)*s]
				var s1, s2 float64
				for j, v := range gr {
					xh := (row[j] - mean) * invstd
					s1 += float64(v)
					s2 += float64(v * xh)
				}
				dg += s2
				db += s1
				if dx == nil {
					continue
				}
				m1, m2 := float32(s1/float64(s)), float32(s2/float64(s))
				d := dx[pl*s : (pl+1)*s]
				for j, v := range gr {
					xh := (row[j] - mean) * invstd
					val := gm * invstd * (v - m1 - xh*m2)
					if acc {
						d[j] += val
					} else {
						d[j] = val
					}
				}
			}
			if k.gamma != nil {
				k.gamma.grad[ch] += float32(dg)
				k.beta.grad[ch] += float32(db)
			}
		}
	})
}

// shuffleKernel is PixelShuffle: input channel c·r²+dy·r+dx at (h, w)
// goes to output channel c at (h·r+dy, w·r+dx). A copy; it keeps nothing.
type shuffleKernel struct{ r, h, w int }

func (k *shuffleKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

// each calls f(in, out) for every value's input and output offsets.
func (k *shuffleKernel) each(e *env, lo, hi int, f func(i, o int)) {
	n, r, hw := e.n, k.r, k.h*k.w
	wo := k.w * r
	for pl := lo; pl < hi; pl++ { // output plane (c, i)
		c, i := pl/n, pl%n
		obase := pl * hw * r * r
		for dy := 0; dy < r; dy++ {
			for dx := 0; dx < r; dx++ {
				ibase := ((c*r*r+dy*r+dx)*n + i) * hw
				for y := 0; y < k.h; y++ {
					orow := obase + (y*r+dy)*wo + dx
					irow := ibase + y*k.w
					for x := 0; x < k.w; x++ {
						f(irow+x, orow+x*r)
					}
				}
			}
		}
	}
}

func (k *shuffleKernel) forward(e *env) {
	x, y := e.in[0], e.out
	e.m.pool.forRange(e.u.out.c*e.n, 1, func(lo, hi int) {
		k.each(e, lo, hi, func(i, o int) { y[o] = x[i] })
	})
}

func (k *shuffleKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	g := e.dout
	acc := e.acc[0]
	e.m.pool.forRange(e.u.out.c*e.n, 1, func(lo, hi int) {
		k.each(e, lo, hi, func(i, o int) {
			if acc {
				dx[i] += g[o]
			} else {
				dx[i] = g[o]
			}
		})
	})
}

func init() {
	registerKernel("leakyrelu", opKernel{build: buildLeaky})
	registerKernel("instancenorm", opKernel{build: buildInstancenorm})
	registerKernel("pixelshuffle", opKernel{build: buildPixelshuffle})
}

func buildLeaky(_ *model, u *unit, _ tail) (kernel, error) {
	return &leakyKernel{slope: float32(u.nodes[0].Args.Slope)}, nil
}

func buildInstancenorm(m *model, u *unit, _ tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	if !u.in0().spatial {
		return nil, unsupported(first, "needs [C, H, W]")
	}
	k := &inKernel{c: u.out.c, eps: eps(a.Eps)}
	if a.Affine {
		c := int64(u.out.c)
		k.gamma, k.beta = m.newParam(first.Name+".weight", []int64{c}), m.newParam(first.Name+".bias", []int64{c})
	}
	return k, nil
}

func buildPixelshuffle(_ *model, u *unit, _ tail) (kernel, error) {
	first, in := u.nodes[0], u.in0()
	if !in.spatial {
		return nil, unsupported(first, "needs [C, H, W]")
	}
	return &shuffleKernel{r: int(first.Args.Scale), h: in.h, w: in.w}, nil
}
