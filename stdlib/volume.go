package stdlib

import (
	"fmt"

	"pipe/lang"
)

// Volumes: the 3-D layers over [C, D, H, W] per sample. They build the
// same primitive ops as their 2-D counterparts (conv, convtranspose,
// maxpool, upsample), told apart by the rank of their shapes, so every
// rule keyed on an op (saved tensors, autocast, fusion, the engines'
// dispatch) reads one name; the engines pick the 3-D kernel (nn.Conv3d,
// the native vol2col) from the input's rank. Kernels, strides and
// padding are cubic: the same along depth, height and width.

// The 3-D layers, each a layer of its 2-D op's descriptor.

func conv3dLayer() *Layer {
	return &Layer{Spec: layer("conv3d", "3-D convolution over [C, D, H, W] (a cubic kernel).", convArgs3("3", "1")...),
		build: func(b *builder, c *lang.LayerCall, x int) int {
			return b.conv3d(b.numbered("conv3d"), x, OpArgs{Channels: argInt(c, "out", 1), Kernel: argInt(c, "kernel", 3),
				Stride: argInt(c, "stride", 1), Padding: argInt(c, "padding", 0), Bias: argBool(c, "bias", true)})
		}}
}

func convTranspose3dLayer() *Layer {
	return &Layer{Spec: layer("convtranspose3d", "3-D transposed convolution (learned upsampling) over [C, D, H, W].", convArgs3("2", "2")...),
		build: func(b *builder, c *lang.LayerCall, x int) int {
			return b.convTranspose3d(b.numbered("convtranspose3d"), x, OpArgs{Channels: argInt(c, "out", 1), Kernel: argInt(c, "kernel", 2),
				Stride: argInt(c, "stride", 2), Padding: argInt(c, "padding", 0), Bias: argBool(c, "bias", true)})
		}}
}

func maxpool3dLayer() *Layer {
	return &Layer{Spec: layer("maxpool3d", "Maximum over cubic windows of [C, D, H, W].",
		arg("size", lang.TInt, "The window size (cubic) over which the maximum is taken.", positional, atLeast(1), def("2")),
		arg("stride", lang.TInt, "Step between windows; the window size when left out.", glued, alias("s"), atLeast(1)),
		arg("padding", lang.TInt, "Padding on each side.", glued, alias("pad"), atLeast(0), def("0"))),
		build: func(b *builder, c *lang.LayerCall, x int) int {
			return b.maxpool3d(b.numbered("maxpool3d"), x, OpArgs{Kernel: argInt(c, "size", 2), Stride: argInt(c, "stride", 0),
				Padding: argInt(c, "padding", 0)})
		}}
}

func upsample3dLayer() *Layer {
	return &Layer{Spec: layer("upsample3d", "Scales depth, height and width of [C, D, H, W] by an integer factor.",
		arg("factor", lang.TInt, "The scale factor.", positional, atLeast(1), def("2")),
		arg("mode", lang.TEnum, "nearest | trilinear (align_corners false).", enum("nearest", "trilinear"), def("nearest"))),
		build: func(b *builder, c *lang.LayerCall, x int) int {
			in, ok := b.shape(x)
			if !ok || !b.volume("upsample3d", in) {
				return -1
			}
			f := argInt(c, "factor", 2)
			var cc calc
			out := []int64{in[0], cc.mul(in[1], f), cc.mul(in[2], f), cc.mul(in[3], f)}
			if cc.overflow {
				b.errorf("overflow", "upsample3d is too large to count", "%s scaled by %d overflows.", shapeStr(in), f)
				return -1
			}
			return b.upsample3d(b.numbered("upsample3d"), x, out, argStr(c, "mode", "nearest"))
		}}
}

func convArgs3(kernelDef, strideDef string) []*lang.ArgSpec {
	return []*lang.ArgSpec{
		arg("out", lang.TInt, "Output channels.", positional, required, atLeast(1)),
		arg("kernel", lang.TInt, "Kernel size (cubic); k3 is 3x3x3.", glued, alias("k"), atLeast(1), def(kernelDef)),
		arg("stride", lang.TInt, "Step between kernel positions; s2 halves each extent.", glued, alias("s"), atLeast(1), def(strideDef)),
		arg("padding", lang.TInt, "Zeros added on each side of each axis; pad1 keeps a k3 conv's size.", glued, alias("pad"), atLeast(0), def("0")),
		biasArg(),
	}
}

// volume checks that a shape is [C, D, H, W].
func (b *builder) volume(op string, in []int64) bool {
	if len(in) == 4 {
		return true
	}
	hint := ""
	switch len(in) {
	case 3:
		hint = fmt.Sprintf(" An image [C, H, W] has no depth: use the 2-D layer (%s), or give the model input [C, D, H, W].", op[:len(op)-2])
	case 1:
		hint = fmt.Sprintf(" A vector has no depth, height and width: %s belongs before flatten.", op)
	}
	b.shapeErr(op+" needs a volume", "%s expects [C, D, H, W] per sample but gets %s.%s", op, shapeStr(in), hint)
	return false
}

// conv3d is op conv on [C, D, H, W]: dilation and groups 1.
func (b *builder) conv3d(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.volume("conv3d", in) {
		return -1
	}
	a = convDefaults(a)
	a.Dilation, a.Groups = 1, 1
	out := []int64{a.Channels, 0, 0, 0}
	for i := 1; i < 4; i++ {
		out[i] = windowOut(in[i], a.Kernel, a.Stride, a.Padding, 1)
		if out[i] < 1 {
			return b.shapeErr("conv3d kernel larger than its input",
				"The %dx%dx%d kernel does not fit the input %s padded by %d. Add padding (pad%d), use a smaller kernel, or pool less before it.",
				a.Kernel, a.Kernel, a.Kernel, shapeStr(in), a.Padding, (a.Kernel-1)/2)
		}
	}
	var cc calc
	n := b.newNode(name, "conv", out, a, x)
	perOut := cc.mul(in[0], a.Kernel, a.Kernel, a.Kernel)
	vox := cc.mul(out[1], out[2], out[3])
	n.Params = cc.mul(perOut, a.Channels)
	n.FLOPs = cc.mul(2, perOut, a.Channels, vox)
	if a.Bias {
		n.Params = cc.add(n.Params, a.Channels)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(a.Channels, vox))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// convTranspose3d is op convtranspose on [C, D, H, W].
func (b *builder) convTranspose3d(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.volume("convtranspose3d", in) {
		return -1
	}
	a = convDefaults(a)
	a.Dilation, a.Groups = 1, 1
	var cc calc
	out := []int64{a.Channels, 0, 0, 0}
	for i := 1; i < 4; i++ {
		out[i] = cc.add(cc.mul(in[i]-1, a.Stride), a.Kernel) - 2*a.Padding
		if out[i] < 1 {
			return b.shapeErr("convtranspose3d padding too large",
				"Padding %d on each side leaves nothing of the output's extent %d; use less padding.", a.Padding, out[i]+2*a.Padding)
		}
	}
	n := b.newNode(name, "convtranspose", out, a, x)
	perIn := cc.mul(a.Channels, a.Kernel, a.Kernel, a.Kernel)
	n.Params = cc.mul(perIn, in[0])
	n.FLOPs = cc.mul(2, perIn, in[0], in[1], in[2], in[3])
	if a.Bias {
		n.Params = cc.add(n.Params, a.Channels)
		n.FLOPs = cc.add(n.FLOPs, cc.mul(a.Channels, out[1], out[2], out[3]))
	}
	n.Keep = []int{x}
	return b.push(n, &cc)
}

// maxpool3d is op maxpool on [C, D, H, W]: Kernel³ FLOPs per output.
func (b *builder) maxpool3d(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.volume("maxpool3d", in) {
		return -1
	}
	if a.Stride == 0 {
		a.Stride = a.Kernel
	}
	a.Dilation = 1
	if 2*a.Padding > a.Kernel {
		return b.shapeErr("maxpool3d padding too large",
			"Padding %d is more than half the %d-wide window; use at most pad%d.", a.Padding, a.Kernel, a.Kernel/2)
	}
	out := []int64{in[0], 0, 0, 0}
	for i := 1; i < 4; i++ {
		out[i] = windowOut(in[i], a.Kernel, a.Stride, a.Padding, 1)
		if out[i] < 1 {
			return b.shapeErr("maxpool3d window larger than its input",
				"The %dx%dx%d window does not fit the input %s; pool less before it or use a smaller window.", a.Kernel, a.Kernel, a.Kernel, shapeStr(in))
		}
	}
	var cc calc
	n := b.newNode(name, "maxpool", out, a, x)
	n.FLOPs = cc.mul(a.Kernel, a.Kernel, a.Kernel, cc.numel(out))
	n.Keep = []int{x}
	n.SavedAux = cc.mul(8, cc.numel(out))
	return b.push(n, &cc)
}

// upsample3d is op upsample on [C, D, H, W]: nearest costs nothing,
// trilinear 15 FLOPs per output element (8 weights, 7 adds).
func (b *builder) upsample3d(name string, x int, out []int64, mode string) int {
	in, _ := b.shape(x)
	a := OpArgs{Mode: mode}
	if out[1]%in[1] == 0 && out[1]/in[1] == out[2]/in[2] && out[2]%in[2] == 0 && out[3]%in[3] == 0 && out[3]/in[3] == out[1]/in[1] {
		a.Scale = out[1] / in[1]
	}
	var cc calc
	n := b.newNode(name, "upsample", out, a, x)
	if mode == "trilinear" {
		n.FLOPs = cc.mul(15, cc.numel(out))
	}
	return b.push(n, &cc)
}

// unet3 is the plain unet with dims 3: the same modules and names as the
// 2-D one (a double conv of 3x3x3 convs without bias, batchnorm and relu;
// 2x2x2 max-pool down; 2x2x2 stride-2 transposed conv up; skip first in
// the concat; a 1x1x1 conv head with bias), as 3-D U-Nets such as
// Çiçek et al.'s and CytoDL's are built.
func (f *fam) unet3(x int, in []int64, depth int64, enc string) int {
	b := f.b
	if !b.volume("unet", in) {
		b.diags[len(b.diags)-1].Detail += " unet with dims 3 takes volumes; for images leave dims at 2."
		return -1
	}
	if enc != "plain" {
		return b.badArg(f.c.Args["encoder"], "unet dims 3 needs the plain encoder",
			"The resnet encoders are 2-D (torchvision's); with dims 3 write encoder plain or leave it out.")
	}
	if depth < 1 || depth > 8 {
		return b.badArg(f.c.Args["depth"], "unet depth out of range", "unet takes depth 1 to 8; found %d.", depth)
	}
	m := int64(1) << depth
	if in[1]%m != 0 || in[2]%m != 0 || in[3]%m != 0 {
		return b.shapeErr("unet input not divisible", "unet with depth %d halves the volume %d times, so depth, height and width must divide by %d; the input is %dx%dx%d. Crop to %dx%dx%d or use less depth.",
			depth, depth, m, in[1], in[2], in[3], max(m, in[1]/m*m), max(m, in[2]/m*m), max(m, in[3]/m*m))
	}
	width := argInt(f.c, "width", 64)
	out := argInt(f.c, "out", 1)
	var cc calc
	cc.mul(width, m)
	if cc.overflow {
		return b.badArg(f.c.Args["width"], "unet width too large", "width·2^depth overflows.")
	}
	ch := func(level int64) int64 { return width << level }
	convBNReLU := func(base string, at int, x int, c int64) int {
		x = b.conv3d(fmt.Sprintf("%s%s%d", f.pre, base, at), x, OpArgs{Channels: c, Kernel: 3, Stride: 1, Padding: 1})
		x = f.bn(fmt.Sprintf("%s%d", base, at+1), x)
		return f.act(fmt.Sprintf("%s%d", base, at+2), "relu", x)
	}
	doubleConv := func(base string, x int, c int64) int {
		x = convBNReLU(base+"double_conv.", 0, x, c)
		return convBNReLU(base+"double_conv.", 3, x, c)
	}
	x = doubleConv("inc.", x, ch(0))
	skips := []int{x}
	for i := int64(1); i <= depth; i++ {
		x = b.maxpool3d(fmt.Sprintf("%sdown%d.maxpool_conv.0", f.pre, i), x, OpArgs{Kernel: 2, Stride: 2})
		x = doubleConv(fmt.Sprintf("down%d.maxpool_conv.1.", i), x, ch(i))
		skips = append(skips, x)
	}
	for j := int64(1); j <= depth; j++ {
		l := depth - j + 1
		up := b.convTranspose3d(fmt.Sprintf("%sup%d.up", f.pre, j), x, OpArgs{Channels: ch(l - 1), Kernel: 2, Stride: 2, Bias: true})
		cat := b.concat(fmt.Sprintf("%sup%d.cat", f.pre, j), []int{skips[l-1], up}, []string{"the skip", "the upsampled flow"})
		x = doubleConv(fmt.Sprintf("up%d.conv.", j), cat, ch(l-1))
	}
	return b.conv3d(f.pre+"outc.conv", x, OpArgs{Channels: out, Kernel: 1, Stride: 1, Bias: true})
}

// volumeSources are the source kinds of volumes: volume (multi-page TIFF
// stacks) and zarr (Zarr v2 arrays). Both cut [C, D, H, W] windows.
func volumeSources() map[string][]*lang.FieldSpec {
	fields := func(what, target string) []*lang.FieldSpec {
		return []*lang.FieldSpec{
			pathField(what),
			field("target", "The per-voxel targets: "+target+" with the inputs' depth, height and width (class indices, a 0/1 mask, or values to regress).",
				arg("target", lang.TString, "The targets' path.", positional, required)),
			field("window", "The extent of the windows cut from the volume, and the step between them; the whole volume is one sample when left out.",
				arg("window", lang.TShape, "Depth, height and width, such as [16, 64, 64].", positional, required),
				arg("stride", lang.TShape, "Voxels between the starts of neighbouring windows along depth, height and width; the window when left out."),
			),
			splitField(),
			field("normalize", "How input values are scaled: standard (each channel to zero mean and unit variance, over every voxel of the volume) or none (raw values).",
				arg("normalize", lang.TEnum, "standard | none.", positional, required, enum("standard", "none"), def("standard"))),
			field("target_normalize", "How a regression target (loss mse or mae) is scaled for training; metrics and predictions are in the target's units either way.",
				arg("target_normalize", lang.TEnum, "standard (zero mean, unit variance over the target's voxels, kept in checkpoints) | none.",
					positional, required, enum("standard", "none"), def("standard"))),
		}
	}
	return map[string][]*lang.FieldSpec{
		"volume": fields("A multi-page TIFF stack (8 or 16-bit, or float): one page per depth slice, its bands the channels; read through GDAL.", "a TIFF stack"),
		"zarr":   fields("A Zarr v2 array (the folder holding .zarray), [D, H, W] or [C, D, H, W], C order, dtype u1, u2 or f4, chunks raw, gzip, zlib or zstd.", "a Zarr v2 array [D, H, W] or [1, D, H, W]"),
	}
}
