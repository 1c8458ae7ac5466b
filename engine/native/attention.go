package native

// Tokens and attention
//
// A sequence of tokens [T, D] is stored as N·T rows of D values, so dense
// and layernorm run on tokens as on vectors. attnKernel is
// nn.MultiheadAttention's self-attention, fused: one GEMM for q, k and v,
// per sample and head the softmax probabilities (computed and stored once;
// dropout's mask is a hash of the position, rebuilt where needed, never
// stored), and one GEMM out. What it keeps (qkv, the probabilities, the
// heads' output and the input) is what the planner's cpuSaved counts.
//
// Derivation, forward and backward: docs/design/attention.md.

import (
	"math"

	"gonum.org/v1/gonum/blas"

	"pipe/engine/native/internal/cvec"
)

// rows is the number of tokens per sample of a non-spatial layout: 1 for
// a vector.
func (l layout) rows() int {
	if l.spatial {
		return 1
	}
	return l.h
}

// seq says the layout is a sequence of tokens [T, D] with T > 1 stored
// as such (a vector is not).
func (l layout) seq() bool { return !l.spatial && l.h > 1 }

// tokensKernel turns [D, H, W] (CNHW) into the tokens [H·W, D] of each
// sample, row-major position by position (torchvision's flatten(2) and
// permute).
type tokensKernel struct{}

func (tokensKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (tokensKernel) forward(e *env) {
	l, n := e.u.in[0], e.n
	s, d := l.s(), l.c
	x, y := e.in[0], e.out
	e.m.pool.forRange(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for c := 0; c < d; c++ {
				src := x[(c*n+i)*s : (c*n+i+1)*s]
				dst := y[i*s*d+c:]
				for p, v := range src {
					dst[p*d] = v
				}
			}
		}
	})
}

func (tokensKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	l, n := e.u.in[0], e.n
	s, d := l.s(), l.c
	g, acc := e.dout, e.acc[0]
	e.m.pool.forRange(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			for c := 0; c < d; c++ {
				dst := dx[(c*n+i)*s : (c*n+i+1)*s]
				src := g[i*s*d+c:]
				for p := range dst {
					if acc {
						dst[p] += src[p*d]
					} else {
						dst[p] = src[p*d]
					}
				}
			}
		}
	})
}

// classTokenKernel prepends a learned token w [1, 1, D] to each sample.
type classTokenKernel struct {
	t, d int // tokens in (without the class token) and width
	w    *param
}

func (k *classTokenKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (k *classTokenKernel) forward(e *env) {
	t, d := k.t, k.d
	for i := 0; i < e.n; i++ {
		o := e.out[i*(t+1)*d:]
		copy(o[:d], k.w.data)
		copy(o[d:(t+1)*d], e.in[0][i*t*d:(i+1)*t*d])
	}
}

func (k *classTokenKernel) backward(e *env) {
	t, d := k.t, k.d
	for i := 0; i < e.n; i++ {
		g := e.dout[i*(t+1)*d:]
		addTo(k.w.grad, g[:d])
		if e.din[0] != nil {
			put(e.din[0][i*t*d:(i+1)*t*d], g[d:(t+1)*d], e.acc[0])
		}
	}
}

// posEmbedKernel adds a learned table w [1, T, D] to each sample.
type posEmbedKernel struct {
	w *param
}

func (k *posEmbedKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (k *posEmbedKernel) forward(e *env) {
	sz := k.w.n
	e.m.pool.forRange(e.n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y := e.out[i*sz : (i+1)*sz]
			copy(y, e.in[0][i*sz:(i+1)*sz])
			addTo(y, k.w.data)
		}
	})
}

func (k *posEmbedKernel) backward(e *env) {
	sz := k.w.n
	for i := 0; i < e.n; i++ {
		g := e.dout[i*sz : (i+1)*sz]
		addTo(k.w.grad, g)
		if e.din[0] != nil {
			put(e.din[0][i*sz:(i+1)*sz], g, e.acc[0])
		}
	}
}

// selectTokenKernel takes token 0 of each sample; meanTokens (mean set)
// averages the tokens instead.
type selectTokenKernel struct {
	t, d int
	mean bool
}

func (k *selectTokenKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (k *selectTokenKernel) forward(e *env) {
	t, d := k.t, k.d
	inv := 1 / float32(t)
	for i := 0; i < e.n; i++ {
		x, y := e.in[0][i*t*d:(i+1)*t*d], e.out[i*d:(i+1)*d]
		copy(y, x[:d])
		if !k.mean {
			continue
		}
		for s := 1; s < t; s++ {
			addTo(y, x[s*d:(s+1)*d])
		}
		for c := range y {
			y[c] *= inv
		}
	}
}

func (k *selectTokenKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	t, d := k.t, k.d
	inv := 1 / float32(t)
	for i := 0; i < e.n; i++ {
		g, x := e.dout[i*d:(i+1)*d], dx[i*t*d:(i+1)*t*d]
		if !k.mean {
			put(x[:d], g, e.acc[0])
			if !e.acc[0] {
				clear(x[d:])
			}
			continue
		}
		for s := 0; s < t; s++ {
			row := x[s*d : (s+1)*d]
			for c, v := range g {
				if e.acc[0] {
					row[c] += v * inv
				} else {
					row[c] = v * inv
				}
			}
		}
	}
}

// attnKernel is multi-head self-attention (see the top of the file).
type attnKernel struct {
	t, d, h, dh int
	causal      bool
	drop        dropoutKernel // p 0: none
	win, bin    *param        // [3D, D], [3D]
	wout, bout  *param        // [D, D], [D]
}

func (k *attnKernel) spec() kspec {
	t, d := k.t, k.d
	return kspec{saveIn: []bool{true},
		aux:  []bsize{{perSample: 3 * t * d}, {perSample: k.h * t * t}, {perSample: t * d}},
		tmpB: []bsize{{perSample: 3 * t * d}, {perSample: t * d}}}
}

// scratchNeed is the per-worker scratch: the dropped probabilities and
// their gradient, one head's T × T each.
func (k *attnKernel) scratchNeed() int { return 2 * k.t * k.t }

// affine sets y = x·Wᵀ + b for rows rows of x.
func (m *model) affine(y, x []float32, w, b *param, rows, in, out int) {
	for i := 0; i < rows; i++ {
		copy(y[i*out:(i+1)*out], b.data)
	}
	m.gemm(blas.NoTrans, blas.Trans, rows, out, in, 1, x, in, w.data, in, 1, y, out)
}

// affineBack adds the gradients of y = x·Wᵀ + b given dy, and sets (or,
// with acc, adds to) dx = dy·W when dx is not nil.
func (m *model) affineBack(dy, x, dx []float32, acc bool, w, b *param, rows, in, out int) {
	m.pool.forRange(out, 64, func(lo, hi int) {
		db := b.grad[lo:hi]
		for i := 0; i < rows; i++ {
			addTo(db, dy[i*out+lo:i*out+hi])
		}
	})
	m.gemm(blas.Trans, blas.NoTrans, out, in, rows, 1, dy, out, x, in, 1, w.grad, in)
	if dx != nil {
		var beta float32
		if acc {
			beta = 1
		}
		m.gemm(blas.NoTrans, blas.NoTrans, rows, in, out, 1, dy, out, w.data, in, beta, dx, in)
	}
}

// dropped writes into dst the probabilities p of head block blk with
// dropout's mask and scale applied.
func (k *attnKernel) dropped(dst, p []float32, blk int, key, th uint64, sc float32) {
	base := uint64(blk * k.t * k.t)
	for j, v := range p {
		if splitmix(key+base+uint64(j))>>40 >= th {
			dst[j] = v * sc
		} else {
			dst[j] = 0
		}
	}
}

func (k *attnKernel) forward(e *env) {
	m, n := e.m, e.n
	t, d, h, dh := k.t, k.d, k.h, k.dh
	x, qkv, probs, o := e.in[0], e.aux[0], e.aux[1], e.aux[2]
	m.affine(qkv, x, k.win, k.bin, n*t, d, 3*d)
	scale := float32(1 / math.Sqrt(float64(dh)))
	drop := e.train && k.drop.p > 0
	key, th, sc := k.drop.mask(m)
	tt := t * t
	m.pool.run(func(w int) {
		lo, hi := m.pool.span(n*h, w)
		for blk := lo; blk < hi; blk++ {
			i, hd := blk/h, blk%h
			q := qkv[i*t*3*d+hd*dh:]
			p := probs[blk*tt : (blk+1)*tt]
			blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, t, dh, scale, q, 3*d, q[d:], 3*d, 0, p, t)
			softmaxBlock(p, t, k.causal)
			src := p
			if drop {
				src = m.scratch[w][:tt]
				k.dropped(src, p, blk, key, th, sc)
			}
			blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, t, 1, src, t, q[2*d:], 3*d, 0, o[i*t*d+hd*dh:], d)
		}
	})
	m.affine(e.out, o, k.wout, k.bout, n*t, d, d)
}

// softmaxBlock replaces each row of the t×t block p by its softmax (with
// causal, row r over its first r+1 entries, the rest 0). The rows are
// shifted by their maxima first, so that one call exponentiates the
// whole block (cvec.ExpSub: a row of a few tokens is shorter than what
// a call to C is worth); the sums then run in row order, as they did
// row by row.
func softmaxBlock(p []float32, t int, causal bool) {
	width := func(r int) int {
		if causal {
			return r + 1
		}
		return t
	}
	for r := 0; r < t; r++ {
		row := p[r*t : r*t+width(r)]
		// A compare, not Go's max (which orders ±0 and passes NaN on at
		// several instructions an element): a NaN makes the row's sum
		// NaN either way, and the sign of a zero maximum changes no
		// exponential, so the softmax is the same.
		mx := float32(math.Inf(-1))
		for _, v := range row {
			if v > mx {
				mx = v
			}
		}
		for j, v := range row {
			row[j] = v - mx
		}
	}
	if cvec.Built && t*t >= cMin {
		cvec.ExpSub(p[:t*t], p[:t*t], 0)
	} else {
		for j, v := range p[:t*t] {
			p[j] = exp32(v)
		}
	}
	for r := 0; r < t; r++ {
		row := p[r*t : r*t+width(r)]
		var s float32
		for _, ev := range row {
			s += ev
		}
		inv := 1 / s
		for j := range row {
			row[j] *= inv
		}
		clear(p[r*t+width(r) : (r+1)*t])
	}
}

func (k *attnKernel) backward(e *env) {
	m, n := e.m, e.n
	t, d, h, dh := k.t, k.d, k.h, k.dh
	x, qkv, probs, o := e.in[0], e.aux[0], e.aux[1], e.aux[2]
	dqkv, do := e.tmp[0], e.tmp[1]
	m.affineBack(e.dout, o, do, false, k.wout, k.bout, n*t, d, d)
	scale := float32(1 / math.Sqrt(float64(dh)))
	drop := k.drop.p > 0
	key, th, sc := k.drop.mask(m)
	tt := t * t
	m.pool.run(func(w int) {
		lo, hi := m.pool.span(n*h, w)
		for blk := lo; blk < hi; blk++ {
			i, hd := blk/h, blk%h
			off := i*t*3*d + hd*dh
			q, dq := qkv[off:], dqkv[off:]
			dO := do[i*t*d+hd*dh:]
			p := probs[blk*tt : (blk+1)*tt]
			dp := m.scratch[w][:tt]
			pd := p
			if drop {
				pd = m.scratch[w][tt : 2*tt]
				k.dropped(pd, p, blk, key, th, sc)
			}
			// dP = dO·vᵀ; dv = drop(P)ᵀ·dO.
			blasImpl.Sgemm(blas.NoTrans, blas.Trans, t, t, dh, 1, dO, d, q[2*d:], 3*d, 0, dp, t)
			blasImpl.Sgemm(blas.Trans, blas.NoTrans, t, dh, t, 1, pd, t, dO, d, 0, dq[2*d:], 3*d)
			if drop {
				k.dropped(dp, dp, blk, key, th, sc)
			}
			// dS = P ⊙ (dP − rowsum(dP ⊙ P)) · scale, over P.
			for r := 0; r < t; r++ {
				pr, gr := p[r*t:(r+1)*t], dp[r*t:(r+1)*t]
				var dot float32
				for j, v := range pr {
					dot += v * gr[j]
				}
				for j, v := range pr {
					pr[j] = v * (gr[j] - dot) * scale
				}
			}
			blasImpl.Sgemm(blas.NoTrans, blas.NoTrans, t, dh, t, 1, p, t, q[d:], 3*d, 0, dq, 3*d)
			blasImpl.Sgemm(blas.Trans, blas.NoTrans, t, dh, t, 1, p, t, q, 3*d, 0, dq[d:], 3*d)
		}
	})
	var acc bool
	var dx []float32
	if e.din[0] != nil {
		dx, acc = e.din[0], e.acc[0]
	}
	m.affineBack(dqkv, x, dx, acc, k.win, k.bin, n*t, d, 3*d)
}

func init() {
	registerKernel("tokens", opKernel{build: buildTokens, tokens: true})
	registerKernel("class_token", opKernel{build: buildClassToken, tokens: true})
	registerKernel("pos_embed", opKernel{build: buildPosEmbed, tokens: true})
	registerKernel("select_token", opKernel{build: buildSelectToken, tokens: true})
	registerKernel("mean_tokens", opKernel{build: buildSelectToken, tokens: true})
	registerKernel("attention", opKernel{build: buildAttention, tokens: true})
}

func buildTokens(_ *model, u *unit, _ tail) (kernel, error) {
	if !u.in0().spatial {
		return nil, unsupported(u.nodes[0], "needs [C, H, W]")
	}
	return tokensKernel{}, nil
}

// tokensIn is the tokens [t, d] a token op reads, refusing anything else.
func tokensIn(u *unit) (t, d int, err error) {
	first, in := u.nodes[0], u.in0()
	if in.spatial || len(first.In) != 1 || len(first.In[0]) != 2 {
		return 0, 0, unsupported(first, "needs tokens [T, D]")
	}
	return in.h, in.c, nil
}

func buildClassToken(m *model, u *unit, _ tail) (kernel, error) {
	t, d, err := tokensIn(u)
	if err != nil {
		return nil, err
	}
	return &classTokenKernel{t: t, d: d, w: m.newParam(u.nodes[0].Name+".weight", []int64{1, 1, int64(d)})}, nil
}

func buildPosEmbed(m *model, u *unit, _ tail) (kernel, error) {
	t, d, err := tokensIn(u)
	if err != nil {
		return nil, err
	}
	return &posEmbedKernel{w: m.newParam(u.nodes[0].Name+".weight", []int64{1, int64(t), int64(d)})}, nil
}

// buildSelectToken is select_token's kernel, or mean_tokens'.
func buildSelectToken(_ *model, u *unit, _ tail) (kernel, error) {
	t, d, err := tokensIn(u)
	if err != nil {
		return nil, err
	}
	return &selectTokenKernel{t: t, d: d, mean: u.nodes[0].Op == "mean_tokens"}, nil
}

func buildAttention(m *model, u *unit, _ tail) (kernel, error) {
	t, d, err := tokensIn(u)
	if err != nil {
		return nil, err
	}
	first, a := u.nodes[0], u.nodes[0].Args
	name := first.Name
	h := int(a.Heads)
	if h < 1 || d%h != 0 {
		return nil, unsupported(first, "needs heads dividing the token width")
	}
	D := int64(d)
	return &attnKernel{t: t, d: d, h: h, dh: d / h, causal: a.Causal,
		drop: dropoutKernel{p: a.P, node: uint64(first.ID) + 1},
		win:  m.newParam(name+".in_proj_weight", []int64{3 * D, D}),
		bin:  m.newParam(name+".in_proj_bias", []int64{3 * D}),
		wout: m.newParam(name+".out_proj.weight", []int64{D, D}),
		bout: m.newParam(name+".out_proj.bias", []int64{D})}, nil
}
