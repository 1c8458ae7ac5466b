package stdlib

import (
	"fmt"
	"math"

	"pipe/lang"
)

// The linear ops: dense and its low-rank form, conv and convtranspose (the
// 3-D layers of volume.go build the same conv and convtranspose), with
// their rules as builder methods.

func linearOps() []*Op {
	return []*Op{
		{Name: "dense", Doc: "Affine map of the last axis (Units, Bias).", Shape: "[..., F] to [..., Units]", Saved: "its input",
			Layers: []*Layer{{
				Spec: layer("dense", "Fully connected layer on a vector, or on each token of [T, D]: y = xW + b.",
					arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
					biasArg()),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					if !ok {
						return -1
					}
					if len(in) != 1 && len(in) != 2 {
						return b.notVector("dense", in)
					}
					return b.dense(b.numbered("dense"), x, OpArgs{Units: argInt(c, "units", 1), Bias: argBool(c, "bias", true)})
				}}},
			Tensors: func(n *Node) []TensorSpec {
				fin, fout := last(inShape(n)), last(n.Out)
				return withBias(n.Name, []int64{fout, fin}, fout, fin, n.Args.Bias)
			}},
		{Name: "conv", Doc: "2-D convolution (Channels, Kernel, Stride, Padding, Dilation, Groups, Bias); 3-D on a volume (conv3d: Dilation and Groups 1).",
			Shape: "[C, H, W] to [Channels, (H+2P-D(K-1)-1)/S+1, same for W]; [C, D, H, W] likewise per axis", Saved: "its input (for the weight gradient)",
			Layers: []*Layer{{
				Spec: layer("conv", "2-D convolution over [C, H, W].", append(convArgs("3", "1"),
					arg("dilation", lang.TInt, "Spacing between kernel taps; d2 doubles the receptive field.", glued, alias("d"), atLeast(1), def("1")),
					arg("groups", lang.TInt, "Channel groups; equal to the input channels for a depthwise conv.", atLeast(1), def("1")),
					biasArg())...),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.conv(b.numbered("conv"), x, OpArgs{Channels: argInt(c, "out", 1), Kernel: argInt(c, "kernel", 3),
						Stride: argInt(c, "stride", 1), Padding: argInt(c, "padding", 0), Dilation: argInt(c, "dilation", 1),
						Groups: argInt(c, "groups", 1), Bias: argBool(c, "bias", true)})
				}}, conv3dLayer()},
			Tensors: func(n *Node) []TensorSpec {
				// A volume's kernel is k×k×k; groups apply to images only.
				in, a := inShape(n), n.Args
				cin, cout, k := first(in), first(n.Out), a.Kernel
				grp := max(a.Groups, 1)
				shape, fan := []int64{cout, cin / grp, k, k}, cin/grp*k*k
				if len(in) == 4 {
					shape, fan = []int64{cout, cin, k, k, k}, cin*k*k*k
				}
				return withBias(n.Name, shape, cout, fan, a.Bias)
			}},
		{Name: "convtranspose", Doc: "2-D transposed convolution (Channels, Kernel, Stride, Padding, Bias); 3-D on a volume (convtranspose3d).",
			Shape: "[C, H, W] to [Channels, (H-1)S-2P+K, same for W]; [C, D, H, W] likewise per axis", Saved: "its input",
			Layers: []*Layer{{
				Spec: layer("convtranspose", "2-D transposed convolution (learned upsampling) over [C, H, W].",
					append(convArgs("2", "2"), biasArg())...),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.convTranspose(b.numbered("convtranspose"), x, OpArgs{Channels: argInt(c, "out", 1),
						Kernel: argInt(c, "kernel", 2), Stride: argInt(c, "stride", 2), Padding: argInt(c, "padding", 0),
						Bias: argBool(c, "bias", true)})
				}}, convTranspose3dLayer()},
			Tensors: func(n *Node) []TensorSpec {
				in, a := inShape(n), n.Args
				cin, cout, k := first(in), first(n.Out), a.Kernel
				grp := max(a.Groups, 1)
				shape, fan := []int64{cin, cout / grp, k, k}, cout/grp*k*k
				if len(in) == 4 {
					shape, fan = []int64{cin, cout, k, k, k}, cout*k*k*k
				}
				return withBias(n.Name, shape, cout, fan, a.Bias)
			}},
		{Name: "lowrank_dense", Doc: "x·Σ U_i V_i + b (Units, Terms, Rank, Bias).", Shape: "[F] to [Units]",
			Saved: "its input, and privately the Terms×Rank products x·U_i (for the V_i gradients)",
			Layers: []*Layer{{
				Spec: layer("lowrank_dense", "A dense layer whose weight is a sum of low-rank products: y = x·Σ U_i V_i + b, U_i: in×rank, V_i: rank×units.",
					arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
					arg("terms", lang.TInt, "The number of low-rank products summed.", atLeast(1), def("1")),
					arg("rank", lang.TInt, "The inner dimension of each product.", atLeast(1), def("16")),
					biasArg()),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					if !ok {
						return -1
					}
					if len(in) != 1 {
						return b.notVector("lowrank_dense", in)
					}
					return b.lowrankDense(b.numbered("lowrank_dense"), x, OpArgs{Units: argInt(c, "units", 1),
						Terms: argInt(c, "terms", 1), Rank: argInt(c, "rank", 16), Bias: argBool(c, "bias", true)})
				}}},
			Tensors: func(n *Node) []TensorSpec {
				a, fin, fout := n.Args, last(inShape(n)), last(n.Out)
				ts := []TensorSpec{
					param(n.Name+".u", []int64{a.Terms, fin, a.Rank}, kaiming(fin)),
					param(n.Name+".v", []int64{a.Terms, a.Rank, fout}, uniform(math.Sqrt(3/float64(a.Terms*a.Rank)))),
				}
				if a.Bias {
					ts = append(ts, param(n.Name+".bias", []int64{fout}, kaiming(fin)))
				}
				return ts
			}},
	}
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
