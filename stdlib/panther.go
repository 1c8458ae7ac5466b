package stdlib

// Panther's sketched layers (panther.nn.SKLinear and SKConv2d), as its
// source and documentation define them:
//
//	SKLinear:  y = 1/(2L) · Σ_{i<L} (x·S1_i·U1_i + x·U2_i·S2_i) + b
//	SKConv2d:  y = 1/(2L) · Σ_{i<2L} U_iᵀ·(S_i ⋆ x) + b
//
// with x a row vector (Panther's docs write the column form
// U1_iᵀ·S1_i·x + S2_i·U2_i·x). L is num_terms (terms), k low_rank (rank).
// S are the learned parameters; U are fixed random sign sketches (±1/√k,
// Panther's scaled_sign_sketch), buffers that no gradient reaches and a
// checkpoint saves. S starts as a sketch of a dense initial weight W:
// S1_i = W·U1_iᵀ, S2_i = U2_iᵀ·W (SKConv2d: the kernel [in, kh, kw, out]
// times U_iᵀ). The shapes, in Panther's layout:
//
//	SKLinear  S1 [L, in, k]  S2 [L, k, out]  U1 [L, k, out]  U2 [L, in, k]
//	SKConv2d  S  [2L·k, in, kh, kw] (a conv weight)  U [2L, k, out]
//
// so SKLinear learns L·k·(in+out) (+ out) values and keeps as many fixed;
// Panther's tutorial counts 2L·k·(in+out) + out, S and U together.

import "pipe/lang"

func pantherOps() []*Op {
	return []*Op{sketchedDenseOp(), sketchedConvOp()}
}

// sketchedDense is Panther's SKLinear on a vector. Forward computes
// x·S1_i and x·U2_i (2·F·k each, L times), their products with U1_i and
// S2_i (2·k·U each) and the bias (U); 1/(2L) rides on the products.
// Backward keeps x (for the S1 gradient) and the L·k values x·U2_i (for
// S2's); U1 and U2 are not trained, so nothing else.
func (b *builder) sketchedDense(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	f, lk := in[0], cc.mul(a.Terms, a.Rank)
	n := b.newNode(name, "sketched_dense", []int64{a.Units}, a, x)
	n.Params = cc.mul(lk, cc.add(f, a.Units))
	n.Buffers = n.Params
	n.FLOPs = cc.mul(4, lk, cc.add(f, a.Units))
	if a.Bias {
		n.Params = cc.add(n.Params, a.Units)
		n.FLOPs = cc.add(n.FLOPs, a.Units)
	}
	n.Keep = []int{x}
	n.Private = lk
	return b.push(n, &cc)
}

// sketchedConv is Panther's SKConv2d on [C, H, W]: a convolution to 2L·k
// channels with the learned S, then each position's 2L·k values times the
// fixed U ([2L·k, out]) scaled by 1/(2L), and the bias. Backward keeps
// only the input: the gradient reaching the convolution is U·dy, and the
// convolution's output is not needed.
func (b *builder) sketchedConv(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("sketched_conv", in) {
		return -1
	}
	a = convDefaults(a)
	c, h, w := in[0], in[1], in[2]
	ho, wo := windowOut(h, a.Kernel, a.Stride, a.Padding, 1), windowOut(w, a.Kernel, a.Stride, a.Padding, 1)
	if ho < 1 || wo < 1 {
		return b.shapeErr("sketched_conv kernel larger than its input",
			"The %dx%d kernel does not fit the input %s padded by %d (%dx%d). Add padding (pad%d), use a smaller kernel, or pool less before it.",
			a.Kernel, a.Kernel, shapeStr(in), a.Padding, h+2*a.Padding, w+2*a.Padding, (a.Kernel-1)/2)
	}
	var cc calc
	mid := cc.mul(2, a.Terms, a.Rank)
	n := b.newNode(name, "sketched_conv", []int64{a.Channels, ho, wo}, a, x)
	perOut := cc.mul(c, a.Kernel, a.Kernel)
	n.Params = cc.mul(perOut, mid)
	n.Buffers = cc.mul(mid, a.Channels)
	n.FLOPs = cc.add(cc.mul(2, perOut, mid, ho, wo), cc.mul(2, mid, a.Channels, ho, wo))
	if a.Bias {
		n.Params = cc.add(n.Params, a.Channels)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(a.Channels, ho, wo))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

func sketchedDenseOp() *Op {
	return &Op{Name: "sketched_dense", Doc: "Panther's SKLinear: 1/(2L)·Σ (x·S1_i·U1_i + x·U2_i·S2_i) + b (Units, Terms L, Rank k, Bias); U fixed (Buffers).",
		Shape: "[F] to [Units]", Saved: "its input, and privately the L·k values x·U2_i (for the S2 gradients)",
		Layers: []*Layer{{
			Spec: layer("sketched_dense", "Panther's SKLinear: y = 1/(2L)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + b over L terms of rank k, learning S1_i (in×k) and S2_i (k×units); U1_i (k×units) and U2_i (in×k) are fixed random sign sketches (±1/√k) that checkpoints keep. S starts as a sketch of a dense weight W: S1_i = W·U1_iᵀ, S2_i = U2_iᵀ·W.",
				arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
				arg("terms", lang.TInt, "L, the number of sketched terms (Panther's num_terms).", atLeast(1), def("1")),
				arg("rank", lang.TInt, "k, the rank of each term (Panther's low_rank).", atLeast(1), def("16")),
				biasArg()),
			build: func(b *builder, c *lang.LayerCall, x int) int {
				in, ok := b.shape(x)
				if !ok {
					return -1
				}
				if len(in) != 1 {
					return b.notVector("sketched_dense", in)
				}
				return b.sketchedDense(b.numbered("sketched_dense"), x, OpArgs{Units: argInt(c, "units", 1), Terms: argInt(c, "terms", 1), Rank: argInt(c, "rank", 16),
					Bias: argBool(c, "bias", true)})
			}}},
		// Panther's names: the sketches S1s [L, in, k] and S2s [L, k, out],
		// the bias, and the fixed sign sketches U1s [L, k, out] and U2s
		// [L, in, k].
		Tensors: func(n *Node) []TensorSpec {
			a, name := n.Args, n.Name
			in, out := last(inShape(n)), last(n.Out)
			sk := Sketch{Layer: name, In: in, Out: out, Terms: a.Terms, Rank: a.Rank}
			ts := []TensorSpec{
				param(name+".S1s", []int64{a.Terms, in, a.Rank}, Init{Kind: InitSketchS1, Sketch: sk}),
				param(name+".S2s", []int64{a.Terms, a.Rank, out}, Init{Kind: InitSketchS2, Sketch: sk}),
			}
			if a.Bias {
				ts = append(ts, param(name+".bias", []int64{out}, kaiming(out)))
			}
			return append(ts,
				buffer(name+".U1s", []int64{a.Terms, a.Rank, out}, signSketch(a.Rank)),
				buffer(name+".U2s", []int64{a.Terms, in, a.Rank}, signSketch(a.Rank)))
		}}
}

func sketchedConvOp() *Op {
	return &Op{Name: "sketched_conv", Doc: "Panther's SKConv2d: 1/(2L)·Σ U_iᵀ·(S_i ⋆ x) + b (Channels, Kernel, Stride, Padding, Terms L, Rank k, Bias); U fixed (Buffers).",
		Shape: "[C, H, W] to [Channels, (H+2P-K)/S+1, same for W]", Saved: "its input",
		Layers: []*Layer{{
			Spec: layer("sketched_conv", "Panther's SKConv2d over [C, H, W]: a convolution to 2L·k channels with learned kernels S, then y = 1/(2L)·Σ_i U_iᵀ·(S_i ⋆ x) + b with 2L fixed random sign sketches U_i (k×out, ±1/√k). S starts as a sketch of a dense kernel K: S_i = K·U_iᵀ.",
				append(convArgs("3", "1"),
					arg("terms", lang.TInt, "L; the layer sums 2L sketched terms (Panther's num_terms).", atLeast(1), def("6")),
					arg("rank", lang.TInt, "k, the rank of each term (Panther's low_rank).", atLeast(1), def("8")),
					biasArg())...),
			build: func(b *builder, c *lang.LayerCall, x int) int {
				return b.sketchedConv(b.numbered("sketched_conv"), x, OpArgs{Channels: argInt(c, "out", 1), Kernel: argInt(c, "kernel", 3),
					Stride: argInt(c, "stride", 1), Padding: argInt(c, "padding", 0), Terms: argInt(c, "terms", 6), Rank: argInt(c, "rank", 8),
					Bias: argBool(c, "bias", true)})
			}}},
		// S1s [2L·k, in, kh, kw] (channel i·k+r is term i's r-th), the bias,
		// and the fixed U1s [2L, k, out].
		Tensors: func(n *Node) []TensorSpec {
			a, name := n.Args, n.Name
			in, out, k := first(inShape(n)), first(n.Out), a.Kernel
			sk := Sketch{Layer: name, In: in, Out: out, Terms: a.Terms, Rank: a.Rank, Kernel: k}
			ts := []TensorSpec{param(name+".S1s", []int64{2 * a.Terms * a.Rank, in, k, k}, Init{Kind: InitSketchConv, Sketch: sk})}
			if a.Bias {
				ts = append(ts, param(name+".bias", []int64{out}, kaiming(k*k*out)))
			}
			return append(ts, buffer(name+".U1s", []int64{2 * a.Terms, a.Rank, out}, signSketch(a.Rank)))
		}}
}
