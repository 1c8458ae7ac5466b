package cost

import "pipe/stdlib"

// CPUFeatures is what CPUID says of the host's vector extensions; the
// zero value is unknown (a host not measured, or not x86-64).
type CPUFeatures struct {
	Known                                 bool
	AVX2                                  bool
	AVX512F, AVX512BW, AVX512VL, AVX512DQ bool
	AVXVNNI, AVXVNNIInt8                  bool
	// AMXTile, AMXBF16 and AMXInt8 are the AMX sets where the OS lets a
	// process use the tile registers too (Linux 5.16 and later, on
	// request, which oneDNN makes); false elsewhere.
	AMXTile, AMXBF16, AMXInt8 bool
}

// Host is what one engine knows of the machine it is planned for, beyond
// the facts every engine shares (the planner's HostInfo): what its
// descriptor measured (HostProber) and its library's version where a
// worker said it or a flag gave it. The planner reads Int8 and Kernels,
// and hands the whole back to the engine (Setup.Host,
// ProcessSetup.Host); Own is the engine's alone.
type Host struct {
	// Int8 is the engine's int8 kernel here; zero where not known.
	Int8 Int8Kernel
	// Kernels names the kernels the engine's products run on this CPU
	// and who chose them, "" where not known.
	Kernels string
	// Version is the engine's library version to price for
	// ("2.11.0+cu130"), "" where not known.
	Version string
	// GraphsOff is why the engine's workers keep CUDA graphs off
	// whatever the plan decides (the torch engine's PIPE_TORCH_GRAPH=off),
	// "" where they capture as the plan decides: the plan then prices the
	// steps as they run, eagerly.
	GraphsOff string
	// Own is the rest of what the engine measured, which its own cost
	// model reads (nil: nothing).
	Own any
}

// HostProber is a descriptor's optional facet: it measures what the
// engine reads of this machine. The planner's callers call it once, as
// they gather the host's facts; tests give a fixed Host instead.
type HostProber interface {
	ProbeHost() Host
}

// Processor is a descriptor's optional facet for an engine that computes
// in a worker (Traits.InProcess false): what the worker's process holds
// on the CPU beyond its step, so that a CPU plan's total is the worker's
// peak resident memory. Without it the plan prices the step alone.
type Processor interface {
	Process(s ProcessSetup) Process
}

// ProcessSetup is what a worker's process on the CPU depends on.
type ProcessSetup struct {
	Graph *stdlib.Graph
	Host  Host
	// Params is the model's parameter count, Optimizer the optimizer's
	// state in bytes.
	Params, Optimizer int64
	// Checkpoints says the run writes checkpoint files.
	Checkpoints bool
}

// Process is a worker's process on the CPU beyond its step.
type Process struct {
	// Runtime is the worker's resident memory once its library is
	// loaded and at work, before any model.
	Runtime int64
	// Checkpoint is the copy of the state a checkpoint is written from,
	// 0 where none is written.
	Checkpoint int64
	// Note says where each term comes from, for the process decision.
	Note string
}
