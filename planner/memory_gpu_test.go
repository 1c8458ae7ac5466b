package planner

import (
	"path/filepath"
	"pipe/engine/torch"
	"strings"
	"testing"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

func gpuPlan(t *testing.T, path string, opts ...Option) *plan.Plan {
	t.Helper()
	prog, _ := load(t, path, filepath.Base(path))
	p, ds := Plan(prog, append([]Option{testCosts, WithHost(testHost), WithDevice("a100-80gb")}, opts...)...)
	if p == nil {
		t.Fatalf("%s: no plan: %v", path, ds)
	}
	return p
}

func term(m plan.Memory, name string) (plan.MemoryTerm, bool) {
	for _, t := range m.Terms {
		if t.Name == name {
			return t, true
		}
	}
	return plan.MemoryTerm{}, false
}

// TestGPUTermsMakeTheTotal: on a GPU the total is the largest phase, the
// terms live in that phase add up to it (less what they count twice,
// NotAtOnce), and every term has a source.
func TestGPUTermsMakeTheTotal(t *testing.T) {
	for _, path := range examples(t) {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		for _, b := range []int64{0, 1, 7} {
			var opts []Option
			if b > 0 {
				opts = append(opts, WithBatch(b))
			}
			p := gpuPlan(t, path, opts...)
			m := p.Memory
			if len(m.Phases) != 3 || len(m.Terms) == 0 {
				t.Fatalf("%s: %d phases, %d terms", name, len(m.Phases), len(m.Terms))
			}
			var most plan.MemoryPhase
			for _, ph := range m.Phases {
				if ph.Device > most.Device {
					most = ph
				}
				if ph.Reserved < ph.Allocated {
					t.Errorf("%s: phase %s reserves %d < allocated %d", name, ph.Name, ph.Reserved, ph.Allocated)
				}
			}
			if m.PeakPhase != most.Name || m.Total != most.Device {
				t.Errorf("%s at batch %d: peak %s total %d, the largest phase is %s with %d", name, p.BatchSize, m.PeakPhase, m.Total, most.Name, most.Device)
			}
			var s int64
			for _, tm := range m.Terms {
				for _, ph := range tm.Phases {
					if ph == m.PeakPhase {
						s += tm.Bytes
					}
				}
				switch tm.Source {
				case plan.SourceConstant, plan.SourceFormula, plan.SourceCalibration, plan.SourceUnmodelled:
				default:
					t.Errorf("%s: term %q has source %q", name, tm.Name, tm.Source)
				}
				if tm.Basis == "" {
					t.Errorf("%s: term %q says nothing of its source", name, tm.Name)
				}
			}
			if ph, _ := m.Peak(); s-ph.NotAtOnce != m.Total {
				t.Errorf("%s at batch %d: the %s phase's terms add up to %d, the total is %d", name, p.BatchSize, m.PeakPhase, s, m.Total)
			}
		}
	}
}

// TestGPUPeakPhase: a convolutional network at a large batch peaks in
// the backward (engine/torch's cost_gpu_test.go checks the optimizer's
// phase).
func TestGPUPeakPhase(t *testing.T) {
	q := gpuPlan(t, "../examples/cells.pipe", WithBatch(64))
	if q.Memory.PeakPhase != plan.PhaseBackward {
		t.Errorf("cells at batch 64 peaks in %s: %+v", q.Memory.PeakPhase, q.Memory.Phases)
	}
}

// TestGPUGradientsAtForward: gradients set to None are absent at the
// forward's end unless micro-batches accumulate into them.
func TestGPUGradientsAtForward(t *testing.T) {
	has := func(p *plan.Plan) bool {
		g, _ := term(p.Memory, "gradients")
		for _, ph := range g.Phases {
			if ph == plan.PhaseForward {
				return true
			}
		}
		return false
	}
	src := `pipeline acc
model m {
  input [64]
  dense 64 -> relu -> dense 10
}
source s synthetic { samples 64  shape [64]  classes 10 }
train { epochs 1  batch 8 %s optimizer adam lr 1e-3 }
`
	one, _ := Plan(check(t, "a.pipe", []byte(strings.Replace(src, "%s", "", 1))), testCosts, WithHost(testHost), WithDevice("a100-80gb"))
	acc, _ := Plan(check(t, "b.pipe", []byte(strings.Replace(src, "%s", "effective_batch 32", 1))), testCosts, WithHost(testHost), WithDevice("a100-80gb"))
	if has(one) {
		t.Error("without accumulation the gradients are live at the forward's end")
	}
	if !has(acc) || acc.AccumulationSteps != 4 {
		t.Errorf("with %d accumulation steps the gradients are not live at the forward's end", acc.AccumulationSteps)
	}
}

// TestGPUDDPBuckets: the buckets are a term only with data parallelism,
// hold every gradient, and make the gradients' own term 0.
func TestGPUDDPBuckets(t *testing.T) {
	one := gpuPlan(t, "../examples/pills.pipe")
	ddp := gpuPlan(t, "../examples/pills.pipe", WithDevices(8, 1))
	if _, ok := term(one.Memory, "DDP gradient buckets"); ok {
		t.Error("one device has DDP buckets")
	}
	b, ok := term(ddp.Memory, "DDP gradient buckets")
	if !ok {
		t.Fatal("8 devices have no DDP buckets")
	}
	if b.Bytes != 4*ddp.Parameters || len(b.Phases) != 3 {
		t.Errorf("buckets of %d bytes in %v; the gradients are %d", b.Bytes, b.Phases, 4*ddp.Parameters)
	}
	if g, _ := term(ddp.Memory, "gradients"); g.Bytes != 0 {
		t.Errorf("gradients of %d bytes beside the buckets they are views into", g.Bytes)
	}
}

// TestGPUWorkspacePerGeneration: cuBLAS's workspace is 32 MiB a handle
// on Hopper and 8 MiB + 128 KiB elsewhere.
func TestGPUWorkspacePerGeneration(t *testing.T) {
	for dev, want := range map[string]int64{"a100-80gb": 2 * (8<<20 + 128<<10), "h100-80gb": 2 * 32 << 20} {
		p := gpuPlan(t, "../examples/fashion.pipe", WithDevice(dev))
		if w, _ := term(p.Memory, "cuBLAS workspace"); w.Bytes != want {
			t.Errorf("%s: cuBLAS workspace %d, want %d", dev, w.Bytes, want)
		}
	}
}

// TestGPUSkipGradients: across a skip connection the encoder's gradient
// waits for the backward to come back to it, so more activation
// gradients are alive at once than in a chain of the same ops.
func TestGPUSkipGradients(t *testing.T) {
	src := `pipeline skip
model m {
  input [8, 64, 64]
  a = conv 8 k3 pad1 -> relu
  conv 8 k3 pad1 -> relu -> conv 8 k3 pad1 -> relu
  %s
  conv 8 k3 pad1
}
source s synthetic { samples 64  shape [8, 64, 64] }
train { epochs 1  batch 4  optimizer sgd lr 0.1  loss mse }
`
	walk := func(body string) backwardWalk {
		p := check(t, "s.pipe", []byte(strings.Replace(src, "%s", body, 1)))
		g, ds := p.Graph(p.Spec.Models[0].Name)
		if g == nil || ds.HasErrors() {
			t.Fatal(ds)
		}
		m := newCostModel(torch.Cost{}, g, cost.Setup{Device: plan.BackendGPU, Precision: plan.Precision{ActivationBytes: 4}, Loss: "mse"}, 0, 0)
		return walkBackward(m.ch)
	}
	chain := walk("conv 16 k1")
	skip := walk("concat a")
	per := int64(8 * 64 * 64 * 4)
	if skip.maxLive < chain.maxLive+per {
		t.Errorf("the skip connection's gradient is not carried: %d bytes live with it, %d without", skip.maxLive, chain.maxLive)
	}
}

// TestGPUConvWorkspacePerLayer: a GPU plan gives every convolution its
// cuDNN workspace at the chosen batch, and the memory's workspace terms
// are at most the largest of them (one runs at a time, and it adds only
// what passes the tensors alive where it runs).
func TestGPUConvWorkspacePerLayer(t *testing.T) {
	for _, path := range examples(t) {
		p := gpuPlan(t, path)
		var most int64
		convs := 0
		for _, l := range p.Layers {
			conv := l.Op == "conv" || l.Op == "convtranspose"
			if conv != (l.Workspace != "") {
				t.Errorf("%s: %s (%s) has workspace %q", path, l.Name, l.Op, l.Workspace)
			}
			if conv {
				convs++
				most = max(most, l.WorkspaceBytes)
			}
		}
		for _, name := range []string{"cuDNN workspace (forward)", "cuDNN workspace (backward)"} {
			w, ok := term(p.Memory, name)
			if ok != (convs > 0) || w.Bytes > most {
				t.Errorf("%s: %s %d (present %v), the layers' largest %d over %d convs", path, name, w.Bytes, ok, most, convs)
			}
		}
		// cudnn.benchmark's first-step trials, where the engine runs it.
		for _, name := range []string{"cuDNN benchmark trials (forward)", "cuDNN benchmark trials (backward)"} {
			if w, ok := term(p.Memory, name); ok && (convs == 0 || w.Bytes > most) {
				t.Errorf("%s: %s %d, the layers' largest %d over %d convs", path, name, w.Bytes, most, convs)
			}
		}
	}
}

// TestPrivatePoolHeld: a private pool's terms (a captured CUDA graph's)
// are packed apart from the general pool and held, at the pool's own
// peak, in every phase, where a general term counts in its phases only.
func TestPrivatePoolHeld(t *testing.T) {
	const mib = 1 << 20
	alloc := torch.CachingAllocator{}
	ts := []cost.Term{
		{Name: "weights", Bytes: 40 * mib, Sizes: []int64{40 * mib}, Phases: cost.InAll},
		{Name: "activations", Bytes: 30 * mib, Sizes: []int64{30 * mib}, Phases: cost.InForward},
		{Name: "gradients", Bytes: 12 * mib, Sizes: []int64{12 * mib}, Phases: cost.InBackward},
	}
	eager := phases(alloc, ts)
	for i := 1; i < 3; i++ {
		ts[i].Pool = cost.PoolCUDAGraph
	}
	graph := phases(alloc, ts)
	for p, want := range []int64{70 * mib, 70 * mib, 70 * mib} {
		if graph[p].reserved != want {
			t.Errorf("phase %d: reserved %d MiB with the pool held, want %d", p, graph[p].reserved/mib, want/mib)
		}
		if graph[p].allocated != eager[p].allocated {
			t.Errorf("phase %d: allocated %d with the pool, %d without: the pool's live tensors are the same", p, graph[p].allocated, eager[p].allocated)
		}
	}
	if eager[1].reserved != 52*mib || eager[2].reserved != 40*mib {
		t.Errorf("eager: reserved %d, %d MiB in the backward and the optimizer step", eager[1].reserved/mib, eager[2].reserved/mib)
	}
}

// TestApartNotAllocatedWithPool: an eager step between a graph's replays
// (Apart terms) reserves beside the held pool, but its tensors and the
// pool's transient ones are never allocated at once: a phase's allocated
// memory is the larger side, plus the pool's tensors still allocated
// meanwhile (the graph's gradients), not the sum.
func TestApartNotAllocatedWithPool(t *testing.T) {
	const mib = 1 << 20
	alloc := torch.CachingAllocator{}
	ts := []cost.Term{
		{Name: "weights", Bytes: 40 * mib, Sizes: []int64{40 * mib}, Phases: cost.InAll},
		{Name: "activations", Bytes: 30 * mib, Sizes: []int64{30 * mib}, Phases: cost.InForward, Pool: cost.PoolCUDAGraph},
		{Name: "gradients", Bytes: 12 * mib, Sizes: []int64{12 * mib}, Phases: cost.InBackward, Pool: cost.PoolCUDAGraph},
		{Name: "eager last batch: activations", Bytes: 20 * mib, Sizes: []int64{20 * mib}, Phases: cost.InForward, Apart: true},
		{Name: "eager last batch: the graph's gradients", Bytes: 12 * mib, Sizes: []int64{12 * mib}, Phases: cost.InAll, Pool: cost.PoolCUDAGraph, Apart: true},
	}
	ps := phases(alloc, ts)
	// Forward: 40 + max(30, 20 + 12); reserved 40 + 20 beside the pool's 30.
	for p, want := range [3][2]int64{{72, 90}, {52, 70}, {52, 70}} {
		if ps[p].allocated != want[0]*mib || ps[p].reserved != want[1]*mib {
			t.Errorf("phase %d: allocated %d MiB, reserved %d; want %d and %d", p, ps[p].allocated/mib, ps[p].reserved/mib, want[0], want[1])
		}
		if ps[p].raw != ps[p].allocated {
			t.Errorf("phase %d: raw %d, allocated %d: MiB sizes round to nothing", p, ps[p].raw, ps[p].allocated)
		}
	}
}
