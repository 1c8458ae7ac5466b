package stdlib

// Families expand into their whole networks here. Each follows a reference
// implementation closely enough that its parameter count matches and its
// node names are that implementation's module names: resnet18/34/50/101
// torchvision's (v1.5), efficientnet_b0 to b4 torchvision's, a plain unet milesial/Pytorch-UNet's, a unet with a
// resnet encoder and deeplabv3plus segmentation_models_pytorch's, vit
// torchvision's VisionTransformer; mlp and cnn are pipe's own.
//
// Each family's details: docs/design/families.md.

import (
	"fmt"

	"pipe/lang"
)

// fam builds the nodes of one family call, prefixing their names.
type fam struct {
	b   *builder
	pre string
	c   *lang.LayerCall
}

func (b *builder) family(c *lang.LayerCall, name string, x int) int {
	pre := ""
	if !b.bare {
		pre = b.numbered(name) + "."
	}
	f := &fam{b: b, pre: pre, c: c}
	if _, ok := b.shape(x); !ok {
		return -1
	}
	switch name {
	case "mlp":
		return f.mlp(x)
	case "cnn":
		return f.cnn(x)
	case "resnet18", "resnet34", "resnet50", "resnet101":
		return f.resnet(x, resnets[name])
	case "unet":
		return f.unet(x)
	case "vit":
		return f.vit(x)
	case "deeplabv3plus":
		return f.deeplab(x)
	case "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4":
		return f.efficientnet(x, effnets[name])
	}
	return b.shapeErr("unknown family", "pipe has no expansion for family '%s'.", name)
}

// Shorthands that name nodes under the family's prefix.

func (f *fam) conv(name string, x int, out, k, s, p, d, g int64, bias bool) int {
	return f.b.conv(f.pre+name, x, OpArgs{Channels: out, Kernel: k, Stride: s, Padding: p, Dilation: d, Groups: g, Bias: bias})
}

func (f *fam) bn(name string, x int) int {
	return f.b.batchnorm(f.pre+name, x, OpArgs{Eps: 1e-5, Momentum: 0.1})
}

func (f *fam) act(name, op string, x int) int { return f.b.activation(f.pre+name, op, x) }

func (f *fam) dense(name string, x int, units int64) int {
	return f.b.dense(f.pre+name, x, OpArgs{Units: units, Bias: true})
}

// convBNReLU is conv (no bias) -> batchnorm -> relu, named base.0, .1, .2
// after offset (smp's Conv2dReLU, a double conv's halves).
func (f *fam) convBNReLU(base string, at int, x int, out, k, p int64) int {
	x = f.conv(fmt.Sprintf("%s%d", base, at), x, out, k, 1, p, 1, 1, false)
	x = f.bn(fmt.Sprintf("%s%d", base, at+1), x)
	return f.act(fmt.Sprintf("%s%d", base, at+2), "relu", x)
}

// intList reads a list argument whose elements must be at least 1.
func (f *fam) intList(name string) ([]int64, bool) {
	xs, v := argInts(f.c, name)
	if v == nil || len(xs) == 0 {
		f.b.badArg(v, fmt.Sprintf("%s needs %s", f.c.Name, name), "Write %s [a, b, ...] with at least one width.", name)
		return nil, false
	}
	for i, n := range xs {
		if n < 1 {
			f.b.badArg(v.List[i], fmt.Sprintf("%s widths must be at least 1", name), "Found %d.", n)
			return nil, false
		}
	}
	return xs, true
}

// mlp: for each hidden width, dense -> [batchnorm] -> activation ->
// [dropout]; then dense out. Nodes: hidden1.dense, hidden1.batchnorm,
// hidden1.relu, hidden1.dropout, ..., out.
func (f *fam) mlp(x int) int {
	b := f.b
	in, _ := b.shape(x)
	if len(in) != 1 {
		return b.notVector("mlp", in)
	}
	hidden, ok := f.intList("hidden")
	if !ok {
		return -1
	}
	act := argStr(f.c, "activation", "relu")
	p := argFloat(f.c, "dropout", 0)
	norm := argBool(f.c, "batchnorm", false)
	for i, h := range hidden {
		base := fmt.Sprintf("hidden%d.", i+1)
		x = f.dense(base+"dense", x, h)
		if norm {
			x = f.bn(base+"batchnorm", x)
		}
		x = f.act(base+act, act, x)
		if p > 0 {
			x = b.dropout(f.pre+base+"dropout", x, p)
		}
	}
	return f.dense("out", x, argInt(f.c, "out", 1))
}

// cnn: for each width, conv k (same padding, no bias) -> batchnorm -> relu
// -> maxpool 2; then gap -> dense out. Nodes: block1.conv, block1.batchnorm,
// block1.relu, block1.maxpool, ..., gap, out.
func (f *fam) cnn(x int) int {
	b := f.b
	in, _ := b.shape(x)
	if !b.spatial("cnn", in) {
		return -1
	}
	chans, ok := f.intList("channels")
	if !ok {
		return -1
	}
	k := argInt(f.c, "kernel", 3)
	if len(chans) < 63 && (in[1]>>len(chans) < 1 || in[2]>>len(chans) < 1) || len(chans) >= 63 {
		return b.shapeErr("cnn input too small", "cnn halves the size %d times (once per width), but the input is only %dx%d; use fewer widths or a larger input.",
			len(chans), in[1], in[2])
	}
	for i, ch := range chans {
		base := fmt.Sprintf("block%d.", i+1)
		x = f.conv(base+"conv", x, ch, k, 1, k/2, 1, 1, false)
		x = f.bn(base+"batchnorm", x)
		x = f.act(base+"relu", "relu", x)
		x = b.pool(f.pre+base+"maxpool", "maxpool", x, OpArgs{Kernel: 2, Stride: 2})
	}
	x = b.gap(f.pre+"gap", x, false)
	return f.dense("out", x, argInt(f.c, "out", 1))
}

// resnetCfg is a torchvision ResNet's block kind and blocks per layer.
type resnetCfg struct {
	bottleneck bool
	blocks     [4]int
}

var resnets = map[string]resnetCfg{
	"resnet18":  {false, [4]int{2, 2, 2, 2}},
	"resnet34":  {false, [4]int{3, 4, 6, 3}},
	"resnet50":  {true, [4]int{3, 4, 6, 3}},
	"resnet101": {true, [4]int{3, 4, 23, 3}},
}

// resnetEncoder builds torchvision's stem and the first `layers` layers
// under pre, and returns the stem's output (stride 2) and each layer's.
// dilation[i] > 1 turns layer i+1's strides into that dilation, as smp's
// replace_strides_with_dilation does: every conv of the layer gets stride
// 1, dilation d and padding (k/2)·d.
func (f *fam) resnetEncoder(x int, cfg resnetCfg, pre string, layers int, dilation [4]int64) []int {
	x = f.conv(pre+"conv1", x, 64, 7, 2, 3, 1, 1, false)
	x = f.bn(pre+"bn1", x)
	x = f.act(pre+"relu", "relu", x)
	feats := []int{x}
	if layers > 0 {
		x = f.b.pool(f.pre+pre+"maxpool", "maxpool", x, OpArgs{Kernel: 3, Stride: 2, Padding: 1})
	}
	inplanes := int64(64)
	exp := int64(1)
	if cfg.bottleneck {
		exp = 4
	}
	for li := 0; li < layers; li++ {
		planes := int64(64) << li
		stride := int64(1)
		if li > 0 {
			stride = 2
		}
		d := dilation[li]
		if d < 1 {
			d = 1
		}
		for bi := 0; bi < cfg.blocks[li]; bi++ {
			nm := fmt.Sprintf("%slayer%d.%d.", pre, li+1, bi)
			s := int64(1)
			if bi == 0 {
				s = stride
			}
			downsample := bi == 0 && (s != 1 || inplanes != planes*exp)
			if d > 1 {
				s = 1
			}
			identity := x
			y := x
			if cfg.bottleneck {
				y = f.conv(nm+"conv1", y, planes, 1, 1, 0, d, 1, false)
				y = f.bn(nm+"bn1", y)
				y = f.act(nm+"relu", "relu", y)
				y = f.conv(nm+"conv2", y, planes, 3, s, d, d, 1, false)
				y = f.bn(nm+"bn2", y)
				y = f.act(nm+"relu", "relu", y)
				y = f.conv(nm+"conv3", y, planes*4, 1, 1, 0, d, 1, false)
				y = f.bn(nm+"bn3", y)
			} else {
				y = f.conv(nm+"conv1", y, planes, 3, s, d, d, 1, false)
				y = f.bn(nm+"bn1", y)
				y = f.act(nm+"relu", "relu", y)
				y = f.conv(nm+"conv2", y, planes, 3, 1, d, d, 1, false)
				y = f.bn(nm+"bn2", y)
			}
			if downsample {
				identity = f.conv(nm+"downsample.0", x, planes*exp, 1, s, 0, d, 1, false)
				identity = f.bn(nm+"downsample.1", identity)
			}
			y = f.b.add(f.pre+nm+"add", []int{y, identity}, []string{"the block", "the shortcut"})
			x = f.act(nm+"relu", "relu", y)
			inplanes = planes * exp
		}
		feats = append(feats, x)
	}
	return feats
}

// resnet is torchvision's classifier: encoder, avgpool (to [C]), fc.
func (f *fam) resnet(x int, cfg resnetCfg) int {
	in, _ := f.b.shape(x)
	if !f.b.spatial(f.c.Name, in) {
		return -1
	}
	feats := f.resnetEncoder(x, cfg, "", 4, [4]int64{})
	x = f.b.gap(f.pre+"avgpool", feats[4], false)
	return f.dense("fc", x, argInt(f.c, "classes", 1000))
}

// unet dispatches on the encoder.
func (f *fam) unet(x int) int {
	b := f.b
	in, _ := b.shape(x)
	depth := argInt(f.c, "depth", 4)
	enc := argStr(f.c, "encoder", "plain")
	if argInt(f.c, "dims", 2) == 3 {
		return f.unet3(x, in, depth, enc)
	}
	if !b.spatial("unet", in) {
		if len(in) == 4 {
			b.diags[len(b.diags)-1].Detail += " For a volume, set dims 3."
		}
		return -1
	}
	maxDepth := int64(8)
	if enc != "plain" {
		maxDepth = 5
	}
	if depth < 1 || depth > maxDepth {
		return b.badArg(f.c.Args["depth"], "unet depth out of range",
			"unet with the %s encoder takes depth 1 to %d; found %d.", enc, maxDepth, depth)
	}
	m := int64(1) << depth
	if in[1]%m != 0 || in[2]%m != 0 {
		return b.shapeErr("unet input not divisible", "unet with depth %d halves the size %d times, so height and width must divide by %d; the input is %dx%d. Resize to %dx%d or use less depth.",
			depth, depth, m, in[1], in[2], in[1]/m*m+m, in[2]/m*m+m)
	}
	width := argInt(f.c, "width", 64)
	out := argInt(f.c, "out", 1)
	var cc calc
	cc.mul(width, m)
	if cc.overflow {
		return b.badArg(f.c.Args["width"], "unet width too large", "width·2^depth overflows.")
	}
	if enc != "plain" {
		return f.smpUnet(x, enc, int(depth), width, out)
	}
	ch := func(level int64) int64 { return width << level }
	doubleConv := func(base string, x int, c int64) int {
		x = f.convBNReLU(base+"double_conv.", 0, x, c, 3, 1)
		return f.convBNReLU(base+"double_conv.", 3, x, c, 3, 1)
	}
	x = doubleConv("inc.", x, ch(0))
	skips := []int{x}
	for i := int64(1); i <= depth; i++ {
		x = b.pool(fmt.Sprintf("%sdown%d.maxpool_conv.0", f.pre, i), "maxpool", x, OpArgs{Kernel: 2, Stride: 2})
		x = doubleConv(fmt.Sprintf("down%d.maxpool_conv.1.", i), x, ch(i))
		skips = append(skips, x)
	}
	for j := int64(1); j <= depth; j++ {
		l := depth - j + 1
		up := b.convTranspose(fmt.Sprintf("%sup%d.up", f.pre, j), x, OpArgs{Channels: ch(l - 1), Kernel: 2, Stride: 2, Bias: true})
		cat := b.concat(fmt.Sprintf("%sup%d.cat", f.pre, j), []int{skips[l-1], up}, []string{"the skip", "the upsampled flow"})
		x = doubleConv(fmt.Sprintf("up%d.conv.", j), cat, ch(l-1))
	}
	return f.conv("outc.conv", x, out, 1, 1, 0, 1, 1, true)
}

// smpUnet is segmentation_models_pytorch's Unet on a resnet encoder, or
// on torchvision's efficientnet features (strides 2 to 32: the stem's and
// stages 2, 3, 5 and 7's outputs, as smp's efficientnet encoders take;
// without stochastic depth).
func (f *fam) smpUnet(x int, enc string, depth int, width, out int64) int {
	b := f.b
	var feats []int
	if cfg, ok := effnets[enc]; ok {
		feats = f.effnetEncoder(x, cfg, "encoder.", 0, depth)
	} else {
		feats = f.resnetEncoder(x, resnets[enc], "encoder.", depth-1, [4]int64{})
	}
	x = feats[depth-1]
	for j := 0; j < depth; j++ {
		base := fmt.Sprintf("decoder.blocks.%d.", j)
		c := width << (depth - 1 - j)
		in, ok := b.shape(x)
		if !ok {
			return -1
		}
		x = b.upsample(f.pre+base+"upsample", x, in[1]*2, in[2]*2, "nearest", false)
		if k := depth - 2 - j; k >= 0 {
			x = b.concat(f.pre+base+"cat", []int{x, feats[k]}, []string{"the upsampled flow", "the skip"})
		}
		x = f.convBNReLU(base+"conv1.", 0, x, c, 3, 1)
		x = f.convBNReLU(base+"conv2.", 0, x, c, 3, 1)
	}
	return f.conv("segmentation_head.0", x, out, 3, 1, 1, 1, 1, true)
}

// vit is torchvision's VisionTransformer.
func (f *fam) vit(x int) int {
	b := f.b
	in, _ := b.shape(x)
	if !b.spatial("vit", in) {
		return -1
	}
	patch := argInt(f.c, "patch", 16)
	depth := argInt(f.c, "depth", 12)
	heads := argInt(f.c, "heads", 12)
	dim := argInt(f.c, "dim", 768)
	mlpDim := argInt(f.c, "mlp_dim", 3072)
	if dim%heads != 0 {
		return b.badArg(f.c.Args["heads"], "vit heads must divide dim", "dim %d is not a multiple of heads %d.", dim, heads)
	}
	if in[1]%patch != 0 || in[2]%patch != 0 {
		return b.shapeErr("vit input not divisible by the patch", "Height and width must divide by the patch size %d; the input is %dx%d.", patch, in[1], in[2])
	}
	if depth > 10000 {
		return b.badArg(f.c.Args["depth"], "vit depth too large", "pipe builds at most 10000 encoder layers; found %d.", depth)
	}
	x = f.conv("conv_proj", x, dim, patch, patch, 0, 1, 1, true)
	x = b.tokens(f.pre+"tokens", x)
	x = b.classToken(f.pre+"class_token", x)
	x = b.posEmbed(f.pre+"encoder.pos_embedding", x)
	ln := func(name string, x int) int { return b.layernorm(f.pre+name, x, OpArgs{Eps: 1e-6}) }
	for i := int64(0); i < depth; i++ {
		nm := fmt.Sprintf("encoder.layers.encoder_layer_%d.", i)
		y := ln(nm+"ln_1", x)
		if y >= 0 {
			y = b.attention(f.pre+nm+"self_attention", y, OpArgs{Heads: heads})
		}
		x = b.add(f.pre+nm+"residual1", []int{y, x}, []string{"attention", "the input"})
		y = ln(nm+"ln_2", x)
		y = f.dense(nm+"mlp.0", y, mlpDim)
		y = f.act(nm+"mlp.1", "gelu", y)
		y = f.dense(nm+"mlp.3", y, dim)
		x = b.add(f.pre+nm+"residual2", []int{y, x}, []string{"the MLP", "the input"})
	}
	x = ln("encoder.ln", x)
	if x >= 0 {
		x = b.selectToken(f.pre+"select", x)
	}
	return f.dense("heads.head", x, argInt(f.c, "classes", 1000))
}

// deeplab is segmentation_models_pytorch's DeepLabV3Plus.
func (f *fam) deeplab(x int) int {
	b := f.b
	in, _ := b.shape(x)
	if !b.spatial("deeplabv3plus", in) {
		return -1
	}
	os := argInt(f.c, "output_stride", 16)
	dil := [4]int64{1, 1, 1, 2}
	upScale := int64(4)
	switch os {
	case 16:
	case 8:
		dil = [4]int64{1, 1, 2, 4}
		upScale = 2
	default:
		return b.badArg(f.c.Args["output_stride"], "output_stride must be 8 or 16", "Found %d.", os)
	}
	if in[1]%os != 0 || in[2]%os != 0 {
		return b.shapeErr("deeplabv3plus input not divisible", "Height and width must divide by the output stride %d; the input is %dx%d.", os, in[1], in[2])
	}
	classes := argInt(f.c, "classes", 1)
	const ch = 256
	feats := f.resnetEncoder(x, resnets[argStr(f.c, "encoder", "resnet50")], "encoder.", 4, dil)
	deep, high := feats[4], feats[1]
	// separable is smp's SeparableConv2d without bias: depthwise .0,
	// pointwise .1.
	separable := func(base string, x int, out, pad, d int64) int {
		s, ok := b.shape(x)
		if !ok {
			return -1
		}
		x = f.conv(base+"0", x, s[0], 3, 1, pad, d, s[0], false)
		return f.conv(base+"1", x, out, 1, 1, 0, 1, 1, false)
	}
	const aspp = "decoder.aspp.0."
	branches := []int{f.convBNReLU(aspp+"convs.0.", 0, deep, ch, 1, 0)}
	for i, rate := range []int64{12, 24, 36} {
		base := fmt.Sprintf("%sconvs.%d.", aspp, i+1)
		y := separable(base+"0.", deep, ch, rate, rate)
		y = f.bn(base+"1", y)
		branches = append(branches, f.act(base+"2", "relu", y))
	}
	pool := b.gap(f.pre+aspp+"convs.4.0", deep, true)
	pool = f.convBNReLU(aspp+"convs.4.", 1, pool, ch, 1, 0)
	if s, ok := b.shape(deep); ok {
		pool = b.upsample(f.pre+aspp+"convs.4.upsample", pool, s[1], s[2], "bilinear", false)
	}
	what := []string{"convs.0", "convs.1", "convs.2", "convs.3", "convs.4"}
	y := b.concat(f.pre+aspp+"cat", append(branches, pool), what)
	y = f.convBNReLU(aspp+"project.", 0, y, ch, 1, 0)
	y = b.dropout(f.pre+aspp+"project.3", y, 0.5)
	y = separable("decoder.aspp.1.", y, ch, 1, 1)
	y = f.bn("decoder.aspp.2", y)
	y = f.act("decoder.aspp.3", "relu", y)
	if s, ok := b.shape(y); ok {
		y = b.upsample(f.pre+"decoder.up", y, s[1]*upScale, s[2]*upScale, "bilinear", true)
	}
	h := f.convBNReLU("decoder.block1.", 0, high, 48, 1, 0)
	y = b.concat(f.pre+"decoder.cat", []int{y, h}, []string{"the ASPP output", "the low-level features"})
	y = separable("decoder.block2.0.", y, ch, 1, 1)
	y = f.bn("decoder.block2.1", y)
	y = f.act("decoder.block2.2", "relu", y)
	y = f.conv("segmentation_head.0", y, classes, 1, 1, 0, 1, 1, true)
	if s, ok := b.shape(y); ok {
		y = b.upsample(f.pre+"segmentation_head.1", y, s[1]*4, s[2]*4, "bilinear", true)
	}
	return y
}
