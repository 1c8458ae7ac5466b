package stdlib

import "pipe/lang"

// The ops of EfficientNet's blocks: squeeze-and-excitation, a channel-wise
// gate of a feature map by its own pooled summary, which the language
// cannot write from primitives (it has no channel-wise product), and
// stochastic depth (drop_path), which drops whole samples of a residual
// branch; their rules follow the descriptors.

func blockOps() []*Op {
	return []*Op{
		{Name: "se", Doc: "Squeeze-and-excitation (Channels: the squeeze channels): x · σ(fc2(silu(fc1(mean over H, W of x)))), each fc a 1x1 conv with bias.",
			Shape: "unchanged ([C, H, W])", Saved: "its input, and privately the pooled input, fc1's output and its silu, and the gate (2C + 2·squeeze per sample)",
			Layers: []*Layer{{
				Spec: layer("se", "Squeeze-and-excitation, torchvision's SqueezeExcitation with a SiLU: each channel of [C, H, W] scaled by σ(fc2(silu(fc1(its mean over H and W)))), fc1 a 1x1 conv from C to the squeeze channels and fc2 back, both with bias.",
					arg("ratio", lang.TInt, "The squeeze channels are max(1, C / ratio).", atLeast(1), def("4")),
					arg("squeeze", lang.TInt, "The squeeze channels written out, in place of C / ratio (EfficientNet's are its block's input channels / 4); 0: from ratio.", atLeast(0), def("0"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					in, ok := b.shape(x)
					if !ok || !b.spatial("se", in) {
						return -1
					}
					s := argInt(c, "squeeze", 0)
					if s == 0 {
						s = max(1, in[0]/argInt(c, "ratio", 4))
					}
					return b.se(b.numbered("se"), x, OpArgs{Channels: s})
				}}},
			// torchvision's names: fc1 and fc2, 1x1 convs with bias.
			Tensors: func(n *Node) []TensorSpec {
				c, s := first(n.Out), n.Args.Channels
				return append(withBias(n.Name+".fc1", []int64{s, c, 1, 1}, s, c, true),
					withBias(n.Name+".fc2", []int64{c, s, 1, 1}, c, s, true)...)
			}},
		{Name: "drop_path", Doc: "Stochastic depth (P): each sample kept whole with probability 1-P and scaled by 1/(1-P), or zeroed; the identity in evaluation.",
			Shape: "unchanged", Saved: "a 4-byte factor per sample (SavedAux); nothing when P is 0",
			Layers: []*Layer{{
				Spec: layer("drop_path", "Stochastic depth, torchvision's StochasticDepth (mode row): during training each sample of a residual branch is zeroed whole with probability p and kept, scaled by 1/(1-p), otherwise; the identity in evaluation. Write it before the add that joins the shortcut. The engines draw from different generators, so they agree only in evaluation or at p 0.",
					arg("p", lang.TFloat, "The probability of dropping a sample, in [0, 1).", positional, atLeast(0), below(1), def("0.2"))),
				build: func(b *builder, c *lang.LayerCall, x int) int {
					return b.dropPath(b.numbered("drop_path"), x, argFloat(c, "p", 0.2))
				}}}},
	}
}

// dropPath keeps a factor per sample, as autograd's product with
// torchvision's noise [N, 1, 1, 1] keeps the noise; one multiply per
// element.
func (b *builder) dropPath(name string, x int, p float64) int {
	in, ok := b.shape(x)
	if !ok {
		return -1
	}
	var cc calc
	n := b.newNode(name, "drop_path", cloneShape(in), OpArgs{P: p}, x)
	if p > 0 {
		n.FLOPs = cc.numel(in)
		n.SavedAux = 4
	}
	return b.push(n, &cc)
}

// se keeps its input (the gate's product and the pooling read it) and
// per sample the pooled input, fc1's output, its silu and the gate, as
// autograd does for torchvision's module. FLOPs: the mean and the product
// one per element each, the two 1x1 convs 2·C·S (+ bias) each, silu 5 and
// sigmoid 4 per value.
func (b *builder) se(name string, x int, a OpArgs) int {
	in, ok := b.shape(x)
	if !ok || !b.spatial("se", in) {
		return -1
	}
	if a.Channels < 1 {
		return b.shapeErr("se needs squeeze channels", "se squeezes to %d channels; it needs at least 1.", a.Channels)
	}
	var cc calc
	c, s := in[0], a.Channels
	n := b.newNode(name, "se", cloneShape(in), a, x)
	n.Params = cc.add(cc.mul(2, c, s), c+s)
	n.FLOPs = cc.add(cc.mul(2, cc.numel(in)), cc.add(cc.mul(4, c, s), 6*s+5*c))
	n.Keep = []int{x}
	n.Private = cc.mul(2, c+s)
	return b.push(n, &cc)
}
