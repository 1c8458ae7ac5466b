package stdlib

import "pipe/lang"

// layerAliases are other names a layer answers to.
var layerAliases = []struct{ alias, name string }{
	{"global_avg_pool", "gap"},
}

func layer(name, doc string, args ...*lang.ArgSpec) *lang.LayerSpec {
	return &lang.LayerSpec{Name: name, Doc: doc, Args: args}
}

func family(name, doc string, args ...*lang.ArgSpec) *lang.LayerSpec {
	return &lang.LayerSpec{Name: name, Doc: doc, Args: args, Family: true}
}

func biasArg() *lang.ArgSpec {
	return arg("bias", lang.TBool, "Whether a learned bias is added.", def("true"))
}

func convArgs(kernelDef, strideDef string) []*lang.ArgSpec {
	return []*lang.ArgSpec{
		arg("out", lang.TInt, "Output channels.", positional, required, atLeast(1)),
		arg("kernel", lang.TInt, "Kernel size (square); k3 is 3x3.", glued, alias("k"), atLeast(1), def(kernelDef)),
		arg("stride", lang.TInt, "Step between kernel positions; s2 halves the size.", glued, alias("s"), atLeast(1), def(strideDef)),
		arg("padding", lang.TInt, "Zeros added on each side; pad1 keeps a k3 conv's size.", glued, alias("pad"), atLeast(0), def("0")),
	}
}

func poolArgs(what string) []*lang.ArgSpec {
	return []*lang.ArgSpec{
		arg("size", lang.TInt, "The window size (square) over which the "+what+" is taken.", positional, atLeast(1), def("2")),
		arg("stride", lang.TInt, "Step between windows; the window size when left out.", glued, alias("s"), atLeast(1)),
		arg("padding", lang.TInt, "Padding on each side.", glued, alias("pad"), atLeast(0), def("0")),
	}
}

func layerSpecs() []*lang.LayerSpec {
	conv := append(convArgs("3", "1"),
		arg("dilation", lang.TInt, "Spacing between kernel taps; d2 doubles the receptive field.", glued, alias("d"), atLeast(1), def("1")),
		arg("groups", lang.TInt, "Channel groups; equal to the input channels for a depthwise conv.", atLeast(1), def("1")),
		biasArg())
	return append([]*lang.LayerSpec{
		layer("dense", "Fully connected layer on a vector, or on each token of [T, D]: y = xW + b.",
			arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
			biasArg()),
		layer("conv", "2-D convolution over [C, H, W].", conv...),
		layer("convtranspose", "2-D transposed convolution (learned upsampling) over [C, H, W].",
			append(convArgs("2", "2"), biasArg())...),
		layer("batchnorm", "Batch normalisation over the channel axis (the first) of a vector, an image or a volume, with a learned scale and shift.",
			arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5")),
			arg("momentum", lang.TFloat, "Weight of the batch in the running statistics, in [0, 1].", atLeast(0), atMost(1), def("0.1"))),
		layer("layernorm", "Layer normalisation over the last axis (each token's features for tokens [T, D]), with a learned scale and shift.",
			arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5"))),
		layer("relu", "max(x, 0), elementwise."),
		layer("leakyrelu", "x for x > 0, slope·x otherwise, elementwise (a GAN discriminator's activation).",
			arg("slope", lang.TFloat, "The slope for negative inputs, in [0, 1).", positional, atLeast(0), below(1), def("0.01"))),
		layer("instancenorm", "Instance normalisation of [C, H, W]: each channel of each sample over H and W, without running statistics.",
			arg("eps", lang.TFloat, "Added to the variance, greater than 0.", above(0), def("1e-5")),
			arg("affine", lang.TBool, "A learned per-channel scale and shift.", def("false"))),
		layer("pixelshuffle", "Rearranges [C·r², H, W] to [C, r·H, r·W] (sub-pixel upsampling, as PyTorch's PixelShuffle).",
			arg("factor", lang.TInt, "The upscale factor r; the channels must divide by r².", positional, required, atLeast(1))),
		layer("gelu", "Gaussian error linear unit, elementwise (the exact erf form)."),
		layer("sigmoid", "1 / (1 + e^-x), elementwise."),
		layer("tanh", "Hyperbolic tangent, elementwise."),
		layer("softmax", "Softmax over the channel axis (the first; the only one for a vector)."),
		layer("maxpool", "Maximum over square windows of [C, H, W].", poolArgs("maximum")...),
		layer("avgpool", "Average over square windows of [C, H, W] (padding counts as zeros).", poolArgs("average")...),
		layer("gap", "Global average pool: [C, H, W] (or [C, D, H, W]) to [C]."),
		layer("dropout", "Zeroes each element with probability p during training and scales the rest by 1/(1-p).",
			arg("p", lang.TFloat, "The probability of zeroing, in [0, 1).", positional, atLeast(0), below(1), def("0.5"))),
		layer("flatten", "Reshapes a sample to a vector: [C, H, W] to [C·H·W]."),
		layer("upsample", "Scales height and width of [C, H, W] by an integer factor.",
			arg("factor", lang.TInt, "The scale factor.", positional, atLeast(1), def("2")),
			arg("mode", lang.TEnum, "nearest | bilinear (align_corners false).", enum("nearest", "bilinear"), def("nearest"))),
		layer("concat", "Joins a labelled tensor to the flow along the channel axis; the other axes must agree.",
			arg("tensor", lang.TTensor, "A labelled tensor, or a branch from one: concat(e1 -> conv 32 k1).", positional, required)),
		layer("add", "Adds a labelled tensor to the flow, elementwise; the shapes must be equal. With scale, the flow is scaled first: scale × flow + tensor, a residual branch scaled before it joins its shortcut (ESRGAN's residual scaling: conv 64 k3 pad1 -> add x scale 0.2).",
			arg("tensor", lang.TTensor, "A labelled tensor, or a branch from one: add(x -> conv 64 k1 s2).", positional, required),
			arg("scale", lang.TFloat, "The flow's factor before the sum, greater than 0.", above(0), def("1"))),
		layer("lowrank_dense", "A dense layer whose weight is a sum of low-rank products: y = x·Σ U_i V_i + b, U_i: in×rank, V_i: rank×units.",
			arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
			arg("terms", lang.TInt, "The number of low-rank products summed.", atLeast(1), def("1")),
			arg("rank", lang.TInt, "The inner dimension of each product.", atLeast(1), def("16")),
			biasArg()),
		layer("sketched_dense", "Panther's SKLinear: y = 1/(2L)·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i) + b over L terms of rank k, learning S1_i (in×k) and S2_i (k×units); U1_i (k×units) and U2_i (in×k) are fixed random sign sketches (±1/√k) that checkpoints keep. S starts as a sketch of a dense weight W: S1_i = W·U1_iᵀ, S2_i = U2_iᵀ·W.",
			arg("units", lang.TInt, "Output features.", positional, required, atLeast(1)),
			arg("terms", lang.TInt, "L, the number of sketched terms (Panther's num_terms).", atLeast(1), def("1")),
			arg("rank", lang.TInt, "k, the rank of each term (Panther's low_rank).", atLeast(1), def("16")),
			biasArg()),
		layer("sketched_conv", "Panther's SKConv2d over [C, H, W]: a convolution to 2L·k channels with learned kernels S, then y = 1/(2L)·Σ_i U_iᵀ·(S_i ⋆ x) + b with 2L fixed random sign sketches U_i (k×out, ±1/√k). S starts as a sketch of a dense kernel K: S_i = K·U_iᵀ.",
			append(convArgs("3", "1"),
				arg("terms", lang.TInt, "L; the layer sums 2L sketched terms (Panther's num_terms).", atLeast(1), def("6")),
				arg("rank", lang.TInt, "k, the rank of each term (Panther's low_rank).", atLeast(1), def("8")),
				biasArg())...),
	}, tokenLayerSpecs()...)
}

func familySpecs() []*lang.LayerSpec {
	resnet := func(name, doc string) *lang.LayerSpec {
		return family(name, doc+" Input [C, H, W], default [3, 224, 224]; torchvision's layout.",
			arg("classes", lang.TInt, "Outputs of the final dense layer.", atLeast(1), def("1000")))
	}
	return []*lang.LayerSpec{
		family("mlp", "A stack of dense layers on a vector: for each hidden width, dense -> [batchnorm] -> activation -> [dropout]; then dense out.",
			arg("hidden", lang.TList, "The hidden widths, such as [256, 128].", elem(lang.TInt), required),
			arg("out", lang.TInt, "Output features.", required, atLeast(1)),
			arg("activation", lang.TEnum, "relu | gelu | tanh.", enum("relu", "gelu", "tanh"), def("relu")),
			arg("dropout", lang.TFloat, "Dropout after each activation, in [0, 1); none when 0.", atLeast(0), below(1), def("0")),
			arg("batchnorm", lang.TBool, "Batch normalisation after each hidden dense layer.", def("false"))),
		family("cnn", "A plain convolutional classifier: for each width, conv (no bias) -> batchnorm -> relu -> maxpool 2; then gap -> dense out.",
			arg("channels", lang.TList, "The conv widths, such as [32, 64, 128].", elem(lang.TInt), required),
			arg("out", lang.TInt, "Output features.", required, atLeast(1)),
			arg("kernel", lang.TInt, "Kernel size of every conv (padded to keep the size).", alias("k"), glued, atLeast(1), def("3"))),
		resnet("resnet18", "ResNet-18 (basic blocks [2, 2, 2, 2])."),
		resnet("resnet34", "ResNet-34 (basic blocks [3, 4, 6, 3])."),
		resnet("resnet50", "ResNet-50 (bottlenecks [3, 4, 6, 3])."),
		resnet("resnet101", "ResNet-101 (bottlenecks [3, 4, 23, 3])."),
		family("unet", "U-Net for dense prediction: [C, H, W] to [out, H, W] (or, with dims 3, [C, D, H, W] to [out, D, H, W]); H and W must divide by 2^depth.",
			arg("depth", lang.TInt, "Downsamplings (plain: 1 to 8; resnet encoders: 1 to 5).", atLeast(1), atMost(8), def("4")),
			arg("width", lang.TInt, "Channels at the top level (plain), or of the last decoder block (resnet encoders); doubled per level.", atLeast(1), def("64")),
			arg("out", lang.TInt, "Output channels (classes or targets).", atLeast(1), def("1")),
			arg("encoder", lang.TEnum, "plain | resnet18 | resnet34 | resnet50.", enum("plain", "resnet18", "resnet34", "resnet50"), def("plain")),
			arg("dims", lang.TInt, "2 for images [C, H, W]; 3 for volumes [C, D, H, W] (3-D convs, pools and transposed convs; plain encoder only, D, H and W must divide by 2^depth).", atLeast(2), atMost(3), def("2"))),
		family("vit", "Vision Transformer (torchvision's layout): patches -> class token -> position embedding -> encoder layers -> head.",
			arg("patch", lang.TInt, "Patch size; H and W must divide by it.", atLeast(1), def("16")),
			arg("depth", lang.TInt, "Encoder layers.", atLeast(1), def("12")),
			arg("heads", lang.TInt, "Attention heads; dim must divide by it.", atLeast(1), def("12")),
			arg("dim", lang.TInt, "Token width.", atLeast(1), def("768")),
			arg("mlp_dim", lang.TInt, "Hidden width of each encoder layer's MLP.", atLeast(1), def("3072")),
			arg("classes", lang.TInt, "Outputs of the head.", atLeast(1), def("1000"))),
		family("deeplabv3plus", "DeepLabV3+ (segmentation_models_pytorch's layout): dilated ResNet encoder, ASPP with separable (depthwise and pointwise) convs and a pooled branch, 48-channel low-level projection, bilinear upsampling; outputs [classes, H, W].",
			arg("encoder", lang.TEnum, "resnet18 | resnet34 | resnet50 | resnet101.", enum("resnet18", "resnet34", "resnet50", "resnet101"), def("resnet50")),
			arg("classes", lang.TInt, "Output channels.", atLeast(1), def("1")),
			arg("output_stride", lang.TInt, "The encoder's total stride: 16 or 8.", atLeast(8), atMost(16), def("16"))),
	}
}

// familyInput is the input a family assumes when the model does not give
// one.
var familyInput = map[string][]int64{
	"resnet18": {3, 224, 224}, "resnet34": {3, 224, 224}, "resnet50": {3, 224, 224}, "resnet101": {3, 224, 224},
	"vit": {3, 224, 224}, "deeplabv3plus": {3, 512, 512},
}
