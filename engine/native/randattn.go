package native

// randAttnKernel is random_attention, Panther's RandMultiHeadAttention
// (Performer's FAVOR+; stdlib/randattn.go has the definition): three GEMMs
// for q, k and v, per sample and head the feature maps φ(q) and φ(k) and
// o_t = φ(q)_t·S / φ(q)_t·z with S = φ(k)ᵀ·v and z = φ(k)ᵀ·1 (prefix sums
// when causal), and one GEMM out. The backward recomputes S and z; the
// softmax map's stabiliser passes its gradient to where it was attained,
// as autograd's max does, so that position is kept (idx).
//
// Derivation of the backward: docs/design/attention.md.

import (
	"math"

	"gonum.org/v1/gonum/blas"

	"pipe/stdlib"

	"pipe/engine/native/internal/cvec"
)

// favorEps is Panther's numerical stabiliser added to every feature.
const favorEps = 1e-5

type randAttnKernel struct {
	t, d, h, dh, m int
	causal, relu   bool
	wq, wk, wv, w0 *param // [D, D]
	bq, bk, bv, b0 *param // [D]
	omega          *param // buffer [M, d]
}

func (k *randAttnKernel) spec() kspec {
	td, htm := k.t*k.d, k.h*k.t*k.m
	return kspec{saveIn: []bool{true},
		aux:  []bsize{{perSample: td}, {perSample: td}, {perSample: td}, {perSample: td}, {perSample: htm}, {perSample: htm}, {perSample: k.h * (k.t + 1)}},
		tmpB: []bsize{{perSample: td}, {perSample: td}, {perSample: td}, {perSample: td}}}
}

// scratchNeed is the per-worker scratch: S, dS, z, dz, den, dden, dnum and
// the two feature maps' gradients of one head.
func (k *randAttnKernel) scratchNeed() int {
	return 2*k.m*k.dh + 2*k.m + 2*k.t + k.t*k.dh + 2*k.t*k.m
}

// featScale is d^-¼, the softmax map's scaling of z (1 for relu).
func (k *randAttnKernel) featScale() float32 {
	if k.relu {
		return 1
	}
	return float32(1 / math.Sqrt(math.Sqrt(float64(k.dh))))
}

// features writes φ(u) into f ([T, M]) for one head's rows u (stride
// k.d), and the stabilisers' argmax positions into idx (T per-token
// positions for queries, one flat position for keys).
func (k *randAttnKernel) features(f, u []float32, query bool, idx []float32) {
	t, m, dh := k.t, k.m, k.dh
	r := float32(1 / math.Sqrt(float64(m)))
	if k.relu {
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, m, dh, r, u, k.d, k.omega.data, dh, 0, f, m)
		for j, v := range f {
			f[j] = max(v, 0) + favorEps
		}
		return
	}
	c := k.featScale()
	blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, m, dh, c, u, k.d, k.omega.data, dh, 0, f, m)
	gmax, gpos := float32(math.Inf(-1)), 0
	for i := 0; i < t; i++ {
		row := f[i*m : (i+1)*m]
		mx, pos := row[0], 0
		for j, v := range row {
			if v > mx {
				mx, pos = v, j
			}
		}
		if query {
			idx[i] = float32(pos)
		} else if mx > gmax {
			gmax, gpos = mx, i*m+pos
		}
	}
	if !query {
		idx[0] = float32(gpos)
	}
	for i := 0; i < t; i++ {
		row := f[i*m : (i+1)*m]
		var sq float32
		for _, v := range u[i*k.d : i*k.d+dh] {
			sq += v * v
		}
		sub := sq * c * c / 2
		if query {
			sub += row[int(idx[i])]
		} else {
			sub += gmax
		}
		for j, v := range row {
			row[j] = v - sub
		}
	}
	// One call for the whole map: a row of m features is shorter than
	// what a call to C is worth. exp32(y - 0) is exp32(y).
	if cvec.Built && len(f) >= cMin {
		cvec.ExpSub(f[:t*m], f[:t*m], 0)
	} else {
		for j, v := range f[:t*m] {
			f[j] = exp32(v)
		}
	}
	for j, v := range f[:t*m] {
		f[j] = r * (v + favorEps)
	}
}

// featuresBack turns g, the gradient of φ(u) ([T, M], overwritten), into
// du (stride k.d): du = g′·ω·c − c²·Σ_m g′_m·u with g′ the gradient of
// the exponent (softmax), or du = g′·ω (relu). sums ([T]) is scratch.
func (k *randAttnKernel) featuresBack(g, f, u, du []float32, query bool, idx, sums []float32) {
	t, m, dh := k.t, k.m, k.dh
	r := float32(1 / math.Sqrt(float64(m)))
	if k.relu {
		for j, v := range f {
			if v > favorEps {
				g[j] *= r
			} else {
				g[j] = 0
			}
		}
		blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, m, 1, g, m, k.omega.data, dh, 0, du, k.d)
		return
	}
	c := k.featScale()
	var all float32
	for i := 0; i < t; i++ {
		row, fr := g[i*m:(i+1)*m], f[i*m:(i+1)*m]
		var s float32
		for j, v := range fr {
			ge := row[j] * (v - r*favorEps)
			row[j] = ge
			s += ge
		}
		sums[i] = s
		all += s
		if query {
			row[int(idx[i])] -= s
		}
	}
	if !query {
		g[int(idx[0])] -= all
	}
	blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, m, c, g, m, k.omega.data, dh, 0, du, k.d)
	for i := 0; i < t; i++ {
		s := c * c * sums[i]
		ui, di := u[i*k.d:i*k.d+dh], du[i*k.d:i*k.d+dh]
		for j, v := range ui {
			di[j] -= s * v
		}
	}
}

// blockBufs are one worker's views of its scratch.
type blockBufs struct{ s, ds, z, dz, den, dden, dnum, da, db []float32 }

func (k *randAttnKernel) bufs(sc []float32) blockBufs {
	md, t := k.m*k.dh, k.t
	var b blockBufs
	take := func(n int) []float32 { x := sc[:n:n]; sc = sc[n:]; return x }
	b.s, b.ds, b.z, b.dz = take(md), take(md), take(k.m), take(k.m)
	b.den, b.dden, b.dnum = take(t), take(t), take(t*k.dh)
	b.da, b.db = take(t*k.m), take(t*k.m)
	return b
}

// sums sets S = Bᵀ·v and z = Bᵀ·1 over every token of the head.
func (k *randAttnKernel) sums(bb blockBufs, b, v []float32) {
	blasImpl.Sgemm(blas.Trans, blas.NoTrans, k.m, k.dh, k.t, 1, b, k.m, v, k.d, 0, bb.s, k.dh)
	clear(bb.z)
	for i := 0; i < k.t; i++ {
		addTo(bb.z, b[i*k.m:(i+1)*k.m])
	}
}

func (k *randAttnKernel) forward(e *env) {
	mo, n := e.m, e.n
	t, d, h, m := k.t, k.d, k.h, k.m
	x := e.in[0]
	q, kk, v, o, fq, fk, idx := e.aux[0], e.aux[1], e.aux[2], e.aux[3], e.aux[4], e.aux[5], e.aux[6]
	mo.affine(q, x, k.wq, k.bq, n*t, d, d)
	mo.affine(kk, x, k.wk, k.bk, n*t, d, d)
	mo.affine(v, x, k.wv, k.bv, n*t, d, d)
	tm := t * m
	mo.pool.run(func(w int) {
		bb := k.bufs(mo.scratch[w])
		lo, hi := mo.pool.span(n*h, w)
		for blk := lo; blk < hi; blk++ {
			i, hd := blk/h, blk%h
			off := i*t*d + hd*k.dh
			a, b := fq[blk*tm:(blk+1)*tm], fk[blk*tm:(blk+1)*tm]
			ix := idx[blk*(t+1) : (blk+1)*(t+1)]
			k.features(a, q[off:], true, ix[:t])
			k.features(b, kk[off:], false, ix[t:])
			k.attend(bb, a, b, v[off:], o[off:])
		}
	})
	mo.affine(e.out, o, k.w0, k.b0, n*t, d, d)
}

// attend writes one head's o = (A·S)/(A·z), S and z over all tokens or
// the prefix up to each token.
func (k *randAttnKernel) attend(bb blockBufs, a, b, v, o []float32) {
	t, m, dh, d := k.t, k.m, k.dh, k.d
	if !k.causal {
		k.sums(bb, b, v)
		blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, m, 1, a, m, bb.s, dh, 0, o, d)
		for i := 0; i < t; i++ {
			inv := 1 / dot32(a[i*m:(i+1)*m], bb.z)
			for j := range o[i*d : i*d+dh] {
				o[i*d+j] *= inv
			}
		}
		return
	}
	clear(bb.s)
	clear(bb.z)
	for i := 0; i < t; i++ {
		ai, bi, vi, oi := a[i*m:(i+1)*m], b[i*m:(i+1)*m], v[i*d:i*d+dh], o[i*d:i*d+dh]
		blasImpl.Sger(m, dh, 1, bi, 1, vi, 1, bb.s, dh)
		addTo(bb.z, bi)
		blasImpl.Sgemv(blas.Trans, m, dh, 1, bb.s, dh, ai, 1, 0, oi, 1)
		inv := 1 / dot32(ai, bb.z)
		for j := range oi {
			oi[j] *= inv
		}
	}
}

func dot32(a, b []float32) float32 {
	var s float32
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

func (k *randAttnKernel) backward(e *env) {
	mo, n := e.m, e.n
	t, d, h, m, dh := k.t, k.d, k.h, k.m, k.dh
	x := e.in[0]
	q, kk, v, o, fq, fk, idx := e.aux[0], e.aux[1], e.aux[2], e.aux[3], e.aux[4], e.aux[5], e.aux[6]
	dq, dk, dv, do := e.tmp[0], e.tmp[1], e.tmp[2], e.tmp[3]
	mo.affineBack(e.dout, o, do, false, k.w0, k.b0, n*t, d, d)
	tm := t * m
	mo.pool.run(func(w int) {
		bb := k.bufs(mo.scratch[w])
		lo, hi := mo.pool.span(n*h, w)
		for blk := lo; blk < hi; blk++ {
			i, hd := blk/h, blk%h
			off := i*t*d + hd*dh
			a, b := fq[blk*tm:(blk+1)*tm], fk[blk*tm:(blk+1)*tm]
			ix := idx[blk*(t+1) : (blk+1)*(t+1)]
			k.attendBack(bb, a, b, v[off:], o[off:], do[off:], dv[off:])
			k.featuresBack(bb.da, a, q[off:], dq[off:], true, ix[:t], bb.dden)
			k.featuresBack(bb.db, b, kk[off:], dk[off:], false, ix[t:], bb.dden)
		}
	})
	var dx []float32
	acc := false
	if e.din[0] != nil {
		dx, acc = e.din[0], e.acc[0]
	}
	mo.affineBack(dq, x, dx, acc, k.wq, k.bq, n*t, d, d)
	mo.affineBack(dk, x, dx, acc || dx != nil, k.wk, k.bk, n*t, d, d)
	mo.affineBack(dv, x, dx, acc || dx != nil, k.wv, k.bv, n*t, d, d)
}

// attendBack sets bb.da and bb.db (the gradients of A and B) and dv from
// dO, for one head.
func (k *randAttnKernel) attendBack(bb blockBufs, a, b, v, o, dO, dv []float32) {
	t, m, dh, d := k.t, k.m, k.dh, k.d
	// den, dnum and dden need z (and S) as the forward had them.
	grads := func(i int, z []float32) {
		den := dot32(a[i*m:(i+1)*m], z)
		inv := 1 / den
		g, oi := dO[i*d:i*d+dh], o[i*d:i*d+dh]
		bb.dden[i] = -dot32(g, oi) * inv
		for j, gv := range g {
			bb.dnum[i*dh+j] = gv * inv
		}
	}
	if !k.causal {
		k.sums(bb, b, v)
		for i := 0; i < t; i++ {
			grads(i, bb.z)
		}
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, m, dh, 1, bb.dnum, dh, bb.s, dh, 0, bb.da, m)
		blasImpl.Sgemm(blas.Trans, blas.NoTrans, m, dh, t, 1, a, m, bb.dnum, dh, 0, bb.ds, dh)
		clear(bb.dz)
		for i := 0; i < t; i++ {
			axpy32(bb.da[i*m:(i+1)*m], bb.z, bb.dden[i])
			axpy32(bb.dz, a[i*m:(i+1)*m], bb.dden[i])
		}
		blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, m, dh, 1, v, d, bb.ds, dh, 0, bb.db, m)
		for i := 0; i < t; i++ {
			addTo(bb.db[i*m:(i+1)*m], bb.dz)
		}
		blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, m, 1, b, m, bb.ds, dh, 0, dv, d)
		return
	}
	clear(bb.s)
	clear(bb.z)
	for i := 0; i < t; i++ {
		bi, vi := b[i*m:(i+1)*m], v[i*d:i*d+dh]
		blasImpl.Sger(m, dh, 1, bi, 1, vi, 1, bb.s, dh)
		addTo(bb.z, bi)
		grads(i, bb.z)
		da := bb.da[i*m : (i+1)*m]
		blasImpl.Sgemv(blas.NoTrans, m, dh, 1, bb.s, dh, bb.dnum[i*dh:(i+1)*dh], 1, 0, da, 1)
		axpy32(da, bb.z, bb.dden[i])
	}
	clear(bb.ds)
	clear(bb.dz)
	for i := t - 1; i >= 0; i-- {
		ai, bi, vi := a[i*m:(i+1)*m], b[i*m:(i+1)*m], v[i*d:i*d+dh]
		blasImpl.Sger(m, dh, 1, ai, 1, bb.dnum[i*dh:(i+1)*dh], 1, bb.ds, dh)
		axpy32(bb.dz, ai, bb.dden[i])
		db := bb.db[i*m : (i+1)*m]
		blasImpl.Sgemv(blas.NoTrans, m, dh, 1, bb.ds, dh, vi, 1, 0, db, 1)
		addTo(db, bb.dz)
		blasImpl.Sgemv(blas.Trans, m, dh, 1, bb.ds, dh, bi, 1, 0, dv[i*d:i*d+dh], 1)
	}
}

// axpy32 adds a·x to y.
func axpy32(y, x []float32, a float32) {
	for i, v := range x {
		y[i] += a * v
	}
}

// randAttnKernelFor builds random_attention's kernel for tokens [t, d]:
// Panther's parameter names, xavier_uniform_ weights, zero biases.
func (m *model) randAttnKernelFor(name string, t, d int, a stdlib.OpArgs) (*randAttnKernel, bool) {
	h, mf := int(a.Heads), int(a.Features)
	if h < 1 || d%h != 0 || mf < 1 {
		return nil, false
	}
	D := int64(d)
	k := &randAttnKernel{t: t, d: d, h: h, dh: d / h, m: mf, causal: a.Causal, relu: a.Mode == "relu"}
	k.wq = m.newParam(name+".Wq", []int64{D, D})
	k.wk = m.newParam(name+".Wk", []int64{D, D})
	k.wv = m.newParam(name+".Wv", []int64{D, D})
	k.w0 = m.newParam(name+".W0", []int64{D, D})
	k.bq = m.newParam(name+".bq", []int64{D})
	k.bk = m.newParam(name+".bk", []int64{D})
	k.bv = m.newParam(name+".bv", []int64{D})
	k.b0 = m.newParam(name+".b0", []int64{D})
	k.omega = m.newBuffer(name+".projection_matrix", []int64{int64(mf), int64(d / h)})
	return k, true
}

func init() {
	registerKernel("random_attention", opKernel{build: buildRandAttn, tokens: true})
}

func buildRandAttn(m *model, u *unit, _ tail) (kernel, error) {
	t, d, err := tokensIn(u)
	if err != nil {
		return nil, err
	}
	first := u.nodes[0]
	if k, ok := m.randAttnKernelFor(first.Name, t, d, first.Args); ok {
		return k, nil
	}
	return nil, unsupported(first, "needs heads dividing the token width and at least one feature")
}
