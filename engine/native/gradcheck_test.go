package native

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"pipe/dataset"
	"pipe/engine"
	"pipe/stdlib"
)

// gradCheck compares the backward pass's parameter gradients with central
// differences of the loss. Every op is checked through the parameters of a
// layer before it, so its input gradient is exercised too. The forward is
// float32, so the step is large (1e-2) and the tolerance loose; a wrong
// gradient is off by far more.
func gradCheck(t *testing.T, m *model, b *dataset.Batch) {
	t.Helper()
	m.ZeroGrad()
	ms := m.microStep
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	m.microStep = ms
	r := rand.New(rand.NewPCG(3, 4))
	checked := 0
	var worst float64
	numeric := func(p *param, i int, h float64) float64 {
		old := p.data[i]
		p.data[i] = old + float32(h)
		lp := m.lossOnly(b)
		p.data[i] = old - float32(h)
		lm := m.lossOnly(b)
		p.data[i] = old
		return (lp - lm) / (2 * h)
	}
	for _, p := range m.params {
		idx := make([]int, 0, 8)
		if p.n <= 8 {
			for i := 0; i < p.n; i++ {
				idx = append(idx, i)
			}
		} else {
			for len(idx) < 8 {
				idx = append(idx, r.IntN(p.n))
			}
		}
		for _, i := range idx {
			got := float64(p.grad[i])
			// A step that moves some value across a kink (relu, max,
			// |x|) misleads finite differences; a wrong gradient is
			// wrong for every step.
			var num, rel float64
			ok := false
			for _, h := range []float64{1e-3, 2e-4, 5e-3} {
				num = numeric(p, i, h)
				diff := math.Abs(num - got)
				scale := math.Max(math.Abs(num), math.Abs(got))
				rel = 0
				if scale > 1e-3 {
					rel = diff / scale
				}
				if diff <= 2e-2*scale+2e-3 {
					ok = true
					break
				}
			}
			if !ok {
				t.Errorf("%s[%d]: backward %.6g, finite differences %.6g", p.name, i, got, num)
			}
			worst = math.Max(worst, rel)
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no parameters checked")
	}
	t.Logf("%d values checked, worst relative error %.2g", checked, worst)
}

type gcase struct {
	name  string
	model string
	loss  string
	fuse  bool
	batch int
	edit  func(g *stdlib.Graph)
}

var gradCases = []gcase{
	{name: "dense", model: "input [5]\ndense 4 -> dense 3", loss: "mse"},
	{name: "dense_nobias", model: "input [5]\ndense 4 bias false -> tanh -> dense 3", loss: "mse"},
	{name: "sketched_dense", model: "input [6]\nsketched_dense 5 terms 3 rank 2 -> tanh -> sketched_dense 3 terms 2 rank 2 bias false", loss: "mse"},
	{name: "sketched_conv", model: "input [2, 5, 5]\nsketched_conv 3 k3 s2 pad1 terms 2 rank 2 -> tanh -> sketched_conv 2 k2 terms 1 rank 3 bias false -> flatten -> dense 2", loss: "mse"},
	{name: "lowrank", model: "input [6]\nlowrank_dense 5 terms 3 rank 2 -> dense 2", loss: "mse"},
	{name: "conv", model: "input [2, 6, 6]\nconv 3 k3 pad1 -> conv 2 k3 -> flatten -> dense 2", loss: "mse"},
	{name: "conv_stride_dilation", model: "input [2, 9, 9]\nconv 3 k3 s2 pad1 -> conv 4 k3 pad2 d2 -> gap -> dense 2", loss: "mse"},
	{name: "conv_groups", model: "input [4, 6, 6]\nconv 4 k3 pad1 groups 2 -> conv 6 k1 groups 2 -> gap -> dense 2", loss: "mse"},
	{name: "conv_dilated_past_map", model: "input [3, 4, 4]\nconv 3 k3 pad9 d9 -> conv 2 k3 pad5 d5 -> conv 4 k3 pad12 d12 -> flatten -> dense 2", loss: "mse"},
	{name: "conv_depthwise", model: "input [3, 5, 6]\nconv 3 k3 pad1 -> conv 3 k3 pad1 groups 3 bias false -> conv 3 k3 pad2 d2 groups 3 -> conv 3 k3 pad4 d4 groups 3 -> flatten -> dense 2", loss: "mse"},
	{name: "conv_depthwise_fused", model: "input [4, 4, 4]\nconv 4 k1 -> conv 4 k3 pad6 d6 groups 4 bias false -> batchnorm -> relu -> conv 4 k5 pad2 groups 4 -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "conv_pointwise", model: "input [3, 5, 5]\nconv 4 k1 -> conv 2 k1 bias false -> flatten -> dense 2", loss: "mse"},
	{name: "convtranspose", model: "input [3, 4, 4]\nconv 4 k1 -> convtranspose 2 k2 s2 -> convtranspose 2 k3 s1 -> flatten -> dense 2", loss: "mse"},
	{name: "batchnorm_image", model: "input [2, 5, 5]\nconv 3 k3 pad1 -> batchnorm -> flatten -> dense 2", loss: "mse"},
	{name: "batchnorm_vector", model: "input [6]\ndense 5 -> batchnorm -> dense 2", loss: "mse"},
	{name: "layernorm", model: "input [6]\ndense 5 -> layernorm -> dense 2", loss: "mse"},
	{name: "relu", model: "input [6]\ndense 8 -> relu -> dense 2", loss: "mse"},
	{name: "gelu", model: "input [6]\ndense 8 -> gelu -> dense 2", loss: "mse"},
	{name: "sigmoid", model: "input [6]\ndense 8 -> sigmoid -> dense 2", loss: "mse"},
	{name: "tanh", model: "input [6]\ndense 8 -> tanh -> dense 2", loss: "mse"},
	{name: "softmax_vector", model: "input [6]\ndense 5 -> softmax -> dense 2", loss: "mse"},
	{name: "softmax_image", model: "input [2, 3, 3]\nconv 4 k1 -> softmax -> flatten -> dense 2", loss: "mse"},
	{name: "maxpool", model: "input [2, 8, 8]\nconv 3 k3 pad1 -> maxpool 2 -> maxpool 3 s2 pad1 -> flatten -> dense 2", loss: "mse"},
	{name: "avgpool", model: "input [2, 7, 7]\nconv 3 k3 pad1 -> avgpool 3 s2 pad1 -> avgpool 2 -> flatten -> dense 2", loss: "mse"},
	{name: "gap", model: "input [2, 5, 5]\nconv 3 k3 -> gap -> dense 2", loss: "mse"},
	{name: "gap_keepdims", model: "input [2, 5, 5]\nconv 3 k3 -> gap -> dense 2", loss: "mse", edit: keepdims},
	{name: "dropout", model: "input [6]\ndense 16 -> dropout 0.3 -> dense 2", loss: "mse"},
	{name: "upsample_nearest", model: "input [2, 3, 3]\nconv 2 k1 -> upsample 2 -> conv 2 k3 -> flatten -> dense 2", loss: "mse"},
	{name: "upsample_bilinear", model: "input [2, 3, 3]\nconv 2 k1 -> upsample 3 mode bilinear -> flatten -> dense 2", loss: "mse"},
	{name: "upsample_align", model: "input [2, 3, 3]\nconv 2 k1 -> upsample 2 mode bilinear -> flatten -> dense 2", loss: "mse", edit: alignCorners},
	{name: "leakyrelu", model: "input [6]\ndense 8 -> leakyrelu 0.2 -> dense 2", loss: "mse"},
	{name: "add_scaled", model: "input [2, 4, 4]\nx = conv 3 k3 pad1\nconv 3 k3 pad1 -> tanh -> add x scale 0.2 -> flatten -> dense 2", loss: "mse"},
	{name: "instancenorm", model: "input [2, 4, 5]\nconv 3 k3 pad1 -> instancenorm -> conv 2 k1 -> flatten -> dense 2", loss: "mse"},
	{name: "instancenorm_affine", model: "input [2, 4, 5]\nconv 3 k3 pad1 -> instancenorm affine -> leakyrelu 0.2 -> flatten -> dense 2", loss: "mse"},
	{name: "pixelshuffle", model: "input [2, 3, 4]\nconv 8 k3 pad1 -> pixelshuffle 2 -> conv 2 k3 -> flatten -> dense 2", loss: "mse"},
	{name: "concat_add", model: "input [2, 4, 4]\nx = conv 3 k3 pad1\ny = conv 2 k1 -> concat x -> conv 3 k1 -> add x -> relu\nflatten -> dense 2", loss: "mse"},
	{name: "concat_vector", model: "input [4]\nx = dense 3\ndense 2 -> concat x -> dense 2", loss: "mse"},
	{name: "tokens", model: "input [2, 4, 6]\npatches 2 dim 4 -> class_token -> pos_embed -> layernorm -> dense 6 -> gelu -> select_token -> dense 2", loss: "mse"},
	{name: "tokens_mean_flatten", model: "input [2, 4, 4]\nx = patches 2 dim 4 -> dense 4\ndense 4 -> relu -> add x -> dropout 0.2\ny = mean_tokens -> dense 2\nx -> flatten -> dense 2 -> add y", loss: "mse"},
	{name: "attention", model: "input [2, 4, 6]\nx = patches 2 dim 6 -> class_token -> pos_embed\nlayernorm -> attention heads 3 -> add x -> select_token -> dense 2", loss: "mse"},
	{name: "attention_causal_dropout", model: "input [2, 4, 6]\npatches 2 dim 4 -> attention heads 2 causal dropout 0.3 -> mean_tokens -> dense 3", loss: "mse"},
	{name: "attention_fused_gelu", model: "input [2, 4, 4]\nx = patches 2 dim 4 -> pos_embed\nattention heads 1 -> layernorm -> dense 8 -> gelu -> dense 4 -> add x -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "random_attention", model: "input [2, 4, 6]\nx = patches 2 dim 6 -> class_token -> pos_embed\nlayernorm -> random_attention heads 2 features 5 -> add x -> select_token -> dense 2", loss: "mse"},
	{name: "random_attention_causal", model: "input [2, 4, 6]\npatches 2 dim 4 -> random_attention heads 2 features 3 causal -> mean_tokens -> dense 3", loss: "mse"},
	{name: "random_attention_relu", model: "input [2, 4, 6]\npatches 2 dim 6 -> random_attention heads 3 features 4 kernel relu -> mean_tokens -> dense 2", loss: "mse"},
	{name: "random_attention_relu_causal", model: "input [2, 4, 4]\npatches 2 dim 4 -> pos_embed -> random_attention features 6 causal kernel relu -> flatten -> dense 2", loss: "mse"},
	{name: "vit_family", model: "input [3, 8, 8]\nvit patch 4 depth 2 heads 2 dim 8 mlp_dim 12 classes 3", loss: "mse", fuse: true},
	// At least winoMinChannels channels in and out: Winograd F(2×2, 3×3),
	// its input gradient through the flip, on odd and even sides.
	{name: "conv_winograd", model: "input [8, 5, 6]\nconv 8 k3 pad1 -> batchnorm -> relu -> conv 9 k3 pad1 -> conv 8 k3 pad1 -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_conv_bn_relu", model: "input [2, 6, 6]\nconv 3 k3 pad1 -> batchnorm -> relu -> conv 3 k3 pad1 bias false -> batchnorm -> gelu -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_conv_bn_sigmoid_tanh", model: "input [2, 5, 5]\nconv 3 k3 pad1 -> batchnorm -> sigmoid -> conv 3 k3 -> batchnorm -> tanh -> conv 2 k1 -> batchnorm -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_conv_act", model: "input [2, 6, 6]\nconv 3 k3 pad1 -> relu -> conv 3 k3 -> gelu -> conv 2 k1 -> sigmoid -> flatten -> dense 2", loss: "mse", fuse: true},
	{name: "fused_dense", model: "input [6]\ndense 8 -> relu -> dense 8 -> gelu -> lowrank_dense 6 terms 2 rank 3 -> tanh -> dense 2", loss: "mse", fuse: true},
	{name: "loss_ce", model: "input [6]\ndense 8 -> relu -> dense 4", loss: "cross_entropy"},
	{name: "loss_ce_softmax", model: "input [6]\ndense 8 -> relu -> dense 4 -> softmax", loss: "cross_entropy"},
	{name: "loss_ce_pixels", model: "input [2, 4, 4]\nconv 3 k3 pad1", loss: "cross_entropy"},
	{name: "loss_bce", model: "input [2, 4, 4]\nconv 3 k3 pad1 -> relu -> conv 1 k1", loss: "bce"},
	{name: "loss_bce_sigmoid", model: "input [2, 4, 4]\nconv 3 k3 pad1 -> relu -> conv 1 k1 -> sigmoid", loss: "bce", fuse: true},
	{name: "loss_mae", model: "input [6]\ndense 8 -> tanh -> dense 3", loss: "mae"},
	{name: "loss_dice", model: "input [2, 4, 4]\nconv 3 k3 pad1 -> relu -> conv 2 k1", loss: "dice"},
	{name: "loss_dice_sigmoid", model: "input [2, 4, 4]\nconv 3 k3 pad1 -> relu -> conv 1 k1 -> sigmoid", loss: "dice", fuse: true},
	{name: "resblock_fused", model: "input [2, 6, 6]\nstem = conv 4 k3 pad1 -> batchnorm -> relu\nconv 4 k3 pad1 -> batchnorm -> relu -> conv 4 k3 pad1 -> batchnorm -> add stem -> relu\nconv 4 k3 s2 pad1 -> batchnorm -> add(stem -> conv 4 k1 s2 -> batchnorm) -> relu\ngap -> dense 3", loss: "cross_entropy", fuse: true},
}

func keepdims(g *stdlib.Graph) {
	for _, n := range g.Nodes {
		if n.Op == "gap" {
			n.Args.Keepdims = true
			n.Out = []int64{n.Out[0], 1, 1}
			// The dense after it reads a [C, 1, 1]: put a flatten in
			// between by making the dense read a vector again.
		}
	}
	// gap -> dense: rewire as gap(keepdims) -> flatten -> dense.
	var out []*stdlib.Node
	for _, n := range g.Nodes {
		out = append(out, n)
		if n.Op == "gap" {
			f := &stdlib.Node{Name: "flatten_k", Op: "flatten", Inputs: []int{n.ID}, In: [][]int64{n.Out}, Out: []int64{n.Out[0]}}
			out = append(out, f)
		}
	}
	for i, n := range out {
		n.ID = i
	}
	for i, n := range out {
		if n.Op == "dense" && i > 0 && out[i-1].Op == "flatten" {
			n.Inputs = []int{i - 1}
		}
	}
	g.Nodes = out
	g.Output = len(out) - 1
}

func alignCorners(g *stdlib.Graph) {
	for _, n := range g.Nodes {
		if n.Op == "upsample" {
			n.Args.AlignCorners = true
		}
	}
}

func TestGradients(t *testing.T) { checkGradCases(t, gradCases) }

// checkGradCases checks each case's gradients with one and two threads.
func checkGradCases(t *testing.T, cases []gcase) {
	for _, c := range cases {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/threads%d", c.name, threads), func(t *testing.T) {
				g := graphOf(t, c.model)
				if c.edit != nil {
					c.edit(g)
				}
				batch := c.batch
				if batch == 0 {
					batch = 5
				}
				cfg := cfgOf(batch, c.loss, "sgd")
				cfg.Threads = threads
				if c.fuse {
					cfg.Fusion = fuseAll(g)
					if len(cfg.Fusion) == 0 {
						t.Fatal("nothing fused")
					}
				}
				m := mustBuild(t, g, cfg)
				if c.fuse {
					fused := 0
					for _, u := range m.units {
						if len(u.nodes) > 1 {
							fused++
						}
					}
					if fused == 0 {
						t.Fatal("no fused unit built")
					}
				}
				b := randomBatch(m, batch, 9)
				if c.loss == "mse" {
					// Make the gradient of every output position visible.
					for i := range b.Y {
						b.Y[i] *= 3
					}
				}
				gradCheck(t, m, b)
			})
		}
	}
}

// TestMaskedLosses checks gradients with a validity mask, and that masked
// positions change nothing.
func TestMaskedLosses(t *testing.T) {
	for _, loss := range []string{"mse", "mae", "bce", "dice", "cross_entropy"} {
		t.Run(loss, func(t *testing.T) {
			g := graphOf(t, "input [2, 4, 4]\nconv 3 k3 pad1 -> relu -> conv 2 k1")
			m := mustBuild(t, g, cfgOf(3, loss, "sgd"))
			b := randomBatch(m, 3, 5)
			r := rand.New(rand.NewPCG(1, 2))
			b.Mask = make([]float32, len(b.Y))
			for i := range b.Mask {
				if r.Float64() < 0.7 {
					b.Mask[i] = 1
				}
			}
			gradCheck(t, m, b)
			before := m.lossOnly(b)
			// Garbage under the mask must not matter.
			for i, v := range b.Mask {
				if v == 0 {
					if loss == "cross_entropy" {
						b.Y[i] = 99
					} else {
						b.Y[i] = 1e6
					}
				}
			}
			if _, err := m.TrainStep(b, 1); err != nil {
				t.Fatal(err)
			}
			if after := m.lossOnly(b); math.Abs(after-before) > 1e-9*math.Max(1, math.Abs(before)) {
				t.Errorf("masked targets changed the loss: %v then %v", before, after)
			}
		})
	}
}

// TestCrossEntropyProbabilities checks soft targets against index targets.
func TestCrossEntropyProbabilities(t *testing.T) {
	g := graphOf(t, "input [6]\ndense 4")
	m := mustBuild(t, g, cfgOf(3, "cross_entropy", "sgd"))
	b := randomBatch(m, 3, 1)
	l1 := m.lossOnly(b)
	soft := &dataset.Batch{N: 3, X: b.X, Y: make([]float32, 12)}
	for i := 0; i < 3; i++ {
		soft.Y[i*4+int(b.Y[i])] = 1
	}
	l2 := m.lossOnly(soft)
	if math.Abs(l1-l2) > 1e-9 {
		t.Errorf("index targets give %v, one-hot probabilities %v", l1, l2)
	}
	for i := range soft.Y {
		soft.Y[i] = 0.25
	}
	gradCheck(t, m, soft)
}

var _ = engine.Config{}

// TestAdamKernels checks that the vector Adam kernel and the scalar one
// give the same bits.
func TestAdamKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	n := 1003
	mk := func() []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	p, g, m1, m2 := mk(), mk(), mk(), mk()
	for i := range m2 {
		m2[i] *= m2[i]
	}
	k := adamConsts{b1: 0.9, c1: 0.1, b2: 0.999, c2: 0.001, bc2: 0.03, eps: 1e-8, step: 0.01, wd: 0.01, keep: 0.999}
	p2, m12, m22 := append([]float32(nil), p...), append([]float32(nil), m1...), append([]float32(nil), m2...)
	i := adamVec(p, g, m1, m2, &k)
	if hasAVX2 && i == 0 {
		t.Fatal("vector kernel did nothing")
	}
	adamGo(p[i:], g[i:], m1[i:], m2[i:], &k)
	adamGo(p2, g, m12, m22, &k)
	for j := range p {
		if p[j] != p2[j] || m1[j] != m12[j] || m2[j] != m22[j] {
			t.Fatalf("value %d: vector %v %v %v, scalar %v %v %v", j, p[j], m1[j], m2[j], p2[j], m12[j], m22[j])
		}
	}
}
