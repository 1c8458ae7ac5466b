package native

// dropPathKernel is stochastic depth (torchvision's StochasticDepth,
// mode "row"): in training each sample is kept whole with probability
// 1-p and scaled by 1/(1-p), or zeroed whole; in evaluation it is the
// identity. Like dropout it keeps nothing: the keep draw of sample i is
// a hash of the seed, the node, the micro-step and i, drawn again in
// backward. PyTorch draws from its own generator, so the engines agree
// only in evaluation or at p 0.
type dropPathKernel struct {
	p    float64
	node uint64
}

func (k *dropPathKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

// scales returns each sample's factor, 0 or 1/(1-p).
func (k *dropPathKernel) scales(m *model, n int) []float32 {
	key := splitmix(splitmix(m.seed^splitmix(k.node)) ^ splitmix(uint64(m.microStep)))
	th, sc := uint64(k.p*(1<<24)), float32(1/(1-k.p))
	f := make([]float32, n)
	for i := range f {
		if splitmix(key+uint64(i))>>40 >= th {
			f[i] = sc
		}
	}
	return f
}

// apply sets dst = src·f[sample], or adds it to dst with acc. A sample's
// values are the planes c·n+i of an image or a volume (CNHW), and the
// row i of a vector.
func (k *dropPathKernel) apply(e *env, dst, src []float32, acc bool) {
	l, n := e.u.out, e.n
	f := k.scales(e.m, n)
	s, rows := l.s(), l.c*n
	if !l.spatial {
		s, rows = l.size(), n
	}
	e.m.pool.forRange(rows, max(1, grain/s), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			v := f[r%n]
			if !l.spatial {
				v = f[r]
			}
			d, x := dst[r*s:(r+1)*s], src[r*s:(r+1)*s]
			for j, xv := range x {
				if acc {
					d[j] += xv * v
				} else {
					d[j] = xv * v
				}
			}
		}
	})
}

func (k *dropPathKernel) forward(e *env) {
	sz := e.n * e.u.out.size()
	if !e.train || k.p == 0 {
		copy(e.out[:sz], e.in[0][:sz])
		return
	}
	k.apply(e, e.out, e.in[0], false)
}

func (k *dropPathKernel) backward(e *env) {
	dx := e.din[0]
	if dx == nil {
		return
	}
	sz := e.n * e.u.out.size()
	if k.p == 0 {
		put(dx[:sz], e.dout[:sz], e.acc[0])
		return
	}
	k.apply(e, dx, e.dout, e.acc[0])
}

func init() {
	registerKernel("drop_path", opKernel{build: func(_ *model, u *unit, _ tail) (kernel, error) {
		first := u.nodes[0]
		if !u.out.spatial && len(first.Out) != 1 {
			return nil, unsupported(first, "on tokens [T, D] is not implemented by the cpu backend")
		}
		return &dropPathKernel{p: first.Args.P, node: uint64(first.ID) + 1}, nil
	}})
}
