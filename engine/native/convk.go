package native

import (
	"math"
)

// convKernel is a convolution with its optional bias, and, when the plan
// fuses them, the batchnorm and the activation after it: one kernel that
// writes the conv's output once, reduces it per channel, and normalises
// and activates in a single pass. It keeps the conv's input, the conv's
// output before normalisation (fused batchnorm only), the per-channel
// statistics, and its own output where the activation's derivative reads
// it; the tensor between batchnorm and activation is never stored.
//
// In evaluation, a fused or folded batchnorm becomes the conv's weights:
// W' = W·γ/√(var+ε), b' = (b-mean)·γ/√(var+ε) + β.
type convKernel struct {
	geo  convGeom
	w, b *param
	bn   *bnState // fused batchnorm, nil when none
	act  actKind
	// fold is the batchnorm folded into the weights for evaluation: bn
	// itself, or a separate batchnorm unit's state (Config.Folds).
	fold    *bnState
	wf, bf  []float32
	foldVer int64
	wt      []float32 // flipped weights for the input gradient (geo.flip)
	vol     *volGeom  // a 3-D convolution (conv3d.go); geo is then its flat view
}

// fwd, bwdW and bwdD are the convolution's three products, 2-D or 3-D.
func (k *convKernel) fwd(m *model, w, x, y []float32, n int) {
	if k.vol != nil {
		m.conv3Forward(k.vol, w, x, y, n, 0)
		return
	}
	m.convForward(&k.geo, w, x, y, n)
}

func (k *convKernel) bwdW(m *model, dy, x, dw []float32, n int) {
	if k.vol != nil {
		m.conv3BackwardWeight(k.vol, dy, x, dw, n)
		return
	}
	m.convBackwardWeight(&k.geo, dy, x, dw, n)
}

func (k *convKernel) spec() kspec {
	sp := kspec{saveIn: []bool{true}, saveOut: k.act.fromOut()}
	per := k.geo.co * k.geo.ho * k.geo.wo
	if k.bn != nil {
		sp.aux = []bsize{{perSample: per}, {fixed: 2 * k.geo.co}}
	} else if k.act.fromIn() {
		sp.aux = []bsize{{perSample: per}}
	}
	return sp
}

// preact returns the tensor before the fused batchnorm or activation when
// the kernel keeps one, for the non-finite check.
func (k *convKernel) preact(e *env) []float32 {
	if k.bn != nil || k.act.fromIn() {
		return e.aux[0][:e.n*k.geo.co*k.geo.ho*k.geo.wo]
	}
	return nil
}

func (k *convKernel) bias(c int) float32 {
	if k.b == nil {
		return 0
	}
	return k.b.data[c]
}

func (k *convKernel) forward(e *env) {
	g := &k.geo
	n := e.n
	m := n * g.ho * g.wo
	x, out := e.in[0], e.out
	if !e.train {
		if k.fold != nil {
			k.refold(e.m)
			k.fwd(e.m, k.wf, x, out, n)
			e.m.pool.forRange(g.co, 1, func(lo, hi int) {
				for c := lo; c < hi; c++ {
					affineAct(k.act, out[c*m:(c+1)*m], out[c*m:(c+1)*m], 1, k.bf[c])
				}
			})
			return
		}
		k.fwd(e.m, k.w.data, x, out, n)
		e.m.pool.forRange(g.co, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				a, b := float32(1), k.bias(c)
				if k.bn != nil {
					s, t := k.bn.evalAffine(c)
					a, b = float32(s), float32(s)*b+float32(t)
				}
				affineAct(k.act, out[c*m:(c+1)*m], out[c*m:(c+1)*m], a, b)
			}
		})
		return
	}
	if k.bn != nil {
		y, stats := e.aux[0], e.aux[1]
		bn := k.bn
		k.fwd(e.m, k.w.data, x, y, n)
		e.m.pool.forRange(g.co, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				yc := y[c*m : (c+1)*m]
				mean, v := meanVar(yc)
				invstd := 1 / math.Sqrt(v+bn.eps)
				stats[c], stats[g.co+c] = float32(mean), float32(invstd)
				if !e.recompute {
					// The conv's bias shifts the mean and nothing else.
					bn.record(c, mean+float64(k.bias(c)), v, m)
				}
				a := float32(float64(bn.gamma.data[c]) * invstd)
				affineAct(k.act, out[c*m:(c+1)*m], yc, a, bn.beta.data[c]-a*float32(mean))
			}
		})
		if !e.recompute {
			bn.markPending()
		}
		return
	}
	z := out
	if k.act.fromIn() {
		z = e.aux[0]
	}
	k.fwd(e.m, k.w.data, x, z, n)
	e.m.pool.forRange(g.co, 1, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			zc := z[c*m : (c+1)*m]
			if b := k.bias(c); b != 0 {
				for i := range zc {
					zc[i] += b
				}
			}
			if k.act != actNone {
				applyAct(k.act, out[c*m:(c+1)*m], zc)
			}
		}
	})
}

func (k *convKernel) backward(e *env) {
	g := &k.geo
	n := e.n
	m := n * g.ho * g.wo
	dy := e.dout
	if k.bn != nil {
		y, stats := e.aux[0], e.aux[1]
		bn := k.bn
		e.m.pool.forRange(g.co, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				var out []float32
				if k.act.fromOut() {
					out = e.out[c*m : (c+1)*m]
				}
				gc := dy[c*m : (c+1)*m]
				dgam, dbet := bnBackwardBlock(k.act, gc, y[c*m:(c+1)*m], out, gc, stats[c], stats[g.co+c], bn.gamma.data[c], bn.beta.data[c], false)
				bn.gamma.grad[c] += float32(dgam)
				bn.beta.grad[c] += float32(dbet)
				if k.b != nil {
					k.b.grad[c] += float32(sum64(gc))
				}
			}
		})
	} else {
		e.m.pool.forRange(g.co, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				gc := dy[c*m : (c+1)*m]
				switch {
				case k.act.fromIn():
					actBackward(k.act, gc, e.aux[0][c*m:(c+1)*m], nil)
				case k.act != actNone:
					actBackward(k.act, gc, nil, e.out[c*m:(c+1)*m])
				}
				if k.b != nil {
					k.b.grad[c] += float32(sum64(gc))
				}
			}
		})
	}
	k.bwdW(e.m, dy, e.in[0], k.w.grad, n)
	if e.din[0] != nil {
		if g.flip != nil {
			if k.wt == nil {
				k.wt = make([]float32, len(k.w.data))
			}
			e.m.flipWeights(g, k.w.data, k.wt)
			var beta float32
			if e.acc[0] {
				beta = 1
			}
			e.m.convForwardBeta(g.flip, k.wt, dy, e.din[0], n, beta)
			return
		}
		if k.vol != nil {
			e.m.conv3BackwardData(k.vol, k.w.data, dy, e.din[0], n, e.acc[0])
			return
		}
		e.m.convBackwardData(g, k.w.data, dy, e.din[0], n, e.acc[0])
	}
}

// refold recomputes the folded weights when the parameters changed.
func (k *convKernel) refold(m *model) {
	if k.wf != nil && k.foldVer == m.version {
		return
	}
	g := &k.geo
	if k.wf == nil {
		k.wf = make([]float32, len(k.w.data))
		k.bf = make([]float32, g.co)
	}
	per := len(k.w.data) / g.co
	for c := 0; c < g.co; c++ {
		s, t := k.fold.evalAffine(c)
		for i := c * per; i < (c+1)*per; i++ {
			k.wf[i] = float32(float64(k.w.data[i]) * s)
		}
		k.bf[c] = float32(float64(k.bias(c))*s + t)
	}
	k.foldVer = m.version
}

// convTKernel is a transposed convolution, weight [in, out/groups, k, k]
// as PyTorch stores it. Its forward is the input-gradient of the
// convolution eq that maps its output back to its input, with the same
// weights; its input-gradient is eq's forward, and its weight-gradient is
// eq's with the roles of input and output-gradient swapped.
type convTKernel struct {
	eq   convGeom // the convolution from this op's output to its input
	w, b *param
	vol  *volGeom // eq of a 3-D transposed convolution; eq is then its flat view
}

func (k *convTKernel) spec() kspec {
	// The temporary holds the input gradient when it must be added.
	return kspec{saveIn: []bool{true}, tmpB: []bsize{{perSample: k.eq.co * k.eq.ho * k.eq.wo}}}
}

func (k *convTKernel) forward(e *env) {
	q := &k.eq
	n := e.n
	y := e.out
	m := n * q.h * q.w
	if k.vol != nil {
		e.m.conv3BackwardData(k.vol, k.w.data, e.in[0], y, n, false)
	} else {
		e.m.convBackwardData(q, k.w.data, e.in[0], y, n, false)
	}
	if k.b != nil {
		e.m.pool.forRange(q.ci, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				b := k.b.data[c]
				yc := y[c*m : (c+1)*m]
				for i := range yc {
					yc[i] += b
				}
			}
		})
	}
}

func (k *convTKernel) backward(e *env) {
	q := &k.eq
	n := e.n
	dy := e.dout
	m := n * q.h * q.w
	if k.b != nil {
		e.m.pool.forRange(q.ci, 1, func(lo, hi int) {
			for c := lo; c < hi; c++ {
				k.b.grad[c] += float32(sum64(dy[c*m : (c+1)*m]))
			}
		})
	}
	// dW[in][out·k·k] += x · im2col(dY)ᵀ: eq's weight gradient with the
	// input x in the role of eq's output gradient.
	fwd := func(dst []float32) { e.m.convForward(q, k.w.data, dy, dst, n) }
	if k.vol != nil {
		e.m.conv3BackwardWeight(k.vol, e.in[0], dy, k.w.grad, n)
		fwd = func(dst []float32) { e.m.conv3Forward(k.vol, k.w.data, dy, dst, n, 0) }
	} else {
		e.m.convBackwardWeight(q, e.in[0], dy, k.w.grad, n)
	}
	if e.din[0] != nil {
		if e.acc[0] {
			// eq's forward overwrites; add through a temporary.
			t := e.tmp[0]
			fwd(t)
			sz := n * q.co * q.ho * q.wo
			e.m.pool.forRange(sz, grain, func(lo, hi int) { addTo(e.din[0][lo:hi], t[lo:hi]) })
			return
		}
		fwd(e.din[0])
	}
}

func init() {
	registerKernel("conv", opKernel{build: buildConv, fuses: true})
	registerKernel("convtranspose", opKernel{build: buildConvT, fuses: true})
}

// buildConv is a conv's kernel, with the fused batchnorm and activation
// (or a batchnorm folded into it for evaluation); over a volume, conv3d's.
func buildConv(m *model, u *unit, t tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	in, out := u.in0(), u.out
	if !in.spatial {
		return nil, unsupported(first, "needs [C, H, W]")
	}
	if in.vol() {
		return m.conv3Kernel(first, t.bn, in, out, t.act)
	}
	geo := convGeomOf(in, out, a)
	k := &convKernel{geo: geo, act: t.act}
	k.w = m.newParam(first.Name+".weight", []int64{int64(out.c), int64(geo.cig), a.Kernel, a.Kernel})
	if a.Bias {
		k.b = m.newParam(first.Name+".bias", []int64{int64(out.c)})
	}
	if t.bn != nil {
		k.bn = m.newBN(t.bn.Name, out.c, eps(t.bn.Args.Eps), t.bn.Args.Momentum)
		for _, f := range m.cfg.Folds {
			if f[0] == first.Name && f[1] == t.bn.Name {
				k.fold = k.bn
			}
		}
	}
	return k, nil
}

// buildConvT is a convtranspose's kernel, which runs unfused.
func buildConvT(m *model, u *unit, t tail) (kernel, error) {
	first, a := u.nodes[0], u.nodes[0].Args
	in, out := u.in0(), u.out
	if !in.spatial || t.act != actNone || t.bn != nil {
		return nil, unsupported(first, "needs [C, H, W] and runs unfused")
	}
	if in.vol() {
		return m.convT3Kernel(first, in, out), nil
	}
	grp := int(max(a.Groups, 1))
	eq := convGeomOf(out, in, a)
	k := &convTKernel{eq: eq}
	k.w = m.newParam(first.Name+".weight", []int64{int64(in.c), int64(out.c / grp), a.Kernel, a.Kernel})
	if a.Bias {
		k.b = m.newParam(first.Name+".bias", []int64{int64(out.c)})
	}
	return k, nil
}
