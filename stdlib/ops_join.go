package stdlib

import "pipe/lang"

// The ops that start or join flows: the model's input, and concat and add
// of the flow with a labelled tensor (build.go's join; the rules are in
// prims.go).

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
