package cost

import "fmt"

// The GPU terms: what an engine's training step holds on a GPU, named,
// with their sources. The engine lists them (it knows its libraries'
// workspaces, its optimizer kernels, its input copies); the planner
// packs each phase's tensors through the engine's Allocator, finds the
// peak phase and solves for the batch. Derivation: docs/design/gpu-memory.md.

// Phases of a step a term is alive in, a bit each.
const (
	InForward uint8 = 1 << iota
	InBackward
	InOptimizer
	InAll = InForward | InBackward | InOptimizer
)

// GPUSetup is what the planner has decided that the GPU terms depend on
// beyond the graph.
type GPUSetup struct {
	// Capability is the device's compute capability ("9.0").
	Capability string
	// Optimizer is the optimizer's kind and StateBuffers its buffers per
	// parameter.
	Optimizer    string
	StateBuffers int64
	// World is the data-parallel processes (1 without).
	World int
	// TargetBytes is one sample's targets as they cross to the device.
	TargetBytes int64
	// L2 is the device's L2 cache in bytes, 0 when not known.
	L2 int64
	// Samples is the training set's size (0: not known), SamplesExact
	// whether it is exact; an engine whose batches of another size run
	// another way (the last, partial one) prices that batch from it.
	Samples      int64
	SamplesExact bool
	// GAN says the step trains a generator and a discriminator in turn.
	GAN bool
	// GraphOff is why the engine's workers keep CUDA graphs off (the
	// host's switch), "" where the engine decides.
	GraphOff string
}

// GPUStep is a step the planner prices: the batch, the kept activations
// per sample, and where the backward pass peaks.
type GPUStep struct {
	Batch int64
	// Act is the kept activations per sample the checkpoint plan leaves,
	// Baseline those without checkpointing, PerNode each node's share of
	// Baseline.
	Act, Baseline int64
	PerNode       []int64
	// Saved is what the nodes not yet visited keep where the backward
	// peaks, and Grads the activation gradients alive there (per sample),
	// for the plan without checkpointing; MaxLiveGrads the sizes of the
	// most activation gradients alive at any node.
	Saved        int64
	Grads        []int64
	MaxLiveGrads []int64
	// Accumulate says micro-batches accumulate into the gradients, so
	// they are alive at the forward's end.
	Accumulate bool
	// Text asks for the terms' bases (the solver does without them).
	Text bool
}

// Term is one named part of a step's memory: its tensors' sizes (for the
// allocator), the phases it is alive in, whether it is outside the
// allocator, its source (plan.SourceFormula, ...) and basis.
type Term struct {
	Name          string
	Bytes         int64
	Sizes         []int64
	Phases        uint8
	Outside       bool
	Source, Basis string
	// Capped says the term grows with the batch but not in proportion
	// (a workspace held to a cap): the batch solver bounds the batch
	// without it, then prices it whole.
	Capped bool
	// Pool names the allocator pool the term's tensors come from, "" for
	// the general one. A private pool (PoolCUDAGraph) shares no segment
	// with another and keeps its segments reserved in every phase at its
	// own peak.
	Pool string
	// Apart says the term is alive only between a private pool's uses (a
	// step that runs eagerly beside a captured graph): its tensors add to
	// its pool's reserved memory, but are never allocated together with
	// the private pools' tensors of the captured step, so a phase's
	// allocated memory takes the larger of the two. An Apart term in a
	// private pool is that pool's tensors still allocated meanwhile (its
	// blocks are the pool's: they add nothing to its reserve).
	Apart bool
}

// PoolCUDAGraph is a captured CUDA graph's private memory pool.
const PoolCUDAGraph = "cuda graph"

// GPU is set by an engine that prices its step on a GPU term by term.
type GPU interface {
	Terms(s GPUStep) []Term
}

// FormatBytes renders a byte count for people: "512 B", "1.5 KiB",
// "12.4 GiB", up to EiB. A saturated count reads "≥ 8 EiB".
func FormatBytes(n int64) string {
	if n == Sat {
		return "≥ 8 EiB"
	}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v >= 100 {
		return fmt.Sprintf("%.0f %s", v, units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}
