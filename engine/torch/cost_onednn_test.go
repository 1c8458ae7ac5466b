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

// TestConvPathFollowsTheCPU: a bf16 conv runs oneDNN only where the CPU
// passes PyTorch's bf16 check (AVX-512 BW, VL and DQ; 2.x also oneDNN's
// avx2_vnni_2), and the slow path elsewhere; fp32 runs oneDNN on any
// x86-64 unless oneDNN is off; an unknown host prices oneDNN.
func TestConvPathFollowsTheCPU(t *testing.T) {
	avx512 := &CPUSetup{AVX512: true}
	avx2 := &CPUSetup{}
	vnni2 := &CPUSetup{AVX2VNNI2: true}
	for _, c := range []struct {
		name string
		s    *CPUSetup
		low  int64
		want bool
	}{
		{"unknown host, bf16", nil, 2, true},
		{"AVX-512, bf16", avx512, 2, true},
		{"AVX2, bf16", avx2, 2, false},
		{"AVX2, fp32", avx2, 4, true},
		{"avx2_vnni_2, bf16, 1.13", vnni2, 2, false},
		{"avx2_vnni_2, bf16, 2.11", &CPUSetup{AVX2VNNI2: true, TorchVersion: "2.11.0+cpu"}, 2, true},
		{"oneDNN off, fp32", &CPUSetup{AVX512: true, OneDNNOff: true}, 4, false},
	} {
		if got := convOneDNN(c.s, c.low); got != c.want {
			t.Errorf("%s: oneDNN %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSlowPathColumns: on the slow path a conv holds its im2col columns,
// (C/groups)·k² rows by the output's positions, at the product's
// precision; a 1×1 stride-1 conv none, a dilated one none priced (one
// sample's frame); the copies of oneDNN are not priced there.
func TestSlowPathColumns(t *testing.T) {
	g := convGraph(t, "conv 32 k3 pad1 -> conv 32 k1 -> conv 8 k3 stride2 pad1 -> conv 8 k3 pad2 dilation 2 -> conv 8 k3 pad1 groups 4")
	bf16 := plan.Precision{Mixed: true, ActivationBytes: 2}
	m := Cost{}.memory(g, cost.Setup{Device: plan.BackendCPU, Precision: bf16, Loss: "mse"}, &CPUSetup{})
	want := map[string]int64{
		"conv1": 16 * 9 * 28 * 28 * 2,
		"conv2": 0,
		"conv3": 32 * 9 * 14 * 14 * 2,
		"conv4": 0,
		"conv5": 2 * 9 * 14 * 14 * 2,
	}
	for _, nd := range g.Nodes {
		if got := m.Work[nd.ID]; got != want[nd.Name] {
			t.Errorf("%s (%s): work %d, want %d", nd.Name, nd.Op, got, want[nd.Name])
		}
	}
	on := Cost{}.memory(g, cost.Setup{Device: plan.BackendCPU, Precision: bf16, Loss: "mse"}, &CPUSetup{AVX512: true})
	if c := g.Nodes[1]; on.Work[c.ID] != (16*28*28+32*28*28)*2 {
		t.Errorf("AVX-512 %s: work %d, want oneDNN's copies", c.Name, on.Work[c.ID])
	}
}
