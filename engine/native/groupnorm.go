package native

import (
	"math"

	"pipe/stdlib"
)

// gnKernel is group normalisation (PyTorch's GroupNorm): the channels of
// each sample split into groups of cg = C/groups, each group normalised
// by the mean and variance (biased) of its cg planes, then scaled and
// shifted per channel. In the CNHW layout a group of sample i is the
// planes ch·n+i for its channels ch, each of s contiguous values. It
// keeps its input and, in aux, the mean and inverse deviation of each
// (sample, group), as stdlib's rule counts them.
type gnKernel struct {
	c, groups   int
	eps         float64
	gamma, beta *param
}

// groupnormKernel builds the kernel of a groupnorm node on in.
func (m *model) groupnormKernel(n *stdlib.Node, in layout) (kernel, error) {
	g := int(n.Args.Groups)
	if !in.spatial {
		return nil, unsupported(n, "needs [C, H, W] or [C, D, H, W]")
	}
	if g < 1 || in.c%g != 0 {
		return nil, unsupported(n, "needs groups dividing the channels")
	}
	c := int64(in.c)
	return &gnKernel{c: in.c, groups: g, eps: eps(n.Args.Eps),
		gamma: m.newParam(n.Name+".weight", []int64{c}),
		beta:  m.newParam(n.Name+".bias", []int64{c})}, nil
}

func (k *gnKernel) spec() kspec {
	return kspec{saveIn: []bool{true}, aux: []bsize{{perSample: 2 * k.groups}}}
}

func (k *gnKernel) forward(e *env) {
	s, n, cg := e.u.out.s(), e.n, k.c/k.groups
	x, y, st := e.in[0], e.out, e.aux[0]
	// One task per (sample, group); its planes' means and variances
	// combine into the group's (the planes are of one size): the mean of
	// the means, and the mean of the variances plus the means' spread.
	e.m.pool.forRange(n*k.groups, 1, func(lo, hi int) {
		pm, pv := make([]float64, cg), make([]float64, cg)
		for t := lo; t < hi; t++ {
			i, g := t/k.groups, t%k.groups
			var mean, v float64
			for j := range pm {
				pl := (g*cg+j)*n + i
				pm[j], pv[j] = meanVar(x[pl*s : (pl+1)*s])
				mean += pm[j]
			}
			mean /= float64(cg)
			for j := range pm {
				d := pm[j] - mean
				v += pv[j] + d*d
			}
			v /= float64(cg)
			invstd := 1 / math.Sqrt(v+k.eps)
			st[2*t], st[2*t+1] = float32(mean), float32(invstd)
			for ch := g * cg; ch < (g+1)*cg; ch++ {
				pl := ch*n + i
				a := float32(invstd) * k.gamma.data[ch]
				b := float32(-mean*invstd)*k.gamma.data[ch] + k.beta.data[ch]
				out := y[pl*s : (pl+1)*s]
				for j, xv := range x[pl*s : (pl+1)*s] {
					out[j] = xv*a + b
				}
			}
		}
	})
}

// backward: with x̂ the normalised input and g = γ·dy over a group of m
// values, dx = invstd·(g − mean(g) − x̂·mean(g·x̂)); dγ = Σ dy·x̂ and
// dβ = Σ dy per channel. One task per group, which owns its channels'
// parameter gradients across the samples.
func (k *gnKernel) backward(e *env) {
	s, n, cg := e.u.out.s(), e.n, k.c/k.groups
	x, dy, st, dx := e.in[0], e.dout, e.aux[0], e.din[0]
	acc := len(e.acc) > 0 && e.acc[0]
	m := float64(cg * s)
	e.m.pool.forRange(k.groups, 1, func(lo, hi int) {
		for g := lo; g < hi; g++ {
			dg := make([]float64, cg)
			db := make([]float64, cg)
			for i := 0; i < n; i++ {
				t := i*k.groups + g
				mean, invstd := st[2*t], st[2*t+1]
				var s1, s2 float64 // Σ γ·dy and Σ γ·dy·x̂ over the group
				for ch := g * cg; ch < (g+1)*cg; ch++ {
					pl := ch*n + i
					row, gr := x[pl*s:(pl+1)*s], dy[pl*s:(pl+1)*s]
					var a1, a2 float64
					for j, v := range gr {
						xh := (row[j] - mean) * invstd
						a1 += float64(v)
						a2 += float64(v * xh)
					}
					dg[ch-g*cg] += a2
					db[ch-g*cg] += a1
					gm := float64(k.gamma.data[ch])
					s1 += gm * a1
					s2 += gm * a2
				}
				if dx == nil {
					continue
				}
				m1, m2 := float32(s1/m), float32(s2/m)
				for ch := g * cg; ch < (g+1)*cg; ch++ {
					pl := ch*n + i
					gm := k.gamma.data[ch]
					row, gr, d := x[pl*s:(pl+1)*s], dy[pl*s:(pl+1)*s], dx[pl*s:(pl+1)*s]
					for j, v := range gr {
						xh := (row[j] - mean) * invstd
						val := invstd * (gm*v - m1 - xh*m2)
						if acc {
							d[j] += val
						} else {
							d[j] = val
						}
					}
				}
			}
			for j := range dg {
				k.gamma.grad[g*cg+j] += float32(dg[j])
				k.beta.grad[g*cg+j] += float32(db[j])
			}
		}
	})
}

func init() {
	registerKernel("groupnorm", opKernel{build: func(m *model, u *unit, _ tail) (kernel, error) {
		return m.groupnormKernel(u.nodes[0], u.in0())
	}})
}
