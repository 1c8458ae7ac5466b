package stdlib

import "pipe/lang"

// The elementwise ops: the activations and dropout, with their rules.

func elementwiseOps() []*Op {
	act := func(name, doc, op, saved string) *Op {
		return &Op{Name: name, Doc: op, Shape: "unchanged", Saved: saved,
			Layers: []*Layer{{Spec: layer(name, doc), build: func(b *builder, c *lang.LayerCall, x int) int {
				return b.activation(b.numbered(name), name, x)
			}}}}
	}
	return []*Op{
		act("relu", "max(x, 0), elementwise.", "max(x, 0).", "its output"),
		{Name: "leakyrelu", Doc: "x, or Slope·x below 0.", Shape: "unchanged", Saved: "its input",
			Layers: []*Layer{{
				Spec: layer("leakyrelu", "x for x > 0, slope·x otherwise, elementwise (a GAN discriminator's activation).",
					arg("slope", lang.TFloat, "The slope for negative inputs, in [0, 1).", positional, atLeast(0), below(1), def("0.01"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.leakyrelu(b.numbered("leakyrelu"), x, argFloat(c, "slope", 0.01))
				}}}},
		act("gelu", "Gaussian error linear unit, elementwise (the exact erf form).", "x·Φ(x).", "its input"),
		withAlias(act("silu", "x·σ(x), elementwise: the sigmoid-weighted linear unit (EfficientNet's activation); swish is its other name.", "x·σ(x).", "its input"), "swish"),
		act("hardswish", "x·min(max(x+3, 0), 6)/6, elementwise: MobileNetV3's piecewise swish.", "x·relu6(x+3)/6.", "its input"),
		act("sigmoid", "1 / (1 + e^-x), elementwise.", "1/(1+e^-x).", "its output"),
		act("tanh", "Hyperbolic tangent, elementwise.", "tanh(x).", "its output"),
		act("softmax", "Softmax over the channel axis (the first; the only one for a vector).", "Softmax over axis 0.", "its output"),
		{Name: "dropout", Doc: "Zeroes elements with probability P and scales the rest.", Shape: "unchanged",
			Saved: "a 1-byte mask per element (SavedAux); nothing when P is 0",
			Layers: []*Layer{{
				Spec: layer("dropout", "Zeroes each element with probability p during training and scales the rest by 1/(1-p).",
					arg("p", lang.TFloat, "The probability of zeroing, in [0, 1).", positional, atLeast(0), below(1), def("0.5"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.dropout(b.numbered("dropout"), x, argFloat(c, "p", 0.5))
				}}}},
	}
}

// withAlias gives an op's one layer other names.
func withAlias(op *Op, names ...string) *Op {
	op.Layers[0].Aliases = names
	return op
}

// activation costs and what each keeps: its output (relu, sigmoid, tanh,
// softmax) or its input (gelu, silu, hardswish: autograd's silu_backward
// and hardswish_backward read the input).
var activations = map[string]struct {
	flops    int64
	keepsOut bool
}{
	"relu":      {1, true},
	"sigmoid":   {4, true}, // neg, exp, add, div
	"tanh":      {1, true},
	"gelu":      {5, false}, // div, erf, add, mul, mul
	"silu":      {5, false}, // sigmoid's 4, mul
	"hardswish": {5, false}, // add, max, min, mul, mul by 1/6
	"softmax":   {5, true},  // max, sub, exp, sum, div
}

func (b *builder) activation(name, op string, x int) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	act := activations[op]
	var cc calc
	n := b.newNode(name, op, cloneShape(in), OpArgs{}, x)
	n.FLOPs = cc.mul(act.flops, cc.numel(in))
	if act.keepsOut {
		n.Keep = []int{b.self()}
	} else {
		n.Keep = []int{x}
	}
	return b.push(n, &cc)
}

// leakyrelu keeps its input, as autograd's leaky_relu_backward reads it:
// a comparison and a multiply per element.
func (b *builder) leakyrelu(name string, x int, slope float64) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	n := b.newNode(name, "leakyrelu", cloneShape(in), OpArgs{Slope: slope}, x)
	n.FLOPs = cc.mul(2, cc.numel(in))
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// dropout keeps a 1-byte mask; one multiply per element.
func (b *builder) dropout(name string, x int, p float64) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	n := b.newNode(name, "dropout", cloneShape(in), OpArgs{P: p}, x)
	if p > 0 {
		n.FLOPs = cc.numel(in)
		n.SavedAux = cc.numel(in)
	}
	return b.push(n, &cc)
}
