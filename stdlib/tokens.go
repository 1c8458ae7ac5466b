package stdlib

import (
	"math"

	"pipe/lang"
)

// The layers of a transformer written by hand: a model turns an image into
// a sequence of tokens [T, D] (patches), prepends a class token, adds a
// position embedding, and runs attention, layernorm, dense and gelu on the
// tokens (dense and layernorm act on the last axis, each token alike),
// with residual adds, before select_token or mean_tokens reduce the
// sequence to one vector. The vit family is built from the same ops.

func tokenOps() []*Op {
	return []*Op{
		{Name: "tokens", Doc: "Turns a feature map into a sequence of tokens.", Shape: "[C, H, W] to [H·W, C]", Saved: "nothing",
			Layers: []*Layer{{
				Spec: layer("patches", "Cuts [C, H, W] into size×size patches and projects each to dim features: a conv with kernel and stride size (with bias), then the tokens [H/size·W/size, dim], row by row.",
					arg("size", lang.TInt, "The patch size; H and W must divide by it.", positional, required, atLeast(1)),
					arg("dim", lang.TInt, "The token width.", required, atLeast(1))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					if !ok || !b.spatial("patches", in) {
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
				}}}},
		{Name: "class_token", Doc: "Prepends a learned token.", Shape: "[T, D] to [T+1, D]", Saved: "nothing",
			Layers: seqLayer(layer("class_token", "Prepends a learned token (initialised to zeros) to the tokens: [T, D] to [T+1, D]."),
				func(b *builder, c *lang.LayerCall, x int, in []int64) int {
					return b.classToken(b.numbered("class_token"), x)
				}),
			Tensors: func(n *Node) []TensorSpec {
				return []TensorSpec{param(n.Name+".weight", []int64{1, 1, last(inShape(n))}, fill(0))}
			}},
		{Name: "pos_embed", Doc: "Adds a learned position embedding.", Shape: "unchanged", Saved: "nothing",
			Layers: seqLayer(layer("pos_embed", "Adds a learned position embedding [T, D] to the tokens (initialised from N(0, 0.02²))."),
				func(b *builder, c *lang.LayerCall, x int, in []int64) int {
					return b.posEmbed(b.numbered("pos_embed"), x)
				}),
			Tensors: func(n *Node) []TensorSpec {
				in := inShape(n)
				return []TensorSpec{param(n.Name+".weight", []int64{1, first(in), last(in)}, normal(0.02))}
			}},
		{Name: "attention", Doc: "Multi-head self-attention with input and output projections (Heads, P: dropout on the probabilities, Causal).", Shape: "[T, D] unchanged",
			Saved: "its input, and privately q, k, v (3·T·D), the attention probabilities (Heads·T·T) and the heads' output (T·D); with dropout a 1-byte mask per probability (SavedAux)",
			Layers: seqLayer(layer("attention", "Multi-head self-attention over the tokens [T, D], PyTorch's nn.MultiheadAttention: a packed q, k, v projection, per head softmax(q·kᵀ/√(D/heads))·v, and an output projection.",
				arg("heads", lang.TInt, "Attention heads; the token width must divide by it.", atLeast(1), def("1")),
				arg("dropout", lang.TFloat, "Dropout on the attention probabilities in training, in [0, 1).", atLeast(0), below(1), def("0")),
				arg("causal", lang.TBool, "Each token attends only to itself and the tokens before it.", def("false"))),
				func(b *builder, c *lang.LayerCall, x int, in []int64) int {
					h := argInt(c, "heads", 1)
					if in[1]%h != 0 {
						return b.badArg(c.Args["heads"], "attention heads must divide the token width",
							"The tokens are %d wide, which is not a multiple of %d heads; pick heads dividing %d.", in[1], h, in[1])
					}
					return b.attention(b.numbered("attention"), x, OpArgs{Heads: h, P: argFloat(c, "dropout", 0), Causal: argBool(c, "causal", false)})
				}),
			// nn.MultiheadAttention's initialisation: xavier_uniform_ on the
			// packed [3D, D] projection, zero biases, and the output
			// projection's Linear default (its bias zeroed too).
			Tensors: func(n *Node) []TensorSpec {
				d := last(inShape(n))
				return []TensorSpec{
					param(n.Name+".in_proj_weight", []int64{3 * d, d}, uniform(math.Sqrt(6/float64(4*d)))),
					param(n.Name+".in_proj_bias", []int64{3 * d}, fill(0)),
					param(n.Name+".out_proj.weight", []int64{d, d}, kaiming(d)),
					param(n.Name+".out_proj.bias", []int64{d}, fill(0)),
				}
			}},
		randomAttentionOp(),
		{Name: "select_token", Doc: "Takes the first token.", Shape: "[T, D] to [D]", Saved: "nothing",
			Layers: seqLayer(layer("select_token", "Takes the first token (the class token): [T, D] to [D]."),
				func(b *builder, c *lang.LayerCall, x int, in []int64) int {
					return b.selectToken(b.numbered("select_token"), x)
				})},
		{Name: "mean_tokens", Doc: "Averages the tokens.", Shape: "[T, D] to [D]", Saved: "nothing",
			Layers: seqLayer(layer("mean_tokens", "Averages the tokens: [T, D] to [D]."),
				func(b *builder, c *lang.LayerCall, x int, in []int64) int {
					return b.meanTokens(b.numbered("mean_tokens"), x)
				})},
	}
}

// seqLayer is a layer on tokens [T, D]: its build checks the shape before
// the op's own rule.
func seqLayer(spec *lang.LayerSpec, build func(b *builder, c *lang.LayerCall, x int, in []int64) int) []*Layer {
	return []*Layer{{Spec: spec, build: func(b *builder, c *lang.LayerCall, x int) int {
		in, ok := b.shape(x)
		if !ok || !b.seq(spec.Name, in) {
			return -1
		}
		return build(b, c, x, in)
	}}}
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

// meanTokens averages [T, D] over T: one FLOP per input element.
func (b *builder) meanTokens(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "mean_tokens", []int64{in[1]}, OpArgs{}, x)
	n.FLOPs = cc.numel(in)
	return b.push(n, &cc)
}

// tokens turns [C, H, W] into the sequence [H·W, C].
func (b *builder) tokens(name string, x int) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("tokens", in) {
		return -1
	}
	var cc calc
	n := b.newNode(name, "tokens", []int64{cc.mul(in[1], in[2]), in[0]}, OpArgs{}, x)
	return b.push(n, &cc)
}

// classToken prepends a learned token of width D.
func (b *builder) classToken(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "class_token", []int64{in[0] + 1, in[1]}, OpArgs{}, x)
	n.Params = in[1]
	return b.push(n, &cc)
}

// posEmbed adds a learned [T, D] table: one FLOP per element.
func (b *builder) posEmbed(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "pos_embed", cloneShape(in), OpArgs{}, x)
	n.Params = cc.numel(in)
	n.FLOPs = cc.numel(in)
	return b.push(n, &cc)
}

// selectToken takes token 0 of [T, D].
func (b *builder) selectToken(name string, x int) int {
	in, _ := b.shape(x)
	var cc calc
	n := b.newNode(name, "select_token", []int64{in[1]}, OpArgs{}, x)
	return b.push(n, &cc)
}

// attention is PyTorch's nn.MultiheadAttention on [T, D] as self-attention:
// a packed input projection to q, k, v (3·D·D weights, 3·D biases), per
// head softmax(q·kᵀ/√(D/H))·v, and an output projection (D·D + D).
// FLOPs: projections 2·T·D·3D and 2·T·D·D plus their biases (4·T·D), scores
// and weighted sum 2·T·T·D each, scaling and softmax 6·H·T·T, and dropout
// on the probabilities H·T·T more (with its 1-byte mask kept, as autograd
// does).
func (b *builder) attention(name string, x int, a OpArgs) int {
	in, _ := b.shape(x)
	t, d, heads := in[0], in[1], a.Heads
	a.Bias = true
	var cc calc
	n := b.newNode(name, "attention", cloneShape(in), a, x)
	n.Params = cc.add(cc.mul(4, d, d), cc.mul(4, d))
	n.FLOPs = cc.add(cc.mul(8, t, d, d), cc.mul(4, t, d), cc.mul(4, t, t, d), cc.mul(6, heads, t, t))
	n.Keep = []int{x}
	n.Private = cc.add(cc.mul(4, t, d), cc.mul(heads, t, t))
	if a.P > 0 {
		n.FLOPs = cc.add(n.FLOPs, cc.mul(heads, t, t))
		n.SavedAux = cc.mul(heads, t, t)
	}
	return b.push(n, &cc)
}
