package native

import (
	"pipe/stdlib"
)

// seKernel is squeeze-and-excitation (torchvision's SqueezeExcitation
// with a SiLU): per sample, the mean p of each channel's plane, z1 =
// W1·p + b1 (S values), a1 = silu(z1), g = σ(W2·a1 + b2) (C values), and
// y = x·g per channel. In the CNHW layout a channel c of sample i is the
// plane c·n+i. It keeps its input and, in aux, each sample's p, z1, a1
// and g (2C + 2S values), as stdlib's rule counts them.
type seKernel struct {
	c, s           int
	w1, b1, w2, b2 *param
}

func (m *model) seKernel(n *stdlib.Node, in layout) (kernel, error) {
	if !in.spatial || len(n.Out) != 3 {
		return nil, unsupported(n, "needs [C, H, W]")
	}
	c, s := int64(in.c), n.Args.Channels
	if s < 1 {
		return nil, unsupported(n, "needs at least 1 squeeze channel")
	}
	return &seKernel{c: in.c, s: int(s),
		w1: m.newParam(n.Name+".fc1.weight", []int64{s, c, 1, 1}),
		b1: m.newParam(n.Name+".fc1.bias", []int64{s}),
		w2: m.newParam(n.Name+".fc2.weight", []int64{c, s, 1, 1}),
		b2: m.newParam(n.Name+".fc2.bias", []int64{c})}, nil
}

// per is the aux values of one sample: p [C], z1 [S], a1 [S], g [C].
func (k *seKernel) per() int { return 2*k.c + 2*k.s }

func (k *seKernel) spec() kspec {
	return kspec{saveIn: []bool{true}, aux: []bsize{{perSample: k.per()}},
		tmpB: []bsize{{perSample: 2*k.c + k.s}}}
}

func (k *seKernel) forward(e *env) {
	s, n, c, sq, per := e.u.out.s(), e.n, k.c, k.s, k.per()
	x, y, st := e.in[0], e.out, e.aux[0]
	e.m.pool.forRange(c*n, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			ch, i := pl/n, pl%n
			st[i*per+ch] = float32(sum64(x[pl*s:(pl+1)*s]) / float64(s))
		}
	})
	e.m.pool.forRange(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v := st[i*per : (i+1)*per]
			p, z1, a1, g := v[:c], v[c:c+sq], v[c+sq:c+2*sq], v[c+2*sq:]
			for j := range z1 {
				w := k.w1.data[j*c : (j+1)*c]
				acc := float64(k.b1.data[j])
				for ch, pv := range p {
					acc += float64(w[ch]) * float64(pv)
				}
				z1[j] = float32(acc)
			}
			applyAct(actSiLU, a1, z1)
			for ch := range g {
				w := k.w2.data[ch*sq : (ch+1)*sq]
				acc := float64(k.b2.data[ch])
				for j, av := range a1 {
					acc += float64(w[j]) * float64(av)
				}
				g[ch] = sigmoid32(float32(acc))
			}
		}
	})
	e.m.pool.forRange(c*n, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			ch, i := pl/n, pl%n
			gv := st[i*per+c+2*sq+ch]
			out := y[pl*s : (pl+1)*s]
			for j, xv := range x[pl*s : (pl+1)*s] {
				out[j] = xv * gv
			}
		}
	})
}

// backward: with dy the output's gradient, dg = Σ dy·x over a plane and
// dz2 = dg·g(1-g); da1 = W2ᵀ·dz2, dz1 = da1·silu'(z1), dp = W1ᵀ·dz1; dx
// = dy·g + dp/(H·W). The weights' gradients are dz2⊗a1 and dz1⊗p summed
// over the samples. tmp holds each sample's dz2 [C], dz1 [S] and dp [C].
func (k *seKernel) backward(e *env) {
	s, n, c, sq, per := e.u.out.s(), e.n, k.c, k.s, k.per()
	x, dy, st, t, dx := e.in[0], e.dout, e.aux[0], e.tmp[0], e.din[0]
	acc := len(e.acc) > 0 && e.acc[0]
	tp := 2*c + sq
	e.m.pool.forRange(c*n, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			ch, i := pl/n, pl%n
			var dg float64
			gr := dy[pl*s : (pl+1)*s]
			for j, xv := range x[pl*s : (pl+1)*s] {
				dg += float64(gr[j]) * float64(xv)
			}
			gv := float64(st[i*per+c+2*sq+ch])
			t[i*tp+ch] = float32(dg * gv * (1 - gv))
		}
	})
	e.m.pool.forRange(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v, w := st[i*per:(i+1)*per], t[i*tp:(i+1)*tp]
			z1 := v[c : c+sq]
			dz2, dz1, dp := w[:c], w[c:c+sq], w[c+sq:]
			for j := range dz1 {
				var a float64
				for ch, d := range dz2 {
					a += float64(k.w2.data[ch*sq+j]) * float64(d)
				}
				dz1[j] = float32(a) * actDeriv(actSiLU, z1[j], 0)
			}
			for ch := range dp {
				var a float64
				for j, d := range dz1 {
					a += float64(k.w1.data[j*c+ch]) * float64(d)
				}
				dp[ch] = float32(a / float64(s))
			}
		}
	})
	// One task per channel owns fc2's row ch, fc1's column ch and their
	// biases' entries ch (fc1's bias goes to the tasks of the first S
	// channels, row j to channel j mod C).
	e.m.pool.forRange(c, 1, func(lo, hi int) {
		for ch := lo; ch < hi; ch++ {
			var db2 float64
			for i := 0; i < n; i++ {
				v, w := st[i*per:(i+1)*per], t[i*tp:(i+1)*tp]
				p, a1, dz2, dz1 := v[:c], v[c+sq:c+2*sq], w[:c], w[c:c+sq]
				d := dz2[ch]
				db2 += float64(d)
				row := k.w2.grad[ch*sq : (ch+1)*sq]
				for j, av := range a1 {
					row[j] += d * av
				}
				for j, dv := range dz1 {
					k.w1.grad[j*c+ch] += dv * p[ch]
				}
			}
			k.b2.grad[ch] += float32(db2)
			for j := ch; j < sq; j += c {
				var db1 float64
				for i := 0; i < n; i++ {
					db1 += float64(t[i*tp+c+j])
				}
				k.b1.grad[j] += float32(db1)
			}
		}
	})
	if dx == nil {
		return
	}
	e.m.pool.forRange(c*n, 1, func(lo, hi int) {
		for pl := lo; pl < hi; pl++ {
			ch, i := pl/n, pl%n
			gv, dpv := st[i*per+c+2*sq+ch], t[i*tp+c+sq+ch]
			gr, d := dy[pl*s:(pl+1)*s], dx[pl*s:(pl+1)*s]
			if acc {
				for j, v := range gr {
					d[j] += v*gv + dpv
				}
			} else {
				for j, v := range gr {
					d[j] = v*gv + dpv
				}
			}
		}
	})
}

func init() {
	registerKernel("se", opKernel{build: func(m *model, u *unit, _ tail) (kernel, error) {
		return m.seKernel(u.nodes[0], u.in0())
	}})
}
