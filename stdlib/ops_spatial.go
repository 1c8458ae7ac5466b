package stdlib

import "pipe/lang"

// The ops that resample or reshape a feature map: the pools, gap,
// flatten, upsample and pixelshuffle (the 3-D layers of volume.go build
// the same maxpool and upsample), with their rules.

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

// pixelshuffle moves r² channels into an r×r block of pixels: a copy,
// which keeps nothing for backward.
func (b *builder) pixelshuffle(name string, x int, r int64) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("pixelshuffle", in) {
		return -1
	}
	var cc calc
	r2 := cc.mul(r, r)
	if cc.overflow || in[0]%r2 != 0 {
		return b.shapeErr("pixelshuffle channels do not divide by r²",
			"pixelshuffle %d turns each %d channels into one channel of a %dx larger image, so the input's channels must divide by %d; it gets %s. Give the conv before it a multiple of %d channels (conv %d k3 pad1 -> pixelshuffle %d).",
			r, r2, r, r2, shapeStr(in), r2, max(in[0]/r2, 1)*r2, r)
	}
	out := []int64{in[0] / r2, cc.mul(in[1], r), cc.mul(in[2], r)}
	n := b.newNode(name, "pixelshuffle", out, OpArgs{Scale: r}, x)
	return b.push(n, &cc)
}
