package stdlib

import "pipe/lang"

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

func familySpecs() []*lang.LayerSpec {
	resnet := func(name, doc string) *lang.LayerSpec {
		return family(name, doc+" Input [C, H, W], default [3, 224, 224]; torchvision's layout.",
			arg("classes", lang.TInt, "Outputs of the final dense layer.", atLeast(1), def("1000")))
	}
	effnet := func(name, doc, dropout string) *lang.LayerSpec {
		return family(name, doc+" MBConv blocks with squeeze-and-excitation, silu and stochastic depth. Input [C, H, W], default [3, 224, 224]; torchvision's layout.",
			arg("classes", lang.TInt, "Outputs of the final dense layer.", atLeast(1), def("1000")),
			arg("dropout", lang.TFloat, "Dropout before the final dense layer, in [0, 1).", atLeast(0), below(1), def(dropout)),
			arg("drop_path", lang.TFloat, "Stochastic depth of the last block, in [0, 1); block i of n drops with drop_path·i/n.", atLeast(0), below(1), def("0.2")))
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
		effnet("efficientnet_b0", "EfficientNet-B0 (width 1.0, depth 1.0).", "0.2"),
		effnet("efficientnet_b1", "EfficientNet-B1 (width 1.0, depth 1.1).", "0.2"),
		effnet("efficientnet_b2", "EfficientNet-B2 (width 1.1, depth 1.2).", "0.3"),
		effnet("efficientnet_b3", "EfficientNet-B3 (width 1.2, depth 1.4).", "0.3"),
		effnet("efficientnet_b4", "EfficientNet-B4 (width 1.4, depth 1.8).", "0.4"),
		family("unet", "U-Net for dense prediction: [C, H, W] to [out, H, W] (or, with dims 3, [C, D, H, W] to [out, D, H, W]); H and W must divide by 2^depth.",
			arg("depth", lang.TInt, "Downsamplings (plain: 1 to 8; resnet and efficientnet encoders: 1 to 5).", atLeast(1), atMost(8), def("4")),
			arg("width", lang.TInt, "Channels at the top level (plain), or of the last decoder block (resnet and efficientnet encoders); doubled per level.", atLeast(1), def("64")),
			arg("out", lang.TInt, "Output channels (classes or targets).", atLeast(1), def("1")),
			arg("encoder", lang.TEnum, "plain | resnet18 | resnet34 | resnet50 | efficientnet_b0 to efficientnet_b4.", enum("plain", "resnet18", "resnet34", "resnet50", "efficientnet_b0", "efficientnet_b1", "efficientnet_b2", "efficientnet_b3", "efficientnet_b4"), def("plain")),
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
	"efficientnet_b0": {3, 224, 224}, "efficientnet_b1": {3, 224, 224}, "efficientnet_b2": {3, 224, 224},
	"efficientnet_b3": {3, 224, 224}, "efficientnet_b4": {3, 224, 224},
}
