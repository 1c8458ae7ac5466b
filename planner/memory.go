package planner

import (
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The memory model. A training step holds, at its peak:
//
//   - parameters: P × 4 bytes in fp32; under mixed precision (fp16, bf16)
//     the P × 2 working copy the forward reads, plus P × 4 of fp32 master
//     weights the optimizer updates;
//   - gradients: P × 4 (fp32, so accumulation over micro-batches is exact);
//   - optimizer state: P × 4 per buffer: none for SGD, one for momentum,
//     two for Adam and AdamW;
//   - activations saved for the backward pass, per node, at the precision
//     they are stored in (stdlib's Keep, Private and SavedAux rules), after
//     checkpointing (checkpoint.go);
//   - workspace for the largest op: the gradients of its inputs and output
//     and of its private buffers, live while its backward runs; on the CPU
//     also the im2col buffers a convolution lowered to a matrix product
//     needs (the column matrix and its gradient);
//   - the input batch on the device: the fp32 inputs, and the targets;
//   - on the CPU backend, which shares the host's memory with the loader,
//     the loader's buffers (workers × prefetch × batch samples).
//
// Both backends follow PyTorch's autograd for what is saved, since the
// executor's backward reads the same tensors. They differ in precision (the
// CPU executor runs fp32 only), in workspace (im2col on the CPU; cuDNN's
// implicit-GEMM workspace is small and left to the margin on a GPU), and
// in where the loader's buffers live.

// costModel is a graph priced for one backend and precision.
type costModel struct {
	backend  string
	elem     int64 // bytes per stored activation element
	mixed    bool
	buffers  int64 // optimizer state buffers
	params   int64
	ch       *chain
	baseline int64 // Σ a_i: activations per sample without checkpointing
	// workspace and input are per sample; static does not grow with the
	// batch.
	workspace int64
	input     int64
	static    staticMem
	// perNode is each node's a_i, for the layer table.
	perNode []int64
}

type staticMem struct {
	parameters, master, gradients, optimizer int64
}

func (s staticMem) total() int64 { return sum(s.parameters, s.master, s.gradients, s.optimizer) }

// matmulOps run on tensor cores under tf32, fp16 and bf16; the rest are
// elementwise or reductions on the ordinary cores.
var matmulOps = map[string]bool{"conv": true, "convtranspose": true, "dense": true, "sketched_dense": true, "attention": true}

// newCostModel prices g. targetBytes is one sample's target on the device.
func newCostModel(g *stdlib.Graph, backend string, prec plan.Precision, buffers int64, targetBytes int64) *costModel {
	m := &costModel{backend: backend, elem: prec.ActivationBytes, mixed: prec.Mixed, buffers: buffers, params: g.Params()}
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
		c.out[i] = mul(numel(nd.Out), m.elem)
		c.priv[i] = add(mul(nd.Private, m.elem), nd.SavedAux)
		c.flops[i] = nd.FLOPs
		c.inputs[i] = nd.Inputs
		for _, k := range nd.Keep {
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
	// The workspace is computed from the true sizes before the input's own
	// bytes are moved out of the chain below.
	for _, nd := range g.Nodes {
		w := add(c.out[nd.ID], c.priv[nd.ID])
		for _, j := range nd.Inputs {
			w = add(w, c.out[j])
		}
		if backend == plan.BackendCPU && nd.Op == "conv" && len(nd.In) == 1 && len(nd.In[0]) == 3 && len(nd.Out) == 3 {
			a := nd.Args
			if a.Kernel > 1 || a.Stride > 1 {
				groups := max(a.Groups, 1)
				col := mul(mul(nd.In[0][0]/groups, mul(a.Kernel, a.Kernel)), mul(nd.Out[1], nd.Out[2]))
				w = add(w, mul(2, mul(col, 4)))
			}
		}
		if w > m.workspace {
			m.workspace = w
		}
	}
	// The input batch is counted once, in fp32, as plan.Memory.Input. Under
	// mixed precision the forward casts it, and the cast copy is what a
	// first conv keeps, so it stays an activation; in fp32 the kept tensor
	// is the batch itself.
	in := int64(0)
	for _, nd := range g.Nodes {
		if nd.Op == "input" {
			in = add(in, mul(numel(nd.Out), 4))
			if !prec.Mixed {
				c.out[nd.ID] = 0
			}
		}
	}
	m.input = add(in, targetBytes)
	c.finish()
	m.ch = c
	m.perNode = make([]int64, n)
	for i := range m.perNode {
		m.perNode[i] = c.stored(i)
	}
	m.baseline = c.baseline()

	p := m.params
	if prec.Mixed {
		m.static.parameters = mul(p, 2)
		m.static.master = mul(p, 4)
	} else {
		m.static.parameters = mul(p, 4)
	}
	m.static.gradients = mul(p, 4)
	m.static.optimizer = mul(p, mul(4, buffers))
	return m
}

// perSample is what one more sample adds at a given activation peak per
// sample, with extra (loader buffers on the CPU) on top.
func (m *costModel) perSample(act, extra int64) int64 {
	return sum(act, m.workspace, m.input, extra)
}

// total is the step's memory at batch b.
func (m *costModel) total(b, act, extra int64) int64 {
	return add(m.static.total(), mul(b, m.perSample(act, extra)))
}

// maxBatch is the largest batch whose total fits budget at the given
// activations per sample, 0 when not even one sample fits.
func (m *costModel) maxBatch(budget, act, extra int64) int64 {
	room := budget - m.static.total()
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

// actBudget is the activation budget per sample at batch b: what is left
// of budget once everything else is paid for.
func (m *costModel) actBudget(budget, b, extra int64) int64 {
	room := budget - m.static.total()
	if room <= 0 || b <= 0 {
		return -1
	}
	return room/b - sum(m.workspace, m.input, extra)
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
