package torch

import (
	"fmt"
	"os"

	"pipe/planner/cost"
)

// One CUDA graph a training step: the worker captures the whole step
// (forward, backward, the fused optimizer's update) once and replays it,
// which leaves the host a launch a step where it had hundreds. The plan
// decides it (cudaGraph), the memory terms price its private pool
// (graphPool), and the worker (pipe_torch/graphs.py) falls back to eager
// steps with the reason in the run report. Design: docs/design/cuda-graphs.md.

// graphMinTorch is the first torch whose fused Adam, AdamW and SGD take
// the learning rate as a device tensor (torch.optim's lr: float | Tensor),
// which a replayed graph reads where a float would be baked in at capture.
var graphMinTorch = [3]int{2, 2, 0}

// graphCase is what the CUDA graph decision reads: from the plan in
// Decide, from the GPU setup and the step in the memory terms, so that
// both decide alike.
type graphCase struct {
	// torch is the version priced for; optimizer the optimizer's kind.
	torch, optimizer string
	world            int
	gan, gradScaler  bool
	// accumulate: micro-batches accumulate into the gradients;
	// recompute: the plan has checkpoint segments.
	accumulate, recompute bool
	// off is why the workers keep graphs off whatever the plan decides
	// (GraphOff), "" where they capture as decided.
	off string
}

// cudaGraph decides whether the worker captures each training step as
// one CUDA graph on a GPU, and why (the reason for off names the first
// obstacle). Every op the torch engine builds captures: none has a shape
// that depends on the data or reads a value back to the host
// (pipe_torch/modules.py, losses.py); dropout's masks come from the
// default generator, which a graph's replay advances as eager steps do.
func cudaGraph(c graphCase) (bool, string) {
	switch {
	case c.off != "":
		return false, c.off + ": the workers keep CUDA graphs off, so the steps run eagerly, and the memory above is theirs."
	case !versionAtLeast(c.torch, graphMinTorch):
		return false, fmt.Sprintf("torch %s: the fused optimizers take the learning rate as a device tensor from %d.%d, which a replayed graph must read; the steps run eagerly.", c.torch, graphMinTorch[0], graphMinTorch[1])
	case !fusedOptimizer(c.optimizer) || !fusedIn(c.optimizer, c.torch):
		return false, fmt.Sprintf("optimizer %s has no fused kernel in torch %s: its update launches per-tensor kernels with host-side learning rates, which capture cannot replay; the steps run eagerly.", c.optimizer, c.torch)
	case c.world > 1:
		return false, fmt.Sprintf("%d devices: DDP's bucketed all-reduce inside a captured step is possible but not built yet; the steps run eagerly.", c.world)
	case c.gan:
		return false, "gan mode: the discriminator's and the generator's steps take turns with host-side choices between them; the steps run eagerly."
	case c.accumulate:
		return false, "micro-batches accumulate into the gradients, which one graph of one micro-batch cannot hold across replays; the steps run eagerly."
	case c.gradScaler:
		return false, "fp16 loss scaling: the GradScaler keeps its per-step state in Python (which optimizer steps it skipped), which a replayed graph would not update; the steps run eagerly."
	case c.recompute:
		return false, "checkpoint segments: torch.utils.checkpoint saves and restores the CUDA generator's state around each segment, which capture forbids; the steps run eagerly."
	}
	return true, "every training batch of the plan's size has the same shapes, and a step reads nothing back to the host (losses come back lagged), so the worker captures the whole step (forward, backward, the fused optimizer with capturable=True and the learning rate as a device tensor, updated in place) once after 3 eager warm-up steps on a side stream, and replays it; a batch of another shape (an epoch's last, partial one) runs eagerly, exactly as without graphs. The report says what ran, and why where capture failed."
}

// GraphOffEnv keeps a planned graph off in the workers ("off"), as
// pipe_torch/graphs.py reads it: make gpu-smoke's row of graphs off.
const GraphOffEnv = "PIPE_TORCH_GRAPH"

// GraphOff says why the workers this process starts keep CUDA graphs off
// (GraphOffEnv), "" where they capture as the plan decides; the engine's
// host probe says it (cost.Host.GraphsOff), so that the plan prices the
// steps as they run.
func GraphOff() string {
	if os.Getenv(GraphOffEnv) == "off" {
		return GraphOffEnv + "=off"
	}
	return ""
}

// graphWarmup is how many eager steps of the captured shape run before
// capture: PyTorch's documentation warms up 3 iterations on a side
// stream, so that lazy initialisation (cuDNN's benchmark, cuBLAS's
// handles, the optimizer's state, torch.compile's first call) is done
// before the graph records. pipe_torch/graphs.py reads it from the spec.
const graphWarmup = 3

// lastBatch is the training set's last batch at batch b: samples mod b,
// 0 when the batches are all full; b−1 (a bound, and false) when the
// set's size is not known exactly.
func lastBatch(samples int64, exact bool, b int64) (int64, bool) {
	switch {
	case b <= 1:
		return 0, true
	case samples <= 0 || !exact:
		return b - 1, false
	}
	return samples % b, true
}

// graphPool prices a captured step's private memory pool in ts, the
// step's terms at batch b, and adds the terms of the eager last batch.
// While capturing, the caching allocator serves the step's tensors from a
// pool of its own, which it keeps whole while the graph lives
// (c10/cuda/CUDACachingAllocator.cpp: a private pool's blocks go back to
// it and to no other allocation, and its segments are freed only with the
// graph): so every term that is alive in some phases only (the saved
// activations, the gradients, the workspaces, the optimizer's
// temporaries) goes into the pool, whose segments stay reserved in every
// phase at the pool's own peak. The eager warm-up's blocks of the same
// tensors are released before capture (torch.cuda.empty_cache), so they
// are not counted twice. at is the step's terms at the last batch's size,
// whose eager step allocates beside the held pool (in the general pool,
// where the caching allocator serves every allocation outside a capture)
// but never while the captured step's tensors are: its terms are Apart,
// and so is the graph's gradients, which the worker keeps (graph_grads)
// and so stay allocated in the pool while the eager step runs.
func graphPool(ts, at []cost.Term, last int64, exact bool) []cost.Term {
	var grads *cost.Term
	for i := range ts {
		if transient(ts[i]) {
			ts[i].Pool = cost.PoolCUDAGraph
			if ts[i].Name == "gradients" {
				grads = &ts[i]
			}
		}
	}
	// The same terms at every batch (the solver lines them up by index),
	// empty where no batch runs eagerly.
	if grads != nil {
		g := *grads
		g.Name, g.Phases, g.Apart, g.Capped = "eager last batch: the graph's gradients", cost.InAll, true, true
		switch {
		case last == 0:
			g.Bytes, g.Sizes = 0, nil
			if g.Basis != "" {
				g.Basis = "0: every batch of the epoch is full, so none runs eagerly beside the graph"
			}
		case g.Basis != "":
			g.Basis = "the captured gradients stay allocated in the graph's pool (its blocks, not new ones) while the eager last batch runs: " + g.Basis
		}
		ts = append(ts, g)
	}
	for _, t := range at {
		if !transient(t) {
			continue
		}
		t.Name = "eager last batch: " + t.Name
		t.Apart = true
		t.Capped = true // the last batch is the set's size mod b: not in proportion to b
		if last == 0 {
			t.Bytes, t.Sizes = 0, nil
			if t.Basis != "" {
				t.Basis = "0: every batch of the epoch is full, so none runs eagerly beside the graph"
			}
		} else if t.Basis != "" {
			how := fmt.Sprintf("the epoch's last batch of %d samples", last)
			if !exact {
				how = fmt.Sprintf("the epoch's last batch, at most %d samples (the training set's size is not known)", last)
			}
			t.Basis = how + " runs eagerly beside the graph's held pool: " + t.Basis
		}
		ts = append(ts, t)
	}
	return ts
}

// transient says whether t lives in some phases of the step only (and
// so, captured, in the graph's pool). Inductor's autotuning buffer is
// not the step's: it is taken and freed at the first compiled call, in
// the warm-up, before capture.
func transient(t cost.Term) bool {
	return !t.Outside && t.Phases != cost.InAll && t.Phases != 0 && t.Name != "Inductor autotuning buffer"
}

// graphDecision decides plan.Engine.CUDAGraph on a GPU, with its reason
// and what happens to the epoch's last batch.
func graphDecision(s *cost.Settings, recompute bool) {
	p := s.Plan
	e := &p.Engine
	torch, _ := gpuTorch(s.Memory.Version)
	on, why := cudaGraph(graphCase{torch: torch, optimizer: p.Optimizer.Kind, world: p.Distributed.WorldSize, gan: p.GAN != nil,
		gradScaler: e.GradScaler, accumulate: p.AccumulationSteps > 1, recompute: recompute, off: s.GraphOff})
	if !on {
		s.Decide("cuda graph", "off", why)
		return
	}
	e.CUDAGraph = true
	last, exact := lastBatch(p.TrainSamples, p.TrainSamplesExact, p.BatchSize)
	switch {
	case !exact:
		why += " The training set's size is not known exactly, so the memory above holds an eager last batch of up to " + fmt.Sprint(last) + " samples beside the graph's pool."
	case last == 0:
		why += fmt.Sprintf(" The training set's %d samples make full batches only.", p.TrainSamples)
	default:
		why += fmt.Sprintf(" The training set's %d samples leave a last batch of %d, which runs eagerly beside the graph's pool, as the memory above holds.", p.TrainSamples, last)
	}
	s.Decide("cuda graph", "on", why)
}
