package torch

import (
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// phaseBytes is each phase's terms added up (before the allocator).
func phaseBytes(ts []cost.Term) [3]int64 {
	var out [3]int64
	for _, t := range ts {
		for p := range out {
			if t.Phases&(1<<p) != 0 {
				out[p] += t.Bytes
			}
		}
	}
	return out
}

func peakPhase(ps [3]int64) int {
	k := 0
	for p := range ps {
		if ps[p] > ps[k] {
			k = p
		}
	}
	return k
}

// TestGPUPeakPhase: with next to no activations, foreach Adam's
// temporaries put the peak at the optimizer step and the fused kernel
// leaves it in the backward (which counts the gradients whole).
func TestGPUPeakPhase(t *testing.T) {
	gm := &gpuTerms{params: []int64{100 << 20}, total: 100 << 20, buffers: 2, optimizer: "adam", world: 1}
	step := cost.GPUStep{Batch: 1}
	if k := peakPhase(phaseBytes(gm.Terms(step))); k != 2 {
		t.Errorf("foreach adam peaks in phase %d", k)
	}
	gm.fused = true
	if k := peakPhase(phaseBytes(gm.Terms(step))); k != 1 {
		t.Errorf("fused adam peaks in phase %d", k)
	}
}

// TestGPUFusedOptimizer: fused Adam has no temporaries, foreach Adam
// P × 4 bytes of them, at the optimizer step only; SGD none.
func TestGPUFusedOptimizer(t *testing.T) {
	temps := func(gm *gpuTerms) (int64, [3]int64) {
		ts := gm.Terms(cost.GPUStep{Batch: 1})
		for _, tm := range ts {
			if tm.Name == "optimizer temporaries" {
				return tm.Bytes, phaseBytes(ts)
			}
		}
		t.Fatal("no optimizer temporaries term")
		return 0, [3]int64{}
	}
	gm := &gpuTerms{params: []int64{2 << 20, 1 << 20}, total: 3 << 20, buffers: 2, optimizer: "adam", fused: true, world: 1}
	fused, fp := temps(gm)
	gm.fused = false
	each, ep := temps(gm)
	gm.buffers, gm.optimizer = 1, "sgd"
	sgd, _ := temps(gm)
	if fused != 0 || sgd != 0 || each != 4*(3<<20) {
		t.Errorf("temporaries: fused %d, foreach %d, sgd %d; want 0, %d, 0", fused, each, sgd, 4*(3<<20))
	}
	if ep[2]-fp[2] != each || ep[1] != fp[1] {
		t.Errorf("foreach adds %d at the optimizer step and %d in the backward", ep[2]-fp[2], ep[1]-fp[1])
	}
}

// TestGPUDDPBuckets: DDP's first bucket is 1 MiB, the others at most the
// bucket size.
func TestGPUDDPBuckets(t *testing.T) {
	if got := ddpBuckets(60<<20, 25<<20); len(got) != 4 || got[0] != 1<<20 || got[3] != 9<<20 {
		t.Errorf("60 MiB in buckets: %v", got)
	}
}

// termOf is the term named name of gm's terms at batch b.
func termOf(t *testing.T, gm *gpuTerms, b int64, name string) cost.Term {
	t.Helper()
	for _, tm := range gm.Terms(cost.GPUStep{Batch: b, Text: true}) {
		if tm.Name == name {
			return tm
		}
	}
	t.Fatalf("no %q term", name)
	return cost.Term{}
}

// TestCublasOnlyWhenCalled: a network of convolutions makes no cuBLAS
// call, so PyTorch allocates no cuBLAS workspace for it; one dense layer
// takes one a handle, 32 MiB each on Hopper and Blackwell.
func TestCublasOnlyWhenCalled(t *testing.T) {
	convs := convGraph(t, "conv 8 k3 pad1 -> relu -> conv 8 k3 pad1")
	dense := convGraph(t, "conv 8 k3 pad1 -> gap -> dense 10")
	for _, c := range []struct {
		g          *stdlib.Graph
		capability string
		want       int64
	}{{convs, "9.0", 0}, {dense, "9.0", 64 << 20}, {dense, "10.0", 64 << 20}, {dense, "8.0", 2 * (8<<20 + 128<<10)}} {
		gm := newGPUTerms(c.g, plan.Precision{Compute: "bf16", Mixed: true, ActivationBytes: 2}, cost.GPUSetup{Capability: c.capability, World: 1}, "")
		if tm := termOf(t, gm, 4, "cuBLAS workspace"); tm.Bytes != c.want || tm.Basis == "" {
			t.Errorf("%d nodes on %s: cuBLAS workspace %d, want %d (%s)", len(c.g.Nodes), c.capability, tm.Bytes, c.want, tm.Basis)
		}
	}
}

// TestInductorAutotuneBuffer: a compiled network's first step autotunes
// its kernels with a buffer of the device's L2 size, in the forward and
// the backward, none in the optimizer step; torch 1.x does not compile,
// and an L2 not known leaves the term unmodelled, not guessed.
func TestInductorAutotuneBuffer(t *testing.T) {
	g := convGraph(t, "conv 8 k3 pad1 -> gap -> dense 10")
	prec := plan.Precision{Compute: "bf16", Mixed: true, ActivationBytes: 2}
	for _, c := range []struct {
		torch  string
		l2     int64
		want   int64
		source string
	}{{"2.11.0", 50 << 20, 50 << 20, plan.SourceFormula}, {"", 40 << 20, 40 << 20, plan.SourceFormula},
		{"1.13.1", 50 << 20, 0, plan.SourceFormula}, {"2.11.0", 0, 0, plan.SourceUnmodelled}} {
		gm := newGPUTerms(g, prec, cost.GPUSetup{Capability: "9.0", World: 1, L2: c.l2}, c.torch)
		tm := termOf(t, gm, 4, "Inductor autotuning buffer")
		if tm.Bytes != c.want || tm.Source != c.source || tm.Phases != cost.InForward|cost.InBackward || tm.Basis == "" {
			t.Errorf("torch %q, L2 %d: %d bytes (%s) in phases %b, want %d (%s): %s", c.torch, c.l2, tm.Bytes, tm.Source, tm.Phases, c.want, c.source, tm.Basis)
		}
	}
}

// TestFusedOptimizerByTorch: the worker asks for the fused kernel and
// falls back to foreach where its torch has none, so AdamW's temporaries
// (P × 4 for sqrt(v) + eps) are priced on torch 1.13 and not on 2.x;
// Adam has its fused kernel from 1.13.
func TestFusedOptimizerByTorch(t *testing.T) {
	g := convGraph(t, "conv 8 k3 pad1 -> gap -> dense 10")
	prec := plan.Precision{Compute: "bf16", Mixed: true, ActivationBytes: 2}
	p := g.Params() * 4
	for _, c := range []struct {
		opt, torch string
		want       int64
	}{{"adamw", "1.13.1", p}, {"adamw", "2.11.0", 0}, {"adamw", "", 0}, {"adam", "1.13.1", 0}} {
		gm := newGPUTerms(g, prec, cost.GPUSetup{Capability: "9.0", World: 1, StateBuffers: 2, Optimizer: c.opt}, c.torch)
		if tm := termOf(t, gm, 4, "optimizer temporaries"); tm.Bytes != c.want {
			t.Errorf("%s on torch %q: temporaries %d, want %d (%s)", c.opt, c.torch, tm.Bytes, c.want, tm.Basis)
		}
	}
}

// TestCheckVersion: --torch-version takes what torch.__version__ writes,
// from the oldest torch the worker accepts.
func TestCheckVersion(t *testing.T) {
	for v, ok := range map[string]bool{"2.11": true, "1.13.1": true, "2.11.0+cu130": true, "1.13.0a0": true,
		"1.12.1": false, "2": false, "abc": false, "": false, "2.11 ": false, "v2.11": false} {
		if err := CheckVersion(v); (err == nil) != ok {
			t.Errorf("CheckVersion(%q) = %v, want ok %v", v, err, ok)
		}
	}
}
