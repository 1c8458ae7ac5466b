package torch

import (
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

// TestOnednnCopiesOnTheCPU: on the CPU each conv holds copies of its
// input and of its output's gradient in oneDNN's layout, at the
// product's precision (bf16 under autocast); other ops none, and a GPU
// plan prices cuDNN instead.
func TestOnednnCopiesOnTheCPU(t *testing.T) {
	g := convGraph(t, "conv 32 k3 pad1 -> relu -> conv 8 k3 stride2 pad1")
	bf16 := plan.Precision{Mixed: true, ActivationBytes: 2}
	m := Cost{}.Memory(g, cost.Setup{Device: plan.BackendCPU, Precision: bf16, Loss: "mse"})
	want := map[string]int64{
		"conv1": (16*28*28 + 32*28*28) * 2,
		"conv2": (32*28*28 + 8*14*14) * 2,
	}
	for _, nd := range g.Nodes {
		if got := m.Work[nd.ID]; got != want[nd.Name] {
			t.Errorf("%s (%s): work %d, want %d", nd.Name, nd.Op, got, want[nd.Name])
		}
	}
	fp32 := Cost{}.Memory(g, cost.Setup{Device: plan.BackendCPU, Precision: plan.Precision{ActivationBytes: 4}, Loss: "mse"})
	if c := g.Nodes[1]; fp32.Work[c.ID] != 2*want[c.Name] {
		t.Errorf("fp32 %s: work %d, want %d", c.Name, fp32.Work[c.ID], 2*want[c.Name])
	}
	if gpu := (Cost{}).Memory(g, cost.Setup{Device: plan.BackendGPU, Precision: bf16, Loss: "mse"}); gpu.Work != nil {
		t.Errorf("a GPU plan prices oneDNN's copies: %v", gpu.Work)
	}
}
