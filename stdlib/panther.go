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

// sketchedCall builds sketched_dense or sketched_conv from a call.
func (b *builder) sketchedCall(c *lang.LayerCall, x int) int {
	if c.Name == "sketched_conv" {
		return b.sketchedConv(b.numbered("sketched_conv"), x, OpArgs{Channels: argInt(c, "out", 1), Kernel: argInt(c, "kernel", 3),
			Stride: argInt(c, "stride", 1), Padding: argInt(c, "padding", 0), Terms: argInt(c, "terms", 6), Rank: argInt(c, "rank", 8),
			Bias: argBool(c, "bias", true)})
	}
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if len(in) != 1 {
		return b.shapeErr("sketched_dense needs a vector", "sketched_dense expects a vector per sample but gets %s; add 'flatten ->' before it%s.",
			shapeStr(in), gapHint(in))
	}
	return b.sketchedDense(b.numbered("sketched_dense"), x, OpArgs{Units: argInt(c, "units", 1), Terms: argInt(c, "terms", 1), Rank: argInt(c, "rank", 16),
		Bias: argBool(c, "bias", true)})
}
