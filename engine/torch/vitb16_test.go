package torch

import (
	"math"
	"strings"
	"testing"

	"pipe/dataset"
	"pipe/engine/native"
	"pipe/internal/progtest"
	"pipe/internal/torchtest"
	"pipe/run"
)

// torchvisionViT writes torchvision's vit_b_16 (weights=None, seed 0), an
// image and the model's output on it into a folder: index.json lists each
// state_dict tensor (name, shape, offset in floats) in tensors.bin. The
// classifier head, which torchvision initialises to zeros, and the class
// token, zeros too, are drawn from N(0, 0.02²) so that the output depends
// on every layer.
const torchvisionViT = `
import json, sys, torch, torchvision
out = sys.argv[1]
torch.manual_seed(0)
m = torchvision.models.vit_b_16(weights=None).eval()
with torch.no_grad():
    m.heads.head.weight.normal_(std=0.02)
    m.heads.head.bias.normal_(std=0.02)
    m.class_token.normal_(std=0.02)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    y = m(x)
` + tensorDump

// TestViTB16MatchesTorchvision: pipe's vit family on the native engine,
// given torchvision's vit_b_16 weights under the torch engine's names,
// computes torchvision's output on a 224×224 image within 1e-4 of its
// largest value.
func TestViTB16MatchesTorchvision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds ViT-B/16 (86M parameters)")
	}
	py := torchtest.Python(t, "torchvision")
	tv := torchvisionTensors(t, py, torchvisionViT)

	src := "pipeline v\nsource d synthetic { samples 4  shape [3, 224, 224]  classes 1000 }\nmodel m {\n  input [3, 224, 224]\n  vit patch 16 depth 12 heads 12 dim 768 mlp_dim 3072 classes 1000\n}\ntrain { epochs 1  batch 1  optimizer sgd lr 0.1  loss cross_entropy }\n"
	prog, p, g := loadSrc(t, "vit_b_16.pipe", []byte(src))
	if got := g.Params(); got != 86_567_656 {
		t.Fatalf("vit_b_16 has %d parameters; torchvision's has 86,567,656", got)
	}
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	cfg.Batch, cfg.Threads, cfg.Checkpoint = 1, 2, nil
	m, err := native.Backend{}.Build(g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	st := m.State()
	copied := 0
	for _, x := range st.Tensors {
		if strings.HasPrefix(x.Name, "optimizer.") {
			continue
		}
		// The torch engine's names are torchvision's state_dict keys, but
		// for the two bare parameters it holds in a module of their own.
		name := x.Name
		if name == "class_token.weight" || name == "encoder.pos_embedding.weight" {
			name = strings.TrimSuffix(name, ".weight")
		}
		v, ok := tv[name]
		if !ok || len(v) != len(x.Data) {
			t.Fatalf("pipe's %s (%v) has no counterpart of its size in torchvision's state_dict", x.Name, x.Shape)
		}
		copy(x.Data, v)
		copied++
	}
	// tv holds the state_dict, the input x and the output y.
	if copied != len(tv)-2 {
		t.Errorf("copied %d tensors; torchvision's state_dict has %d", copied, len(tv)-2)
	}
	if err := m.SetState(st); err != nil {
		t.Fatal(err)
	}
	b := &dataset.Batch{N: 1, X: tv["x"]}
	out := make([]float32, 1000)
	if _, err := m.Eval(b, out); err != nil {
		t.Fatal(err)
	}
	want := tv["y"]
	var worst, scale float64
	for i, v := range want {
		worst = math.Max(worst, math.Abs(float64(out[i]-v)))
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	if worst > 1e-4*scale || scale == 0 {
		t.Errorf("pipe's output differs from torchvision's by %.3g (largest output %.3g)", worst, scale)
	}
	t.Logf("largest difference %.3g, %.2g of the largest output %.3g", worst, worst/scale, scale)
}
