package stdlib

import "pipe/lang"

// The ops that resample or reshape a feature map: the pools, gap,
// flatten, upsample and pixelshuffle (the 3-D layers of volume.go build
// the same maxpool and upsample). Their rules are in prims.go and
// gan_ops.go (pixelshuffle).

func spatialOps() []*Op {
	pool := func(name, doc, what, op, shape, saved string, more ...*Layer) *Op {
		return &Op{Name: name, Doc: op, Shape: shape, Saved: saved,
			Layers: append([]*Layer{{Spec: layer(name, doc, poolArgs(what)...), build: func(b *builder, c *lang.LayerCall, x int) int {
				return b.pool(b.numbered(name), name, x, OpArgs{Kernel: argInt(c, "size", 2), Stride: argInt(c, "stride", 0),
					Padding: argInt(c, "padding", 0)})
			}}}, more...)}
	}
	return []*Op{
		pool("maxpool", "Maximum over square windows of [C, H, W].", "maximum",
			"Maximum over windows (Kernel, Stride, Padding); cubic windows on a volume (maxpool3d).",
			"[C, H, W] to [C, (H+2P-K)/S+1, same for W]; [C, D, H, W] likewise per axis",
			"its input, and 8-byte indices of the maxima (SavedAux)", maxpool3dLayer()),
		pool("avgpool", "Average over square windows of [C, H, W] (padding counts as zeros).", "average",
			"Average over windows (Kernel, Stride, Padding).", "[C, H, W] to [C, (H+2P-K)/S+1, same for W]",
			"its input (PyTorch keeps it though only its size is read)"),
		{Name: "gap", Doc: "Global average pool (Keepdims).", Shape: "[C, H, W] or [C, D, H, W] to [C] (or [C, 1, 1], [C, 1, 1, 1])",
			Saved: "its input (as PyTorch's adaptive_avg_pool2d does)",
			Layers: []*Layer{{
				Spec:    layer("gap", "Global average pool: [C, H, W] (or [C, D, H, W]) to [C]."),
				Aliases: []string{"global_avg_pool"},
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.gap(b.numbered("gap"), x, false)
				}}}},
		{Name: "flatten", Doc: "Reshape to a vector.", Shape: "[C, H, W] to [C·H·W]", Saved: "nothing",
			Layers: []*Layer{{
				Spec: layer("flatten", "Reshapes a sample to a vector: [C, H, W] to [C·H·W]."),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.flatten(b.numbered("flatten"), x)
				}}}},
		{Name: "upsample", Doc: "Resize of H and W (Scale, Mode, AlignCorners); of D, H and W on a volume (upsample3d: nearest or trilinear).",
			Shape: "[C, H, W] to [C, Scale·H, Scale·W] or Out; [C, D, H, W] to [C, Scale·D, Scale·H, Scale·W]",
			Saved: "nothing (backward needs only the sizes)",
			Layers: []*Layer{{
				Spec: layer("upsample", "Scales height and width of [C, H, W] by an integer factor.",
					arg("factor", lang.TInt, "The scale factor.", positional, atLeast(1), def("2")),
					arg("mode", lang.TEnum, "nearest | bilinear (align_corners false).", enum("nearest", "bilinear"), def("nearest"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					if !ok || !b.spatial("upsample", in) {
						return -1
					}
					f := argInt(c, "factor", 2)
					var cc calc
					ho, wo := cc.mul(in[1], f), cc.mul(in[2], f)
					if cc.overflow {
						b.errorf("overflow", "upsample is too large to count", "%s scaled by %d overflows.", shapeStr(in), f)
						return -1
					}
					return b.upsample(b.numbered("upsample"), x, ho, wo, argStr(c, "mode", "nearest"), false)
				}}, upsample3dLayer()}},
		{Name: "pixelshuffle", Doc: "Sub-pixel rearrangement (Scale).", Shape: "[C·Scale², H, W] to [C, Scale·H, Scale·W]", Saved: "nothing",
			Layers: []*Layer{{
				Spec: layer("pixelshuffle", "Rearranges [C·r², H, W] to [C, r·H, r·W] (sub-pixel upsampling, as PyTorch's PixelShuffle).",
					arg("factor", lang.TInt, "The upscale factor r; the channels must divide by r².", positional, required, atLeast(1))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.pixelshuffle(b.numbered("pixelshuffle"), x, argInt(c, "factor", 2))
				}}}},
	}
}
