package native

// int8 inference
//
// QuantizeInt8 builds a second model from the same graph and weights whose
// convolutions (2-D, one group) and dense layers run in int8; every other
// op keeps its fp32 kernel, where int8 would buy little beside the cost of
// converting. An int8 layer quantises its input per tensor to bytes,
// multiplies by weights quantised per output channel (batchnorm folded in)
// into int32 (int8_gemm.go), and requantises to fp32 as it stores. The
// activation scales come from running the fp32 model on calibration
// batches (min/max or a percentile of |x|).
//
// Derivation: docs/design/int8-inference.md.

import (
	"fmt"
	"math"
	"strings"

	"pipe/dataset/samples"
	"pipe/engine"
	"pipe/engine/native/internal/cvec"
	"pipe/stdlib"
)

// actQuant quantises an activation to unsigned bytes:
// u = clamp(round(x/scale) + zero, 0, 255).
type actQuant struct {
	scale, inv float32
	zero       int32
	lo, hi     int32 // the range of round(x/scale)
}

func newActQuant(clip float32, signed bool) actQuant {
	q := actQuant{lo: 0, hi: 255}
	steps := float32(255)
	if signed {
		q.zero, q.lo, q.hi, steps = 128, -127, 127, 127
	}
	q.scale = clip / steps
	if !(q.scale > 0) || math.IsInf(float64(q.scale), 0) {
		q.scale = 1
	}
	q.inv = 1 / q.scale
	return q
}

func (q *actQuant) u8(v float32) uint8 {
	return uint8(clampRound(v*q.inv, q.lo, q.hi) + q.zero)
}

// quantRow quantises src into dst as u8 does, in internal/cvec's
// vectorised twin where it is built.
func (q *actQuant) quantRow(dst []uint8, src []float32) {
	if cvec.Built && len(src) >= cMin {
		cvec.QuantU8(dst, src, q.inv, q.lo, q.hi, q.zero)
		return
	}
	q.quantRowGo(dst, src)
}

func (q *actQuant) quantRowGo(dst []uint8, src []float32) {
	for i, v := range src {
		dst[i] = q.u8(v)
	}
}

// qlayer is what the int8 conv and dense kernels share: the packed
// weights and the requantisation.
type qlayer struct {
	fp   kernel // the fp32 kernel it replaced (its spec)
	w    *qweights
	in   actQuant
	mul  []float32 // in.scale · w.scale[o]
	bias []float32 // b'_o
	corr []int32   // in.zero · Σ_k q_ok
	act  actKind
	rows int // output rows per chunk, a multiple of 4
	ws   []qscratch
}

type qscratch struct {
	a []uint8
	c []int32
}

func newQLayer(fp kernel, wq []int8, ws []float32, bias []float32, co, k int, in actQuant, act actKind, workers int) *qlayer {
	l := &qlayer{fp: fp, w: packWeights(wq, ws, co, k), in: in, act: act, bias: bias}
	l.mul = make([]float32, co)
	l.corr = make([]int32, co)
	for o := 0; o < co; o++ {
		l.mul[o] = in.scale * ws[o]
		l.corr[o] = in.zero * l.w.wsum[o]
	}
	// A chunk's rows of A stay within 64 KiB (the core's L2 holds them
	// beside a weight block).
	l.rows = min(256, max(4, (64<<10)/l.w.lda()/4*4))
	l.ws = make([]qscratch, workers)
	for i := range l.ws {
		l.ws[i] = qscratch{a: make([]uint8, l.rows*l.w.lda()), c: make([]int32, l.rows*l.w.cop)}
	}
	return l
}

func (l *qlayer) spec() kspec { return l.fp.spec() }

func (l *qlayer) backward(*env) { panic(engine.ErrInt8Training) }

// chunkRows is the chunk for P rows over the pool's workers: at most
// l.rows, small enough to give every worker some.
func (l *qlayer) chunkRows(p *pool, P int) int {
	per := (P + p.n - 1) / p.n
	return max(4, min(l.rows, (per+3)/4*4))
}

// requantT writes a chunk of rows rows (output pixels p0.. of P) to the
// channel-major output y: y[o·P + p0 + i] for every channel o. Each
// channel's block is written contiguously, reading its int32 sums a row
// of the (L1-resident) tile apart: writing row by row instead strides by
// P floats, a multiple of 4 KiB on the examples' maps, and every channel
// then lands in the same cache set (measured 3× slower). A relu is a
// max, without branches.
func (l *qlayer) requantT(s *qscratch, rows int, y []float32, P, p0 int) {
	cop := l.w.cop
	relu := l.act == actReLU
	done := 0
	if qpath == qVNNI && (relu || l.act == actNone) && rows >= 16 {
		groups := rows / 16
		if len(y) < (l.w.co-1)*P+p0+rows || len(s.c) < rows*cop {
			panic("cpu: int8 requantisation operands too small")
		}
		r := 0
		if relu {
			r = 1
		}
		requantVNNI(&s.c[0], cop, groups, l.w.co, &l.mul[0], &l.bias[0], &l.corr[0], r, &y[p0], P)
		done = groups * 16
	}
	if done == rows {
		return
	}
	if cvec.Built && (relu || l.act == actNone) {
		cvec.RequantT(y[p0+done:], P, s.c[done*cop:], cop, rows-done, l.w.co, l.mul, l.bias, l.corr, relu)
		return
	}
	l.requantGo(s, done, rows, y, P, p0)
}

// requantGo is requantT's loop for rows [r0, r1) of the chunk: internal/cvec's
// RequantT computes the same bits for a relu or no activation. The
// conversions keep the multiply and the add two roundings (Go may fuse
// them otherwise), as in C.
func (l *qlayer) requantGo(s *qscratch, r0, r1 int, y []float32, P, p0 int) {
	cop := l.w.cop
	for o := 0; o < l.w.co; o++ {
		m, b, cr := l.mul[o], l.bias[o], l.corr[o]
		d := y[o*P+p0+r0 : o*P+p0+r1]
		c := s.c[r0*cop+o:]
		if l.act == actReLU {
			for i := range d {
				d[i] = relu32(float32(float32(c[i*cop]-cr)*m) + b)
			}
			continue
		}
		for i := range d {
			d[i] = float32(float32(c[i*cop]-cr)*m) + b
		}
		if l.act != actNone {
			applyAct(l.act, d, d)
		}
	}
}

// qconvKernel is an int8 2-D convolution of one group.
type qconvKernel struct {
	*qlayer
	g  convGeom
	xq []uint8 // the input, quantised, NHWC
	// pool, when set, is the 2×2, stride-2 max-pool that alone reads this
	// convolution: it is taken here, on the int32 sums of each window
	// before requantising (see pooledConv), and the pool's unit copies.
	pool *poolKernel
}

func (k *qconvKernel) forward(e *env) {
	g := &k.g
	n := e.n
	pix := n * g.h * g.w
	x, y := e.in[0], e.out
	if len(k.xq) < pix*g.ci {
		k.xq = make([]uint8, pix*g.ci)
	}
	xq := k.xq[:pix*g.ci]
	e.m.pool.forRange((pix+255)/256, 1, func(lo, hi int) {
		p0, p1 := lo*256, min(pix, hi*256)
		if cvec.Built {
			cvec.QuantNHWC(xq, x, pix, g.ci, p0, p1, k.in.inv, k.in.lo, k.in.hi, k.in.zero)
			return
		}
		k.quantNHWCGo(xq, x, pix, p0, p1)
	})
	P := n * g.ho * g.wo
	if k.pool != nil {
		// A row per pixel of each window, the window's four together.
		P = 4 * n * k.pool.ho * k.pool.wo
	}
	rows := k.chunkRows(e.m.pool, P)
	chunks := (P + rows - 1) / rows
	lda, cop := k.w.lda(), k.w.cop
	e.m.pool.run(func(wk int) {
		c0, c1 := e.m.pool.span(chunks, wk)
		s := &k.ws[wk]
		for ch := c0; ch < c1; ch++ {
			p0 := ch * rows
			r := min(rows, P-p0)
			k.im2row(xq, p0, r, s.a, lda)
			k.w.gemm(s.a, lda, (r+3)&^3, s.c, cop)
			if k.pool != nil {
				maxOf4Rows(s.c, r/4, k.w.co, cop)
				k.requantT(s, r/4, y, P/4, p0/4)
				continue
			}
			k.requantT(s, r, y, P, p0)
		}
	})
}

// pixel is the output pixel (image, row, column) that row p of the
// product computes: p itself in row-major order, or with a pool the
// (p mod 4)th pixel of pooled pixel p/4's window.
func (k *qconvKernel) pixel(p int) (nn, oh, ow int) {
	if q := k.pool; q != nil {
		j, d := p>>2, p&3
		phw := q.ho * q.wo
		nn = j / phw
		r := j - nn*phw
		ph := r / q.wo
		return nn, 2*ph + d>>1, 2*(r-ph*q.wo) + d&1
	}
	howo := k.g.ho * k.g.wo
	nn = p / howo
	r := p - nn*howo
	oh = r / k.g.wo
	return nn, oh, r - oh*k.g.wo
}

// maxOf4Rows replaces rows [0, m) of c (co sums each, ldc apart) by the
// maxima of rows 4i..4i+3, channel by channel (C where built: the Go loop
// is not vectorised and took 8% of an int8 pass).
func maxOf4Rows(c []int32, m, co, ldc int) {
	if cvec.Built {
		cvec.MaxOf4Rows(c, m, co, ldc)
		return
	}
	maxOf4RowsGo(c, m, co, ldc)
}

func maxOf4RowsGo(c []int32, m, co, ldc int) {
	for i := 0; i < m; i++ {
		d := c[i*ldc : i*ldc+co]
		r0, r1, r2, r3 := c[4*i*ldc:], c[(4*i+1)*ldc:], c[(4*i+2)*ldc:], c[(4*i+3)*ldc:]
		for o := range d {
			d[o] = max(r0[o], r1[o], r2[o], r3[o])
		}
	}
}

// quantNHWCGo quantises pixels [p0, p1) of the input x (channel-major,
// pix pixels a plane) to xq pixel-major, as internal/cvec's QuantNHWC
// does.
func (k *qconvKernel) quantNHWCGo(xq []uint8, x []float32, pix, p0, p1 int) {
	ci := k.g.ci
	for b := p0; b < p1; b += 256 {
		e := min(p1, b+256)
		for c := 0; c < ci; c++ {
			for i, v := range x[c*pix+b : c*pix+e] {
				xq[(b+i)*ci+c] = k.in.u8(v)
			}
		}
	}
}

// im2row writes the receptive fields of output pixels [p0, p0+rows) (over
// the batch) as rows of a, in the order (kh, kw, channel) of the packed
// weights; padding reads as the zero point.
func (k *qconvKernel) im2row(xq []uint8, p0, rows int, a []uint8, lda int) {
	g := &k.g
	ci := g.ci
	zp := uint8(k.in.zero)
	K := g.k * g.k * ci
	run := g.k * ci // a kernel row's bytes when its taps are adjacent
	for i := 0; i < rows; i++ {
		nn, oh, ow := k.pixel(p0 + i)
		row := a[i*lda : (i+1)*lda]
		img := xq[nn*g.h*g.w*ci : (nn+1)*g.h*g.w*ci]
		iw0 := ow*g.s - g.p
		t := 0
		for kh := 0; kh < g.k; kh++ {
			ih := oh*g.s - g.p + kh*g.d
			if ih < 0 || ih >= g.h {
				fillU8(row[t:t+run], zp)
				t += run
				continue
			}
			line := img[ih*g.w*ci : (ih+1)*g.w*ci]
			if g.d == 1 && iw0 >= 0 && iw0+g.k <= g.w {
				copy(row[t:t+run], line[iw0*ci:])
				t += run
				continue
			}
			for kw := 0; kw < g.k; kw++ {
				iw := iw0 + kw*g.d
				if iw < 0 || iw >= g.w {
					fillU8(row[t:t+ci], zp)
				} else {
					copy(row[t:t+ci], line[iw*ci:])
				}
				t += ci
			}
		}
		clear(row[K:])
	}
}

// fillU8 sets b to v: clear (memclr) for an unsigned input's zero point
// 0, doubling copies otherwise; a byte loop took 4% of an int8 pass.
func fillU8(b []uint8, v uint8) {
	if v == 0 {
		clear(b)
		return
	}
	if len(b) == 0 {
		return
	}
	b[0] = v
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// qdenseKernel is an int8 dense layer (on vectors or tokens).
type qdenseKernel struct {
	*qlayer
	in, out, perSample int
}

func (k *qdenseKernel) forward(e *env) {
	n := e.n * k.perSample
	x, y := e.in[0], e.out
	rows := k.chunkRows(e.m.pool, n)
	chunks := (n + rows - 1) / rows
	lda, cop := k.w.lda(), k.w.cop
	e.m.pool.run(func(wk int) {
		c0, c1 := e.m.pool.span(chunks, wk)
		s := &k.ws[wk]
		for ch := c0; ch < c1; ch++ {
			p0 := ch * rows
			r := min(rows, n-p0)
			for i := 0; i < r; i++ {
				row := s.a[i*lda : (i+1)*lda]
				k.qlayer.in.quantRow(row, x[(p0+i)*k.in:(p0+i+1)*k.in])
				clear(row[k.in:])
			}
			k.w.gemm(s.a, lda, (r+3)&^3, s.c, cop)
			for i := 0; i < r; i++ {
				k.requantRow(y[(p0+i)*k.out:(p0+i+1)*k.out], s.c[i*cop:i*cop+k.out])
			}
		}
	})
}

// requantRow writes one row's outputs from its int32 sums c, in
// internal/cvec's twin of requantRowGo for a relu or no activation.
func (k *qdenseKernel) requantRow(dst []float32, c []int32) {
	relu := k.act == actReLU
	if cvec.Built && (relu || k.act == actNone) && len(dst) >= cMin {
		cvec.RequantRow(dst, c, k.mul, k.bias, k.corr, relu)
		return
	}
	k.requantRowGo(dst, c)
}

func (k *qdenseKernel) requantRowGo(dst []float32, c []int32) {
	for o := range dst {
		v := float32(float32(c[o]-k.corr[o])*k.mul[o]) + k.bias[o]
		if k.act == actReLU {
			v = relu32(v)
		}
		dst[o] = v
	}
	if k.act != actNone && k.act != actReLU {
		applyAct(k.act, dst, dst)
	}
}

// qmodel is an int8 model: the fp32 model's units with the int8 kernels
// in place. It evaluates; it does not train.
type qmodel struct {
	*model
}

func (q *qmodel) TrainStep(*samples.Batch, float64) (float64, error) {
	return 0, engine.ErrInt8Training
}
func (q *qmodel) Step(float64) error                    { return engine.ErrInt8Training }
func (q *qmodel) ZeroGrad()                             {}
func (q *qmodel) ClipGradNorm(float64) (float64, error) { return 0, engine.ErrInt8Training }
func (q *qmodel) Precision() string                     { return "int8" }
func (q *qmodel) SetState(engine.State) error {
	return fmt.Errorf("%w: set the state on the fp32 model and quantise it again", engine.ErrInt8Training)
}

// Memory implements engine.Model: an int8 model holds no training arena.
func (q *qmodel) Memory() engine.MemStats {
	var s engine.MemStats
	s.Parameters = int64(len(q.flat.params)+len(q.flat.buffers)) * 4
	for _, u := range q.units {
		if l := qlayerOf(u.k); l != nil {
			s.Parameters += int64(len(l.w.packed)) + 12*int64(l.w.co)
			for _, w := range l.ws {
				s.Scratch += int64(len(w.a)) + 4*int64(len(w.c))
			}
		}
		if k, ok := u.k.(*qconvKernel); ok {
			s.Scratch += int64(cap(k.xq))
		}
	}
	s.Scratch += int64(q.scratchWords) * 4
	if q.eval != nil {
		s.EvalArena = int64(q.eval.words) * 4
	}
	s.Total = s.Parameters + s.Scratch + s.EvalArena
	return s
}

func qlayerOf(k kernel) *qlayer {
	switch k := k.(type) {
	case *qconvKernel:
		return k.qlayer
	case *qdenseKernel:
		return k.qlayer
	}
	return nil
}

// int8Plan says whether a unit runs in int8 and, if not, why: by
// stdlib.Int8's rule for its first node, with this engine's own cases
// (a batchnorm folded into a conv, a kernel of another kind).
func int8Plan(u *unit) (bool, string) {
	switch k := u.k.(type) {
	case *convKernel:
		if k.vol != nil {
			return false, "3-D convolution: no int8 kernel"
		}
		return stdlib.Int8(u.nodes[0])
	case *denseKernel:
		if k.lowrank {
			return stdlib.Int8(u.nodes[0])
		}
		return u.nodes[0].Op == "dense", ""
	case *bnKernel:
		if k.folded {
			return false, "folded into the convolution before it"
		}
		return false, "batchnorm: elementwise"
	}
	if ok, why := stdlib.Int8(u.nodes[0]); !ok {
		return false, why
	}
	return false, u.nodes[0].Op + ": no int8 kernel here"
}

func unitOps(u *unit) string {
	var ops []string
	for _, n := range u.nodes {
		ops = append(ops, n.Op)
	}
	return strings.Join(ops, "+")
}

// QuantizeInt8 implements engine.Int8Quantizer.
func (m *model) QuantizeInt8(calib []*samples.Batch, o engine.QuantOptions) (qm engine.Model, rep *engine.QuantReport, err error) {
	defer recoverErr(&err)
	if err := m.usable(); err != nil {
		return nil, nil, err
	}
	nm, err := build(m.g, m.cfg, false)
	if err != nil {
		return nil, nil, err
	}
	nm.train = nil // inference only: its arena goes
	if err := nm.SetState(m.State()); err != nil {
		nm.Close()
		return nil, nil, err
	}
	want := map[int]bool{}
	rep = &engine.QuantReport{Calibration: "minmax", Kernel: qpath.String()}
	if o.Percentile > 0 {
		rep.Calibration = fmt.Sprintf("percentile %g", o.Percentile)
	}
	for _, u := range nm.units {
		if ok, _ := int8Plan(u); ok {
			want[u.idx] = true
		}
	}
	ranges, samples, err := nm.calibrate(calib, want, o.Percentile)
	if err != nil {
		nm.Close()
		return nil, nil, err
	}
	rep.CalibBatches, rep.CalibSamples = len(calib), samples
	for _, u := range nm.units {
		ok, why := int8Plan(u)
		if u.idx == 0 {
			continue
		}
		l := engine.QuantLayer{Name: u.nodes[0].Name, Op: unitOps(u), Why: why}
		if ok {
			r := ranges[u.idx]
			aq := newActQuant(r.clip, r.min < 0)
			var fp32Bytes int64
			switch k := u.k.(type) {
			case *convKernel:
				wq, ws, bias, K := k.quantize(nm)
				ql := newQLayer(k, wq, ws, bias, k.geo.co, K, aq, k.act, nm.pool.n)
				u.k = &qconvKernel{qlayer: ql, g: k.geo}
				fp32Bytes = int64(len(k.w.data)+k.geo.co) * 4
			case *denseKernel:
				wq, ws := quantizeWeights(k.w.data, k.out, k.in)
				bias := make([]float32, k.out)
				if k.b != nil {
					copy(bias, k.b.data)
				}
				ql := newQLayer(k, wq, ws, bias, k.out, k.in, aq, k.act, nm.pool.n)
				u.k = &qdenseKernel{qlayer: ql, in: k.in, out: k.out, perSample: k.rows}
				fp32Bytes = int64(len(k.w.data)+k.out) * 4
			}
			ql := qlayerOf(u.k)
			l.Int8, l.InScale, l.InZero = true, aq.scale, int(aq.zero)
			sign := "unsigned"
			if aq.zero != 0 {
				sign = "signed"
			}
			l.Why = fmt.Sprintf("int8 weights per channel (%d), %s input scale %.4g", ql.w.co, sign, aq.scale)
			rep.WeightBytesFP32 += fp32Bytes
			rep.WeightBytesInt8 += int64(ql.w.co*ql.w.k) + 8*int64(ql.w.co)
		}
		rep.Layers = append(rep.Layers, l)
	}
	for _, u := range nm.units {
		if p := poolAfter(nm, u); p != nil && int8PoolFusion {
			u.k.(*qconvKernel).pool = p.k.(*poolKernel)
			p.k = &pooledKernel{}
			rep.Layers[u.idx-1].Why += "; the max-pool after it taken on its int32 sums"
			rep.Layers[p.idx-1].Why = "max-pool taken by the int8 convolution before it"
		}
	}
	nm.eval = nil
	return &qmodel{nm}, rep, nil
}

// int8PoolFusion lets a test turn poolAfter's fusion off to compare.
var int8PoolFusion = true

// poolAfter returns the unit of the 2×2, stride-2 max-pool that alone
// reads int8 convolution u, when u's activation is a relu or none, or
// nil. Such a convolution takes the pool on its int32 sums: requantising
// (x − corr)·mul + bias with mul > 0, then a relu, never decreases as the
// sum grows (each rounding is monotone), so the maximum of four
// requantised sums is the requantised maximum, bit for bit, and no NaN or
// −0 can come out of it. A quarter of the requantisation and the pool's
// pass over the convolution's output go.
func poolAfter(m *model, u *unit) *unit {
	k, ok := u.k.(*qconvKernel)
	if !ok || u.idx == m.outUnit || (k.act != actReLU && k.act != actNone) || k.g.g != 1 {
		return nil
	}
	var next *unit
	for _, v := range m.units {
		for _, j := range v.ins {
			if j == u.idx {
				if next != nil {
					return nil
				}
				next = v
			}
		}
	}
	if next == nil {
		return nil
	}
	p, ok := next.k.(*poolKernel)
	if !ok || !p.max || p.k != 2 || p.s != 2 || p.p != 0 || p.h != k.g.ho || p.w != k.g.wo || p.ho < 1 || p.wo < 1 {
		return nil
	}
	return next
}

// pooledKernel stands in for a max-pool that the int8 convolution before
// it took (poolAfter): the convolution wrote the pooled maps at the start
// of its output, which this copies on.
type pooledKernel struct{}

func (*pooledKernel) spec() kspec { return kspec{saveIn: []bool{false}} }

func (*pooledKernel) forward(e *env) {
	n := e.n * e.u.out.size()
	copy(e.out[:n], e.in[0][:n])
}

func (*pooledKernel) backward(*env) { panic(engine.ErrInt8Training) }

// quantize returns the convolution's evaluation weights (batchnorm
// folded) quantised per output channel, in im2row's order (kh, kw, ci),
// their scales, the folded bias and K.
func (k *convKernel) quantize(m *model) (wq []int8, ws, bias []float32, K int) {
	g := &k.geo
	co, ci, kk := g.co, g.ci, g.k*g.k
	K = kk * ci
	w := make([]float32, co*K)
	bias = make([]float32, co)
	src := k.w.data
	if k.fold != nil {
		k.refold(m)
		src = k.wf
		copy(bias, k.bf)
	} else {
		for o := range bias {
			bias[o] = k.bias(o)
		}
	}
	for o := 0; o < co; o++ {
		a := 1.0
		if k.fold == nil && k.bn != nil {
			s, t := k.bn.evalAffine(o)
			a = s
			bias[o] = float32(s*float64(bias[o]) + t)
		}
		for c := 0; c < ci; c++ {
			for t := 0; t < kk; t++ {
				w[o*K+t*ci+c] = float32(float64(src[(o*ci+c)*kk+t]) * a)
			}
		}
	}
	wq, ws = quantizeWeights(w, co, K)
	return wq, ws, bias, K
}

// actRange is one int8 layer's calibrated input range.
type actRange struct {
	min, max float32
	clip     float32 // the range quantised: max|x|, or its percentile
	hist     []int64
}

const histBins = 2048

// calibrate runs the fp32 model on the batches and measures the inputs of
// the units in want.
func (m *model) calibrate(batches []*samples.Batch, want map[int]bool, pct float64) (map[int]*actRange, int, error) {
	ranges := map[int]*actRange{}
	for i := range want {
		ranges[i] = &actRange{min: float32(math.Inf(1)), max: float32(math.Inf(-1))}
	}
	samples := 0
	for _, b := range batches {
		samples += b.N
		err := m.observe(b, want, func(i int, x []float32) {
			r := ranges[i]
			for _, v := range x {
				r.min = min(r.min, v)
				r.max = max(r.max, v)
			}
		})
		if err != nil {
			return nil, 0, err
		}
	}
	for _, r := range ranges {
		if math.IsInf(float64(r.min), 0) || math.IsInf(float64(r.max), 0) || r.min != r.min || r.max != r.max {
			return nil, 0, fmt.Errorf("calibration saw a non-finite activation")
		}
		r.clip = max(abs32(r.min), abs32(r.max))
	}
	if pct <= 0 || pct >= 100 {
		return ranges, samples, nil
	}
	for _, r := range ranges {
		r.hist = make([]int64, histBins)
	}
	for _, b := range batches {
		err := m.observe(b, want, func(i int, x []float32) {
			r := ranges[i]
			if r.clip == 0 {
				return
			}
			f := histBins / r.clip
			for _, v := range x {
				r.hist[min(histBins-1, int(abs32(v)*f))]++
			}
		})
		if err != nil {
			return nil, 0, err
		}
	}
	for _, r := range ranges {
		var total int64
		for _, c := range r.hist {
			total += c
		}
		if total == 0 {
			continue
		}
		need := int64(math.Ceil(float64(total) * pct / 100))
		var cum int64
		for bin, c := range r.hist {
			cum += c
			if cum >= need {
				r.clip = min(r.clip, float32(bin+1)*r.clip/histBins)
				break
			}
		}
		r.hist = nil
	}
	return ranges, samples, nil
}

// observe runs the model in evaluation mode on b and calls fn with the
// input of each unit in want.
func (m *model) observe(b *samples.Batch, want map[int]bool, fn func(unit int, x []float32)) error {
	if err := m.checkBatch(b, 0, false); err != nil {
		return err
	}
	if m.eval == nil || m.eval.batch < b.N {
		m.eval = nil
		m.eval = m.buildEval(max(b.N, m.cfg.Batch))
	}
	m.batch = b
	defer func() { m.batch = nil }()
	m.runForward(m.eval, b.N, false, func(u *unit, e *env) bool {
		if want[u.idx] {
			fn(u.idx, e.in[0][:b.N*u.in[0].size()])
		}
		return true
	})
	return nil
}
