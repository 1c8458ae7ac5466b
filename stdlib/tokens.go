package stdlib

import (
	"pipe/lang"
)

// The layers of a transformer written by hand: a model turns an image into
// a sequence of tokens [T, D] (patches), prepends a class token, adds a
// position embedding, and runs attention, layernorm, dense and gelu on the
// tokens (dense and layernorm act on the last axis, each token alike),
// with residual adds, before select_token or mean_tokens reduce the
// sequence to one vector. The vit family is built from the same ops.

func tokenLayerSpecs() []*lang.LayerSpec {
	return []*lang.LayerSpec{
		layer("patches", "Cuts [C, H, W] into size×size patches and projects each to dim features: a conv with kernel and stride size (with bias), then the tokens [H/size·W/size, dim], row by row.",
			arg("size", lang.TInt, "The patch size; H and W must divide by it.", positional, required, atLeast(1)),
			arg("dim", lang.TInt, "The token width.", required, atLeast(1))),
		layer("class_token", "Prepends a learned token (initialised to zeros) to the tokens: [T, D] to [T+1, D]."),
		layer("pos_embed", "Adds a learned position embedding [T, D] to the tokens (initialised from N(0, 0.02²))."),
		layer("attention", "Multi-head self-attention over the tokens [T, D], PyTorch's nn.MultiheadAttention: a packed q, k, v projection, per head softmax(q·kᵀ/√(D/heads))·v, and an output projection.",
			arg("heads", lang.TInt, "Attention heads; the token width must divide by it.", atLeast(1), def("1")),
			arg("dropout", lang.TFloat, "Dropout on the attention probabilities in training, in [0, 1).", atLeast(0), below(1), def("0")),
			arg("causal", lang.TBool, "Each token attends only to itself and the tokens before it.", def("false"))),
		randomAttentionSpec(),
		layer("select_token", "Takes the first token (the class token): [T, D] to [D]."),
		layer("mean_tokens", "Averages the tokens: [T, D] to [D]."),
	}
}

// seq checks that a shape is a sequence of tokens [T, D].
func (b *builder) seq(op string, in []int64) bool {
	if len(in) == 2 {
		return true
	}
	hint := " Turn an image into tokens with patches first, such as 'patches 4 dim 64 ->'."
	if len(in) == 1 {
		hint = " A vector is one token's features: " + op + " belongs before select_token or mean_tokens."
	}
	b.shapeErr(op+" needs tokens", "%s expects tokens [T, D] per sample but gets %s.%s", op, shapeStr(in), hint)
	return false
}

// tokenLayer builds a hand-written token layer.
func (b *builder) tokenLayer(c *lang.LayerCall, name string, x int) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	if name == "patches" {
		if !b.spatial("patches", in) {
			return -1
		}
		p := argInt(c, "size", 1)
		if in[1]%p != 0 || in[2]%p != 0 {
			return b.badArg(c.Args["size"], "patches do not tile the image",
				"The %dx%d image does not divide into %dx%d patches; use a patch size that divides both, or resize the input.", in[1], in[2], p, p)
		}
		nm := b.numbered("patches")
		x = b.conv(nm, x, OpArgs{Channels: argInt(c, "dim", 1), Kernel: p, Stride: p, Bias: true})
		if x < 0 {
			return -1
		}
		return b.tokens(nm+".tokens", x)
	}
	if !b.seq(name, in) {
		return -1
	}
	switch name {
	case "class_token":
		return b.classToken(b.numbered(name), x)
	case "pos_embed":
		return b.posEmbed(b.numbered(name), x)
	case "select_token":
		return b.selectToken(b.numbered(name), x)
	case "mean_tokens":
		return b.meanTokens(b.numbered(name), x)
	}
	if name == "random_attention" {
		return b.randomAttentionCall(c, x, in)
	}
	h := argInt(c, "heads", 1)
	if in[1]%h != 0 {
		return b.badArg(c.Args["heads"], "attention heads must divide the token width",
			"The tokens are %d wide, which is not a multiple of %d heads; pick heads dividing %d.", in[1], h, in[1])
	}
	return b.attention(b.numbered(name), x, OpArgs{Heads: h, P: argFloat(c, "dropout", 0), Causal: argBool(c, "causal", false)})
}

// meanTokens averages [T, D] over T: one FLOP per input element.
func (b *builder) meanTokens(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "mean_tokens", []int64{in[1]}, OpArgs{}, x)
	n.FLOPs = cc.numel(in)
	return b.push(n, &cc)
}
