package stdlib

import (
	"fmt"
)

// The primitive ops as builder methods. Each takes the IDs of its inputs
// and returns the ID of the node it adds, or -1 when it cannot: an input
// is -1 (an earlier error, already reported) or the shapes do not fit
// (reported here, at the layer being built).

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

func (b *builder) conv(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("conv", in) {
		return -1
	}
	a = convDefaults(a)
	c, h, w := in[0], in[1], in[2]
	if c%a.Groups != 0 || a.Channels%a.Groups != 0 {
		return b.shapeErr("conv groups do not divide the channels",
			"groups %d must divide both the input channels (%d) and the output channels (%d).", a.Groups, c, a.Channels)
	}
	ho, wo := windowOut(h, a.Kernel, a.Stride, a.Padding, a.Dilation), windowOut(w, a.Kernel, a.Stride, a.Padding, a.Dilation)
	if ho < 1 || wo < 1 {
		eff := a.Dilation*(a.Kernel-1) + 1
		k := fmt.Sprintf("%dx%d kernel", a.Kernel, a.Kernel)
		if a.Dilation > 1 {
			k += fmt.Sprintf(" (%dx%d dilated)", eff, eff)
		}
		return b.shapeErr("conv kernel larger than its input",
			"The %s does not fit the input %s padded by %d (%dx%d). Add padding (pad%d), use a smaller kernel, or pool less before it.",
			k, shapeStr(in), a.Padding, h+2*a.Padding, w+2*a.Padding, (eff-1)/2)
	}
	var cc calc
	n := b.newNode(name, "conv", []int64{a.Channels, ho, wo}, a, x)
	perOut := cc.mul(c/a.Groups, a.Kernel, a.Kernel)
	n.Params = cc.mul(perOut, a.Channels)
	n.FLOPs = cc.mul(2, perOut, a.Channels, ho, wo)
	if a.Bias {
		n.Params = cc.add(n.Params, a.Channels)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(a.Channels, ho, wo))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

func convDefaults(a OpArgs) OpArgs {
	if a.Kernel == 0 {
		a.Kernel = 1
	}
	if a.Stride == 0 {
		a.Stride = 1
	}
	if a.Dilation == 0 {
		a.Dilation = 1
	}
	if a.Groups == 0 {
		a.Groups = 1
	}
	return a
}

func (b *builder) convTranspose(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("convtranspose", in) {
		return -1
	}
	a = convDefaults(a)
	c, h, w := in[0], in[1], in[2]
	var cc calc
	ho := cc.add(cc.mul(h-1, a.Stride), a.Dilation*(a.Kernel-1)+1) - 2*a.Padding
	wo := cc.add(cc.mul(w-1, a.Stride), a.Dilation*(a.Kernel-1)+1) - 2*a.Padding
	if ho < 1 || wo < 1 {
		return b.shapeErr("convtranspose padding too large",
			"Padding %d on each side leaves nothing of the %dx%d output; use less padding.", a.Padding, ho+2*a.Padding, wo+2*a.Padding)
	}
	n := b.newNode(name, "convtranspose", []int64{a.Channels, ho, wo}, a, x)
	perIn := cc.mul(a.Channels/a.Groups, a.Kernel, a.Kernel)
	n.Params = cc.mul(perIn, c)
	n.FLOPs = cc.mul(2, perIn, c, h, w)
	if a.Bias {
		n.Params = cc.add(n.Params, a.Channels)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(a.Channels, ho, wo))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// dense maps the last axis; rows are the product of the others.
func (b *builder) dense(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if len(in) == 0 {
		return b.shapeErr("dense needs a vector", "dense gets a scalar per sample.")
	}
	var cc calc
	f := in[len(in)-1]
	rows := cc.numel(in[:len(in)-1])
	out := cloneShape(in)
	out[len(out)-1] = a.Units
	n := b.newNode(name, "dense", out, a, x)
	n.Params = cc.mul(f, a.Units)
	n.FLOPs = cc.mul(2, rows, f, a.Units)
	if a.Bias {
		n.Params = cc.add(n.Params, a.Units)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(rows, a.Units))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// lowrankDense is y = x·Σ_i U_i V_i + b on a vector. Forward computes each
// t_i = x·U_i (2·F·R FLOPs), then t_i·V_i (2·R·U), sums the Terms results
// ((Terms-1)·U) and adds the bias (U).
func (b *builder) lowrankDense(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	f := in[0]
	n := b.newNode(name, "lowrank_dense", []int64{a.Units}, a, x)
	n.Params = cc.mul(a.Terms, cc.add(cc.mul(f, a.Rank), cc.mul(a.Rank, a.Units)))
	n.FLOPs = cc.add(cc.mul(2, a.Terms, a.Rank, cc.add(f, a.Units)), cc.mul(a.Terms-1, a.Units))
	if a.Bias {
		n.Params = cc.add(n.Params, a.Units)
		n.FLOPs = cc.add(n.FLOPs, a.Units)
	}
	n.Keep = []int{x}
	n.Private = cc.mul(a.Terms, a.Rank)
	return b.push(n, &cc)
}

// batchnorm normalises over axis 0 (channels of [C, H, W], features of a
// vector). FLOPs per element: sum and sum of squares for the statistics
// (3), then (x-mean)·scale+shift folded into one multiply-add (2).
func (b *builder) batchnorm(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if len(in) == 0 {
		return b.shapeErr("batchnorm needs channels", "batchnorm gets a scalar per sample.")
	}
	var cc calc
	n := b.newNode(name, "batchnorm", cloneShape(in), a, x)
	n.Params = cc.mul(2, in[0])
	n.FLOPs = cc.mul(5, cc.numel(in))
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// layernorm normalises the last axis; 5 FLOPs per element as batchnorm.
func (b *builder) layernorm(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if len(in) == 0 {
		return b.shapeErr("layernorm needs a vector", "layernorm gets a scalar per sample.")
	}
	var cc calc
	d := in[len(in)-1]
	n := b.newNode(name, "layernorm", cloneShape(in), a, x)
	n.Params = cc.mul(2, d)
	n.FLOPs = cc.mul(5, cc.numel(in))
	n.Keep = []int{x}
	n.Private = cc.mul(2, cc.numel(in[:len(in)-1]))
	return b.push(n, &cc)
}

// activation costs and what each keeps: its output (relu, sigmoid, tanh,
// softmax) or its input (gelu).
var activations = map[string]struct {
	flops    int64
	keepsOut bool
}{
	"relu":    {1, true},
	"sigmoid": {4, true}, // neg, exp, add, div
	"tanh":    {1, true},
	"gelu":    {5, false}, // div, erf, add, mul, mul
	"softmax": {5, true},  // max, sub, exp, sum, div
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

// pool is maxpool or avgpool over square windows; Kernel·Kernel FLOPs
// per output element.
func (b *builder) pool(name, op string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial(op, in) {
		return -1
	}
	if a.Stride == 0 {
		a.Stride = a.Kernel
	}
	a.Dilation = 1
	if 2*a.Padding > a.Kernel {
		return b.shapeErr(op+" padding too large",
			"Padding %d is more than half the %dx%d window; use at most pad%d.", a.Padding, a.Kernel, a.Kernel, a.Kernel/2)
	}
	ho, wo := windowOut(in[1], a.Kernel, a.Stride, a.Padding, 1), windowOut(in[2], a.Kernel, a.Stride, a.Padding, 1)
	if ho < 1 || wo < 1 {
		return b.shapeErr(op+" window larger than its input",
			"The %dx%d window does not fit the input %s; pool less before it or use a smaller window.", a.Kernel, a.Kernel, shapeStr(in))
	}
	var cc calc
	out := []int64{in[0], ho, wo}
	n := b.newNode(name, op, out, a, x)
	n.FLOPs = cc.mul(a.Kernel, a.Kernel, cc.numel(out))
	n.Keep = []int{x}
	if op == "maxpool" {
		n.SavedAux = cc.mul(8, cc.numel(out))
	}
	return b.push(n, &cc)
}

// gap averages each channel: one FLOP per input element.
func (b *builder) gap(name string, x int, keepdims bool) int {
	in, ok := b.shape(x)
	if !ok || len(in) != 4 && !b.spatial("gap", in) {
		return -1
	}
	out := []int64{in[0]}
	if keepdims {
		out = []int64{in[0], 1, 1}
	}
	if keepdims && len(in) == 4 {
		out = append(out, 1)
	}
	var cc calc
	n := b.newNode(name, "gap", out, OpArgs{Keepdims: keepdims}, x)
	n.FLOPs = cc.numel(in)
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

func (b *builder) flatten(name string, x int) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	n := b.newNode(name, "flatten", []int64{cc.numel(in)}, OpArgs{}, x)
	return b.push(n, &cc)
}

// upsample resizes [C, H, W] to [C, ho, wo]. Nearest costs nothing;
// bilinear 7 FLOPs per output element (4 weights, 3 adds).
func (b *builder) upsample(name string, x int, ho, wo int64, mode string, alignCorners bool) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("upsample", in) {
		return -1
	}
	a := OpArgs{Mode: mode, AlignCorners: alignCorners}
	if in[1] > 0 && in[2] > 0 && ho%in[1] == 0 && wo%in[2] == 0 && ho/in[1] == wo/in[2] {
		a.Scale = ho / in[1]
	}
	var cc calc
	out := []int64{in[0], ho, wo}
	n := b.newNode(name, "upsample", out, a, x)
	if mode == "bilinear" {
		n.FLOPs = cc.mul(7, cc.numel(out))
	}
	return b.push(n, &cc)
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

// tokens turns [C, H, W] into the sequence [H·W, C].
func (b *builder) tokens(name string, x int) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("tokens", in) {
		return -1
	}
	var cc calc
	n := b.newNode(name, "tokens", []int64{cc.mul(in[1], in[2]), in[0]}, OpArgs{}, x)
	return b.push(n, &cc)
}

// classToken prepends a learned token of width D.
func (b *builder) classToken(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "class_token", []int64{in[0] + 1, in[1]}, OpArgs{}, x)
	n.Params = in[1]
	return b.push(n, &cc)
}

// posEmbed adds a learned [T, D] table: one FLOP per element.
func (b *builder) posEmbed(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "pos_embed", cloneShape(in), OpArgs{}, x)
	n.Params = cc.numel(in)
	n.FLOPs = cc.numel(in)
	return b.push(n, &cc)
}

// selectToken takes token 0 of [T, D].
func (b *builder) selectToken(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "select_token", []int64{in[1]}, OpArgs{}, x)
	return b.push(n, &cc)
}

// attention is PyTorch's nn.MultiheadAttention on [T, D] as self-attention:
// a packed input projection to q, k, v (3·D·D weights, 3·D biases), per
// head softmax(q·kᵀ/√(D/H))·v, and an output projection (D·D + D).
// FLOPs: projections 2·T·D·3D and 2·T·D·D plus their biases (4·T·D), scores
// and weighted sum 2·T·T·D each, scaling and softmax 6·H·T·T, and dropout
// on the probabilities H·T·T more (with its 1-byte mask kept, as autograd
// does).
func (b *builder) attention(name string, x int, a OpArgs) int {
	in, _ := b.shape(x)
	t, d, heads := in[0], in[1], a.Heads
	a.Bias = true
	var cc calc
	n := b.newNode(name, "attention", cloneShape(in), a, x)
	n.Params = cc.add(cc.mul(4, d, d), cc.mul(4, d))
	n.FLOPs = cc.add(cc.mul(8, t, d, d), cc.mul(4, t, d), cc.mul(4, t, t, d), cc.mul(6, heads, t, t))
	n.Keep = []int{x}
	n.Private = cc.add(cc.mul(4, t, d), cc.mul(heads, t, t))
	if a.P > 0 {
		n.FLOPs = cc.add(n.FLOPs, cc.mul(heads, t, t))
		n.SavedAux = cc.mul(heads, t, t)
	}
	return b.push(n, &cc)
}
