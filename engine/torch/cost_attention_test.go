package torch

import (
	"testing"

	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

// TestAttentionPathByTorch: the path nn.MultiheadAttention's training
// forward takes, by the torch version, the device and the attention's
// dtype, mask and dropout (PyTorch's sdp_utils of each version).
func TestAttentionPathByTorch(t *testing.T) {
	for _, c := range []struct {
		torch                string
		gpu                  bool
		capability           string
		low, masked, dropout bool
		want                 string
	}{
		{"1.13.0a0", false, "", false, false, false, "math"},
		{"1.13.1+cu117", true, "8.0", true, false, false, "math"},
		{"2.0.1", true, "8.0", true, true, false, "math"},               // 2.0: no masks
		{"2.0.1", true, "8.0", false, false, true, "math"},              // 2.0: efficient has no dropout
		{"2.0.1", true, "8.0", false, false, false, "memory-efficient"}, // fp32
		{"2.1.0", true, "8.0", true, true, true, "memory-efficient"},    // masks and dropout from 2.1
		{"2.11.0+cu130", true, "9.0", true, false, true, "flash"},
		{"2.11.0+cu130", true, "7.5", true, false, false, "memory-efficient"}, // flash needs sm80
		{"2.11.0+cu130", true, "9.0", false, false, false, "memory-efficient"},
		{"2.1.2", false, "", false, false, false, "math"}, // no CPU kernel before 2.2
		{"2.2.0", false, "", false, true, false, "math"},  // 2.2's CPU flash: no mask
		{"2.3.0", false, "", true, true, false, "flash (CPU)"},
		{"2.11.0", false, "", false, false, true, "math"}, // the CPU's flash: no dropout
		{"", true, "9.0", true, false, false, "flash"},    // a GPU's torch not known: 2.x
		{"", false, "", false, false, false, "math"},      // a CPU's not known: the larger price
	} {
		got := attentionPath(c.torch, c.gpu, c.capability, c.low, c.masked, c.dropout)
		if got.name != c.want || got.fused != (c.want != "math") || got.why == "" {
			t.Errorf("torch %q gpu %v sm %s low %v masked %v dropout %v: %+v, want %s", c.torch, c.gpu, c.capability, c.low, c.masked, c.dropout, got, c.want)
		}
	}
}

// TestAttentionPricedByTorch: a GPU plan of vit_fashion prices its
// attention by the torch it is given: torch 1.13's math path keeps the
// heads × tokens² probabilities, 2.x's flash path does not.
func TestAttentionPricedByTorch(t *testing.T) {
	_, p, g := loadFile(t, "../../examples/vit_fashion.pipe", planner.WithEngine("torch"), planner.WithDevice("a100-80gb"))
	setup := func(v string) cost.Setup {
		return cost.Setup{Device: plan.BackendGPU, Precision: p.Precision, Loss: "cross_entropy", Host: cost.Host{Version: v},
			GPU: &cost.GPUSetup{Capability: "8.0", Optimizer: "adamw", StateBuffers: 2}}
	}
	old, cur := Cost{}.Memory(g, setup("1.13.1")), Cost{}.Memory(g, setup("2.11.0+cu130"))
	if old.Attention != "math" || cur.Attention != "flash" || old.AttentionWhy == "" {
		t.Fatalf("attention priced as %q (%s) on 1.13, %q on 2.11", old.Attention, old.AttentionWhy, cur.Attention)
	}
	var low int64 = 2 // bf16
	for _, nd := range g.Nodes {
		if nd.Op != "attention" {
			continue
		}
		tk, d, h := nd.In[0][0], nd.In[0][1], nd.Args.Heads
		// math: 5·T·D + H·T² at the products' dtype; flash: 6·T·D and
		// each row's logsumexp, H·T fp32.
		want := (5*tk*d+h*tk*tk)*low - (6*tk*d*low + 4*h*tk)
		if got := old.Own[nd.ID] - cur.Own[nd.ID]; got != want {
			t.Errorf("%s: math keeps %d bytes a sample more than flash, want %d", nd.Name, got, want)
		}
	}
}
