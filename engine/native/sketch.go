package native

import (
	"gonum.org/v1/gonum/blas"
)

// Panther's sketched layers (stdlib/panther.go has their definitions).
//
// skDenseKernel is SKLinear on vectors, x [n, in]:
//
//	t1 = [x·S1_1, …, x·S1_L]   t2 = [x·U2_1, …, x·U2_L]      ([n, L·k])
//	y  = c·t1·U1 + c·t2·S2 + b,   c = 1/(2L)
//
// with U1 and S2 read as [L·k, out] (their [L, k, out] layout). Backward
// keeps x and t2; t1 lives only during the forward. With g = dy:
//
//	dS2 += c·t2ᵀ·g;  dt = c·g·U1ᵀ: dS1_i += xᵀ·dt_i, dx = Σ dt_i·S1_iᵀ;
//	dt = c·g·S2ᵀ: dx += Σ dt_i·U2_iᵀ.
type skDenseKernel struct {
	in, out, terms, rank int
	s1, s2, b            *param
	u1, u2               *param // buffers
}

func (k *skDenseKernel) lk() int { return k.terms * k.rank }

func (k *skDenseKernel) spec() kspec {
	lk := bsize{perSample: k.lk()}
	return kspec{saveIn: []bool{true}, aux: []bsize{lk}, tmpF: []bsize{lk}, tmpB: []bsize{lk}}
}

// sketchTerms writes [x·A_1, …, x·A_L] into t ([n, L·k]), A [L, in, k].
func (k *skDenseKernel) sketchTerms(e *env, x, a, t []float32) {
	lk, m := k.lk(), k.in*k.rank
	for i := 0; i < k.terms; i++ {
		e.m.gemm(blas.NoTrans, blas.NoTrans, e.n, k.rank, k.in, 1, x, k.in, a[i*m:], k.rank, 0, t[i*k.rank:], lk)
	}
}

func (k *skDenseKernel) forward(e *env) {
	n, lk := e.n, k.lk()
	x, y := e.in[0], e.out
	c := float32(1 / (2 * float64(k.terms)))
	var beta float32
	if k.b != nil {
		for i := 0; i < n; i++ {
			copy(y[i*k.out:(i+1)*k.out], k.b.data)
		}
		beta = 1
	}
	t1, t2 := e.tmp[0], e.aux[0]
	if !e.train {
		t2 = t1 // nothing is kept in evaluation
	}
	k.sketchTerms(e, x, k.s1.data, t1)
	e.m.gemm(blas.NoTrans, blas.NoTrans, n, k.out, lk, c, t1, lk, k.u1.data, k.out, beta, y, k.out)
	k.sketchTerms(e, x, k.u2.data, t2)
	e.m.gemm(blas.NoTrans, blas.NoTrans, n, k.out, lk, c, t2, lk, k.s2.data, k.out, 1, y, k.out)
}

func (k *skDenseKernel) backward(e *env) {
	n, lk, m := e.n, k.lk(), k.in*k.rank
	x, g, t2, dt := e.in[0], e.dout, e.aux[0], e.tmp[0]
	c := float32(1 / (2 * float64(k.terms)))
	if k.b != nil {
		e.m.pool.forRange(k.out, 64, func(lo, hi int) {
			db := k.b.grad[lo:hi]
			for i := 0; i < n; i++ {
				addTo(db, g[i*k.out+lo:i*k.out+hi])
			}
		})
	}
	e.m.gemm(blas.Trans, blas.NoTrans, lk, k.out, n, c, t2, lk, g, k.out, 1, k.s2.grad, k.out)
	e.m.gemm(blas.NoTrans, blas.Trans, n, lk, k.out, c, g, k.out, k.u1.data, k.out, 0, dt, lk)
	for i := 0; i < k.terms; i++ {
		e.m.gemm(blas.Trans, blas.NoTrans, k.in, k.rank, n, 1, x, k.in, dt[i*k.rank:], lk, 1, k.s1.grad[i*m:], k.rank)
	}
	dx := e.din[0]
	if dx == nil {
		return
	}
	var beta float32
	if e.acc[0] {
		beta = 1
	}
	for i := 0; i < k.terms; i++ {
		e.m.gemm(blas.NoTrans, blas.Trans, n, k.in, k.rank, 1, dt[i*k.rank:], lk, k.s1.data[i*m:], k.rank, beta, dx, k.in)
		beta = 1
	}
	e.m.gemm(blas.NoTrans, blas.Trans, n, lk, k.out, c, g, k.out, k.s2.data, k.out, 0, dt, lk)
	for i := 0; i < k.terms; i++ {
		e.m.gemm(blas.NoTrans, blas.Trans, n, k.in, k.rank, 1, dt[i*k.rank:], lk, k.u2.data[i*m:], k.rank, 1, dx, k.in)
	}
}

// skConvKernel is SKConv2d on [C, N, H, W]: t = S ⋆ x (2L·k channels),
// y = c·Uᵀ·t + b with U read as [2L·k, out] and c = 1/(2L), one product
// over every position of the batch. Backward keeps only x: the gradient
// reaching the convolution is dt = c·U·dy.
type skConvKernel struct {
	geo   convGeom // the convolution to 2L·k channels
	out   int
	terms int
	s, b  *param
	u     *param // buffer
	wt    []float32
}

func (k *skConvKernel) mid() int { return k.geo.co }

func (k *skConvKernel) spec() kspec {
	t := bsize{perSample: k.mid() * k.geo.ho * k.geo.wo}
	return kspec{saveIn: []bool{true}, tmpF: []bsize{t}, tmpB: []bsize{t}}
}

func (k *skConvKernel) forward(e *env) {
	g := &k.geo
	m := e.n * g.ho * g.wo
	t, y := e.tmp[0], e.out
	c := float32(1 / (2 * float64(k.terms)))
	e.m.convForward(g, k.s.data, e.in[0], t, e.n)
	e.m.gemm(blas.Trans, blas.NoTrans, k.out, m, k.mid(), c, k.u.data, k.out, t, m, 0, y, m)
	if k.b != nil {
		e.m.pool.forRange(k.out, 1, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				b := k.b.data[o]
				yo := y[o*m : (o+1)*m]
				for i := range yo {
					yo[i] += b
				}
			}
		})
	}
}

func (k *skConvKernel) backward(e *env) {
	g := &k.geo
	n := e.n
	m := n * g.ho * g.wo
	dy, dt := e.dout, e.tmp[0]
	c := float32(1 / (2 * float64(k.terms)))
	if k.b != nil {
		e.m.pool.forRange(k.out, 1, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				k.b.grad[o] += float32(sum64(dy[o*m : (o+1)*m]))
			}
		})
	}
	e.m.gemm(blas.NoTrans, blas.NoTrans, k.mid(), m, k.out, c, k.u.data, k.out, dy, m, 0, dt, m)
	e.m.convBackwardWeight(g, dt, e.in[0], k.s.grad, n)
	if e.din[0] == nil {
		return
	}
	if g.flip != nil {
		if k.wt == nil {
			k.wt = make([]float32, len(k.s.data))
		}
		e.m.flipWeights(g, k.s.data, k.wt)
		var beta float32
		if e.acc[0] {
			beta = 1
		}
		e.m.convForwardBeta(g.flip, k.wt, dt, e.din[0], n, beta)
		return
	}
	e.m.convBackwardData(g, k.s.data, dt, e.din[0], n, e.acc[0])
}

// skDense builds SKLinear's kernel and its tensors, named as Panther's
// module names them (S1s, S2s, U1s, U2s, bias).
func (m *model) skDense(name string, in, out, terms, rank int, bias bool) *skDenseKernel {
	k := &skDenseKernel{in: in, out: out, terms: terms, rank: rank}
	L, K, I, O := int64(terms), int64(rank), int64(in), int64(out)
	k.u1 = m.newBuffer(name+".U1s", []int64{L, K, O})
	k.u2 = m.newBuffer(name+".U2s", []int64{L, I, K})
	k.s1 = m.newParam(name+".S1s", []int64{L, I, K})
	k.s2 = m.newParam(name+".S2s", []int64{L, K, O})
	if bias {
		k.b = m.newParam(name+".bias", []int64{O})
	}
	return k
}

// skConv builds SKConv2d's kernel: S [2L·k, in, kh, kw] (channel i·k+r
// is term i's r-th), U [2L, k, out].
func (m *model) skConv(name string, geo convGeom, out, terms, rank, kernel int, bias bool) *skConvKernel {
	k := &skConvKernel{geo: geo, out: out, terms: terms}
	k.u = m.newBuffer(name+".U1s", []int64{int64(2 * terms), int64(rank), int64(out)})
	k.s = m.newParam(name+".S1s", []int64{int64(geo.co), int64(geo.ci), int64(kernel), int64(kernel)})
	if bias {
		k.b = m.newParam(name+".bias", []int64{int64(out)})
	}
	return k
}

func init() {
	registerKernel("sketched_dense", opKernel{build: buildSkDense})
	registerKernel("sketched_conv", opKernel{build: buildSkConv})
}

func buildSkDense(m *model, u *unit, _ tail) (kernel, error) {
	first, a, in := u.nodes[0], u.nodes[0].Args, u.in0()
	if in.spatial || a.Terms < 1 || a.Rank < 1 {
		return nil, unsupported(first, "needs a vector, and terms and rank of at least 1")
	}
	return m.skDense(first.Name, in.c, u.out.c, int(a.Terms), int(a.Rank), a.Bias), nil
}

func buildSkConv(m *model, u *unit, _ tail) (kernel, error) {
	first, a, in := u.nodes[0], u.nodes[0].Args, u.in0()
	if !in.spatial || a.Terms < 1 || a.Rank < 1 {
		return nil, unsupported(first, "needs [C, H, W], and terms and rank of at least 1")
	}
	geo := skConvGeomOf(in, u.out, a)
	return m.skConv(first.Name, geo, u.out.c, int(a.Terms), int(a.Rank), int(a.Kernel), a.Bias), nil
}
