package enginetest

import (
	"fmt"
	"math"
	"time"

	"pipe/dataset/samples"
	"pipe/engine"
	"pipe/stdlib"
)

// Backend is a fake engine.Backend whose models are linear.
type Backend struct {
	// BackendName is what Name returns; "native" when empty.
	BackendName string
	// NaNAt makes the loss of the NaNAt-th micro-batch trained (counting
	// from 1 over the model's life) NaN; 0 never does.
	NaNAt int64
	// OOMAt makes the OOMAt-th micro-batch trained fail as a device out of
	// memory does (an *engine.OutOfMemoryError in the forward pass of the
	// last node); 0 never does.
	OOMAt int64
	// Noise scales a multiplicative noise on the inputs of training
	// micro-batches, x·(1 + Noise·u) with u uniform in [-1, 1) drawn from
	// (seed, micro-step, element): it stands in for dropout, so a run
	// resumed without the micro-step counter would not reproduce.
	Noise float64
	// StepDelay makes every TrainStep take at least this long, as a
	// bigger model would (the loader stall tests).
	StepDelay time.Duration
	// FailAt makes the FailAt-th micro-batch trained return Fail; 0
	// never does.
	FailAt int64
	Fail   error
	// Ahead makes the model an engine.Queuer that runs a step ahead, as
	// the torch engine does: Results(false) reports a step only once the
	// next is queued, so a failure comes back after the step behind it
	// was queued, and that step is not trained (queue.go).
	Ahead bool
	// Devices makes the model an engine.DeviceMeasurer that reports
	// these figures, as the torch engine's workers report a GPU's.
	Devices []engine.DeviceMemory
}

// Name implements engine.Backend.
func (b *Backend) Name() string {
	if b.BackendName == "" {
		return "native"
	}
	return b.BackendName
}

// Build implements engine.Backend.
func (b *Backend) Build(g *stdlib.Graph, cfg engine.Config) (engine.Model, error) {
	if g == nil || len(g.Nodes) == 0 {
		return nil, fmt.Errorf("exectest: empty graph")
	}
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("exectest: batch %d", cfg.Batch)
	}
	switch cfg.Loss.Kind {
	case "cross_entropy", "mse", "mae", "bce":
	default:
		return nil, fmt.Errorf("exectest: loss %q: %w", cfg.Loss.Kind, engine.ErrUnsupported)
	}
	switch cfg.Optimizer.Kind {
	case "sgd", "adam", "adamw":
	default:
		return nil, fmt.Errorf("exectest: optimizer %q: %w", cfg.Optimizer.Kind, engine.ErrUnsupported)
	}
	out := g.OutShape()
	m := &Model{cfg: cfg, g: g, nanAt: b.NaNAt, oomAt: b.OOMAt, failAt: b.FailAt, fail: b.Fail, noise: b.Noise, delay: b.StepDelay, ahead: b.Ahead, devices: b.Devices, outShape: append([]int64(nil), out...)}
	m.f = numel(g.Input)
	m.o = numel(out)
	m.k = 1
	if len(out) > 0 {
		m.k = int(out[0])
	}
	m.s = m.o / m.k
	m.w = make([]float32, m.o*m.f)
	m.b = make([]float32, m.o)
	m.gw = make([]float32, len(m.w))
	m.gb = make([]float32, len(m.b))
	r := splitmix(cfg.Seed ^ 0x5eed)
	bound := 1 / math.Sqrt(float64(m.f))
	for i := range m.w {
		m.w[i] = float32((2*r.float() - 1) * bound)
	}
	for i := range m.b {
		m.b[i] = float32((2*r.float() - 1) * bound)
	}
	switch cfg.Optimizer.Kind {
	case "sgd":
		if cfg.Optimizer.Momentum > 0 {
			m.m1w, m.m1b = make([]float32, len(m.w)), make([]float32, len(m.b))
		}
	default:
		m.m1w, m.m1b = make([]float32, len(m.w)), make([]float32, len(m.b))
		m.m2w, m.m2b = make([]float32, len(m.w)), make([]float32, len(m.b))
	}
	m.xbuf = make([]float32, cfg.Batch*m.f)
	m.zbuf = make([]float32, cfg.Batch*m.o)
	return m, nil
}

// Model is the fake's linear model: out = W·x + b over flattened samples.
type Model struct {
	cfg        engine.Config
	g          *stdlib.Graph
	outShape   []int64
	f, o, k, s int
	w, b       []float32
	gw, gb     []float32
	m1w, m1b   []float32
	m2w, m2b   []float32
	step       int64
	micro      int64
	nanAt      int64
	oomAt      int64
	failAt     int64
	fail       error
	noise      float64
	delay      time.Duration
	xbuf, zbuf []float32
	closed     bool
	// ahead: the queue of queue.go, its steps queued, the current step's
	// losses, and a failure not yet reported (failing).
	ahead   bool
	queued  []outcome
	cur     []float64
	curErr  error
	curSkip bool
	failing bool
	devices []engine.DeviceMemory
	// TrainSteps counts TrainStep calls that trained (for tests).
	TrainSteps int64
}

func numel(s []int64) int {
	n := 1
	for _, d := range s {
		n *= int(d)
	}
	return n
}

func (m *Model) check(b *samples.Batch, limit int, targets bool) error {
	if m.closed {
		return fmt.Errorf("exectest: the model is closed")
	}
	if b == nil || b.N < 1 {
		return fmt.Errorf("%w: empty batch", engine.ErrBadBatch)
	}
	if limit > 0 && b.N > limit {
		return fmt.Errorf("%w: %d samples, built for %d", engine.ErrBadBatch, b.N, limit)
	}
	if len(b.X) != b.N*m.f {
		return fmt.Errorf("%w: %d input values for %d samples of %d", engine.ErrBadBatch, len(b.X), b.N, m.f)
	}
	if targets {
		ny := len(b.Y)
		if ny != b.N*m.o && ny != b.N*m.s {
			return fmt.Errorf("%w: %d target values for %d samples of output %v", engine.ErrBadBatch, ny, b.N, m.outShape)
		}
		if b.Mask != nil && len(b.Mask) != ny {
			return fmt.Errorf("%w: mask of %d for %d targets", engine.ErrBadBatch, len(b.Mask), ny)
		}
		if m.cfg.Loss.Kind == "cross_entropy" && ny == b.N*m.s {
			for i, y := range b.Y {
				if b.Mask != nil && b.Mask[i] == 0 {
					continue
				}
				if y < 0 || int(y) >= m.k || float32(int(y)) != y {
					return fmt.Errorf("%w: label %v outside [0, %d)", engine.ErrBadBatch, y, m.k)
				}
			}
		}
	}
	return nil
}

// forward computes z = W·x + b for n samples of x.
func (m *Model) forward(x, z []float32, n int) {
	for i := range n {
		xi := x[i*m.f : (i+1)*m.f]
		for o := range m.o {
			wr := m.w[o*m.f : (o+1)*m.f]
			var s float64
			for j, v := range xi {
				s += float64(wr[j]) * float64(v)
			}
			z[i*m.o+o] = float32(s + float64(m.b[o]))
		}
	}
}

// loss returns the batch's mean loss and, when dz is non-nil, its
// gradient with respect to z.
func (m *Model) loss(b *samples.Batch, z, dz []float32) float64 {
	n := b.N
	perClass := m.cfg.Loss.Kind == "cross_entropy" && len(b.Y) == n*m.s
	valid := func(i int) bool { return b.Mask == nil || b.Mask[i] != 0 }
	var sum float64
	var count int
	if dz != nil {
		clear(dz[:n*m.o])
	}
	if m.cfg.Loss.Kind == "cross_entropy" {
		for i := range n {
			for p := range m.s {
				yi := i*m.s + p
				if perClass && !valid(yi) {
					continue
				}
				mx := math.Inf(-1)
				for c := range m.k {
					mx = math.Max(mx, float64(z[i*m.o+c*m.s+p]))
				}
				var se float64
				for c := range m.k {
					se += math.Exp(float64(z[i*m.o+c*m.s+p]) - mx)
				}
				lse := mx + math.Log(se)
				for c := range m.k {
					zi := i*m.o + c*m.s + p
					var t float64
					if perClass {
						if int(b.Y[yi]) == c {
							t = 1
						}
					} else {
						t = float64(b.Y[zi])
					}
					sum -= t * (float64(z[zi]) - lse)
					if dz != nil {
						dz[zi] = float32(math.Exp(float64(z[zi])-lse) - t)
					}
				}
				count++
			}
		}
	} else {
		for i := range n * m.o {
			if !valid(i) {
				continue
			}
			zi, y := float64(z[i]), float64(b.Y[i])
			var l, g float64
			switch m.cfg.Loss.Kind {
			case "mse":
				l, g = (zi-y)*(zi-y), 2*(zi-y)
			case "mae":
				l = math.Abs(zi - y)
				if zi > y {
					g = 1
				} else if zi < y {
					g = -1
				}
			case "bce":
				l = math.Max(zi, 0) - zi*y + math.Log1p(math.Exp(-math.Abs(zi)))
				g = 1/(1+math.Exp(-zi)) - y
			}
			sum += l
			if dz != nil {
				dz[i] = float32(g)
			}
			count++
		}
	}
	if count == 0 {
		return 0
	}
	if dz != nil {
		inv := float32(1 / float64(count))
		for i := range n * m.o {
			dz[i] *= inv
		}
	}
	return sum / float64(count)
}

// TrainStep implements engine.Model.
func (m *Model) TrainStep(b *samples.Batch, scale float64) (float64, error) {
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	if err := m.check(b, m.cfg.Batch, true); err != nil {
		return 0, err
	}
	n := b.N
	if m.failAt > 0 && m.micro+1 == m.failAt {
		return 0, m.fail
	}
	if m.oomAt > 0 && m.micro+1 == m.oomAt {
		last := m.g.Nodes[len(m.g.Nodes)-1]
		return 0, &engine.OutOfMemoryError{Step: m.step, Phase: "forward", Node: last.Name, Device: "cuda:0",
			MaxAllocated: 70 << 30, MaxReserved: 75 << 30, Used: 79 << 30, Total: 80 << 30,
			Detail: "CUDA out of memory. Tried to allocate 2.00 GiB"}
	}
	x := m.xbuf[:n*m.f]
	copy(x, b.X)
	if m.noise > 0 {
		r := splitmix(m.cfg.Seed*0x9e3779b97f4a7c15 ^ uint64(m.micro+1)*0xbf58476d1ce4e5b9)
		for i := range x {
			x[i] *= float32(1 + m.noise*(2*r.float()-1))
		}
	}
	z := m.zbuf[:n*m.o]
	m.forward(x, z, n)
	dz := make([]float32, n*m.o)
	loss := m.loss(b, z, dz)
	if m.nanAt > 0 && m.micro+1 == m.nanAt {
		loss = math.NaN()
	}
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		last := m.g.Nodes[len(m.g.Nodes)-1]
		return loss, &engine.NonFiniteError{Step: m.step, MicroStep: m.micro, Loss: loss, Node: last.Name, Op: last.Op}
	}
	for i := range n {
		xi := x[i*m.f : (i+1)*m.f]
		for o := range m.o {
			g := float64(dz[i*m.o+o]) * scale
			if g == 0 {
				continue
			}
			gr := m.gw[o*m.f : (o+1)*m.f]
			for j, v := range xi {
				gr[j] += float32(g * float64(v))
			}
			m.gb[o] += float32(g)
		}
	}
	m.micro++
	m.TrainSteps++
	return loss, nil
}

// Step implements engine.Model.
func (m *Model) Step(lr float64) error {
	for _, g := range [][]float32{m.gw, m.gb} {
		for _, v := range g {
			if v-v != 0 {
				return &engine.NonFiniteError{Step: m.step, MicroStep: m.micro, Param: "linear.weight.grad"}
			}
		}
	}
	o := m.cfg.Optimizer
	m.step++
	upd := func(p, g, m1, m2 []float32) {
		for i := range p {
			gi := float64(g[i])
			pi := float64(p[i])
			switch o.Kind {
			case "sgd":
				gi += o.WeightDecay * pi
				if m1 != nil {
					v := o.Momentum*float64(m1[i]) + gi
					if m.step == 1 {
						v = gi
					}
					m1[i] = float32(v)
					if o.Nesterov {
						gi += o.Momentum * v
					} else {
						gi = v
					}
				}
				p[i] = float32(pi - lr*gi)
			case "adam", "adamw":
				if o.Kind == "adam" {
					gi += o.WeightDecay * pi
				} else {
					pi -= lr * o.WeightDecay * pi
				}
				b1, b2, eps := o.Beta1, o.Beta2, o.Eps
				a := b1*float64(m1[i]) + (1-b1)*gi
				v := b2*float64(m2[i]) + (1-b2)*gi*gi
				m1[i], m2[i] = float32(a), float32(v)
				ah := a / (1 - math.Pow(b1, float64(m.step)))
				vh := v / (1 - math.Pow(b2, float64(m.step)))
				p[i] = float32(pi - lr*ah/(math.Sqrt(vh)+eps))
			}
		}
	}
	upd(m.w, m.gw, m.m1w, m.m2w)
	upd(m.b, m.gb, m.m1b, m.m2b)
	return nil
}

// ZeroGrad implements engine.Model.
func (m *Model) ZeroGrad() {
	clear(m.gw)
	clear(m.gb)
}

// ClipGradNorm implements engine.Model.
func (m *Model) ClipGradNorm(max float64) (float64, error) {
	var s float64
	for _, g := range [][]float32{m.gw, m.gb} {
		for _, v := range g {
			s += float64(v) * float64(v)
		}
	}
	norm := math.Sqrt(s)
	if norm > max {
		f := float32(max / (norm + 1e-6))
		for _, g := range [][]float32{m.gw, m.gb} {
			for i := range g {
				g[i] *= f
			}
		}
	}
	return norm, nil
}

// Eval implements engine.Model.
func (m *Model) Eval(b *samples.Batch, out []float32) (float64, error) {
	if err := m.check(b, 0, b.Y != nil); err != nil {
		return 0, err
	}
	if out != nil && len(out) != b.N*m.o {
		return 0, fmt.Errorf("%w: output buffer of %d for %d samples of %d", engine.ErrBadBatch, len(out), b.N, m.o)
	}
	z := make([]float32, b.N*m.o)
	m.forward(b.X, z, b.N)
	if out != nil {
		copy(out, z)
	}
	if b.Y == nil {
		return 0, nil
	}
	return m.loss(b, z, nil), nil
}

// OutShape implements engine.Model.
func (m *Model) OutShape() []int64 { return append([]int64(nil), m.outShape...) }

// Precision implements engine.Model.
func (m *Model) Precision() string { return "fp32" }

// Capabilities implements engine.Model: a queue with Ahead, device
// figures with Devices, nothing else beyond the Model interface.
func (m *Model) Capabilities() engine.Capabilities {
	var c engine.Capabilities
	if m.ahead {
		c.Queue = m
	}
	if m.devices != nil {
		c.Devices = m
	}
	return c
}

// DeviceMemory implements engine.DeviceMeasurer with Backend.Devices.
func (m *Model) DeviceMemory() ([]engine.DeviceMemory, error) {
	return append([]engine.DeviceMemory(nil), m.devices...), nil
}

func (m *Model) named() []struct {
	name string
	data []float32
	dims []int64
} {
	type t = struct {
		name string
		data []float32
		dims []int64
	}
	ts := []t{{"linear.weight", m.w, []int64{int64(m.o), int64(m.f)}}, {"linear.bias", m.b, []int64{int64(m.o)}}}
	switch {
	case m.m2w != nil:
		ts = append(ts,
			t{"optimizer.linear.weight.exp_avg", m.m1w, []int64{int64(m.o), int64(m.f)}},
			t{"optimizer.linear.weight.exp_avg_sq", m.m2w, []int64{int64(m.o), int64(m.f)}},
			t{"optimizer.linear.bias.exp_avg", m.m1b, []int64{int64(m.o)}},
			t{"optimizer.linear.bias.exp_avg_sq", m.m2b, []int64{int64(m.o)}})
	case m.m1w != nil:
		ts = append(ts,
			t{"optimizer.linear.weight.momentum_buffer", m.m1w, []int64{int64(m.o), int64(m.f)}},
			t{"optimizer.linear.bias.momentum_buffer", m.m1b, []int64{int64(m.o)}})
	}
	return ts
}

// State implements engine.Model.
func (m *Model) State() engine.State {
	var s engine.State
	for _, t := range m.named() {
		s.Tensors = append(s.Tensors, engine.Tensor{Name: t.name, Shape: append([]int64(nil), t.dims...), Data: append([]float32(nil), t.data...)})
	}
	s.Counters = map[string]int64{engine.CounterStep: m.step, engine.CounterMicroStep: m.micro}
	return s
}

// SetState implements engine.Model.
func (m *Model) SetState(s engine.State) error {
	named := m.named()
	known := map[string]bool{}
	for _, t := range named {
		known[t.name] = true
		st := s.Lookup(t.name)
		if st == nil {
			return fmt.Errorf("state: %s is missing", t.name)
		}
		if numel(st.Shape) != len(t.data) || len(st.Data) != len(t.data) {
			return fmt.Errorf("state: %s has shape %v, the model's is %v", t.name, st.Shape, t.dims)
		}
	}
	for _, t := range s.Tensors {
		if !known[t.Name] {
			return fmt.Errorf("state: unknown tensor %s", t.Name)
		}
	}
	for _, t := range named {
		copy(t.data, s.Lookup(t.name).Data)
	}
	m.step = s.Counters[engine.CounterStep]
	m.micro = s.Counters[engine.CounterMicroStep]
	return nil
}

// Memory implements engine.Model.
func (m *Model) Memory() engine.MemStats {
	var s engine.MemStats
	s.Parameters = int64(len(m.w)+len(m.b)) * 4
	s.Gradients = s.Parameters
	s.Optimizer = int64(len(m.m1w)+len(m.m1b)+len(m.m2w)+len(m.m2b)) * 4
	s.Arena = int64(len(m.xbuf)+len(m.zbuf)) * 4
	s.PeakLive = s.Arena
	s.Total = s.Parameters + s.Gradients + s.Optimizer + s.Arena
	return s
}

// Close implements engine.Model.
func (m *Model) Close() error {
	m.closed = true
	return nil
}

// splitmix is SplitMix64.
type splitmixRNG struct{ s uint64 }

func splitmix(seed uint64) *splitmixRNG { return &splitmixRNG{s: seed} }

func (r *splitmixRNG) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *splitmixRNG) float() float64 { return float64(r.next()>>11) / (1 << 53) }
