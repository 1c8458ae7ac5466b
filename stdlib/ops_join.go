package stdlib

import (
	"fmt"

	"pipe/lang"
)

// The ops that start or join flows: the model's input, and concat and add
// of the flow with a labelled tensor, with their rules.

func joinOps() []*Op {
	join := func(op string) func(b *builder, c *lang.LayerCall, x int) int {
		return func(b *builder, c *lang.LayerCall, x int) int { return b.join(c, op, x) }
	}
	return []*Op{
		{Name: "input", Doc: "The model's input.", Shape: "the model's input shape", Saved: "nothing"},
		{Name: "concat", Doc: "Joins its inputs along axis 0.", Shape: "[C1, ...] and [C2, ...] to [C1+C2, ...]", Saved: "nothing",
			Layers: []*Layer{{
				Spec: layer("concat", "Joins a labelled tensor to the flow along the channel axis; the other axes must agree.",
					arg("tensor", lang.TTensor, "A labelled tensor, or a branch from one: concat(e1 -> conv 32 k1).", positional, required)),
				build: join("concat")}}},
		{Name: "add", Doc: "Elementwise sum of its inputs, the first scaled by add's scale when it is written.", Shape: "equal shapes, unchanged", Saved: "nothing",
			Layers: []*Layer{{
				Spec: layer("add", "Adds a labelled tensor to the flow, elementwise; the shapes must be equal. With scale, the flow is scaled first: scale × flow + tensor, a residual branch scaled before it joins its shortcut (ESRGAN's residual scaling: conv 64 k3 pad1 -> add x scale 0.2).",
					arg("tensor", lang.TTensor, "A labelled tensor, or a branch from one: add(x -> conv 64 k1 s2).", positional, required),
					arg("scale", lang.TFloat, "The flow's factor before the sum, greater than 0.", above(0), def("1"))),
				build: join("add")}}},
	}
}

// join builds add or concat of the flow x and the tensor argument: a
// label, optionally through a branch of layers.
func (b *builder) join(c *lang.LayerCall, op string, x int) int {
	name := b.numbered(op)
	v := c.Args["tensor"]
	if v == nil || v.Tensor == nil {
		return b.shapeErr(op+" needs a tensor", "Write %s NAME or %s(NAME -> layers), NAME a label defined above.", op, op)
	}
	t := v.Tensor
	from := b.lookup(t.From, t.FromRange)
	y := b.chain(t.Nodes, from)
	b.rng, b.layer = c.Range, c.Name
	if x < 0 || y < 0 {
		return -1
	}
	what := "'" + t.From + "'"
	if len(t.Nodes) > 0 {
		what = "the branch (" + t.String() + ")"
	}
	if op == "add" {
		id := b.add(name, []int{x, y}, []string{"the flow", what})
		if s := argFloat(c, "scale", 1); id >= 0 && s != 1 {
			n := b.g.Nodes[id]
			n.Args.FlowScale = s
			n.FLOPs += numel(n.Out) // the product
		}
		return id
	}
	return b.concat(name, []int{x, y}, []string{"the flow", what})
}

// concat joins along axis 0; the inputs' other axes must agree. what
// names each input for messages.
func (b *builder) concat(name string, xs []int, what []string) int {
	var shapes [][]int64
	for _, x := range xs {
		s, ok := b.shape(x)
		if !ok {
			return -1
		}
		shapes = append(shapes, s)
	}
	out := cloneShape(shapes[0])
	var cc calc
	for i, s := range shapes[1:] {
		if len(s) != len(out) || !equalShape(s[1:], shapes[0][1:]) {
			return b.shapeErr("concat of mismatched shapes",
				"concat joins along channels, so the other axes must agree: %s (%s) vs %s (%s).%s",
				shapeStr(shapes[0]), what[0], shapeStr(s), what[i+1], resizeHint(shapes[0], s))
		}
		out[0] = cc.add(out[0], s[0])
	}
	n := b.newNode(name, "concat", out, OpArgs{}, xs...)
	return b.push(n, &cc)
}

// resizeHint suggests how to bring two feature maps to the same size.
func resizeHint(flow, other []int64) string {
	if len(flow) != 3 || len(other) != 3 || flow[1] == other[1] {
		return ""
	}
	if other[1] > flow[1] && other[1]%flow[1] == 0 && other[2] == flow[2]*(other[1]/flow[1]) {
		return fmt.Sprintf(" Upsample the flow first: upsample %d -> ...", other[1]/flow[1])
	}
	if flow[1] > other[1] && flow[1]%other[1] == 0 {
		return fmt.Sprintf(" The flow is %d times larger; pool it or upsample the other tensor.", flow[1]/other[1])
	}
	return ""
}

// add sums equal shapes, one FLOP per element per extra input.
func (b *builder) add(name string, xs []int, what []string) int {
	var shapes [][]int64
	for _, x := range xs {
		s, ok := b.shape(x)
		if !ok {
			return -1
		}
		shapes = append(shapes, s)
	}
	for i, s := range shapes[1:] {
		if !equalShape(s, shapes[0]) {
			return b.shapeErr("add of unequal shapes",
				"add: %s vs %s. add needs equal shapes: %s is the flow, %s is %s.%s",
				shapeStr(shapes[0]), shapeStr(s), shapeStr(shapes[0]), shapeStr(s), what[i+1], projectHint(shapes[0], s, what[i+1]))
		}
	}
	var cc calc
	n := b.newNode(name, "add", cloneShape(shapes[0]), OpArgs{}, xs...)
	n.FLOPs = cc.mul(int64(len(xs)-1), cc.numel(shapes[0]))
	return b.push(n, &cc)
}

// projectHint suggests a projection shortcut when a branch from a labelled
// map differs from the flow in channels or stride.
func projectHint(flow, other []int64, what string) string {
	if len(flow) != 3 || len(other) != 3 || flow[1] < 1 || other[1]%flow[1] != 0 {
		return ""
	}
	s := other[1] / flow[1]
	if other[2] != flow[2]*s {
		return ""
	}
	label := what
	if len(label) > 2 && label[0] == '\'' {
		label = label[1 : len(label)-1]
	} else {
		return ""
	}
	conv := fmt.Sprintf("conv %d k1", flow[0])
	if s > 1 {
		conv += fmt.Sprintf(" s%d", s)
	}
	return fmt.Sprintf(" Project the shortcut: add(%s -> %s -> batchnorm).", label, conv)
}
