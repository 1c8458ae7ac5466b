package torch

import (
	"pipe/planner/cost"
	"pipe/stdlib"
)

// What a compiled step saves for the backward. Under torch.compile,
// AOTAutograd traces the forward and backward as one graph and its
// min-cut partitioner (torch/_functorch/partitioners.py,
// min_cut_rematerialization_partition) saves the cheapest set of tensors
// from which the backward can recompute the rest: pointwise ops are
// recomputed, a tensor a convolution or a matrix product reads in the
// backward is saved (should_ban_recomputation, is_materialized_backwards).
// Two eager rules change, for the ops pipe's examples use; the others
// keep eager's price (a bound). Derivation: docs/design/torch-saved.md.

// inductorPoolWindow is the largest max-pool window Inductor lowers with
// int8 offsets (lowering.py, should_fallback_max_pool_with_indices: a
// window over 25 falls back to aten's int64 indices).
const inductorPoolWindow = 25

// compiledSaves says whether a step on a CUDA GPU (gpu) with the torch
// given ("" when not known: the assumed GPU torch) runs compiled, and
// whether its max pools keep int8 offsets: Inductor's decomposition of
// max_pool2d/3d_with_indices into _low_memory_max_pool_with_offsets
// (torch/_inductor/decomposition.py), for 3-D pools too from 2.8, which
// the plan takes for both (2-D pools had it earlier; the smaller release
// is not priced, so a plan for 2.4 to 2.7 keeps eager's int64 bound).
func compiledSaves(gpu bool, torch string) (compiled, offsets bool) {
	if !gpu {
		return false, false
	}
	v, _ := gpuTorch(torch)
	compiled = torchMajor(v) >= 2
	return compiled, compiled && versionAtLeast(v, [3]int{2, 8, 0})
}

// poolWindow is a pool's window in elements: kernel^dims.
func poolWindow(nd *stdlib.Node) int64 {
	w := int64(1)
	for range max(len(nd.Out)-1, 1) {
		w = cost.Mul(w, max(nd.Args.Kernel, 1))
	}
	return w
}

// compiledMasks applies the partitioner to the relus: eager keeps a
// relu's output for its backward (threshold_backward), which reads it
// only through pointwise ops. When no other node keeps that output (no
// convolution or matrix product reads it in the backward), the cut
// recomputes it: from nothing more when its input can be recomputed from
// what is saved anyway (a batchnorm's input and statistics, sums of
// those), else from the 1-byte bool mask out <= 0 (torch.bool), which the
// cut prefers to any wider tensor on the path.
func compiledMasks(g *stdlib.Graph, c *savedCtx) {
	s := c.s
	keepers := make([]int, len(g.Nodes))
	for _, ks := range s.keep {
		for _, b := range ks {
			keepers[b]++
		}
	}
	for _, nd := range g.Nodes {
		i := nd.ID
		if nd.Op != "relu" || len(nd.Inputs) == 0 || c.base[i] != i || keepers[i] != 1 || !keepsOnly(s.keep[i], i) {
			continue
		}
		s.keep[i] = nil
		keepers[i] = 0
		if !recomputable(g, c, keepers, nd.Inputs[0], 0) {
			s.priv[i] = cost.Add(s.priv[i], cost.Numel(nd.Out))
		}
	}
}

// keepsOnly says ks is the node's own output, once.
func keepsOnly(ks []int, i int) bool { return len(ks) == 1 && ks[0] == i }

// recomputable says node j's output can be recomputed in the backward
// from tensors saved anyway: kept by a node, a batchnorm's output (its
// input and statistics are saved for its own backward, and the affine
// parameters are the step's inputs), the network's input, or a sum or
// relu of such tensors. depth bounds the walk.
func recomputable(g *stdlib.Graph, c *savedCtx, keepers []int, j, depth int) bool {
	if j < 0 || depth > 64 {
		return false
	}
	if keepers[c.base[j]] > 0 {
		return true
	}
	nd := g.Nodes[j]
	switch nd.Op {
	case "input", "batchnorm":
		return true
	case "add", "relu":
		for _, k := range nd.Inputs {
			if !recomputable(g, c, keepers, k, depth+1) {
				return false
			}
		}
		return len(nd.Inputs) > 0
	}
	return false
}

// poolSaying says what a compiled max pool keeps under torch v.
func poolSaying(v string) string {
	if _, offsets := compiledSaves(true, v); offsets {
		return "a max pool with a window of at most 25 keeps int8 offsets and not its input (Inductor's _low_memory_max_pool_with_offsets)"
	}
	return "max pools keep eager's int64 positions (Inductor's int8 offsets are priced from torch 2.8)"
}

// savingRules names the rules the saved activations follow.
func savingRules(compiled bool) string {
	if compiled {
		return "torch.compile's partition of stdlib's saving rules"
	}
	return "stdlib's saving rules"
}
