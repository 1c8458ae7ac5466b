package native

import (
	"pipe/planner/cost"
	"pipe/stdlib"
)

// The native engine's cost model: what a training step of a graph takes
// in this engine's memory, for the planner (package cost's contract).
//
// Build compiles the model into units (a node, or a fusion group run as
// one kernel) and lays every tensor of a step out in one arena before the
// first step (schedule.go). The cost model compiles the same units and
// asks kernelFor for each one's kernel on a model that only registers
// parameters: what a unit keeps is its kernel's kspec, its scratch is
// kernelScratch (Winograd or im2col, the flipped input gradient, the
// depthwise kernel, the column budget), as allocScratch sizes it. It then
// lays the step out event by event as buildTrain and buildEval do, and
// takes the peak of the buffers alive at one event (the arena packs them
// first-fit, within a few percent of that peak). TestCostMatchesKernels
// holds it to the models the engine builds for every example.

// Cost is the native engine's cost model; its zero value is ready.
type Cost struct{}

var _ cost.Engine = Cost{}

// Memory implements cost.Engine: each node's output in fp32, what its
// kernel keeps, and the step's arena.
func (Cost) Memory(g *stdlib.Graph, s cost.Setup) cost.Memory {
	n := len(g.Nodes)
	m := cost.Memory{Out: make([]int64, n), Keep: make([][]int, n), Own: make([]int64, n)}
	for _, nd := range g.Nodes {
		m.Out[nd.ID] = cost.Mul(cost.Numel(nd.Out), 4)
		m.Keep[nd.ID], m.Own[nd.ID] = nodeSaved(g, nd)
	}
	m.Arena = newCostArena(g, s)
	return m
}

// nodeSaved is what a node's kernel keeps for its backward when it runs
// alone, as the checkpoint programme sees each node: the nodes whose
// outputs it reads (kspec's saveIn and saveOut) and the bytes of its kept
// buffers per sample. A node without a kernel here keeps what stdlib's
// rule says.
func nodeSaved(g *stdlib.Graph, nd *stdlib.Node) (keep []int, own int64) {
	if nd.Op == "input" {
		return nil, 0
	}
	u := &costUnit{nodes: []*stdlib.Node{nd}, ins: nd.Inputs, out: cost.Numel(nd.Out)}
	ku := &unit{nodes: u.nodes, ins: nd.Inputs, seg: -1}
	ok := fits(nd)
	ku.out, ok = layoutOrNot(nd.Out, ok)
	for _, j := range nd.Inputs {
		var l layout
		if l, ok = layoutOrNot(g.Nodes[j].Out, ok); ok {
			ku.in = append(ku.in, l)
		}
	}
	if !ok {
		ku = nil
	}
	u.spec(&model{}, ku)
	if !u.kernel {
		return nd.Keep, cost.Add(cost.Mul(nd.Private, 4), nd.SavedAux)
	}
	for k, j := range nd.Inputs {
		if u.saveIn[k] {
			keep = append(keep, j)
		}
	}
	if u.saveOut {
		keep = append(keep, nd.ID)
	}
	for _, w := range u.aux {
		own = cost.Add(own, cost.Mul(w.per, 4))
	}
	return keep, own
}

// layoutOrNot is layoutOf while ok holds.
func layoutOrNot(shape []int64, ok bool) (layout, bool) {
	if !ok {
		return layout{}, false
	}
	return layoutOf(shape)
}
