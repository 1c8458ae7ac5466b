package torch

import (
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// cellsGraph is examples/cells.pipe's U-Net.
func cellsGraph(t *testing.T) *stdlib.Graph {
	t.Helper()
	src := `pipeline cells
model cellseg {
  input [1, 256, 256]
  e1 = conv 32 k3 pad1 -> batchnorm -> relu -> conv 32 k3 pad1 -> batchnorm -> relu
  maxpool 2
  e2 = conv 64 k3 pad1 -> batchnorm -> relu -> conv 64 k3 pad1 -> batchnorm -> relu
  maxpool 2
  conv 128 k3 pad1 -> batchnorm -> relu -> conv 128 k3 pad1 -> batchnorm -> relu
  upsample 2 -> concat e2 -> conv 64 k3 pad1 -> batchnorm -> relu
  upsample 2 -> concat e1 -> conv 32 k3 pad1 -> batchnorm -> relu
  conv 1 k1 -> sigmoid
}
source s synthetic { samples 8  shape [1, 256, 256] }
train { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }
`
	return graphOf(t, src)
}

// TestAMXWeightScratchOfCells: on an AMX host with two threads, cells'
// 96-to-32-channel 3×3 conv at 256×256 (conv8) holds, in its weight
// gradient, the transposed input of 2 samples (6 blocks of 16 channels,
// doubled by the kernel's blocking, 256 rows of 288: 256 and 32 of
// padding rounded to the tile), the transposed output gradient of 2 (2
// blocks, doubled, 256×256) and 2 fp32 reductions of the weights and
// bias (docs/design/torch-cpu-amx.md); the 192-channel conv7 splits its
// threads over channels, one sample.
func TestAMXWeightScratchOfCells(t *testing.T) {
	g := cellsGraph(t)
	want := map[string]struct{ bytes, mb int64 }{
		"conv8": {2*(2*6*16*288*256*2+32+2*2*16*256*256*2) + 4*2*2*16*(6*16*9+1), 2},
		"conv7": {2*(1*12*16*160*128*2+32+1*4*16*128*128*2) + 4*1*4*16*(12*16*9+1), 1},
	}
	found := 0
	for _, nd := range g.Nodes {
		w, ok := want[nd.Name]
		if !ok {
			continue
		}
		found++
		if b, mb := amxWeightScratch(nd, 2); b != w.bytes || mb != w.mb {
			t.Errorf("%s: %d bytes over %d samples, want %d over %d", nd.Name, b, mb, w.bytes, w.mb)
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of %v", found, want)
	}
}

// TestAMXScratchOnlyOnAnAMXHost: the AMX weight gradient's scratch is
// priced for bf16 convs on a host whose oneDNN runs AMX, and nowhere
// else: not in fp32, not where ONEDNN_MAX_CPU_ISA caps oneDNN below AMX
// (the planner clears AMX then), not without AMX, not on a host not
// known; the copies (Work) are the same on every oneDNN path.
func TestAMXScratchOnlyOnAnAMXHost(t *testing.T) {
	g := cellsGraph(t)
	bf16 := plan.Precision{Mixed: true, ActivationBytes: 2}
	fp32 := plan.Precision{ActivationBytes: 4}
	amx := &CPUSetup{AVX512: true, AMX: true, Threads: 2}
	mem := func(s *CPUSetup, p plan.Precision) cost.Memory {
		return Cost{}.memory(g, cost.Setup{Device: plan.BackendCPU, Precision: p, Loss: "mse"}, s)
	}
	on := mem(amx, bf16)
	if on.Workspaces == nil || on.ConvPath != "oneDNN AMX" {
		t.Fatalf("AMX host, bf16: path %q, workspaces %v", on.ConvPath, on.Workspaces)
	}
	var largest int64
	for _, nd := range g.Nodes {
		w := on.Workspaces[nd.ID]
		if (nd.Op == "conv") != (w.Fixed > 0) || w.PerSample != 0 {
			t.Errorf("%s (%s): workspace %+v", nd.Name, nd.Op, w)
		}
		if b, _ := amxWeightScratch(nd, 2); nd.Op == "conv" && w.Fixed != b {
			t.Errorf("%s: %d, want %d", nd.Name, w.Fixed, b)
		}
		largest = max(largest, w.Fixed)
	}
	if lo, hi := int64(70<<20), int64(71<<20); largest < lo || largest > hi {
		t.Errorf("largest AMX scratch %d, want conv8's 70.2 MiB", largest)
	}
	avx512 := mem(&CPUSetup{AVX512: true, Threads: 2}, bf16)
	for name, m := range map[string]cost.Memory{
		"fp32":        mem(amx, fp32),
		"AVX-512":     avx512,
		"unknown":     mem(nil, bf16),
		"oneDNN off":  mem(&CPUSetup{AVX512: true, AMX: true, OneDNNOff: true, Threads: 2}, bf16),
		"no AVX-512 ": mem(&CPUSetup{Threads: 2}, bf16),
	} {
		if m.Workspaces != nil {
			t.Errorf("%s: AMX scratch priced: %v", name, m.Workspaces)
		}
	}
	if avx512.ConvPath != "oneDNN" {
		t.Errorf("AVX-512 host: path %q", avx512.ConvPath)
	}
	for i := range on.Work {
		if on.Work[i] != avx512.Work[i] {
			t.Errorf("node %d: AMX copies %d, AVX-512 %d", i, on.Work[i], avx512.Work[i])
		}
	}
}

// TestAMXKernelDeclines: the AMX weight-gradient kernel takes no
// depthwise conv (oneDNN's depthwise kernel does) and no conv whose
// padding passes its bounds; nothing is priced for them.
func TestAMXKernelDeclines(t *testing.T) {
	g := convGraph(t, "conv 16 k3 pad1 groups 16 -> conv 16 k3 pad2 -> conv 16 k3 pad1")
	for _, nd := range g.Nodes {
		b, _ := amxWeightScratch(nd, 2)
		if want := nd.Name == "conv3"; (b > 0) != want {
			t.Errorf("%s: %d bytes, priced %v", nd.Name, b, want)
		}
	}
}
