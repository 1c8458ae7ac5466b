package native

import (
	"fmt"
	"math"

	"pipe/engine"
)

// optimizer is torch.optim's SGD (dampening 0), Adam and AdamW, computed
// in float32 over the flat parameter arrays, the workers splitting them
// into fixed ranges.
type optimizer struct {
	kind        string
	momentum    float32
	nesterov    bool
	wd          float32
	b1, b2, eps float64
}

func newOptimizer(o engine.Optimizer) (optimizer, int, error) {
	op := optimizer{kind: o.Kind, momentum: float32(o.Momentum), nesterov: o.Nesterov, wd: float32(o.WeightDecay),
		b1: o.Beta1, b2: o.Beta2, eps: o.Eps}
	if op.b1 == 0 {
		op.b1 = 0.9
	}
	if op.b2 == 0 {
		op.b2 = 0.999
	}
	if op.eps == 0 {
		op.eps = 1e-8
	}
	switch o.Kind {
	case "sgd":
		if o.Nesterov && o.Momentum <= 0 {
			return op, 0, fmt.Errorf("%w: nesterov needs a momentum greater than 0", engine.ErrUnsupported)
		}
		if o.Momentum > 0 {
			return op, 1, nil
		}
		return op, 0, nil
	case "adam", "adamw":
		return op, 2, nil
	}
	return op, 0, fmt.Errorf("%w: optimizer %q (the cpu backend has sgd, adam and adamw)", engine.ErrUnsupported, o.Kind)
}

// Step implements engine.Model.
func (m *model) Step(lr float64) (err error) {
	defer recoverErr(&err)
	if err := m.usable(); err != nil {
		return err
	}
	if !allFinite(m.flat.grads) {
		e := &engine.NonFiniteError{Step: m.step, MicroStep: m.microStep}
		for _, p := range m.params {
			if !finite(p.grad) {
				e.Param = "the gradient of " + p.name
				break
			}
		}
		return e
	}
	m.step++
	m.version++
	o := &m.opt
	f := &m.flat
	lr32 := float32(lr)
	wd := o.wd
	switch o.kind {
	case "sgd":
		mo := o.momentum
		m.pool.forRange(len(f.params), grain, func(lo, hi int) {
			p, g := f.params[lo:hi], f.grads[lo:hi]
			var buf []float32
			if mo != 0 {
				buf = f.m1[lo:hi]
			}
			for i := range p {
				d := g[i]
				if wd != 0 {
					d += wd * p[i]
				}
				if mo != 0 {
					buf[i] = mo*buf[i] + d
					if o.nesterov {
						d += mo * buf[i]
					} else {
						d = buf[i]
					}
				}
				p[i] -= lr32 * d
			}
		})
	case "adam", "adamw":
		t := float64(m.step)
		k := adamConsts{b1: float32(o.b1), c1: float32(1 - o.b1), b2: float32(o.b2), c2: float32(1 - o.b2),
			bc2: float32(math.Sqrt(1 - math.Pow(o.b2, t))), eps: float32(o.eps),
			step: float32(lr / (1 - math.Pow(o.b1, t))), keep: 1}
		if o.kind == "adamw" {
			k.keep = 1 - lr32*wd
		} else {
			k.wd = wd
		}
		m.pool.forRange(len(f.params), grain, func(lo, hi int) {
			p, g := f.params[lo:hi], f.grads[lo:hi]
			m1, m2 := f.m1[lo:hi], f.m2[lo:hi]
			i := adamVec(p, g, m1, m2, &k)
			adamGo(p[i:], g[i:], m1[i:], m2[i:], &k)
		})
	}
	return nil
}

// adamConsts are one Adam step's constants (the vector kernel reads them
// by offset: keep the field order).
type adamConsts struct {
	b1, c1, b2, c2 float32
	bc2            float32 // √(1-β2^t)
	eps            float32
	step           float32 // lr/(1-β1^t)
	wd             float32 // L2 term (adam)
	keep           float32 // 1 - lr·wd (adamw), else 1
}

// adamGo is torch.optim.Adam's and AdamW's update (its single-tensor
// path, in the same order of operations), one value at a time.
func adamGo(p, g, m1, m2 []float32, k *adamConsts) {
	n := len(p)
	g, m1, m2 = g[:n], m1[:n], m2[:n]
	for i := range p {
		d := g[i] + k.wd*p[i]
		p[i] *= k.keep
		a := k.b1*m1[i] + k.c1*d
		v := k.b2*m2[i] + k.c2*d*d
		m1[i], m2[i] = a, v
		den := float32(math.Sqrt(float64(v)))/k.bc2 + k.eps
		p[i] -= k.step * (a / den)
	}
}

// allFinite reports whether x holds no NaN or infinity. The sum of
// squares (OpenBLAS's vectorised dot product) is NaN or infinite when one
// is; only then, since large finite values can overflow it too, is x
// scanned value by value.
func allFinite(x []float32) bool {
	if len(x) == 0 {
		return true
	}
	if s := blasImpl.Sdot(len(x), x, 1, x, 1); s-s == 0 {
		return true
	}
	return finite(x)
}

// ZeroGrad implements engine.Model.
func (m *model) ZeroGrad() {
	m.pool.forRange(len(m.flat.grads), grain, func(lo, hi int) { clear(m.flat.grads[lo:hi]) })
}

// ClipGradNorm implements engine.Model: torch.nn.utils.clip_grad_norm_ with
// the L2 norm.
func (m *model) ClipGradNorm(max float64) (norm float64, err error) {
	defer recoverErr(&err)
	g := m.flat.grads
	part := make([]float64, m.pool.n)
	m.pool.run(func(wk int) {
		lo, hi := m.pool.span(len(g), wk)
		var s float64
		for _, v := range g[lo:hi] {
			s += float64(v) * float64(v)
		}
		part[wk] = s
	})
	var s float64
	for _, v := range part {
		s += v
	}
	norm = math.Sqrt(s)
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		e := &engine.NonFiniteError{Step: m.step, MicroStep: m.microStep}
		for _, p := range m.params {
			if !finite(p.grad) {
				e.Param = "the gradient of " + p.name
				break
			}
		}
		return norm, e
	}
	if coef := max / (norm + 1e-6); coef < 1 {
		c := float32(coef)
		m.pool.forRange(len(g), grain, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				g[i] *= c
			}
		})
	}
	return norm, nil
}
