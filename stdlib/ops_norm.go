package stdlib

import "pipe/lang"

// The normalisations: batchnorm over the channels of a batch, layernorm
// over each row's features, instancenorm over each channel of a sample,
// groupnorm over each group of channels of a sample; their rules follow
// the descriptors.

func normOps() []*Op {
	return []*Op{
		{Name: "batchnorm", Doc: "Batch normalisation over axis 0 (Eps, Momentum).", Shape: "unchanged",
			Saved: "its input (the per-channel mean and inverse deviation are per batch)",
			Layers: []*Layer{{
				Spec: layer("batchnorm", "Batch normalisation over the channel axis (the first) of a vector, an image or a volume, with a learned scale and shift.",
					arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5")),
					arg("momentum", lang.TFloat, "Weight of the batch in the running statistics, in [0, 1].", atLeast(0), atMost(1), def("0.1"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.batchnorm(b.numbered("batchnorm"), x, OpArgs{Eps: argFloat(c, "eps", 1e-5), Momentum: argFloat(c, "momentum", 0.1)})
				}}},
			// The affine parameters, then the running statistics (buffers). A
			// conv that fuses a batchnorm holds these under the batchnorm's name.
			Tensors: func(n *Node) []TensorSpec {
				c := first(n.Out)
				return append(affine(n.Name, c),
					buffer(n.Name+".running_mean", []int64{c}, fill(0)),
					buffer(n.Name+".running_var", []int64{c}, fill(1)))
			}},
		{Name: "layernorm", Doc: "Normalisation over the last axis (Eps).", Shape: "unchanged",
			Saved: "its input, and privately a mean and an inverse deviation per row",
			Layers: []*Layer{{
				Spec: layer("layernorm", "Layer normalisation over the last axis (each token's features for tokens [T, D]), with a learned scale and shift.",
					arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.layernorm(b.numbered("layernorm"), x, OpArgs{Eps: argFloat(c, "eps", 1e-5)})
				}}},
			Tensors: func(n *Node) []TensorSpec { return affine(n.Name, last(n.Out)) }},
		{Name: "instancenorm", Doc: "Normalisation of each channel of each sample over H and W (Eps, Affine).", Shape: "unchanged",
			Saved: "its input, and privately a mean and an inverse deviation per channel",
			Layers: []*Layer{{
				Spec: layer("instancenorm", "Instance normalisation of [C, H, W]: each channel of each sample over H and W, without running statistics.",
					arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5")),
					arg("affine", lang.TBool, "A learned per-channel scale and shift.", def("false"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.instancenorm(b.numbered("instancenorm"), x, OpArgs{Eps: argFloat(c, "eps", 1e-5), Affine: argBool(c, "affine", false)})
				}}},
			Tensors: func(n *Node) []TensorSpec {
				if !n.Args.Affine {
					return nil
				}
				return affine(n.Name, first(n.Out))
			}},
		{Name: "groupnorm", Doc: "Normalisation of each group of Channels/Groups channels of each sample over the group's channels and positions, with a per-channel scale and shift (Groups, Eps).",
			Shape: "unchanged ([C, H, W] or [C, D, H, W])", Saved: "its input, and privately a mean and an inverse deviation per group",
			Layers: []*Layer{{
				Spec: layer("groupnorm", "Group normalisation of [C, H, W] or [C, D, H, W], as PyTorch's GroupNorm: the channels of each sample split into groups, each normalised over its channels and positions, with a learned per-channel scale and shift. groups 1 normalises each sample whole; groups C is instancenorm affine.",
					arg("groups", lang.TInt, "The number of groups; the channels must divide by it.", positional, required, atLeast(1)),
					arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					g := argInt(c, "groups", 1)
					if ok && len(in) > 0 && g > 0 && in[0]%g != 0 {
						return b.badArg(c.Args["groups"], "groupnorm groups must divide the channels",
							"The input has %d channels, which is not a multiple of %d groups; pick groups dividing %d.", in[0], g, in[0])
					}
					return b.groupnorm(b.numbered("groupnorm"), x, OpArgs{Groups: g, Eps: argFloat(c, "eps", 1e-5)})
				}}},
			Tensors: func(n *Node) []TensorSpec { return affine(n.Name, first(n.Out)) }},
	}
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

// instancenorm normalises each channel of each sample over H and W: 5
// FLOPs per element as batchnorm. PyTorch runs it as a batch norm of
// [1, N·C, H, W], which keeps its input and a mean and an inverse
// deviation per (sample, channel).
func (b *builder) instancenorm(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("instancenorm", in) {
		return -1
	}
	var cc calc
	n := b.newNode(name, "instancenorm", cloneShape(in), a, x)
	if a.Affine {
		n.Params = cc.mul(2, in[0])
	}
	n.FLOPs = cc.mul(5, cc.numel(in))
	n.Keep = []int{x}
	n.Private = cc.mul(2, in[0])
	return b.push(n, &cc)
}

// groupnorm normalises each group of a sample's channels over the group's
// channels and positions: 5 FLOPs per element as batchnorm. PyTorch's
// native_group_norm keeps its input and a mean and an inverse deviation
// per (sample, group).
func (b *builder) groupnorm(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if len(in) != 3 && len(in) != 4 {
		hint := ""
		if len(in) == 1 {
			hint = " A vector has no positions to normalise over: use layernorm or batchnorm."
		}
		return b.shapeErr("groupnorm needs an image or a volume", "groupnorm expects [C, H, W] or [C, D, H, W] per sample but gets %s.%s", shapeStr(in), hint)
	}
	if a.Groups < 1 || in[0]%a.Groups != 0 {
		return b.shapeErr("groupnorm groups must divide the channels", "groups %d must divide the input's %d channels.", a.Groups, in[0])
	}
	var cc calc
	n := b.newNode(name, "groupnorm", cloneShape(in), a, x)
	n.Params = cc.mul(2, in[0])
	n.FLOPs = cc.mul(5, cc.numel(in))
	n.Keep = []int{x}
	n.Private = cc.mul(2, a.Groups)
	return b.push(n, &cc)
}
