package stdlib

// random_attention is Panther's RandMultiHeadAttention (panther.nn and its
// pawX kernels), Performer's FAVOR+ self-attention over the tokens [T, D]:
// per head, o = φ(q)·(φ(k)ᵀ·v) / φ(q)·Σ_t φ(k_t), with φ a softmax or relu
// feature map on M fixed random orthogonal features (a buffer no gradient
// reaches; pipe draws them from its own seeded generator, so the values
// differ from Panther's and the distribution is the same). Every step is
// linear in T. Panther never applies its dropout, so pipe has none.
//
// Definition, feature maps and FLOPs: docs/design/attention.md.

import (
	"math"

	"pipe/lang"
)

func randomAttentionOp() *Op {
	return &Op{Name: "random_attention", Doc: "Performer (FAVOR+) self-attention, Panther's RandMultiHeadAttention: q, k, v and output projections, per head φ(q)·(φ(k)ᵀ·v) / φ(q)·Σφ(k) with M fixed random features (Heads, Features, Causal, Mode: softmax or relu); the features are Buffers.", Shape: "[T, D] unchanged",
		Saved: "its input, and privately q, k, v and the heads' output (4·T·D), φ(q) and φ(k) (2·Heads·T·Features) and the argmax of each feature map's stabiliser (Heads·T + Heads)",
		Layers: seqLayer(layer("random_attention", "Performer (FAVOR+) self-attention over the tokens [T, D], Panther's RandMultiHeadAttention: q, k, v projections, per head φ(q)·(φ(k)ᵀ·v) / φ(q)·Σφ(k) with φ a map onto M fixed random features (orthogonal, drawn from the run's seed, saved in checkpoints), and an output projection. Time and memory grow linearly with the tokens.",
			arg("heads", lang.TInt, "Attention heads; the token width must divide by it.", atLeast(1), def("1")),
			arg("features", lang.TInt, "Random features M per head (Panther's num_random_features).", required, atLeast(1)),
			arg("causal", lang.TBool, "Each token attends only to itself and the tokens before it (prefix sums).", def("false")),
			arg("kernel", lang.TEnum, "softmax (positive random features, exp(ω·z − |z|²/2)) | relu (relu(ω·z)).", enum("softmax", "relu"), def("softmax"))),
			func(b *builder, c *lang.LayerCall, x int, in []int64) int {
				h := argInt(c, "heads", 1)
				if in[1]%h != 0 {
					return b.badArg(c.Args["heads"], "random_attention heads must divide the token width",
						"The tokens are %d wide, which is not a multiple of %d heads; pick heads dividing %d.", in[1], h, in[1])
				}
				return b.randomAttention(b.numbered("random_attention"), x, OpArgs{Heads: h, Features: argInt(c, "features", 1),
					Causal: argBool(c, "causal", false), Mode: argStr(c, "kernel", "softmax")})
			}),
		// Panther's names: xavier_uniform_ projections, zero biases and the
		// FAVOR+ feature matrix [M, D/heads].
		Tensors: func(n *Node) []TensorSpec {
			name, d, a := n.Name, last(inShape(n)), n.Args
			sq, v := []int64{d, d}, []int64{d}
			xavier := uniform(math.Sqrt(6 / float64(2*d)))
			dh := int64(0)
			if a.Heads > 0 {
				dh = d / a.Heads
			}
			return []TensorSpec{
				param(name+".Wq", sq, xavier), param(name+".Wk", sq, xavier),
				param(name+".Wv", sq, xavier), param(name+".W0", sq, xavier),
				param(name+".bq", v, fill(0)), param(name+".bk", v, fill(0)),
				param(name+".bv", v, fill(0)), param(name+".b0", v, fill(0)),
				buffer(name+".projection_matrix", []int64{a.Features, dh}, Init{Kind: InitFavor}),
			}
		}}
}

// randomAttention adds the node (the rules at the top of the file).
// Backward keeps the input (for the projections' weights) and privately
// q, k, v and o, φ(q) and φ(k), and the position of each stabiliser's
// maximum (H·T for queries, H for keys).
func (b *builder) randomAttention(name string, x int, a OpArgs) int {
	in, _ := b.shape(x)
	t, d, h, m := in[0], in[1], a.Heads, a.Features
	a.Bias = true
	var cc calc
	n := b.newNode(name, "random_attention", cloneShape(in), a, x)
	n.Params = cc.add(cc.mul(4, d, d), cc.mul(4, d))
	n.Buffers = cc.mul(m, d/h)
	n.FLOPs = cc.add(cc.mul(8, t, d, d), cc.mul(5, t, d), cc.mul(8, t, d, m), cc.mul(11, h, t, m))
	n.Keep = []int{x}
	n.Private = cc.add(cc.mul(4, t, d), cc.mul(2, h, t, m), cc.mul(h, t), h)
	return b.push(n, &cc)
}
