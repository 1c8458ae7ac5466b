package stdlib

import (
	"testing"

	"pipe/lang"
)

// The counts below are derived in closed form, term by term from each
// architecture's layers, and never through BuildGraph; the published
// numbers (torchvision's model cards, smp's tables) are asserted beside
// them.

func iv(n int64) *lang.Value   { return &lang.Value{Type: lang.TInt, Int: n, Float: float64(n)} }
func fv(x float64) *lang.Value { return &lang.Value{Type: lang.TFloat, Float: x} }
func sv(s string) *lang.Value  { return &lang.Value{Type: lang.TEnum, Str: s} }
func bv(b bool) *lang.Value    { return &lang.Value{Type: lang.TBool, Bool: b} }
func lv(xs ...int64) *lang.Value {
	v := &lang.Value{Type: lang.TList}
	for _, x := range xs {
		v.List = append(v.List, iv(x))
	}
	return v
}

// oneCall is a model made of a single layer or family call.
func oneCall(input []int64, name string, args lang.Args) *lang.Model {
	return &lang.Model{Name: "m", Input: input, Stmts: []*lang.ModelStmt{{
		Chain: &lang.Chain{Nodes: []lang.ChainNode{&lang.LayerCall{Name: name, Args: args}}},
	}}}
}

func paramsOf(t *testing.T, m *lang.Model) int64 {
	t.Helper()
	g, ds := BuildGraph(m)
	if len(ds) > 0 {
		t.Fatalf("unexpected diagnostics: %v", ds)
	}
	return g.Params()
}

// resnetFormula counts torchvision's ResNet: stem conv 7x7 (no bias) and
// batchnorm; per block its convs (no bias) and batchnorms (2 per channel),
// plus a 1x1 projection and batchnorm where the shape changes; and the fc
// (with bias) when classes > 0.
func resnetFormula(in int64, bottleneck bool, blocks [4]int64, classes int64) int64 {
	n := 49*in*64 + 2*64
	c := int64(64)
	for i, nb := range blocks {
		p := int64(64) << i
		for j := int64(0); j < nb; j++ {
			if bottleneck {
				n += c*p + 2*p + 9*p*p + 2*p + p*4*p + 2*4*p
				if j == 0 {
					n += c*4*p + 2*4*p // every layer's first block projects
				}
				c = 4 * p
			} else {
				n += 9*c*p + 2*p + 9*p*p + 2*p
				if j == 0 && i > 0 {
					n += c*p + 2*p
				}
				c = p
			}
		}
	}
	if classes > 0 {
		n += c*classes + classes
	}
	return n
}

func TestResNetParams(t *testing.T) {
	for _, tc := range []struct {
		name       string
		bottleneck bool
		blocks     [4]int64
		published  int64 // torchvision's model card, 3x224x224, 1000 classes
	}{
		{"resnet18", false, [4]int64{2, 2, 2, 2}, 11_689_512},
		{"resnet34", false, [4]int64{3, 4, 6, 3}, 21_797_672},
		{"resnet50", true, [4]int64{3, 4, 6, 3}, 25_557_032},
		{"resnet101", true, [4]int64{3, 4, 23, 3}, 44_549_160},
	} {
		if f := resnetFormula(3, tc.bottleneck, tc.blocks, 1000); f != tc.published {
			t.Errorf("%s: formula %d, torchvision publishes %d", tc.name, f, tc.published)
		}
		if got := paramsOf(t, oneCall(nil, tc.name, lang.Args{})); got != tc.published {
			t.Errorf("%s: %d parameters, want %d", tc.name, got, tc.published)
		}
		// Grayscale input and 20 classes change only the stem and the fc.
		want := resnetFormula(1, tc.bottleneck, tc.blocks, 20)
		if got := paramsOf(t, oneCall([]int64{1, 64, 64}, tc.name, lang.Args{"classes": iv(20)})); got != want {
			t.Errorf("%s on [1, 64, 64], 20 classes: %d parameters, want %d", tc.name, got, want)
		}
	}
}

func TestResNetShapesAndNames(t *testing.T) {
	g, _ := BuildGraph(oneCall(nil, "resnet50", lang.Args{}))
	want := map[string][]int64{
		"conv1":                 {64, 112, 112},
		"maxpool":               {64, 56, 56},
		"layer1.0.downsample.0": {256, 56, 56},
		"layer2.0.conv2":        {128, 28, 28},
		"layer3.5.bn3":          {1024, 14, 14},
		"layer4.2.relu#3":       {2048, 7, 7},
		"avgpool":               {2048},
		"fc":                    {1000},
	}
	found := map[string]bool{}
	for _, n := range g.Nodes {
		if w, ok := want[n.Name]; ok {
			found[n.Name] = true
			if !equalShape(n.Out, w) {
				t.Errorf("%s: %v, want %v", n.Name, n.Out, w)
			}
		}
	}
	for name := range want {
		if !found[name] {
			t.Errorf("no node named %s", name)
		}
	}
	// torchvision's ResNet-50 is 4.09 GMACs at 224x224 (its model card).
	if f := g.FLOPs(); f < 2*4.0e9 || f > 2*4.2e9 {
		t.Errorf("resnet50 FLOPs %d, want about 2 x 4.09e9", f)
	}
}

// vitFormula counts torchvision's VisionTransformer: the patch conv with
// bias, the class token, the position embedding over patches+1 tokens, per
// layer two layernorms, attention's packed in-projection and
// out-projection with biases, and the MLP; the final layernorm and head.
func vitFormula(in, image, patch, depth, dim, mlp, classes int64) int64 {
	tokens := (image/patch)*(image/patch) + 1
	n := in*patch*patch*dim + dim // conv_proj
	n += dim                      // class_token
	n += tokens * dim             // pos_embedding
	layer := 2*dim + (3*dim*dim + 3*dim) + (dim*dim + dim) + 2*dim + (dim*mlp + mlp) + (mlp*dim + dim)
	n += depth * layer
	n += 2 * dim                     // encoder.ln
	return n + dim*classes + classes // heads.head
}

func TestViTParams(t *testing.T) {
	l16 := lang.Args{"patch": iv(16), "depth": iv(24), "heads": iv(16), "dim": iv(1024), "mlp_dim": iv(4096), "classes": iv(1000)}
	const published = 304_326_632 // torchvision vit_l_16
	if f := vitFormula(3, 224, 16, 24, 1024, 4096, 1000); f != published {
		t.Errorf("vit_l_16: formula %d, torchvision publishes %d", f, published)
	}
	if got := paramsOf(t, oneCall(nil, "vit", l16)); got != published {
		t.Errorf("vit_l_16: %d parameters, want %d", got, published)
	}
	if got, want := paramsOf(t, oneCall(nil, "vit", lang.Args{})), int64(86_567_656); got != want {
		t.Errorf("vit defaults (vit_b_16): %d parameters, want %d", got, want)
	}
	g, _ := BuildGraph(oneCall(nil, "vit", lang.Args{}))
	if !equalShape(g.OutShape(), []int64{1000}) {
		t.Errorf("vit output %v", g.OutShape())
	}
}

// deeplabFormula counts segmentation_models_pytorch's DeepLabV3Plus with
// its defaults (decoder_channels 256, atrous rates (12, 24, 36), separable
// ASPP, no bias before a batchnorm): the encoder is the ResNet without its
// fc (dilation changes no count), then
//
//	ASPP   1x1 branch                in·256 + bn
//	       3 separable branches      3·(9·in + in·256 + bn)
//	       pooling branch            in·256 + bn
//	       projection of 5·256       1280·256 + bn
//	separable 3x3 256→256            9·256 + 256·256 + bn
//	block1 1x1 layer1 (256) → 48     256·48 + bn(48)
//	block2 separable 304 → 256       9·304 + 304·256 + bn
//	head   1x1 256 → classes, bias   256·classes + classes
func deeplabFormula(encoderNoFC, in, classes int64) int64 {
	return deeplabFormulaLow(encoderNoFC, in, 256, classes)
}

// deeplabFormulaLow is deeplabFormula with the low-level features' channels
// (layer1's: 256 for bottlenecks, 64 for resnet18 and resnet34).
func deeplabFormulaLow(encoderNoFC, in, low, classes int64) int64 {
	const c = 256
	bn := func(ch int64) int64 { return 2 * ch }
	aspp := (in*c + bn(c)) + 3*(9*in+in*c+bn(c)) + (in*c + bn(c)) + (5*c*c + bn(c))
	sep := 9*c + c*c + bn(c)
	block1 := low*48 + bn(48)
	block2 := 9*(48+c) + (48+c)*c + bn(c)
	head := c*classes + classes
	return encoderNoFC + aspp + sep + block1 + block2 + head
}

func TestDeepLabV3PlusParams(t *testing.T) {
	enc := resnetFormula(3, true, [4]int64{3, 4, 23, 3}, 0)
	if enc != 44_549_160-2048*1000-1000 {
		t.Fatalf("resnet101 without fc: %d", enc)
	}
	want := deeplabFormula(enc, 2048, 1)
	if want != 45_669_713 {
		t.Errorf("DeepLabV3+ resnet101 formula gives %d, want 45,669,713", want)
	}
	args := lang.Args{"encoder": sv("resnet101"), "classes": iv(1)}
	if got := paramsOf(t, oneCall([]int64{3, 512, 512}, "deeplabv3plus", args)); got != want {
		t.Errorf("deeplabv3plus resnet101: %d parameters, want %d", got, want)
	}
	args["output_stride"] = iv(8)
	if got := paramsOf(t, oneCall([]int64{3, 512, 512}, "deeplabv3plus", args)); got != want {
		t.Errorf("deeplabv3plus resnet101, output stride 8: %d parameters, want %d (dilation adds none)", got, want)
	}
	enc50 := resnetFormula(3, true, [4]int64{3, 4, 6, 3}, 0)
	if got, want := paramsOf(t, oneCall(nil, "deeplabv3plus", lang.Args{"classes": iv(21)})), deeplabFormula(enc50, 2048, 21); got != want {
		t.Errorf("deeplabv3plus resnet50, 21 classes: %d parameters, want %d", got, want)
	}
	for _, c := range []struct {
		enc    string
		blocks [4]int64
	}{{"resnet18", [4]int64{2, 2, 2, 2}}, {"resnet34", [4]int64{3, 4, 6, 3}}} {
		want := deeplabFormulaLow(resnetFormula(6, false, c.blocks, 0), 512, 64, 1)
		if got := paramsOf(t, oneCall([]int64{6, 64, 64}, "deeplabv3plus", lang.Args{"encoder": sv(c.enc)})); got != want {
			t.Errorf("deeplabv3plus %s on 6 bands: %d parameters, want %d", c.enc, got, want)
		}
	}
	g, _ := BuildGraph(oneCall([]int64{3, 512, 512}, "deeplabv3plus", lang.Args{"encoder": sv("resnet101")}))
	for name, shape := range map[string][]int64{
		"encoder.layer4.2.relu#3":         {2048, 32, 32}, // output stride 16: layer4 dilated, not strided
		"decoder.aspp.0.convs.2.0.0":      {2048, 32, 32}, // depthwise, dilation 24
		"decoder.aspp.0.convs.4.upsample": {256, 32, 32},
		"decoder.cat":                     {304, 128, 128},
		"segmentation_head.1":             {1, 512, 512},
	} {
		if n := nodeNamed(g, name); n == nil || !equalShape(n.Out, shape) {
			t.Errorf("%s: %v, want %v", name, n, shape)
		}
	}
}

func nodeNamed(g *Graph, name string) *Node {
	for _, n := range g.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// unetFormula counts the plain U-Net: a double conv from a to b is two 3x3
// convs without bias and two batchnorms, 9ab + 9b² + 4b; level i has
// width·2^i channels; each up step is a 2x2 transposed conv with bias
// (4·c_l·c_{l-1} + c_{l-1}) and a double conv from 2·c_{l-1}; the head is
// a 1x1 conv with bias.
func unetFormula(in, width, depth, out int64) int64 {
	dc := func(a, b int64) int64 { return 9*a*b + 9*b*b + 4*b }
	ch := func(l int64) int64 { return width << l }
	n := dc(in, ch(0))
	for l := int64(1); l <= depth; l++ {
		n += dc(ch(l-1), ch(l))
		n += 4*ch(l)*ch(l-1) + ch(l-1) + dc(2*ch(l-1), ch(l-1))
	}
	return n + ch(0)*out + out
}

func TestUNetParams(t *testing.T) {
	// olinda.pipe's unet.
	if got, want := paramsOf(t, oneCall([]int64{6, 64, 64}, "unet", lang.Args{"depth": iv(3), "width": iv(32), "out": iv(1)})), unetFormula(6, 32, 3, 1); got != want {
		t.Errorf("unet depth 3 width 32: %d parameters, want %d", got, want)
	}
	// The defaults are milesial/Pytorch-UNet's UNet(bilinear=False):
	// 31,037,698 parameters for 3 channels in and 2 classes.
	if f := unetFormula(3, 64, 4, 2); f != 31_037_698 {
		t.Errorf("unet formula for milesial's UNet(3, 2) gives %d", f)
	}
	g, ds := BuildGraph(oneCall([]int64{3, 256, 256}, "unet", lang.Args{"out": iv(2)}))
	if len(ds) > 0 || g.Params() != 31_037_698 || !equalShape(g.OutShape(), []int64{2, 256, 256}) {
		t.Errorf("unet defaults: %d parameters, output %v, %v", g.Params(), g.OutShape(), ds)
	}
	if n := nodeNamed(g, "up1.conv.double_conv.0"); n == nil || !equalShape(n.In[0], []int64{1024, 32, 32}) {
		t.Errorf("up1.conv.double_conv.0 reads %v, want [1024, 32, 32]", n)
	}
}

func TestSMPUNetParams(t *testing.T) {
	// smp's Unet: the encoder without fc, then decoder blocks j of
	// in_j + skip_j → out_j channels, two 3x3 conv-bn-relu each, and a 3x3
	// head with bias.
	block := func(in, skip, out int64) int64 { return 9*(in+skip)*out + 2*out + 9*out*out + 2*out }
	for _, tc := range []struct {
		enc        string
		bottleneck bool
		blocks     [4]int64
		skips      []int64 // the stages' channels, deepest first, past the head
		head       int64
		published  int64
	}{
		{"resnet34", false, [4]int64{3, 4, 6, 3}, []int64{256, 128, 64, 64, 0}, 512, 24_436_369},
		{"resnet18", false, [4]int64{2, 2, 2, 2}, []int64{256, 128, 64, 64, 0}, 512, 14_328_209},
		{"resnet50", true, [4]int64{3, 4, 6, 3}, []int64{1024, 512, 256, 64, 0}, 2048, 32_521_105},
	} {
		n := resnetFormula(3, tc.bottleneck, tc.blocks, 0)
		in := tc.head
		for j, out := range []int64{256, 128, 64, 32, 16} {
			n += block(in, tc.skips[j], out)
			in = out
		}
		n += 9*16*1 + 1
		if n != tc.published {
			t.Errorf("smp Unet %s: formula %d, smp's count %d", tc.enc, n, tc.published)
		}
		args := lang.Args{"encoder": sv(tc.enc), "depth": iv(5), "width": iv(16)}
		if got := paramsOf(t, oneCall([]int64{3, 256, 256}, "unet", args)); got != n {
			t.Errorf("unet encoder %s: %d parameters, want %d", tc.enc, got, n)
		}
	}
	g, _ := BuildGraph(oneCall([]int64{4, 64, 96}, "unet", lang.Args{"encoder": sv("resnet18"), "depth": iv(3), "width": iv(8), "out": iv(3)}))
	if !equalShape(g.OutShape(), []int64{3, 64, 96}) {
		t.Errorf("unet resnet18 depth 3: output %v, want [3, 64, 96]", g.OutShape())
	}
}

func TestMLPParams(t *testing.T) {
	// pharma.pipe: 5 → 256 → 128 → 64 → 1, dense layers with bias.
	want := int64(5*256+256) + (256*128 + 128) + (128*64 + 64) + (64*1 + 1)
	args := lang.Args{"hidden": lv(256, 128, 64), "out": iv(1), "activation": sv("gelu"), "dropout": fv(0.1)}
	if got := paramsOf(t, oneCall([]int64{5}, "mlp", args)); got != want || want != 42_753 {
		t.Errorf("mlp: %d parameters, want %d", got, want)
	}
	args["batchnorm"] = bv(true)
	if got := paramsOf(t, oneCall([]int64{5}, "mlp", args)); got != want+2*(256+128+64) {
		t.Errorf("mlp with batchnorm: %d parameters, want %d", got, want+2*(256+128+64))
	}
}

func TestCNNParams(t *testing.T) {
	// conv k (no bias) + batchnorm per width, then dense with bias.
	k, in := int64(5), int64(3)
	want := int64(0)
	for _, c := range []int64{16, 32, 64} {
		want += k*k*in*c + 2*c
		in = c
	}
	want += 64*10 + 10
	g, ds := BuildGraph(oneCall([]int64{3, 32, 32}, "cnn", lang.Args{"channels": lv(16, 32, 64), "out": iv(10), "kernel": iv(5)}))
	if len(ds) > 0 || g.Params() != want {
		t.Errorf("cnn: %d parameters, want %d (%v)", g.Params(), want, ds)
	}
	if n := nodeNamed(g, "block3.maxpool"); n == nil || !equalShape(n.Out, []int64{64, 4, 4}) {
		t.Errorf("block3.maxpool: %v, want [64, 4, 4]", n)
	}
}

func TestLowrankDenseParams(t *testing.T) {
	// Σ_i U_i V_i with U_i: in×rank, V_i: rank×units, plus a bias of units.
	in, units, terms, rank := int64(1024), int64(2048), int64(4), int64(64)
	want := terms*(in*rank+rank*units) + units
	g, ds := BuildGraph(oneCall([]int64{in}, "lowrank_dense", lang.Args{"units": iv(units), "terms": iv(terms), "rank": iv(rank)}))
	if len(ds) > 0 || g.Params() != want || want != 788_480 {
		t.Errorf("lowrank_dense: %d parameters, want %d (%v)", g.Params(), want, ds)
	}
	n := g.Nodes[g.Output]
	if n.Private != terms*rank || n.FLOPs != 2*terms*rank*(in+units)+(terms-1)*units+units {
		t.Errorf("lowrank_dense keeps %d private, costs %d FLOPs", n.Private, n.FLOPs)
	}
}

// TestEfficientNetParams: efficientnet_b0 to b4 have torchvision's
// parameter counts (torchvision.models.efficientnet_bN(), counted with
// sum(p.numel() for p in m.parameters()) under torchvision 0.14).
func TestEfficientNetParams(t *testing.T) {
	for name, want := range map[string]int64{
		"efficientnet_b0": 5_288_548,
		"efficientnet_b1": 7_794_184,
		"efficientnet_b2": 9_109_994,
		"efficientnet_b3": 12_233_232,
		"efficientnet_b4": 19_341_616,
	} {
		if got := paramsOf(t, oneCall(nil, name, lang.Args{})); got != want {
			t.Errorf("%s: %d parameters, torchvision's has %d", name, got, want)
		}
	}
}
