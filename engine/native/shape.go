package native

import (
	"fmt"
	"math"
)

// inputKernel copies the batch's NCHW inputs into the model's layout.
type inputKernel struct{}

func (inputKernel) spec() kspec { return kspec{} }

func (inputKernel) forward(e *env) {
	fromNCHW(e.out, e.m.batch.X, e.u.out, e.n)
}

func (inputKernel) backward(*env) {}

// put writes v into dst, or adds it when acc.
func put(dst, v []float32, acc bool) {
	if acc {
		addTo(dst, v)
	} else {
		copy(dst, v)
	}
}

// scalePut writes s·v to dst, or adds it with acc.
func scalePut(dst, v []float32, s float32, acc bool) {
	if acc {
		for i, x := range v {
			dst[i] += s * x
		}
		return
	}
	for i, x := range v {
		dst[i] = s * x
	}
}

// flattenKernel turns [C, H, W] (CNHW) into vectors [C·H·W] (NF): the
// same transpose as the model's output.
type flattenKernel struct{}

func (flattenKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

// The transposes are split by channel among the workers: on one thread
// they were the step's longest serial stretch (fashion's 0.8 MB, 0.12 ms
// forward and 0.08 ms backward; docs/design/native-threads.md).

func (flattenKernel) forward(e *env) {
	l := e.u.in[0]
	if !l.spatial || l.c == 1 {
		toNCHW(e.out, e.in[0], l, e.n)
		return
	}
	e.m.pool.forRange(l.c, max(1, grain/(e.n*l.s())), func(lo, hi int) {
		toNCHWChannels(e.out, e.in[0], l, e.n, lo, hi)
	})
}

func (flattenKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	l := e.u.in[0]
	if !l.spatial || l.c == 1 {
		put(dx[:e.n*l.size()], e.dout[:e.n*l.size()], e.acc[0])
		return
	}
	e.m.pool.forRange(l.c, max(1, grain/(e.n*l.s())), func(lo, hi int) {
		fromNCHWChannels(dx, e.dout, l, e.n, lo, hi, e.acc[0])
	})
}

// addKernel sums its inputs, the first scaled by scale when it is not 1
// (add's scale: a scaled residual).
type addKernel struct {
	k     int
	scale float32
}

func (a *addKernel) spec() kspec { return kspec{saveIn: make([]bool, a.k)} }

func (a *addKernel) forward(e *env) {
	sz := e.n * e.u.out.size()
	y := e.out[:sz]
	e.m.pool.forRange(sz, grain, func(lo, hi int) {
		if s := a.scale; s != 1 {
			for i, v := range e.in[0][lo:hi] {
				y[lo+i] = s * v
			}
		} else {
			copy(y[lo:hi], e.in[0][lo:hi])
		}
		for _, x := range e.in[1:] {
			addTo(y[lo:hi], x[lo:hi])
		}
	})
}

func (a *addKernel) backward(e *env) {
	sz := e.n * e.u.out.size()
	e.m.pool.forRange(sz, grain, func(lo, hi int) {
		for j, dx := range e.din {
			switch {
			case dx == nil:
			case j == 0 && a.scale != 1:
				scalePut(dx[lo:hi], e.dout[lo:hi], a.scale, e.acc[j])
			default:
				put(dx[lo:hi], e.dout[lo:hi], e.acc[j])
			}
		}
	})
}

// concatKernel joins its inputs along channels. In CNHW each input is a
// run of whole channel blocks, so the join is one copy per input, split
// among the workers by range of the joined tensor (on the caller alone
// the U-Net's were 0.4–2 ms each way, docs/design/native-threads.md);
// vectors join row by row.
type concatKernel struct{ k int }

func (c *concatKernel) spec() kspec { return kspec{saveIn: make([]bool, c.k)} }

// blocks is the size of each input's block of the joined tensor, or nil
// when an input is a vector (then the join is row by row).
func (*concatKernel) blocks(e *env) []int {
	sizes := make([]int, len(e.u.in))
	for j, l := range e.u.in {
		if !l.spatial {
			return nil
		}
		sizes[j] = e.n * l.size()
	}
	return sizes
}

// forBlocks calls f(j, lo, hi, off) for each input j whose block
// [off, off+sizes[j]) of the joined tensor meets [a, b), with [lo, hi)
// the part of it inside, counted from the block's start.
func forBlocks(sizes []int, a, b int, f func(j, lo, hi, off int)) {
	off := 0
	for j, sz := range sizes {
		if lo, hi := max(a, off), min(b, off+sz); lo < hi {
			f(j, lo-off, hi-off, off)
		}
		off += sz
	}
}

func (c *concatKernel) forward(e *env) {
	n := e.n
	if sizes := c.blocks(e); sizes != nil {
		e.m.pool.forRange(e.n*e.u.out.size(), grain, func(a, b int) {
			forBlocks(sizes, a, b, func(j, lo, hi, off int) {
				copy(e.out[off+lo:off+hi], e.in[j][lo:hi])
			})
		})
		return
	}
	off := 0
	for j, x := range e.in {
		l := e.u.in[j]
		f, F := l.c, e.u.out.c
		for i := 0; i < n; i++ {
			copy(e.out[i*F+off:i*F+off+f], x[i*f:(i+1)*f])
		}
		off += f
	}
}

func (c *concatKernel) backward(e *env) {
	n := e.n
	if sizes := c.blocks(e); sizes != nil {
		e.m.pool.forRange(e.n*e.u.out.size(), grain, func(a, b int) {
			forBlocks(sizes, a, b, func(j, lo, hi, off int) {
				if dx := e.din[j]; dx != nil {
					put(dx[lo:hi], e.dout[off+lo:off+hi], e.acc[j])
				}
			})
		})
		return
	}
	off := 0
	for j, dx := range e.din {
		l := e.u.in[j]
		f, F := l.c, e.u.out.c
		if dx != nil {
			for i := 0; i < n; i++ {
				put(dx[i*f:(i+1)*f], e.dout[i*F+off:i*F+off+f], e.acc[j])
			}
		}
		off += f
	}
}

// upsampleKernel resizes planes: nearest, or bilinear with PyTorch's
// align_corners rule. The source rows and columns and their weights are
// tabulated at Build.
type upsampleKernel struct {
	h, w, ho, wo int
	bilinear     bool
	// For output row r: source rows r0[r], r1[r] and the weight of r1.
	r0, r1 []int
	rw     []float32
	c0, c1 []int
	cw     []float32
}

func newUpsample(h, w, ho, wo int, bilinear, alignCorners bool) *upsampleKernel {
	k := &upsampleKernel{h: h, w: w, ho: ho, wo: wo, bilinear: bilinear}
	k.r0, k.r1, k.rw = upTable(h, ho, bilinear, alignCorners)
	k.c0, k.c1, k.cw = upTable(w, wo, bilinear, alignCorners)
	return k
}

func upTable(in, out int, bilinear, align bool) (i0, i1 []int, wt []float32) {
	i0, i1, wt = make([]int, out), make([]int, out), make([]float32, out)
	for o := 0; o < out; o++ {
		if !bilinear {
			// PyTorch's "nearest": floor(o·in/out).
			s := int(math.Floor(float64(o) * float64(in) / float64(out)))
			if s > in-1 {
				s = in - 1
			}
			i0[o], i1[o] = s, s
			continue
		}
		var src float64
		if align {
			if out > 1 {
				src = float64(o) * float64(in-1) / float64(out-1)
			}
		} else {
			src = (float64(o)+0.5)*float64(in)/float64(out) - 0.5
			if src < 0 {
				src = 0
			}
		}
		a := int(src)
		if a > in-1 {
			a = in - 1
		}
		b := a + 1
		if b > in-1 {
			b = in - 1
		}
		i0[o], i1[o], wt[o] = a, b, float32(src-float64(a))
	}
	return
}

func (k *upsampleKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (k *upsampleKernel) forward(e *env) {
	planes := e.u.out.c * e.n
	hw, howo := k.h*k.w, k.ho*k.wo
	x, y := e.in[0], e.out
	e.m.pool.forRange(planes, 4, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			src, dst := x[pl*hw:(pl+1)*hw], y[pl*howo:(pl+1)*howo]
			for r := 0; r < k.ho; r++ {
				d := dst[r*k.wo : (r+1)*k.wo]
				if !k.bilinear {
					s := src[k.r0[r]*k.w : (k.r0[r]+1)*k.w]
					for c := range d {
						d[c] = s[k.c0[c]]
					}
					continue
				}
				s0 := src[k.r0[r]*k.w : (k.r0[r]+1)*k.w]
				s1 := src[k.r1[r]*k.w : (k.r1[r]+1)*k.w]
				lr := k.rw[r]
				for c := range d {
					a, b, lc := k.c0[c], k.c1[c], k.cw[c]
					top := s0[a] + lc*(s0[b]-s0[a])
					bot := s1[a] + lc*(s1[b]-s1[a])
					d[c] = top + lr*(bot-top)
				}
			}
		}
	})
}

func (k *upsampleKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	planes := e.u.out.c * e.n
	hw, howo := k.h*k.w, k.ho*k.wo
	g := e.dout
	acc := e.acc[0]
	e.m.pool.forRange(planes, 4, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			d, gp := dx[pl*hw:(pl+1)*hw], g[pl*howo:(pl+1)*howo]
			if !acc {
				clear(d)
			}
			for r := 0; r < k.ho; r++ {
				gr := gp[r*k.wo : (r+1)*k.wo]
				if !k.bilinear {
					row := d[k.r0[r]*k.w : (k.r0[r]+1)*k.w]
					for c, v := range gr {
						row[k.c0[c]] += v
					}
					continue
				}
				d0 := d[k.r0[r]*k.w : (k.r0[r]+1)*k.w]
				d1 := d[k.r1[r]*k.w : (k.r1[r]+1)*k.w]
				lr := k.rw[r]
				for c, v := range gr {
					a, b, lc := k.c0[c], k.c1[c], k.cw[c]
					top, bot := v*(1-lr), v*lr
					d0[a] += top * (1 - lc)
					d0[b] += top * lc
					d1[a] += bot * (1 - lc)
					d1[b] += bot * lc
				}
			}
		}
	})
}

// dropoutKernel zeroes each value with probability p in training and
// scales the rest by 1/(1-p). The mask is never stored: it is a hash of
// (seed, node, micro-batch, position), recomputed in the backward pass and
// in a checkpoint segment's recomputation, identical whatever the
// workers' split.
type dropoutKernel struct {
	p    float64
	node uint64
}

func (k *dropoutKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (k *dropoutKernel) mask(m *model) (key uint64, thresh uint64, scale float32) {
	key = splitmix(splitmix(m.seed^splitmix(k.node)) ^ splitmix(uint64(m.microStep)))
	return key, uint64(k.p * (1 << 24)), float32(1 / (1 - k.p))
}

func (k *dropoutKernel) apply(e *env, dst, src []float32) {
	sz := e.n * e.u.out.size()
	key, th, sc := k.mask(e.m)
	e.m.pool.forRange(sz, grain, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if splitmix(key+uint64(i))>>40 >= th {
				dst[i] = src[i] * sc
			} else {
				dst[i] = 0
			}
		}
	})
}

func (k *dropoutKernel) forward(e *env) {
	sz := e.n * e.u.out.size()
	if !e.train || k.p == 0 {
		copy(e.out[:sz], e.in[0][:sz])
		return
	}
	k.apply(e, e.out, e.in[0])
}

func (k *dropoutKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	sz := e.n * e.u.out.size()
	if k.p > 0 {
		k.apply(e, e.dout, e.dout)
	}
	put(dx[:sz], e.dout[:sz], e.acc[0])
}

// softmaxKernel is softmax over the channel axis: over the features of a
// vector, over C at each position of [C, H, W].
type softmaxKernel struct{}

func (softmaxKernel) spec() kspec { return kspec{saveIn: []bool{false}, saveOut: true} }

// strides returns, for layout l and n samples, the number of softmax rows,
// the offset of row r's first value and the stride between its values.
func softmaxRows(l layout, n int) (rows int, at func(r int) int, stride int) {
	if !l.spatial {
		return n, func(r int) int { return r * l.c }, 1
	}
	return n * l.s(), func(r int) int { return r }, n * l.s()
}

func (softmaxKernel) forward(e *env) {
	l := e.u.out
	rows, at, st := softmaxRows(l, e.n)
	x, y := e.in[0], e.out
	e.m.pool.forRange(rows, 256, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o := at(r)
			mx := float32(math.Inf(-1))
			for c := 0; c < l.c; c++ {
				if v := x[o+c*st]; v > mx {
					mx = v
				}
			}
			var s float64
			for c := 0; c < l.c; c++ {
				v := math.Exp(float64(x[o+c*st] - mx))
				y[o+c*st] = float32(v)
				s += v
			}
			inv := float32(1 / s)
			for c := 0; c < l.c; c++ {
				y[o+c*st] *= inv
			}
		}
	})
}

func (softmaxKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	l := e.u.out
	rows, at, st := softmaxRows(l, e.n)
	y, g := e.out, e.dout
	acc := e.acc[0]
	e.m.pool.forRange(rows, 256, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o := at(r)
			var dot float64
			for c := 0; c < l.c; c++ {
				dot += float64(g[o+c*st] * y[o+c*st])
			}
			d := float32(dot)
			for c := 0; c < l.c; c++ {
				v := y[o+c*st] * (g[o+c*st] - d)
				if acc {
					dx[o+c*st] += v
				} else {
					dx[o+c*st] = v
				}
			}
		}
	})
}

func init() {
	registerKernel("input", opKernel{build: func(*model, *unit, tail) (kernel, error) { return inputKernel{}, nil }})
	registerKernel("flatten", opKernel{build: func(*model, *unit, tail) (kernel, error) { return flattenKernel{}, nil }, tokens: true})
	registerKernel("softmax", opKernel{build: func(*model, *unit, tail) (kernel, error) { return softmaxKernel{}, nil }})
	registerKernel("dropout", opKernel{build: buildDropout, tokens: true})
	registerKernel("add", opKernel{build: buildAdd, tokens: true})
	registerKernel("concat", opKernel{build: buildConcat})
	registerKernel("upsample", opKernel{build: buildUpsample})
}

func buildDropout(_ *model, u *unit, _ tail) (kernel, error) {
	first := u.nodes[0]
	return &dropoutKernel{p: first.Args.P, node: uint64(first.ID) + 1}, nil
}

func buildAdd(_ *model, u *unit, _ tail) (kernel, error) {
	s := float32(1)
	if f := u.nodes[0].Args.FlowScale; f > 0 {
		s = float32(f)
	}
	return &addKernel{k: len(u.ins), scale: s}, nil
}

func buildConcat(_ *model, u *unit, _ tail) (kernel, error) {
	for _, l := range u.in {
		if l.spatial != u.out.spatial {
			return nil, unsupported(u.nodes[0], "joins tensors of different ranks")
		}
	}
	return &concatKernel{k: len(u.ins)}, nil
}

// buildUpsample is upsample's kernel, nearest or (bi/tri)linear; over a
// volume, upsample3's.
func buildUpsample(_ *model, u *unit, _ tail) (kernel, error) {
	first, a, in := u.nodes[0], u.nodes[0].Args, u.in0()
	if !in.spatial {
		return nil, unsupported(first, "needs [C, H, W]")
	}
	if in.vol() {
		if a.Mode != "" && a.Mode != "nearest" && a.Mode != "trilinear" {
			return nil, unsupported(first, fmt.Sprintf("over a volume has mode %q", a.Mode))
		}
		return newUpsample3(in, u.out, a.Mode == "trilinear"), nil
	}
	if a.Mode != "" && a.Mode != "nearest" && a.Mode != "bilinear" {
		return nil, unsupported(first, fmt.Sprintf("has mode %q", a.Mode))
	}
	return newUpsample(in.h, in.w, u.out.h, u.out.w, a.Mode == "bilinear", a.AlignCorners), nil
}
