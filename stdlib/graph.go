package stdlib

import (
	"pipe/diag"
	"pipe/lang"
)

// Graph is a model expanded into primitive operations: a DAG whose nodes
// are in topological order, each node's ID its index in Nodes. Node 0 is
// always the model's input (op "input"). Shapes are per sample, without the
// batch dimension; costs are per sample too, so the planner multiplies by
// the batch size.
type Graph struct {
	// Input is the shape of one sample.
	Input []int64
	// Nodes in topological order; Nodes[i].ID == i.
	Nodes []*Node
	// Output is the ID of the node whose output is the model's output.
	Output int
	// Labels maps each statement label to the node that produced it.
	Labels map[string]int
}

// Node is one primitive operation of a Graph.
type Node struct {
	ID int
	// Name is unique within the graph and readable. Nodes of a family
	// line up with the reference implementation's module names
	// (torchvision's "layer1.0.conv1", smp's "decoder.aspp.0.project.0"),
	// so a parameter "<Name>.weight" is a state_dict key. Layers written
	// by hand are numbered per kind: "conv1", "conv2", "relu1".
	Name string
	// Op is the primitive operation; see Ops for the list.
	Op string
	// Inputs are the IDs of the nodes whose outputs this node reads, in
	// order (for add and concat: the main flow first, then the branch).
	Inputs []int
	// In holds the shape of each input, aligned with Inputs; Out is the
	// shape this node produces. Shapes are shared between a node's Out
	// and its readers' In; do not modify them.
	In  [][]int64
	Out []int64
	// Params is the number of trainable parameters.
	Params int64
	// FLOPs is the forward cost per sample; a multiply-add counts 2.
	FLOPs int64
	// Saved is the number of elements per sample this op keeps for its
	// backward pass, at the activation precision: the outputs of the
	// nodes in Keep plus Private. Each op's rule is documented in Ops.
	Saved int64
	// Keep lists the nodes (this node or its inputs) whose outputs the op
	// keeps for backward. Two ops that keep the same tensor share it, so
	// Graph.SavedElems counts it once.
	Keep []int
	// Private is the number of elements per sample of buffers that belong
	// to this op alone (attention's probabilities, layernorm's statistics).
	Private int64
	// Buffers is the number of values the op stores beside its parameters
	// that no gradient reaches (the fixed sketches of sketched_dense and
	// sketched_conv); batchnorm's running statistics are counted apart.
	Buffers int64
	// SavedAux is the number of bytes per sample kept whatever the
	// precision: dropout's 1-byte masks and max-pool's 8-byte indices.
	SavedAux int64
	// Range is the source of the layer or family call that produced the
	// node; the input node has the model's input range.
	Range diag.Range
	// Layer is the name of the layer or family written in the source
	// ("resnet18" for every node of a resnet18).
	Layer string
	// Args are the op's settings, with defaults applied.
	Args OpArgs
}

// OpArgs are the settings of a primitive op. Each op reads only the fields
// its documentation in Ops names; the rest are zero.
type OpArgs struct {
	// Units is the output width of dense, lowrank_dense and sketched_dense.
	Units int64
	// Channels is the output channels of conv, convtranspose and
	// sketched_conv, and se's squeeze channels.
	Channels int64
	// Kernel, Stride, Padding and Dilation are square: the same along
	// height and width (conv, convtranspose, maxpool, avgpool).
	Kernel, Stride, Padding, Dilation int64
	// Groups splits a conv's channels; Groups == input channels is a
	// depthwise conv.
	Groups int64
	// Bias says whether dense, lowrank_dense, conv or convtranspose adds a
	// bias.
	Bias bool
	// Terms and Rank shape lowrank_dense (a sum of Terms products U_i·V_i,
	// U_i of in×Rank and V_i of Rank×Units), and sketched_dense and
	// sketched_conv (Panther's num_terms and low_rank).
	Terms, Rank int64
	// P is dropout's probability of zeroing an element, drop_path's of
	// zeroing a sample.
	P float64
	// Eps and Momentum are batchnorm's and layernorm's settings.
	Eps, Momentum float64
	// Scale is upsample's factor (the target size is Out either way) and
	// pixelshuffle's.
	Scale int64
	// Slope is leakyrelu's slope below zero.
	Slope float64
	// FlowScale is add's factor on the flow, the first input (0: 1):
	// FlowScale × flow + the rest (a scaled residual).
	FlowScale float64
	// Affine gives instancenorm a learned scale and shift.
	Affine bool
	// Mode is upsample's interpolation: "nearest" or "bilinear".
	Mode string
	// Heads is attention's number of heads; Causal masks each token's
	// attention to itself and the tokens before it. P is the dropout on
	// attention's probabilities.
	Heads  int64
	Causal bool
	// Features is random_attention's number of random features M; Mode
	// its feature map, "softmax" or "relu".
	Features int64
	// Keepdims makes gap return [C, 1, 1] instead of [C].
	Keepdims bool
	// AlignCorners is upsample's bilinear corner rule (PyTorch's
	// align_corners; nn.UpsamplingBilinear2d sets it).
	AlignCorners bool
}

// BuildGraph expands a checked model into its graph. Statements are walked
// in order, each continuing from the previous statement's output (or from
// the labelled tensor its chain names); a label names the statement's
// output; add and concat read a labelled tensor, optionally through a
// branch of layers; a repeat makes fresh copies of its body; a family
// expands into its whole network. Shape mismatches are reported at the
// layer that causes them. BuildGraph returns the graph built so far when it
// stops at an error.
func BuildGraph(m *lang.Model) (*Graph, diag.Diagnostics) {
	return buildGraph(m)
}

// Node returns the node with the given ID, or nil.
func (g *Graph) Node(id int) *Node {
	if g == nil || id < 0 || id >= len(g.Nodes) {
		return nil
	}
	return g.Nodes[id]
}

// OutShape returns the shape of the model's output for one sample.
func (g *Graph) OutShape() []int64 {
	if n := g.Node(g.Output); n != nil {
		return n.Out
	}
	return nil
}

// Params returns the number of trainable parameters, saturating at
// math.MaxInt64.
func (g *Graph) Params() int64 {
	var s int64
	for _, n := range g.Nodes {
		s = addSat(s, n.Params)
	}
	return s
}

// FLOPs returns the forward cost of one sample, saturating at
// math.MaxInt64.
func (g *Graph) FLOPs() int64 {
	var s int64
	for _, n := range g.Nodes {
		s = addSat(s, n.FLOPs)
	}
	return s
}

// SavedElems returns the elements per sample kept for the backward pass at
// the activation precision: every tensor some op keeps, counted once, plus
// every op's private buffers.
func (g *Graph) SavedElems() int64 {
	kept := make([]bool, len(g.Nodes))
	var s int64
	for _, n := range g.Nodes {
		for _, id := range n.Keep {
			if id >= 0 && id < len(kept) && !kept[id] {
				kept[id] = true
				s = addSat(s, numel(g.Nodes[id].Out))
			}
		}
		s = addSat(s, n.Private)
	}
	return s
}

// SavedAux returns the bytes per sample kept for the backward pass whatever
// the precision (masks and indices).
func (g *Graph) SavedAux() int64 {
	var s int64
	for _, n := range g.Nodes {
		s = addSat(s, n.SavedAux)
	}
	return s
}

// SavedBytes returns the bytes per sample kept for the backward pass when
// activations take elemSize bytes each (4 for fp32, 2 for bf16).
func (g *Graph) SavedBytes(elemSize int64) int64 {
	return addSat(mulSat(g.SavedElems(), elemSize), g.SavedAux())
}

// ActivationElems returns the sum of every node's output elements per
// sample: what a forward pass without autograd would allocate if nothing
// were freed, an upper bound for inference.
func (g *Graph) ActivationElems() int64 {
	var s int64
	for _, n := range g.Nodes {
		s = addSat(s, numel(n.Out))
	}
	return s
}
