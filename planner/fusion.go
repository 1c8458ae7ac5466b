package planner

import (
	"pipe/planner/plan"
	"pipe/stdlib"
)

// plan.Fusion runs adjacent ops as one kernel so the tensors between them never
// travel through memory. The patterns are the ones cuDNN, oneDNN and
// PyTorch's compilers fuse for training:
//
//   - conv + batchnorm (+ activation);
//   - conv + activation (the bias is part of the conv);
//   - dense + bias + activation (the bias is part of the dense);
//   - chains of elementwise ops (activations, dropout, add).
//
// A node joins the group of the node before it only when it is that node's
// only reader, so nothing outside the group needs the tensor in between.
// plan.Fusion changes no saved tensor: a tensor some backward reads is still
// written, so memory is the same and only the step time gains (the
// in-between tensors nothing keeps are neither written nor read back).
//
// For inference (evaluate, predict) a batchnorm whose input is a conv's
// only output is folded into the conv's weights; those pairs are listed
// apart, since training cannot fold them.

var activationOps = map[string]bool{"relu": true, "gelu": true, "silu": true, "hardswish": true, "sigmoid": true, "tanh": true}

var elementwiseOps = map[string]bool{"relu": true, "gelu": true, "silu": true, "hardswish": true, "sigmoid": true, "tanh": true, "dropout": true, "add": true}

// fuse finds the fusion groups of g. group[i] is node i's group ID (0 for
// none).
func fuse(g *stdlib.Graph) (groups []plan.FusionGroup, group []int, folds [][]string) {
	n := len(g.Nodes)
	readers := make([][]int, n)
	for _, nd := range g.Nodes {
		for _, j := range nd.Inputs {
			if j >= 0 && j < n {
				readers[j] = append(readers[j], nd.ID)
			}
		}
	}
	group = make([]int, n)
	// only returns the single reader of i when it is an op in ops and not
	// yet grouped, else -1. The model's output has the loss as a reader.
	only := func(i int, ops map[string]bool) int {
		if len(readers[i]) != 1 || i == g.Output {
			return -1
		}
		r := readers[i][0]
		if group[r] != 0 || !ops[g.Nodes[r].Op] {
			return -1
		}
		return r
	}
	newGroup := func(kind string, ids []int) {
		id := len(groups) + 1
		fg := plan.FusionGroup{ID: id, Kind: kind}
		for _, i := range ids {
			group[i] = id
			fg.Nodes = append(fg.Nodes, g.Nodes[i].Name)
		}
		groups = append(groups, fg)
	}
	bn := map[string]bool{"batchnorm": true}
	for _, nd := range g.Nodes {
		i := nd.ID
		if nd.Op == "conv" {
			if b := only(i, bn); b >= 0 {
				folds = append(folds, []string{nd.Name, g.Nodes[b].Name})
			}
		}
		if group[i] != 0 {
			continue
		}
		switch {
		case nd.Op == "conv":
			if b := only(i, bn); b >= 0 {
				if a := only(b, activationOps); a >= 0 {
					newGroup("conv+batchnorm+activation", []int{i, b, a})
				} else {
					newGroup("conv+batchnorm", []int{i, b})
				}
			} else if a := only(i, activationOps); a >= 0 {
				newGroup("conv+activation", []int{i, a})
			}
		case nd.Op == "dense" || nd.Op == "lowrank_dense":
			if a := only(i, activationOps); a >= 0 {
				newGroup("dense+bias+activation", []int{i, a})
			}
		case elementwiseOps[nd.Op]:
			ids := []int{i}
			for j := only(i, elementwiseOps); j >= 0; j = only(j, elementwiseOps) {
				ids = append(ids, j)
				group[j] = -1 // reserve it while the chain grows
			}
			if len(ids) > 1 {
				newGroup("elementwise", ids)
			} else {
				group[i] = 0
			}
		}
	}
	return groups, group, folds
}
