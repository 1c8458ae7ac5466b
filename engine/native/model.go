package native

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"pipe/dataset/samples"
	"pipe/engine"
	"pipe/engine/weights"
	"pipe/stdlib"
)

// layout is how a unit's output is stored for a batch of n samples. An
// image [C, H, W] is stored CNHW: channel c of every sample is one
// contiguous block of n·H·W values, so a convolution over the whole batch
// is one matrix product whose result is already in place, batchnorm's
// statistics are contiguous reductions, and concat along channels is a
// copy of whole blocks. A vector [F] is stored NF, a row per sample.
// Batches arrive and outputs leave NCHW; the input and output units
// transpose.
//
// A volume [C, D, H, W] is spatial with d set: CNDHW, each channel's
// block of a sample D·H·W positions, so everything that works per
// channel block (batchnorm, activations, concat, add, gap, the losses)
// runs on it unchanged. d is 0 for images and vectors.
type layout struct {
	spatial bool
	c, h, w int
	d       int
}

func layoutOf(shape []int64) (layout, bool) {
	switch len(shape) {
	case 1:
		return layout{c: int(shape[0]), h: 1, w: 1}, shape[0] > 0
	case 2: // tokens [T, D]: T rows of D (attention.go)
		return layout{c: int(shape[1]), h: int(shape[0]), w: 1}, shape[0] > 0 && shape[1] > 0
	case 3:
		return layout{spatial: true, c: int(shape[0]), h: int(shape[1]), w: int(shape[2])}, shape[0] > 0 && shape[1] > 0 && shape[2] > 0
	case 4:
		return layout{spatial: true, c: int(shape[0]), d: int(shape[1]), h: int(shape[2]), w: int(shape[3])},
			shape[0] > 0 && shape[1] > 0 && shape[2] > 0 && shape[3] > 0
	}
	return layout{}, false
}

// size is the number of values per sample; s the positions per channel.
func (l layout) size() int { return l.c * l.s() }
func (l layout) s() int    { return max(l.d, 1) * l.h * l.w }

// vol says the layout is a volume [C, D, H, W].
func (l layout) vol() bool { return l.d > 0 }

// kernel computes one unit. forward reads e.in and writes e.out and e.aux;
// backward reads e.dout (and may overwrite it), the kept tensors, and
// writes e.din[j] (adding when e.acc[j]) and the parameters' gradients
// (always adding).
type kernel interface {
	spec() kspec
	forward(e *env)
	backward(e *env)
}

// kspec is what a kernel keeps and needs: which inputs and whether its
// output its backward reads, and the sizes of its kept and temporary
// buffers.
type kspec struct {
	saveIn  []bool
	saveOut bool
	aux     []bsize // kept from forward to backward
	tmpF    []bsize // forward temporaries
	tmpB    []bsize // backward temporaries
}

// bsize is a buffer size: perSample values per sample plus fixed.
type bsize struct{ perSample, fixed int }

// env is one event's view of the arena, bound once at Build.
type env struct {
	m         *model
	u         *unit
	n         int
	train     bool
	recompute bool
	in        [][]float32
	out       []float32
	aux       [][]float32
	tmp       [][]float32
	dout      []float32
	din       [][]float32
	acc       []bool
}

// unit is a graph node, or a fusion group, run as one kernel.
type unit struct {
	idx     int
	nodes   []*stdlib.Node
	ins     []int // unit indices of the inputs
	in      []layout
	out     layout
	k       kernel
	sp      kspec
	seg     int // checkpoint segment, -1 when stored
	reqGrad bool
	needDin []bool
	skipBwd bool // the loss differentiates through this unit itself
}

func (u *unit) name() string { return u.nodes[len(u.nodes)-1].Name }

func (u *unit) describe() string {
	if len(u.nodes) == 1 {
		return fmt.Sprintf("%s (%s)", u.nodes[0].Name, u.nodes[0].Op)
	}
	var names []string
	for _, n := range u.nodes {
		names = append(names, n.Name)
	}
	return "fused " + strings.Join(names, "+")
}

// model implements engine.Model.
type model struct {
	cfg     engine.Config
	g       *stdlib.Graph
	units   []*unit
	outUnit int
	pool    *pool
	serial  *pool // one worker, for small evaluations (Eval)
	// gemmThreads, when more than 1, is how many of OpenBLAS's threads
	// model.gemm runs a product on; the pool then has one worker
	// (denseOnly).
	gemmThreads int
	threads     int

	params  []*param // trainable, in order
	buffers []*param // running statistics
	// deadGrads are the parameters whose gradient is zero in exact
	// arithmetic (Graph.ZeroGradients); each backward pass zeroes theirs.
	deadGrads []*param
	flat      flatState
	bns       []*bnState
	// decls are package weights' tensors of the graph, by name.
	decls map[string]weights.Tensor
	opt   optimizer
	loss  *lossFn

	train *sched
	eval  *sched

	scratch      [][]float32 // per worker: im2col columns
	partial      [][]float32 // per worker: partial weight gradients
	scratchWords int

	batch     *samples.Batch
	seed      uint64 // keys dropout's stream; part of the State
	step      int64
	microStep int64
	version   int64 // bumped when parameters change (invalidates folds)

	ganTmp    []float32 // BackwardTrain's output gradient in the model's layout
	heldGrads []float32 // the gradients HoldGrads keeps

	// prof is the profile's state while profiling is on (profile.go).
	prof *profile

	heapBefore uint64
	heapDelta  int64
	measured   bool
	closed     bool
}

// sched is a compiled list of events and the arena they share.
type sched struct {
	batch    int
	events   []event
	bufs     []*vbuf
	arena    []float32
	words    int
	peak     int
	saved    int
	lossAt   int   // the loss's time in the buffers' lifetimes
	bwdAt    int   // index of the first backward event
	pred     *vbuf // the output unit's activation
	logits   *vbuf // the loss's logits when it differentiates through the last unit
	seed     *vbuf // where the loss writes its gradient
	predS    []float32
	logitsS  []float32
	seedS    []float32
	seedUnit *unit
	inGrad   *vbuf // the input's gradient, with Config.InputGrad (gan.go)
	inGradS  []float32
}

type evKind int

const (
	evFwd evKind = iota
	evRecompute
	evBwd
)

type event struct {
	kind evKind
	u    *unit
	e    *env
	bind binding
}

type binding struct {
	in   []*vbuf
	out  *vbuf
	aux  []*vbuf
	tmp  []*vbuf
	dout *vbuf
	din  []*vbuf
}

func (s *sched) newBuf(per, fixed int, saved bool) *vbuf {
	b := &vbuf{perSample: per, fixed: fixed, first: -1, last: -1, saved: saved}
	s.bufs = append(s.bufs, b)
	return b
}

func (s *sched) temps(sizes []bsize, t int) []*vbuf {
	var out []*vbuf
	for _, sz := range sizes {
		b := s.newBuf(sz.perSample, sz.fixed, false)
		b.touch(t)
		out = append(out, b)
	}
	return out
}

func touchAll(bs []*vbuf, t int) {
	for _, b := range bs {
		if b != nil {
			b.touch(t)
		}
	}
}

// buildTrain compiles the training step's events (see schedule.go).
func (m *model) buildTrain(batch int) *sched {
	s := &sched{batch: batch}
	nu := len(m.units)
	actF := make([]*vbuf, nu)
	actR := make([]*vbuf, nu)
	auxF := make([][]*vbuf, nu)
	auxR := make([][]*vbuf, nu)
	grad := make([]*vbuf, nu)
	for i, u := range m.units {
		actF[i] = s.newBuf(u.out.size(), 0, true)
		for _, a := range u.sp.aux {
			auxF[i] = append(auxF[i], s.newBuf(a.perSample, a.fixed, true))
		}
		if u.seg >= 0 {
			actR[i] = s.newBuf(u.out.size(), 0, true)
			for _, a := range u.sp.aux {
				auxR[i] = append(auxR[i], s.newBuf(a.perSample, a.fixed, true))
			}
		}
		if u.reqGrad {
			grad[i] = s.newBuf(u.out.size(), 0, false)
		}
	}
	// copyOf is the copy of unit j's output (and kept buffers) that unit
	// u's recomputation or backward reads.
	recomputed := func(j, u int) bool {
		return m.units[j].seg >= 0 && m.units[j].seg == m.units[u].seg
	}
	actOf := func(j, u int) *vbuf {
		if recomputed(j, u) {
			return actR[j]
		}
		return actF[j]
	}
	t := 0
	for i, u := range m.units {
		ev := event{kind: evFwd, u: u}
		for _, j := range u.ins {
			ev.bind.in = append(ev.bind.in, actF[j])
		}
		ev.bind.out = actF[i]
		ev.bind.aux = auxF[i]
		ev.bind.tmp = s.temps(u.sp.tmpF, t)
		touchAll(ev.bind.in, t)
		touchAll(ev.bind.aux, t)
		ev.bind.out.touch(t)
		s.events = append(s.events, ev)
		t++
	}
	// The loss reads the prediction (or the logits before the last
	// unit) and writes the seed gradient.
	s.lossAt = t
	s.pred = actF[m.outUnit]
	s.pred.touch(t)
	s.seedUnit = m.units[m.outUnit]
	if m.loss.throughLast {
		s.seedUnit = m.units[m.units[m.outUnit].ins[0]]
		s.logits = actF[s.seedUnit.idx]
		s.logits.touch(t)
	}
	s.bwdAt = len(s.events)
	written := make([]bool, nu)
	if s.seedUnit.reqGrad {
		s.seed = grad[s.seedUnit.idx]
		s.seed.touch(t)
		written[s.seedUnit.idx] = true
	}
	t++
	done := make(map[int]bool)
	for i := nu - 1; i >= 1; i-- {
		u := m.units[i]
		if !u.reqGrad || u.skipBwd || !written[i] {
			continue
		}
		if u.seg >= 0 && !done[u.seg] {
			done[u.seg] = true
			for _, v := range m.units {
				if v.seg != u.seg {
					continue
				}
				ev := event{kind: evRecompute, u: v}
				for _, j := range v.ins {
					ev.bind.in = append(ev.bind.in, actOf(j, v.idx))
				}
				ev.bind.out = actR[v.idx]
				ev.bind.aux = auxR[v.idx]
				ev.bind.tmp = s.temps(v.sp.tmpF, t)
				touchAll(ev.bind.in, t)
				touchAll(ev.bind.aux, t)
				ev.bind.out.touch(t)
				s.events = append(s.events, ev)
				t++
			}
		}
		ev := event{kind: evBwd, u: u}
		ev.bind.in = make([]*vbuf, len(u.ins))
		for k, j := range u.ins {
			if u.sp.saveIn[k] {
				ev.bind.in[k] = actOf(j, i)
			}
		}
		if u.sp.saveOut {
			ev.bind.out = actOf(i, i)
		}
		if u.seg >= 0 {
			ev.bind.aux = auxR[i]
		} else {
			ev.bind.aux = auxF[i]
		}
		ev.bind.tmp = s.temps(u.sp.tmpB, t)
		ev.bind.dout = grad[i]
		ev.bind.din = make([]*vbuf, len(u.ins))
		for k, j := range u.ins {
			if u.needDin[k] {
				ev.bind.din[k] = grad[j]
			}
		}
		touchAll(ev.bind.in, t)
		touchAll(ev.bind.aux, t)
		touchAll(ev.bind.din, t)
		if ev.bind.out != nil {
			ev.bind.out.touch(t)
		}
		ev.bind.dout.touch(t)
		e := &env{m: m, u: u, train: true}
		for k, j := range u.ins {
			e.acc = append(e.acc, written[j])
			if u.needDin[k] {
				written[j] = true
			}
		}
		ev.e = e
		s.events = append(s.events, ev)
		t++
	}
	if m.units[0].reqGrad {
		// The input's gradient outlives the step, for InputGrad.
		s.inGrad = grad[0]
		s.inGrad.touch(t - 1)
	}
	m.bind(s, t)
	return s
}

// buildEval compiles the forward-only schedule for up to batch samples.
func (m *model) buildEval(batch int) *sched {
	s := &sched{batch: batch}
	nu := len(m.units)
	act := make([]*vbuf, nu)
	for i, u := range m.units {
		act[i] = s.newBuf(u.out.size(), 0, true)
	}
	t := 0
	for i, u := range m.units {
		ev := event{kind: evFwd, u: u}
		for _, j := range u.ins {
			ev.bind.in = append(ev.bind.in, act[j])
		}
		ev.bind.out = act[i]
		ev.bind.aux = s.temps(u.sp.aux, t)
		ev.bind.tmp = s.temps(u.sp.tmpF, t)
		touchAll(ev.bind.in, t)
		act[i].touch(t)
		s.events = append(s.events, ev)
		t++
	}
	s.lossAt = t
	s.pred = act[m.outUnit]
	s.pred.touch(t)
	s.seedUnit = m.units[m.outUnit]
	if m.loss.throughLast {
		s.seedUnit = m.units[m.units[m.outUnit].ins[0]]
		s.logits = act[s.seedUnit.idx]
		s.logits.touch(t)
	}
	t++
	m.bind(s, t)
	for _, ev := range s.events {
		ev.e.train = false
	}
	return s
}

// bind packs a schedule's buffers, allocates its arena and slices it into
// every event's env.
func (m *model) bind(s *sched, nEvents int) {
	s.words = pack(s.bufs, s.batch)
	s.arena = make([]float32, s.words)
	s.peak, s.saved = peakLive(s.bufs, s.batch, nEvents, s.lossAt)
	sl := func(b *vbuf) []float32 {
		if b == nil || b.off < 0 {
			return nil
		}
		n := b.size(s.batch)
		return s.arena[b.off : b.off+n : b.off+n]
	}
	sls := func(bs []*vbuf) [][]float32 {
		out := make([][]float32, len(bs))
		for i, b := range bs {
			out[i] = sl(b)
		}
		return out
	}
	for i := range s.events {
		ev := &s.events[i]
		if ev.e == nil {
			ev.e = &env{m: m, u: ev.u, train: true}
		}
		e := ev.e
		e.recompute = ev.kind == evRecompute
		e.in = sls(ev.bind.in)
		e.out = sl(ev.bind.out)
		e.aux = sls(ev.bind.aux)
		e.tmp = sls(ev.bind.tmp)
		e.dout = sl(ev.bind.dout)
		e.din = sls(ev.bind.din)
	}
	s.predS = sl(s.pred)
	s.logitsS = sl(s.logits)
	s.seedS = sl(s.seed)
	s.inGradS = sl(s.inGrad)
}

// forwardRange runs the forward events of s for n samples; check, when
// set, is called after each unit.
func (m *model) runForward(s *sched, n int, train bool, check func(*unit, *env) bool) bool {
	for i := range s.events {
		ev := &s.events[i]
		if ev.kind != evFwd {
			break
		}
		e := ev.e
		e.n = n
		e.train = train
		if p := m.prof; p != nil && check == nil {
			t0 := now()
			ev.u.k.forward(e)
			p.span(ev.u, engine.PhaseForward, t0)
		} else {
			ev.u.k.forward(e)
		}
		if check != nil && !check(ev.u, e) {
			return false
		}
	}
	return true
}

// TrainStep implements engine.Model.
func (m *model) TrainStep(b *samples.Batch, scale float64) (loss float64, err error) {
	defer recoverErr(&err)
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.checkBatch(b, m.cfg.Batch, true); err != nil {
		return 0, err
	}
	if !m.measured {
		defer m.measureHeap()
	}
	s := m.train
	n := b.N
	m.batch = b
	defer func() { m.batch = nil }()
	m.runForward(s, n, true, nil)
	loss = m.timedLoss(s, b, scale, true)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, m.diagnose(s, b, loss)
	}
	m.runBackward(s, n)
	return loss, nil
}

// runBackward commits the batchnorms' statistics of the forward pass just
// run and runs the step's backward events (recomputing checkpoint
// segments where they fall) for a batch of n.
func (m *model) runBackward(s *sched, n int) {
	for _, bn := range m.bns {
		bn.commit()
	}
	m.version++
	for i := s.bwdAt; i < len(s.events); i++ {
		ev := &s.events[i]
		e := ev.e
		e.n = n
		var t0 time.Time
		if m.prof != nil {
			t0 = now()
		}
		if ev.kind == evRecompute {
			e.train = true
			ev.u.k.forward(e)
		} else {
			ev.u.k.backward(e)
		}
		if p := m.prof; p != nil {
			ph := engine.PhaseBackward
			if ev.kind == evRecompute {
				ph = engine.PhaseRecompute
			}
			p.span(ev.u, ph, t0)
		}
	}
	for _, p := range m.deadGrads {
		clear(p.grad)
	}
	m.microStep++
}

// Eval implements engine.Model.
func (m *model) Eval(b *samples.Batch, out []float32) (loss float64, err error) {
	defer recoverErr(&err)
	if err := m.usable(); err != nil {
		return 0, err
	}
	if err := m.checkBatch(b, 0, b.Y != nil); err != nil {
		return 0, err
	}
	if want := b.N * m.units[m.outUnit].out.size(); out != nil && len(out) != want {
		return 0, fmt.Errorf("%w: the output buffer holds %d values; %d samples of %v need %d", engine.ErrBadBatch, len(out), b.N, m.OutShape(), want)
	}
	if m.eval == nil || m.eval.batch < b.N {
		sz := b.N
		if sz < m.cfg.Batch {
			sz = m.cfg.Batch
		}
		m.eval = nil
		m.eval = m.buildEval(sz)
	}
	s := m.eval
	m.batch = b
	defer func() { m.batch = nil }()
	if m.pool.n > 1 && int64(b.N)*m.g.FLOPs() < evalSerialFLOPs {
		// Too little work to share: one worker, the caller.
		p := m.pool
		m.pool = m.serialPool()
		defer func() { m.pool = p }()
	}
	m.runForward(s, b.N, false, nil)
	if out != nil {
		toNCHW(out, s.predS, m.units[m.outUnit].out, b.N)
	}
	if b.Y != nil {
		loss = m.timedLoss(s, b, 1, false)
	}
	return loss, nil
}

// evalSerialFLOPs is the forward work below which Eval runs on one worker.
// Splitting a small batch's layers costs more than it gains: the fashion
// net's forward (17 MFLOP a sample) at 2 workers against 1, AMD EPYC,
// BenchmarkEvalFashion-style: int8 batch 1 23.8k against 31.6k samples/s,
// batch 8 24.1k against 36.2k, batch 16 36.0k against 36.4k, batch 32 46k
// against 37k; fp32 crosses between batch 16 and 32 too.
const evalSerialFLOPs = 256e6

// serialPool is the one-worker pool small evaluations run on.
func (m *model) serialPool() *pool {
	if m.serial == nil {
		m.serial = newPool(1)
	}
	return m.serial
}

// checkBatch rejects batches whose sizes do not fit the model.
func (m *model) checkBatch(b *samples.Batch, max int, targets bool) error {
	if b == nil {
		return fmt.Errorf("%w: no batch", engine.ErrBadBatch)
	}
	if b.N < 1 {
		return fmt.Errorf("%w: the batch has %d samples", engine.ErrBadBatch, b.N)
	}
	if max > 0 && b.N > max {
		return fmt.Errorf("%w: the batch has %d samples but the model was built for micro-batches of at most %d", engine.ErrBadBatch, b.N, max)
	}
	in := m.units[0].out
	if len(b.X) != b.N*in.size() {
		return fmt.Errorf("%w: the batch's inputs hold %d values; %d samples of shape %v need %d", engine.ErrBadBatch, len(b.X), b.N, m.g.Input, b.N*in.size())
	}
	if targets {
		return m.loss.checkTargets(m, b)
	}
	return nil
}

// diagnose finds why the loss is not finite: the input, a parameter, or
// the first unit whose output is not finite, by running the forward pass
// again (it is deterministic) with a check after each unit.
func (m *model) diagnose(s *sched, b *samples.Batch, loss float64) error {
	e := &engine.NonFiniteError{Step: m.step, MicroStep: m.microStep, Loss: loss}
	if !finite(b.X) {
		e.Input = true
		return e
	}
	for _, p := range m.params {
		if !finite(p.data) {
			e.Param = p.name
			return e
		}
	}
	for _, p := range m.buffers {
		if !finite(p.data) {
			e.Param = p.name
			return e
		}
	}
	for _, ev := range s.events {
		if ev.kind == evFwd {
			ev.e.recompute = true
		}
	}
	defer func() {
		for _, ev := range s.events {
			if ev.kind == evFwd {
				ev.e.recompute = false
			}
		}
	}()
	m.runForward(s, b.N, true, func(u *unit, ev *env) bool {
		if pa, ok := u.k.(interface{ preact(*env) []float32 }); ok && len(u.nodes) > 1 {
			if x := pa.preact(ev); x != nil && !finite(x) {
				e.Node, e.Op = u.nodes[0].Name, u.nodes[0].Op
				return false
			}
		}
		if !finite(ev.out[:ev.n*u.out.size()]) {
			last := u.nodes[len(u.nodes)-1]
			e.Node, e.Op = last.Name, last.Op
			return false
		}
		return true
	})
	return e
}

func finite(xs []float32) bool {
	for _, x := range xs {
		if x-x != 0 {
			return false
		}
	}
	return true
}

func (m *model) usable() error {
	if m.closed {
		return fmt.Errorf("the model is closed")
	}
	return nil
}

func (m *model) measureHeap() {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.heapDelta = int64(ms.HeapInuse) - int64(m.heapBefore)
	m.measured = true
}

// OutShape implements engine.Model.
func (m *model) OutShape() []int64 { return append([]int64(nil), m.g.OutShape()...) }

// Precision implements engine.Model: the CPU backend computes in fp32.
func (m *model) Precision() string { return "fp32" }

// Memory implements engine.Model.
func (m *model) Memory() engine.MemStats {
	var s engine.MemStats
	s.Parameters = int64(len(m.flat.params)+len(m.flat.buffers)) * 4
	s.Gradients = int64(len(m.flat.grads)) * 4
	s.Optimizer = int64(len(m.flat.m1)+len(m.flat.m2)) * 4
	s.Arena = int64(m.train.words) * 4
	s.PeakLive = int64(m.train.peak) * 4
	s.Saved = int64(m.train.saved) * 4
	s.Scratch = int64(m.scratchWords) * 4
	if m.eval != nil {
		s.EvalArena = int64(m.eval.words) * 4
	}
	s.Total = s.Parameters + s.Gradients + s.Optimizer + s.Arena + s.Scratch + s.EvalArena
	s.HeapInuseDelta = m.heapDelta
	return s
}

// Close implements engine.Model.
func (m *model) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	m.pool.close()
	m.train, m.eval = nil, nil
	m.scratch, m.partial = nil, nil
	return nil
}

// recoverErr turns a panic into an error at the API boundary.
func recoverErr(err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok {
			*err = fmt.Errorf("%w: %w", engine.ErrInternal, e)
			return
		}
		*err = fmt.Errorf("%w: %v", engine.ErrInternal, r)
	}
}

// toNCHW copies n samples stored in layout l into dst, NCHW.
func toNCHW(dst, src []float32, l layout, n int) {
	if !l.spatial || l.c == 1 {
		copy(dst[:n*l.size()], src)
		return
	}
	toNCHWChannels(dst, src, l, n, 0, l.c)
}

// toNCHWChannels is toNCHW for channels [c0, c1) of a spatial layout.
func toNCHWChannels(dst, src []float32, l layout, n, c0, c1 int) {
	s := l.s()
	for c := c0; c < c1; c++ {
		for i := 0; i < n; i++ {
			copy(dst[(i*l.c+c)*s:(i*l.c+c+1)*s], src[(c*n+i)*s:(c*n+i+1)*s])
		}
	}
}

// fromNCHW copies n NCHW samples into dst in layout l.
func fromNCHW(dst, src []float32, l layout, n int) {
	if !l.spatial || l.c == 1 {
		copy(dst[:n*l.size()], src)
		return
	}
	fromNCHWChannels(dst, src, l, n, 0, l.c, false)
}

// fromNCHWChannels is fromNCHW for channels [c0, c1) of a spatial layout,
// adding into dst when acc.
func fromNCHWChannels(dst, src []float32, l layout, n, c0, c1 int, acc bool) {
	s := l.s()
	for c := c0; c < c1; c++ {
		for i := 0; i < n; i++ {
			put(dst[(c*n+i)*s:(c*n+i+1)*s], src[(i*l.c+c)*s:(i*l.c+c+1)*s], acc)
		}
	}
}

// Capabilities implements engine.Model: the run loop's GAN trainer, the
// kernels' clock and int8 inference.
func (m *model) Capabilities() engine.Capabilities {
	return engine.Capabilities{Adversarial: m, Profile: m, Int8: m, Applied: m}
}

// Applied says which BLAS kernels the model's products ran on: the
// machine decides them (BLASKernels).
func (m *model) Applied() map[string]string {
	return map[string]string{"blas": BLASKernels()}
}
