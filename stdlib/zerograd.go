package stdlib

import "slices"

// ZeroGradients names the trainable parameters of g whose gradient is zero
// in exact arithmetic, in node order: a shift (the bias of a conv,
// convtranspose or dense, the shift of a batchnorm, instancenorm,
// groupnorm or layernorm) adds a constant per channel, and when every path
// from it carries that constant, kept a constant, only into training-mode
// normalisations that subtract it, the loss does not depend on it. Both
// engines, and PyTorch, compute rounding noise for such a gradient, which
// Adam turns into full steps of random sign; the engines give these
// parameters an exact zero instead. docs/design/zero-gradients.md has the
// rules, op by op.
func (g *Graph) ZeroGradients() []string {
	if g == nil {
		return nil
	}
	readers := make([][]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, j := range n.Inputs {
			if j >= 0 && j < len(readers) && !slices.Contains(readers[j], n.ID) {
				readers[j] = append(readers[j], n.ID)
			}
		}
	}
	z := zeroGrad{g: g, readers: readers, memo: map[[2]int]bool{}}
	var out []string
	for _, n := range g.Nodes {
		if axes, ok := shiftAxes(n); ok && z.cancelled(n.ID, axes) {
			out = append(out, n.Name+".bias")
		}
	}
	return out
}

// axisSet is a set of a sample's axes (bit i: axis i) along which a
// perturbation may vary; it is constant along the others and across the
// batch.
type axisSet uint32

func axis(i int) axisSet { return 1 << uint(i) }

// shiftAxes is the axes along which node n's shift parameter varies, and
// whether n has one: the channels (axis 0) for a conv, convtranspose,
// batchnorm, instancenorm or groupnorm, the last axis for a dense or a
// layernorm.
func shiftAxes(n *Node) (axisSet, bool) {
	if len(n.Out) == 0 {
		return 0, false
	}
	switch n.Op {
	case "conv", "convtranspose":
		return axis(0), n.Args.Bias
	case "dense":
		return axis(len(n.Out) - 1), n.Args.Bias
	case "batchnorm", "groupnorm":
		return axis(0), true
	case "instancenorm":
		return axis(0), n.Args.Affine
	case "layernorm":
		return axis(len(n.Out) - 1), true
	}
	return 0, false
}

type zeroGrad struct {
	g       *Graph
	readers [][]int
	memo    map[[2]int]bool
}

// cancelled reports whether a perturbation of node id's output, constant
// across the batch and along every axis outside vary, leaves the loss
// unchanged: the node is not the model's output, it has readers, and each
// reader subtracts the perturbation or passes it on, transformed, to
// readers that do.
func (z *zeroGrad) cancelled(id int, vary axisSet) bool {
	key := [2]int{id, int(vary)}
	if v, ok := z.memo[key]; ok {
		return v
	}
	z.memo[key] = false // a DAG has no cycles; this only guards a malformed graph
	ok := id != z.g.Output && len(z.readers[id]) > 0
	for _, r := range z.readers[id] {
		if !ok {
			break
		}
		ok = z.absorbed(z.g.Nodes[r], vary)
	}
	z.memo[key] = ok
	return ok
}

// absorbed reports whether node r, reading a perturbation that varies
// only along vary, removes it or passes on one that its own readers
// remove. Only ops for which that holds exactly are admitted; anything
// else (an activation, a padded conv, pooling, se, attention, a dropout
// that draws) keeps the gradient.
func (z *zeroGrad) absorbed(r *Node, vary axisSet) bool {
	rank := len(r.Out)
	if rank == 0 || rank > 16 {
		return false
	}
	chans := axis(0)
	lastAx := axis(rank - 1)
	switch r.Op {
	case "batchnorm", "instancenorm":
		// Training mode subtracts each channel's mean over the batch (and
		// the positions), or over each sample's positions: a perturbation
		// that varies along the channels alone is part of that mean.
		return vary&^chans == 0
	case "groupnorm":
		// Each group's mean spans its channels: only groups of one
		// channel (instancenorm) remove a perturbation along them.
		return vary == 0 || (vary&^chans == 0 && r.Args.Groups == first(r.Out))
	case "layernorm":
		// Each row's mean over the last axis: the perturbation must be
		// constant along it.
		return vary&lastAx == 0
	case "conv":
		// Without padding every output sums whole windows of its input,
		// so a per-channel constant becomes one per output channel; zero
		// padding breaks it at the borders.
		return r.Args.Padding == 0 && vary&^chans == 0 && z.cancelled(r.ID, chans)
	case "dense":
		// An affine map of the last axis mixes it and keeps the others.
		return z.cancelled(r.ID, vary&^lastAx|lastAx)
	case "add":
		return z.cancelled(r.ID, vary)
	case "concat":
		return z.cancelled(r.ID, vary|chans)
	case "flatten":
		return z.cancelled(r.ID, chans)
	case "gap":
		return z.cancelled(r.ID, chans)
	case "dropout", "drop_path":
		// The identity at P = 0; at P > 0 each sample or element draws.
		return r.Args.P == 0 && z.cancelled(r.ID, vary)
	}
	return false
}
