package torch

import (
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// What autograd saves on this engine, node by node: the torch engine's
// cost model (package cost's contract), which the planner prices a torch
// plan with.
//
// stdlib's rules (Node.Keep, Private, SavedAux) give which tensors an op's
// backward reads at one precision; this file follows each tensor's dtype
// through the graph under autocast (casts, fp32 ops, type promotion, views,
// dropout masks, attention's paths, the loss) and prices what each node's
// backward keeps, as saved-tensor hooks count it (TestSavedBytesArePyTorchs).
// Per-batch tensors are left out, as the layer table is per sample.
// Derivation: docs/design/torch-saved.md.

// torchSaved is a graph's saved bytes per sample on the torch engine.
type torchSaved struct {
	// out is each node's output in bytes at its dtype; keep the nodes
	// whose output storages each node keeps; priv what it keeps that is
	// its own (cast copies, masks, indices, statistics, inner tensors).
	out  []int64
	keep [][]int
	priv []int64
	// loss is what the loss keeps, per sample.
	loss int64
	// attention names the implementation attention is priced by
	// (attnPath), and attentionWhy says why; "" when the model has none.
	attention, attentionWhy string
}

// savedCtx is newTorchSaved's state as an op's rule (torchOp.saved)
// sees it, at the node being priced.
type savedCtx struct {
	s       *torchSaved
	gpu, ac bool // on a CUDA GPU; under autocast
	// torch is the worker's torch version ("" when not known), capability
	// the GPU's compute capability: attention's path depends on both.
	torch, capability string
	low               int64 // bytes per element of what autocast computes products in
	dt                []int64
	base              []int  // the node whose storage each output is
	contig            []bool // whether each output is contiguous
	in                func(j int) int64

	// compiled: the step runs under torch.compile (a CUDA GPU, torch
	// 2.x), whose partitioner decides what is saved (compiled.go);
	// offsetPool: its max pools keep int8 offsets (torch >= 2.8).
	compiled, offsetPool bool

	// the node: its ID, its first input (-1: none), that input's bytes
	// per element, and its output's elements.
	i, x int
	ex   int64
	out  int64
}

// as sets the node's output dtype, in bytes per element.
func (c *savedCtx) as(b int64) { c.dt[c.i] = b }

// keep saves node j's output storage.
func (c *savedCtx) keep(j int) { c.s.keep[c.i] = append(c.s.keep[c.i], c.base[j]) }

// own adds b bytes the node keeps of its own.
func (c *savedCtx) own(b int64) { c.s.priv[c.i] = cost.Add(c.s.priv[c.i], b) }

// cast saves input j in dtype size to: the input itself, or a copy of
// its elements.
func (c *savedCtx) cast(j int, to int64) {
	if c.dt[j] == to {
		c.keep(j)
	} else {
		c.own(cost.Mul(c.in(j), to))
	}
}

// newTorchSaved prices g's saved tensors on a CUDA GPU (gpu) or the CPU,
// at precision prec, with the loss given: each node by its op's rule in
// torchOps.
func newTorchSaved(g *stdlib.Graph, gpu bool, prec plan.Precision, loss, torch, capability string) *torchSaved {
	n := len(g.Nodes)
	s := &torchSaved{out: make([]int64, n), keep: make([][]int, n), priv: make([]int64, n)}
	low := int64(4)
	if prec.Mixed && prec.ActivationBytes > 0 {
		low = prec.ActivationBytes
	}
	c := &savedCtx{s: s, gpu: gpu, ac: low != 4, low: low, torch: torch, capability: capability,
		dt: make([]int64, n), base: make([]int, n), contig: make([]bool, n),
		in: func(j int) int64 { return cost.Numel(g.Nodes[j].Out) }}
	c.compiled, c.offsetPool = compiledSaves(gpu, torch)
	for _, nd := range g.Nodes {
		i := nd.ID
		c.base[i], c.contig[i] = i, true
		c.i, c.x, c.ex, c.out = i, -1, 4, cost.Numel(nd.Out)
		if len(nd.Inputs) > 0 {
			c.x = nd.Inputs[0]
			c.ex = c.dt[c.x]
		}
		if op := torchOps[nd.Op]; op.saved != nil {
			op.saved(c, nd)
		} else {
			// An op with no rule: stdlib's at the activation precision.
			c.as(prec.ActivationBytes)
			for _, k := range nd.Keep {
				if k == i {
					s.keep[i] = append(s.keep[i], i)
				} else if k >= 0 && k < i {
					c.keep(k)
				}
			}
			s.priv[i] = cost.Add(cost.Mul(nd.Private, prec.ActivationBytes), nd.SavedAux)
		}
		s.out[i] = cost.Mul(c.out, c.dt[i])
	}
	s.loss = lossSaved(g, loss, c.dt, c.base, s)
	if c.compiled {
		compiledMasks(g, c)
	}
	return s
}

// The rules several ops share.

// savedProduct: a convolution or matrix product, computed in autocast's
// precision, keeps its input in it.
func savedProduct(c *savedCtx, _ *stdlib.Node) {
	c.as(c.low)
	c.cast(c.x, c.low)
}

// savedSketched: a product and the sketch's terms·rank inner tensors.
func savedSketched(c *savedCtx, nd *stdlib.Node) {
	savedProduct(c, nd)
	c.own(cost.Mul(cost.Mul(nd.Args.Terms, nd.Args.Rank), c.low))
}

func savedKeepsInput(c *savedCtx, _ *stdlib.Node) {
	c.as(c.ex)
	c.keep(c.x)
}

func savedKeepsOutput(c *savedCtx, _ *stdlib.Node) {
	c.as(c.ex)
	c.keep(c.i)
}

func savedNothing(c *savedCtx, _ *stdlib.Node) { c.as(c.ex) }

// savedWidest: type promotion over the inputs, nothing kept.
func savedWidest(c *savedCtx, nd *stdlib.Node) {
	for _, j := range nd.Inputs {
		c.as(max(c.dt[c.i], c.dt[j]))
	}
}

// savedStridedView: a view of the input that is not contiguous.
func savedStridedView(c *savedCtx, _ *stdlib.Node) {
	c.as(c.ex)
	c.base[c.i], c.contig[c.i] = c.base[c.x], false
}

func savedAttention(c *savedCtx, nd *stdlib.Node) {
	low := c.low
	c.as(low)
	t, d, h := nd.In[0][0], nd.In[0][1], nd.Args.Heads
	td := cost.Mul(t, d)
	path := attentionPath(c.torch, c.gpu, c.capability, low < 4, nd.Args.Causal, nd.Args.P > 0)
	if c.s.attention == "" || path.name == "math" {
		c.s.attention, c.s.attentionWhy = path.name, path.why
	}
	if path.fused {
		// q, k, v, the heads' output and the projections' inputs, and
		// each row's logsumexp (fp32).
		c.own(cost.Add(cost.Mul(cost.Mul(6, td), low), cost.Mul(cost.Mul(h, t), 4)))
		return
	}
	c.own(cost.Add(cost.Mul(cost.Mul(5, td), low), cost.Mul(cost.Mul(h, cost.Mul(t, t)), low)))
	if nd.Args.P > 0 {
		// Dropout on the probabilities: its scaled noise and the
		// dropped probabilities the next product reads.
		c.own(cost.Mul(cost.Mul(h, cost.Mul(t, t)), 2*low))
	}
}

// savedRandomAttention follows the worker's twin op by op (measured with
// saved-tensor hooks): each projection keeps its input (under autocast a
// cast copy each) and autocast casts the features once; then q′, k′
// (softmax), v, num and o (relu: three T·D); φ's exponentials or relus,
// φ(q) twice (a product's copy) and φ(k)'s copy (5·H·T·M); the
// denominators (H·T); S and Σφ(k) (causal: the prefix sums of φ(k)·vᵀ,
// H·T·M·d); the softmax maxima's int64 positions.
func savedRandomAttention(c *savedCtx, nd *stdlib.Node) {
	c.as(c.low)
	t, d, h, mf := nd.In[0][0], nd.In[0][1], nd.Args.Heads, nd.Args.Features
	dh, relu := d/max(h, 1), nd.Args.Mode == "relu"
	for range 3 {
		c.cast(c.x, c.low)
	}
	tds := int64(5)
	if relu {
		tds = 3
	}
	htm := cost.Mul(h, cost.Mul(t, mf))
	el := cost.Add(cost.Add(cost.Mul(tds, cost.Mul(t, d)), cost.Mul(5, htm)), cost.Mul(h, t))
	if nd.Args.Causal {
		el = cost.Add(el, cost.Mul(htm, dh))
	} else {
		el = cost.Add(el, cost.Mul(cost.Mul(h, mf), dh+1))
	}
	if c.ac {
		el = cost.Add(el, cost.Mul(mf, dh))
	}
	c.own(cost.Mul(el, c.low))
	if !relu {
		c.own(cost.Mul(cost.Add(cost.Mul(2, cost.Mul(h, t)), h), 8))
	}
}

// lossSaved is what the loss keeps per sample (the worker's compute_loss),
// fp32 throughout: the logits are cast to fp32 first. Where the loss
// keeps the logits themselves (bce on fp32 logits), the node keeps them.
func lossSaved(g *stdlib.Graph, loss string, dt []int64, base []int, s *torchSaved) int64 {
	o := g.Node(g.Output)
	if o == nil {
		return 0
	}
	shape := o.Out
	logits := o.ID
	if (loss == "cross_entropy" || loss == "" || loss == "bce") && len(o.Inputs) > 0 &&
		((o.Op == "softmax" && loss != "bce") || (o.Op == "sigmoid" && loss == "bce")) {
		logits = o.Inputs[0]
	}
	all := cost.Mul(cost.Numel(shape), 4)
	switch loss {
	case "cross_entropy", "":
		positions := int64(1)
		if len(shape) > 1 {
			positions = cost.Numel(shape[1:])
		}
		if len(shape) > 0 && shape[0] > 1 {
			return cost.Add(all, cost.Mul(positions, 8)) // log-softmax, int64 targets
		}
		return cost.Mul(all, 2) // log-softmax, soft targets
	case "bce":
		if dt[logits] == 4 {
			s.keep[logits] = append(s.keep[logits], base[logits])
			return all // the targets
		}
		return cost.Mul(all, 2) // an fp32 copy of the logits, the targets
	case "mse", "mae":
		return all // the difference
	case "dice":
		if o.Op == "sigmoid" {
			return all // the targets: the probabilities are the output
		}
		return cost.Mul(all, 2) // the probabilities, the targets
	}
	return all
}

// Cost is the torch engine's cost model; its zero value is ready.
type Cost struct{}

var _ cost.Engine = Cost{}

// Memory implements cost.Engine: what autograd saves per node on the
// device, oneDNN's copies on the CPU, and PyTorch's caching allocator on
// a GPU.
func (c Cost) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory {
	return c.memory(g, s, cpuSetup(s))
}

// memory is Memory with the CPU kernels chosen by cpu (nil: not known).
func (Cost) memory(g *stdlib.Graph, s cost.Setup, cpu *CPUSetup) cost.Memory {
	capability := ""
	if s.GPU != nil {
		capability = s.GPU.Capability
	}
	ts := newTorchSaved(g, s.Device == plan.BackendGPU, s.Precision, s.Loss, s.Host.Version, capability)
	m := cost.Memory{Out: ts.out, Keep: ts.keep, Own: ts.priv, Loss: ts.loss, Attention: ts.attention, AttentionWhy: ts.attentionWhy}
	if s.Device != plan.BackendGPU {
		low := int64(4)
		if s.Precision.Mixed && s.Precision.ActivationBytes > 0 {
			low = s.Precision.ActivationBytes
		}
		m.Work = convWork(g, low, cpu)
		m.Workspaces = convScratch(g, low, cpu)
		m.ConvPath, m.ConvPathWhy = convPath(g, low, cpu)
	}
	if s.Device == plan.BackendGPU {
		m.Allocator = CachingAllocator{}
		if s.GPU != nil && s.GPU.Capability != "" {
			gt := newGPUTerms(g, s.Precision, *s.GPU, s.Host.Version)
			m.GPU = gt
			m.Version, m.VersionAssumed = gt.torch, gt.assumed
			m.Workspaces = gt.layerWorkspaces(g)
		}
	}
	return m
}
