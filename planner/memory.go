package planner

import (
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The memory model. A plan's memory is the peak of one training step, in
// components (plan.Memory), priced per backend from the same graph facts:
// each node's output shape, parameters, and what its backward reads. The
// two backends allocate differently, so they have two models; both are a
// static part, independent of the batch, plus a part per sample, which is
// what lets the batch be solved for (batch.go). Each engine prices itself
// (package cost, handed in by WithCosts); the GPU's terms are in
// memory_gpu.go, the native engine's in memory_cpu.go.
// Derivation: docs/design/gpu-memory.md.

// costModel is a graph priced for one backend and precision.
type costModel struct {
	backend string
	elem    int64 // bytes per stored activation element
	mixed   bool
	buffers int64 // optimizer state buffers
	params  int64
	ch      *chain
	// baseline is the activation peak per sample without checkpointing:
	// Σ a_i on a GPU, the step's working memory on the CPU.
	baseline int64
	// workspace, input and eval are per sample; static does not grow with
	// the batch.
	workspace int64
	// gan is the discriminator's share while the batch is chosen
	// (gan_batch.go): total, maxBatch and actBudget count it.
	gan   ganShare
	input int64
	// unitInput is what one more step a command adds per sample: the
	// torch worker's input slots on the CPU, each of which holds a unit's
	// batches side by side (0 where the plan's total is the device's).
	unitInput int64
	eval      int64
	static    staticMem
	// perNode is each node's a_i, for the layer table.
	perNode []int64
	// lossSaved is what the loss keeps per sample, part of the
	// activations (the input node's in the chain, never recomputed), and
	// attention the implementation that prices attention (cost.Memory);
	// both the torch engine's.
	lossSaved               int64
	attention, attentionWhy string
	// convPath names the kernels the CPU's convs were priced on, and
	// convPathWhy why (cost.Memory).
	convPath, convPathWhy string
	// version is the library version the engine priced for, and
	// whether it assumed it (cost.Memory).
	version        string
	versionAssumed bool
	// workspaces is the engine's per-node scratch (cost.Memory), for
	// the plan's layers.
	workspaces []cost.Workspace
	// gpuTerms is the engine's GPU terms (cost.Memory.GPU), nil when it
	// prices none.
	gpuTerms cost.GPU
	// cpu is the CPU executor's step; nil on a GPU.
	cpu *cpuModel
	// gcDiv sets the garbage collector's headroom, 1/gcDiv of the heap
	// (process.go); 0 on a GPU.
	gcDiv int64
	// folds is the CPU evaluation's folded conv weights, in eval.
	folds int64
	// alloc is the engine's caching allocator, where it has one.
	alloc cost.Allocator
	// gpu is the torch engine's model on a CUDA device (memory_gpu.go),
	// whose phases and allocator replace the linear total; nil elsewhere.
	gpu *gpuModel
	// min caches minPlan.
	min *minResult
}

type staticMem struct {
	parameters, master, gradients, optimizer int64
	// scratch and fixed are the CPU executor's: per-thread scratch, and
	// the per-channel buffers whose size does not depend on the batch;
	// for the torch engine scratch is its CPU kernels' largest scratch
	// that does not grow with the batch (oneDNN's AMX weight gradient).
	scratch, fixed int64
	// The rest of a native run's process (process.go): runtime is what
	// the process holds before any data or model (its code, its
	// libraries, the Go runtime), data the sources' samples as they are
	// held, checkpoint the copy of the state a checkpoint is written from.
	runtime, data, checkpoint int64
}

// heap is what lives on the Go heap (or, on a GPU, on the device): all
// but the process's runtime.
func (s staticMem) heap() int64 {
	return sum(s.parameters, s.master, s.gradients, s.optimizer, s.scratch, s.fixed, s.data, s.checkpoint)
}

func (s staticMem) total() int64 { return add(s.runtime, s.heap()) }

type minResult struct {
	r    ckptResult
	peak int64
	ok   bool
}

// matmulOps run on tensor cores under tf32, fp16 and bf16; the rest are
// elementwise or reductions on the ordinary cores.
var matmulOps = map[string]bool{"conv": true, "convtranspose": true, "dense": true, "lowrank_dense": true, "attention": true,
	"sketched_dense": true, "sketched_conv": true, "random_attention": true}

// newChain returns the checkpoint solver's view of g priced by an engine
// (cost.Memory): each node's output, the outputs it keeps and its own
// bytes; the loss's bytes are the input node's, which is never
// recomputed.
func newChain(g *stdlib.Graph, mem cost.Memory) *chain {
	n := len(g.Nodes)
	c := &chain{
		out: make([]int64, n), kept: make([]bool, n), priv: make([]int64, n), flops: make([]int64, n),
		inputs: make([][]int, n), last: make([]int, n), fixed: make([]bool, n),
	}
	for i := range c.last {
		c.last[i] = -1
	}
	for _, nd := range g.Nodes {
		i := nd.ID
		c.out[i] = mem.Out[i]
		c.priv[i] = mem.Own[i]
		c.flops[i] = nd.FLOPs
		c.inputs[i] = nd.Inputs
		for _, k := range mem.Keep[i] {
			if k >= 0 && k < n {
				c.kept[k] = true
			}
		}
		for _, j := range nd.Inputs {
			if j >= 0 && j < n && i > c.last[j] {
				c.last[j] = i
			}
		}
		if nd.Op == "input" {
			c.fixed[i] = true
		}
	}
	if g.Output >= 0 && g.Output < n {
		c.last[g.Output] = n
	}
	if n > 0 {
		c.priv[0] = add(c.priv[0], mem.Loss)
	}
	return c
}

// newCostModel prices g for an engine in a worker on a GPU or the CPU
// with the engine's cost model e (autograd's saving rules; a caching
// allocator on a GPU) under s (its device, precision and loss, what the
// GPU terms depend on, the host's facts). buffers is the optimizer's
// state buffers, targetBytes one sample's target on the device.
func newCostModel(e cost.Engine, g *stdlib.Graph, s cost.Setup, buffers int64, targetBytes int64) *costModel {
	backend, prec := s.Device, s.Precision
	m := &costModel{backend: backend, elem: prec.ActivationBytes, mixed: prec.Mixed, buffers: buffers, params: g.Params()}
	mem := e.Memory(g, s)
	m.attentionWhy, m.workspaces = mem.AttentionWhy, mem.Workspaces
	m.attention, m.lossSaved, m.alloc, m.gpuTerms = mem.Attention, mem.Loss, mem.Allocator, mem.GPU
	m.convPath, m.convPathWhy = mem.ConvPath, mem.ConvPathWhy
	m.version, m.versionAssumed = mem.Version, mem.VersionAssumed
	if backend == plan.BackendCPU {
		// The CPU kernels' scratch that does not grow with the batch
		// (oneDNN's AMX weight gradient), the largest conv's: the step
		// holds one conv's at a time.
		for _, w := range mem.Workspaces {
			m.static.scratch = max(m.static.scratch, w.Fixed)
		}
	}
	c := newChain(g, mem)
	// The workspace is computed from the true sizes before the input's own
	// bytes are moved out of the chain below.
	for _, nd := range g.Nodes {
		w := add(c.out[nd.ID], c.priv[nd.ID])
		for _, j := range nd.Inputs {
			w = add(w, c.out[j])
		}
		if nd.ID < len(mem.Work) {
			w = add(w, mem.Work[nd.ID])
		}
		if w > m.workspace {
			m.workspace = w
		}
	}
	// The input batch is counted once, in fp32, as plan.Memory.Input. Under
	// mixed precision the forward casts it, and the cast copy is what a
	// first conv keeps, its own; in fp32 the kept tensor is the batch
	// itself.
	in := int64(0)
	for _, nd := range g.Nodes {
		if nd.Op == "input" {
			in = add(in, mul(numel(nd.Out), 4))
			c.out[nd.ID] = 0
		}
	}
	m.input = add(in, targetBytes)
	c.finish()
	m.ch = c
	m.perNode = make([]int64, len(g.Nodes))
	for i := range m.perNode {
		m.perNode[i] = c.stored(i)
	}
	if len(m.perNode) > 0 {
		m.perNode[0] -= m.lossSaved // the loss's line, not the input's
	}
	m.baseline = c.baseline()

	p := m.params
	if prec.Mixed {
		m.static.parameters = mul(p, 2)
		m.static.master = mul(p, 4)
	} else {
		m.static.parameters = mul(p, 4)
	}
	// Panther's fixed sketches stay fp32 beside the parameters.
	for _, nd := range g.Nodes {
		m.static.parameters = add(m.static.parameters, mul(nd.Buffers, 4))
	}
	m.static.gradients = mul(p, 4)
	m.static.optimizer = mul(p, mul(4, buffers))
	return m
}

// minPlan returns the checkpoint plan of least peak (what checkpoint all
// runs, and what bounds the largest batch), that peak per sample, and
// whether the solver returned the plan.
func (m *costModel) minPlan() (ckptResult, int64, bool) {
	if m.min != nil {
		return m.min.r, m.min.peak, m.min.ok
	}
	pk := m.ch.minPeak()
	r, ok := m.ch.solve(pk)
	if m.cpu != nil {
		// The plan of least kept memory is measured as the executor lays
		// it out; where that is no lower than storing everything (the
		// gradients of the recomputed tensors can outweigh the saving),
		// nothing is recomputed.
		pk = m.baseline
		if ok {
			if p := m.cpu.train(r.Segments).peak; p < m.baseline {
				r.Peak, pk = p, p
			} else {
				ok = false
			}
		}
		if !ok {
			r, ok = ckptResult{Peak: m.baseline, Exact: true}, true
		}
	}
	m.min = &minResult{r: r, peak: pk, ok: ok}
	return r, pk, ok
}

// solve returns the checkpoint plan of least extra FLOPs whose activation
// peak per sample (as baseline counts it) is at most budget.
//
// On a GPU that is checkpoint.go's programme. On the CPU the programme
// bounds the kept tensors, and the step's peak adds what the backward
// holds besides them (the activations' gradients, the recomputed
// segment's tensors): the programme runs with the budget less that
// difference as measured without checkpointing, the executor's layout
// measures the plan, and the programme's budget comes down by what the
// plan exceeded until it fits, falling back on the plan of least peak.
func (m *costModel) solve(budget int64) (ckptResult, bool) {
	if m.cpu == nil {
		return m.ch.solve(budget)
	}
	if budget < 0 {
		return ckptResult{}, false
	}
	low := m.cpu.chainMin(m.ch)
	cb := budget - m.cpu.overhead
	for range 8 {
		if cb < low {
			cb = low
		}
		r, ok := m.ch.solve(cb)
		if !ok {
			break
		}
		r.Peak = m.cpu.train(r.Segments).peak
		if r.Peak <= budget {
			return r, true
		}
		if cb == low {
			break
		}
		cb -= r.Peak - budget
	}
	if r, pk, _ := m.minPlan(); pk <= budget {
		return r, true
	}
	return ckptResult{}, false
}

// perSample is what one more sample adds at a given activation peak per
// sample, with extra (loader buffers on the CPU) on top.
func (m *costModel) perSample(act, extra int64) int64 {
	return sum(act, m.workspace, m.input, m.eval, extra)
}

// modelTotal is the step's memory at batch b: on the CPU the whole process's,
// the garbage collector's headroom included.
func (m *costModel) modelTotal(b, act, extra int64) int64 {
	if m.gpu != nil {
		return m.gpu.total(m, b, act)
	}
	h := add(m.static.heap(), mul(b, m.perSample(act, extra)))
	return sum(m.static.runtime, h, m.headroom(h))
}

// headroom is the garbage collector's room over a heap of h bytes: the
// run sets the Go runtime's soft memory limit to the plan's total less
// the runtime's baseline (process.go), which leaves the collector this
// much for garbage between collections; 0 on a GPU.
func (m *costModel) headroom(h int64) int64 {
	if m.gcDiv <= 0 {
		return 0
	}
	return max(h/m.gcDiv, minHeadroom)
}

// heapRoom is what budget leaves the heap once the runtime's baseline
// and the collector's headroom are paid for, less the static heap.
func (m *costModel) heapRoom(budget int64) int64 {
	room := budget - m.static.runtime
	if m.gcDiv > 0 && room > 0 {
		room = min(room/(m.gcDiv+1)*m.gcDiv, room-minHeadroom)
	}
	return room - m.static.heap()
}

// modelMaxBatch is the largest batch whose total fits budget at the given
// activations per sample, 0 when not even one sample fits.
func (m *costModel) modelMaxBatch(budget, act, extra int64) int64 {
	if m.gpu != nil {
		return m.gpu.maxBatch(m, budget, act)
	}
	room := m.heapRoom(budget)
	if room <= 0 {
		return 0
	}
	ps := m.perSample(act, extra)
	if ps <= 0 || ps == sat {
		if ps == 0 {
			return sat
		}
		return 0
	}
	return room / ps
}

// modelActBudget is the activation budget per sample at batch b: what is left
// of budget once everything else is paid for.
func (m *costModel) modelActBudget(budget, b, extra int64) int64 {
	if m.gpu != nil {
		return m.gpu.actBudget(m, budget, b)
	}
	room := m.heapRoom(budget)
	if room <= 0 || b <= 0 {
		return -1
	}
	return room/b - sum(m.workspace, m.input, m.eval, extra)
}

// memory fills the plan's memory components at batch b with the
// checkpoint segments segs, whose activation peak per sample is act;
// extra is the loader's buffers per sample where they count.
func (m *costModel) memory(mem *plan.Memory, b, act, extra int64, segs []segment) {
	mem.Parameters, mem.Master, mem.Gradients, mem.Optimizer = m.static.parameters, m.static.master, m.static.gradients, m.static.optimizer
	mem.Loader = mul(extra, b)
	mem.Total = m.total(b, act, extra)
	mem.Runtime, mem.Data, mem.Checkpoint, mem.Folds = m.static.runtime, m.static.data, m.static.checkpoint, m.folds
	mem.Headroom = m.headroom(add(m.static.heap(), mul(b, m.perSample(act, extra))))
	if m.cpu == nil {
		mem.LossSaved = mul(m.lossSaved, b)
		mem.Activations = mul(act, b)
		mem.ActivationsBefore = mul(m.baseline, b)
		mem.Workspace = add(mul(m.workspace, b), m.static.scratch)
		mem.Input = mul(m.input, b)
		if m.gpu != nil {
			m.gpu.memory(m, mem, b, act)
		}
		return
	}
	// The CPU's arena peak, split: the kept tensors at the end of the
	// forward pass (the input's copy apart), and what the backward adds.
	s, none := m.cpu.train(segs), m.cpu.train(nil)
	mem.Activations = add(mul(sub(s.saved, s.input), b), m.cpu.fixedTrain)
	mem.ActivationsBefore = add(mul(sub(none.saved, none.input), b), m.cpu.fixedTrain)
	mem.ActivationGradients = mul(sub(s.peak, s.saved), b)
	mem.Input = mul(s.input, b)
	mem.Workspace = m.static.scratch
	mem.Eval = add(mul(m.eval, b), m.cpu.fixedEval)
}

// peakBytes is a checkpoint plan's activation peak at batch b as
// plan.Checkpoint reports it.
func (m *costModel) peakBytes(act, b int64) int64 {
	if m.cpu == nil {
		return mul(act, b)
	}
	return add(mul(act, b), m.cpu.fixedTrain)
}

// targetBytes is one sample's target as the loss reads it: an int64 class
// per sample, or per pixel for a dense prediction, for cross_entropy; the
// output's size in fp32 for the other losses.
func targetBytes(loss string, out []int64) int64 {
	if loss == "cross_entropy" || loss == "" {
		if len(out) == 3 {
			return mul(mul(out[1], out[2]), 8)
		}
		return 8
	}
	return mul(numel(out), 4)
}
