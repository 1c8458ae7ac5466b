package native

import (
	"math"
)

// bnState is a batchnorm's parameters and running statistics, shared by
// the standalone kernel and the fused conv kernel.
type bnState struct {
	name          string
	c             int
	eps, momentum float64
	gamma, beta   *param
	rm, rv        *param
	tracked       int64
	// The batch statistics of the last training forward, applied to the
	// running statistics by commit once the loss is known to be finite.
	pendMean, pendVar []float64
	pending           bool
}

func (m *model) newBN(name string, c int, eps, momentum float64) *bnState {
	b := &bnState{name: name, c: c, eps: eps, momentum: momentum}
	sh := []int64{int64(c)}
	b.gamma = m.newParam(name+".weight", sh)
	b.beta = m.newParam(name+".bias", sh)
	b.rm = m.newBuffer(name+".running_mean", sh)
	b.rv = m.newBuffer(name+".running_var", sh)
	b.pendMean = make([]float64, c)
	b.pendVar = make([]float64, c)
	m.bns = append(m.bns, b)
	return b
}

// record keeps channel c's batch mean and biased variance over count
// values for commit. Workers call it for disjoint channels at once, so it
// touches only channel c's slots; the caller marks the statistics pending
// once the parallel loop is over (markPending).
func (b *bnState) record(c int, mean, variance float64, count int) {
	b.pendMean[c] = mean
	if count > 1 {
		variance *= float64(count) / float64(count-1)
	}
	b.pendVar[c] = variance
}

// markPending says that record filled every channel, for commit.
func (b *bnState) markPending() { b.pending = true }

// commit folds the pending batch statistics into the running ones, as
// PyTorch does: running = (1-momentum)·running + momentum·batch, with the
// unbiased variance.
func (b *bnState) commit() {
	if !b.pending {
		return
	}
	mo := b.momentum
	for c := 0; c < b.c; c++ {
		b.rm.data[c] = float32((1-mo)*float64(b.rm.data[c]) + mo*b.pendMean[c])
		b.rv.data[c] = float32((1-mo)*float64(b.rv.data[c]) + mo*b.pendVar[c])
	}
	b.tracked++
	b.pending = false
}

// evalAffine returns the per-channel scale and shift of evaluation mode:
// y = scale·x + shift.
func (b *bnState) evalAffine(c int) (scale, shift float64) {
	scale = float64(b.gamma.data[c]) / math.Sqrt(float64(b.rv.data[c])+b.eps)
	shift = float64(b.beta.data[c]) - float64(b.rm.data[c])*scale
	return
}

// affineAct sets dst = act(a·src + b).
func affineAct(act actKind, dst, src []float32, a, b float32) {
	switch act {
	case actNone:
		affine(dst, src, a, b)
	case actReLU:
		affineRelu(dst, src, a, b)
	default:
		affine(dst, src, a, b)
		applyAct(act, dst[:len(src)], dst[:len(src)])
	}
}

// bnBackwardBlock is the backward of y = act(γ·x̂ + β), x̂ = (x-mean)·invstd,
// over one channel's values with batch statistics. g is dL/dy; out is y
// (for relu, sigmoid, tanh). It writes dL/dx into dx (which may be g) and
// returns dL/dγ and dL/dβ. When acc, dx is added to instead.
func bnBackwardBlock(act actKind, g, x, out, dx []float32, mean, invstd, gamma, beta float32, acc bool) (dgamma, dbeta float64) {
	n := len(g)
	x = x[:n]
	relu := act == actReLU
	switch act {
	case actNone, actReLU:
	case actGELU, actSiLU, actHardswish:
		// g·act'(pre) in place, then as without an activation.
		for i := range g {
			g[i] *= actDeriv(act, gamma*(x[i]-mean)*invstd+beta, 0)
		}
	default:
		out = out[:n]
		for i := range g {
			g[i] *= actDeriv(act, 0, out[i])
		}
	}
	sg, sgc := sumCentered(g, x, out, mean, relu)
	sgx := sgc * float64(invstd)
	k := float32(float64(gamma) * float64(invstd) / float64(n))
	// dx = γ·invstd/N · (N·g' - Σg' - x̂·Σg'x̂), with x̂·Σg'x̂ written as
	// (x-mean)·invstd·Σg'x̂.
	bnDx(dx, g, x, out, mean, k, float32(n), float32(sg), float32(sgx)*invstd, relu, acc)
	return sgx, sg
}

// bnKernel is a batchnorm alone, over channels of [C, H, W] (CNHW blocks)
// or features of a vector.
type bnKernel struct {
	st     *bnState
	folded bool      // folded into the conv before it for evaluation
	sums   []float64 // per-feature sums of the vector case
}

func (k *bnKernel) spec() kspec {
	return kspec{saveIn: []bool{true}, aux: []bsize{{fixed: 2 * k.st.c}}}
}

func (k *bnKernel) forward(e *env) {
	l := e.u.out
	x, y := e.in[0], e.out
	n := e.n
	st := k.st
	if !e.train {
		if k.folded {
			copy(y[:n*l.size()], x)
			return
		}
		if l.spatial {
			m := n * l.s()
			e.m.pool.forRange(l.c, 1, func(lo, hi int) {
				for c := lo; c < hi; c++ {
					a, b := st.evalAffine(c)
					affineAct(actNone, y[c*m:(c+1)*m], x[c*m:(c+1)*m], float32(a), float32(b))
				}
			})
			return
		}
		f := l.c
		for i := 0; i < n; i++ {
			for c := 0; c < f; c++ {
				a, b := st.evalAffine(c)
				y[i*f+c] = float32(a)*x[i*f+c] + float32(b)
			}
		}
		return
	}
	stats := e.aux[0]
	if l.spatial {
		m := n * l.s()
		e.m.pool.forRange(l.c, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				xs := x[c*m : (c+1)*m]
				mean, v := meanVar(xs)
				invstd := 1 / math.Sqrt(v+st.eps)
				stats[c], stats[st.c+c] = float32(mean), float32(invstd)
				if !e.recompute {
					st.record(c, mean, v, m)
				}
				a := float32(float64(st.gamma.data[c]) * invstd)
				affineAct(actNone, y[c*m:(c+1)*m], xs, a, st.beta.data[c]-a*float32(mean))
			}
		})
		if !e.recompute {
			st.markPending()
		}
		return
	}
	f := l.c
	if len(k.sums) != 2*f {
		k.sums = make([]float64, 2*f)
	}
	mean, sq := k.sums[:f], k.sums[f:]
	clear(k.sums)
	for i := 0; i < n; i++ {
		row := x[i*f : (i+1)*f]
		for c, v := range row {
			mean[c] += float64(v)
		}
	}
	for c := range mean {
		mean[c] /= float64(n)
	}
	for i := 0; i < n; i++ {
		row := x[i*f : (i+1)*f]
		for c, v := range row {
			d := float64(v) - mean[c]
			sq[c] += d * d
		}
	}
	for c := 0; c < f; c++ {
		v := sq[c] / float64(n)
		invstd := 1 / math.Sqrt(v+st.eps)
		stats[c], stats[f+c] = float32(mean[c]), float32(invstd)
		if !e.recompute {
			st.record(c, mean[c], v, n)
		}
	}
	if !e.recompute {
		st.markPending()
	}
	for i := 0; i < n; i++ {
		for c := 0; c < f; c++ {
			a := st.gamma.data[c] * stats[f+c]
			y[i*f+c] = a*(x[i*f+c]-stats[c]) + st.beta.data[c]
		}
	}
}

func (k *bnKernel) backward(e *env) {
	l := e.u.out
	x, g, stats := e.in[0], e.dout, e.aux[0]
	n := e.n
	st := k.st
	dx := e.din[0]
	if l.spatial {
		m := n * l.s()
		e.m.pool.forRange(l.c, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				gc := g[c*m : (c+1)*m]
				dst := gc
				if dx != nil {
					dst = dx[c*m : (c+1)*m]
				}
				dgam, dbet := bnBackwardBlock(actNone, gc, x[c*m:(c+1)*m], nil, dst, stats[c], stats[st.c+c], st.gamma.data[c], st.beta.data[c], dx != nil && e.acc[0])
				st.gamma.grad[c] += float32(dgam)
				st.beta.grad[c] += float32(dbet)
			}
		})
		return
	}
	f := l.c
	for c := 0; c < f; c++ {
		mean, invstd, gamma := stats[c], stats[f+c], st.gamma.data[c]
		var sg, sgx float64
		for i := 0; i < n; i++ {
			v := g[i*f+c]
			sg += float64(v)
			sgx += float64(v * (x[i*f+c] - mean) * invstd)
		}
		st.gamma.grad[c] += float32(sgx)
		st.beta.grad[c] += float32(sg)
		if dx == nil {
			continue
		}
		kk := gamma * invstd / float32(n)
		for i := 0; i < n; i++ {
			xh := (x[i*f+c] - mean) * invstd
			d := kk * (float32(n)*g[i*f+c] - float32(sg) - xh*float32(sgx))
			if e.acc[0] {
				dx[i*f+c] += d
			} else {
				dx[i*f+c] = d
			}
		}
	}
}

// lnKernel is layer normalisation over the features of a vector.
type lnKernel struct {
	f, rows     int // features, and rows per sample (tokens; 1 for a vector)
	eps         float64
	gamma, beta *param
}

func (k *lnKernel) spec() kspec {
	return kspec{saveIn: []bool{true}, aux: []bsize{{perSample: 2 * k.rows}}}
}

func (k *lnKernel) forward(e *env) {
	f := k.f
	x, y, st := e.in[0], e.out, e.aux[0]
	e.m.pool.forRange(e.n*k.rows, 8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row := x[i*f : (i+1)*f]
			mean, v := meanVar(row)
			invstd := 1 / math.Sqrt(v+k.eps)
			st[2*i], st[2*i+1] = float32(mean), float32(invstd)
			out := y[i*f : (i+1)*f]
			for c, xv := range row {
				out[c] = k.gamma.data[c]*(xv-float32(mean))*float32(invstd) + k.beta.data[c]
			}
		}
	})
}

func (k *lnKernel) backward(e *env) {
	f := k.f
	x, g, st := e.in[0], e.dout, e.aux[0]
	dx := e.din[0]
	for i := 0; i < e.n*k.rows; i++ {
		mean, invstd := st[2*i], st[2*i+1]
		row, gr := x[i*f:(i+1)*f], g[i*f:(i+1)*f]
		var s1, s2 float64
		for c, v := range gr {
			xh := (row[c] - mean) * invstd
			k.gamma.grad[c] += v * xh
			k.beta.grad[c] += v
			gg := v * k.gamma.data[c]
			s1 += float64(gg)
			s2 += float64(gg * xh)
		}
		if dx == nil {
			continue
		}
		d := dx[i*f : (i+1)*f]
		m1, m2 := float32(s1/float64(f)), float32(s2/float64(f))
		for c, v := range gr {
			xh := (row[c] - mean) * invstd
			val := invstd * (v*k.gamma.data[c] - m1 - xh*m2)
			if e.acc[0] {
				d[c] += val
			} else {
				d[c] = val
			}
		}
	}
}

func init() {
	registerKernel("batchnorm", opKernel{build: buildBatchnorm})
	registerKernel("layernorm", opKernel{build: buildLayernorm, tokens: true})
}

func buildBatchnorm(m *model, u *unit, _ tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	return &bnKernel{st: m.newBN(first.Name, u.out.c, eps(a.Eps), a.Momentum)}, nil
}

func buildLayernorm(m *model, u *unit, _ tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	if u.out.spatial {
		return nil, unsupported(first, "over [C, H, W] normalises the last axis only; the cpu backend runs layernorm on vectors")
	}
	f := int64(u.out.c)
	return &lnKernel{f: u.out.c, rows: u.out.rows(), eps: eps(a.Eps),
		gamma: m.newParam(first.Name+".weight", []int64{f}),
		beta:  m.newParam(first.Name+".bias", []int64{f})}, nil
}
