package stdlib

import (
	"fmt"
)

// The helpers of the ops' builder methods, which live beside their
// descriptors. Each method takes the IDs of its inputs and returns the ID
// of the node it adds, or -1 when it cannot: an input is -1 (an earlier
// error, already reported) or the shapes do not fit (reported here, at
// the layer being built).

// shape returns the output shape of node x, or false when x is -1.
func (b *builder) shape(x int) ([]int64, bool) {
	if x < 0 || x >= len(b.g.Nodes) {
		return nil, false
	}
	return b.g.Nodes[x].Out, true
}

// newNode starts a node reading the given inputs.
func (b *builder) newNode(name, op string, out []int64, a OpArgs, inputs ...int) *Node {
	n := &Node{Name: name, Op: op, Inputs: inputs, Out: out, Args: a, Range: b.rng, Layer: b.layer}
	for _, x := range inputs {
		n.In = append(n.In, b.g.Nodes[x].Out)
	}
	return n
}

// push adds a node to the graph once its costs are set, computing Saved
// and reporting an overflow of any count.
func (b *builder) push(n *Node, c *calc) int {
	if len(b.g.Nodes) >= MaxNodes {
		if !b.tooBig {
			b.tooBig = true
			b.errorf("too-large", "model too large",
				"After expanding repeats and families the model has more than %d operations; pipe builds at most that many. Check the repeat counts.", MaxNodes)
		}
		return -1
	}
	c.numel(n.Out)
	saved := n.Private
	for _, k := range n.Keep {
		var out []int64
		if k == len(b.g.Nodes) {
			out = n.Out
		} else {
			out = b.g.Nodes[k].Out
		}
		saved = c.add(saved, c.numel(out))
	}
	n.Saved = saved
	if c.overflow {
		b.errorf("overflow", fmt.Sprintf("%s is too large to count", b.layer),
			"Its size, parameter count or FLOPs per sample exceed 2^63 (at %s, output %s); check its arguments and the shapes feeding it.",
			n.Op, shapeStr(n.Out))
		return -1
	}
	n.ID = len(b.g.Nodes)
	n.Name = b.uniq(n.Name)
	b.g.Nodes = append(b.g.Nodes, n)
	return n.ID
}

// self is the Keep entry for the node being pushed: its own output.
func (b *builder) self() int { return len(b.g.Nodes) }

// spatial checks that a shape is [C, H, W].
func (b *builder) spatial(op string, in []int64) bool {
	if len(in) == 3 {
		return true
	}
	hint := ""
	if len(in) == 1 {
		hint = fmt.Sprintf(" A vector has no height and width: %s belongs before flatten, or the input should be [C, H, W].", op)
	}
	if len(in) == 4 && registry.Layer(op+"3d") != nil {
		hint = fmt.Sprintf(" A volume [C, D, H, W] takes the 3-D layer: %s3d.", op)
	}
	b.shapeErr(op+" needs an image", "%s expects [C, H, W] per sample but gets %s.%s", op, shapeStr(in), hint)
	return false
}

// windowOut is the output extent of a window of size k (dilated by d)
// sliding by s over n padded by p on each side, or -1 when the window does
// not fit.
func windowOut(n, k, s, p, d int64) int64 {
	eff := d*(k-1) + 1
	if eff > n+2*p {
		return -1
	}
	return (n+2*p-eff)/s + 1
}
