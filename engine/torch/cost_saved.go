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
	// attention says which implementation prices attention: "math" or
	// "fused"; "" when the model has none.
	attention string
}

// newTorchSaved prices g's saved tensors on a CUDA GPU (gpu) or the CPU,
// at precision prec, with the loss given.
func newTorchSaved(g *stdlib.Graph, gpu bool, prec plan.Precision, loss string) *torchSaved {
	n := len(g.Nodes)
	s := &torchSaved{out: make([]int64, n), keep: make([][]int, n), priv: make([]int64, n)}
	low := int64(4) // what autocast computes products in
	if prec.Mixed && prec.ActivationBytes > 0 {
		low = prec.ActivationBytes
	}
	ac := low != 4
	dt := make([]int64, n)    // bytes per element of each node's output
	base := make([]int, n)    // the node whose storage each output is
	contig := make([]bool, n) // whether the output is contiguous
	keepIn := func(i, j int) { s.keep[i] = append(s.keep[i], base[j]) }
	// castIn saves input j of node i in dtype size to: the input itself,
	// or a copy of its elements.
	castIn := func(i, j int, to int64) {
		if dt[j] == to {
			keepIn(i, j)
		} else {
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Numel(g.Nodes[j].Out), to))
		}
	}
	for _, nd := range g.Nodes {
		i := nd.ID
		base[i], contig[i] = i, true
		x := -1
		if len(nd.Inputs) > 0 {
			x = nd.Inputs[0]
		}
		ex := int64(4)
		if x >= 0 {
			ex = dt[x]
		}
		out := cost.Numel(nd.Out)
		switch nd.Op {
		case "input":
			dt[i] = 4
		case "conv", "dense":
			dt[i] = low
			castIn(i, x, low)
		case "convtranspose":
			// CPU autocast in PyTorch 1.13 lists conv_transpose2d among
			// its fp32 ops (later versions among the low-precision ones).
			dt[i] = low
			if !gpu {
				dt[i] = 4
			}
			castIn(i, x, dt[i])
		case "lowrank_dense":
			dt[i] = low
			castIn(i, x, low)
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Mul(nd.Args.Terms, nd.Args.Rank), low))
		case "sketched_dense": // x for S1's gradient, x·U2_i for S2's
			dt[i] = low
			castIn(i, x, low)
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Mul(nd.Args.Terms, nd.Args.Rank), low))
		case "sketched_conv": // x; the projection by the fixed U keeps no activation
			dt[i] = low
			castIn(i, x, low)
		case "batchnorm", "avgpool", "gap", "gelu", "leakyrelu":
			dt[i] = ex
			keepIn(i, x)
		case "instancenorm":
			// A batch norm of [1, N·C, H, W]: its input (a view) and an
			// fp32 mean and inverse deviation per channel of each sample.
			dt[i] = ex
			keepIn(i, x)
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(nd.Out[0], 8))
		case "groupnorm":
			// native_group_norm keeps its input and an fp32 mean and
			// inverse deviation per group of each sample. Under autocast
			// it runs in fp32 (CUDA's autocast casts it; the worker's
			// GroupNorm32 does on the CPU), keeping the fp32 copy.
			dt[i] = ex
			if ac {
				dt[i] = 4
			}
			castIn(i, x, dt[i])
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(nd.Args.Groups, 8))
		case "pixelshuffle":
			dt[i] = ex
		case "layernorm":
			dt[i] = ex
			if gpu && ac {
				dt[i] = 4
			}
			castIn(i, x, dt[i])
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Numel(nd.Out[:len(nd.Out)-1]), 8))
		case "relu", "sigmoid", "tanh":
			dt[i] = ex
			s.keep[i] = append(s.keep[i], i)
		case "softmax":
			dt[i] = ex
			if gpu && ac {
				dt[i] = 4
			}
			s.keep[i] = append(s.keep[i], i)
		case "maxpool":
			dt[i] = ex
			if len(nd.Out) == 4 && !gpu {
				// CPU autocast in PyTorch 1.13 lists max_pool3d among
				// its fp32 ops: it keeps an fp32 copy of a bf16 input.
				dt[i] = 4
				castIn(i, x, 4)
			} else {
				keepIn(i, x)
			}
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(out, 8))
		case "dropout":
			dt[i] = ex
			switch {
			case nd.Args.P <= 0:
				base[i], contig[i] = base[x], contig[x]
			case gpu:
				s.priv[i] = cost.Add(s.priv[i], out)
			default:
				s.priv[i] = cost.Add(s.priv[i], cost.Mul(out, ex))
			}
		case "flatten":
			dt[i] = ex
			if contig[x] {
				base[i] = base[x]
			}
		case "tokens", "select_token":
			dt[i] = ex
			base[i], contig[i] = base[x], false
		case "class_token", "pos_embed":
			// A concat with, or a sum with, an fp32 parameter.
			dt[i] = 4
		case "upsample":
			dt[i] = ex
		case "mean_tokens":
			// Measured: PyTorch 1.13's mean over the tokens keeps its
			// input (what attention's output views, a whole [T, N, D]).
			dt[i] = ex
			keepIn(i, x)
		case "concat", "add":
			for _, j := range nd.Inputs {
				dt[i] = max(dt[i], dt[j])
			}
		case "attention":
			dt[i] = low
			t, d, h := nd.In[0][0], nd.In[0][1], nd.Args.Heads
			td := cost.Mul(t, d)
			if gpu {
				s.attention = "fused"
				s.priv[i] = cost.Add(cost.Mul(cost.Mul(6, td), low), cost.Mul(cost.Mul(h, t), 4))
			} else {
				if s.attention == "" {
					s.attention = "math"
				}
				sm := low
				if gpu && ac {
					sm = 4 + low
				}
				s.priv[i] = cost.Add(cost.Mul(cost.Mul(5, td), low), cost.Mul(cost.Mul(h, cost.Mul(t, t)), sm))
				if nd.Args.P > 0 {
					// Dropout on the probabilities: its scaled noise and
					// the dropped probabilities the next product reads.
					s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Mul(h, cost.Mul(t, t)), 2*low))
				}
			}
		case "random_attention":
			// the worker's twin, op by op (measured with saved-tensor
			// hooks): each projection keeps its input (under autocast a
			// cast copy each) and autocast casts the features once; then
			// q′, k′ (softmax), v, num and o (relu: three T·D); φ's exponentials or relus, φ(q) twice
			// (a product's copy) and φ(k)'s copy (5·H·T·M); the
			// denominators (H·T); S and Σφ(k) (causal: the prefix sums of
			// φ(k)·vᵀ, H·T·M·d); the softmax maxima's int64 positions.
			dt[i] = low
			t, d, h, mf := nd.In[0][0], nd.In[0][1], nd.Args.Heads, nd.Args.Features
			dh, relu := d/max(h, 1), nd.Args.Mode == "relu"
			for range 3 {
				castIn(i, x, low)
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
			if ac {
				el = cost.Add(el, cost.Mul(mf, dh))
			}
			s.priv[i] = cost.Add(s.priv[i], cost.Mul(el, low))
			if !relu {
				s.priv[i] = cost.Add(s.priv[i], cost.Mul(cost.Add(cost.Mul(2, cost.Mul(h, t)), h), 8))
			}
		default:
			// An op this file does not know: stdlib's rule at the
			// activation precision.
			dt[i] = prec.ActivationBytes
			for _, k := range nd.Keep {
				if k == i {
					s.keep[i] = append(s.keep[i], i)
				} else if k >= 0 && k < i {
					keepIn(i, k)
				}
			}
			s.priv[i] = cost.Add(cost.Mul(nd.Private, prec.ActivationBytes), nd.SavedAux)
		}
		s.out[i] = cost.Mul(out, dt[i])
	}
	s.loss = lossSaved(g, loss, dt, base, s)
	return s
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

// Name implements cost.Engine.
func (Cost) Name() string { return plan.EngineTorch }

// Memory implements cost.Engine: what autograd saves per node on the
// device, and PyTorch's caching allocator on a GPU.
func (Cost) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory {
	ts := newTorchSaved(g, s.Device == plan.BackendGPU, s.Precision, s.Loss)
	m := cost.Memory{Out: ts.out, Keep: ts.keep, Own: ts.priv, Loss: ts.loss, Attention: ts.attention}
	if s.Device == plan.BackendGPU {
		m.Allocator = CachingAllocator{}
		if s.GPU != nil && s.GPU.Capability != "" {
			m.GPU = newGPUTerms(g, s.Precision, *s.GPU)
		}
	}
	return m
}
