// Package cost is the contract through which the planner asks an engine
// what it is (its Traits) and what training a graph costs it. The planner
// declares it and never imports an engine; each engine implements it
// beside its kernels, with the constants and eligibility rules those
// kernels use, registers itself (Register), and the callers of
// planner.Plan hand the registered engines in (planner.WithCosts).
//
// It imports only stdlib and the plan, so that an engine can implement it
// without depending on the planner, and the planner's tests can build the
// engines without an import cycle.
package cost

import (
	"pipe/planner/plan"
	"pipe/stdlib"
)

// Engine is one engine's descriptor: its name, its traits and its cost
// model.
type Engine interface {
	// Name is the engine as the plan and the engine field name it.
	Name() string
	// Traits is what the planner reads of the engine.
	Traits() Traits
	// Memory prices a training step of g as the engine runs it.
	Memory(g *stdlib.Graph, s Setup) Memory
}

// Setup is what the planner has decided that an engine's memory depends
// on.
type Setup struct {
	// Device is plan.BackendCPU or plan.BackendGPU.
	Device    string
	Precision plan.Precision
	Loss      string
	// Fusion is the plan's fusion groups; the engine runs those it can.
	Fusion []Group
	// Threads is the engine's compute threads, one per core of the
	// device's machine.
	Threads int
	// GPU is what the GPU terms depend on; nil where the device is not a
	// GPU with a known compute capability.
	GPU *GPUSetup
	// HostCPU is the vector extensions of the host the plan is made on
	// (zero: not known), which an engine's CPU kernels may be chosen by.
	HostCPU CPUFeatures
	// Host is what the engine knows of the host (its version among it).
	Host Host
}

// Group is a fusion group: its kind (plan.FusionGroup.Kind) and its
// nodes' IDs in order.
type Group struct {
	Kind string
	IDs  []int
}

// Memory is a graph priced by one engine, in bytes per sample unless
// said otherwise. The per-node slices are indexed by node ID, and are
// what the planner's checkpoint programme works on.
type Memory struct {
	// Out is each node's output as the engine stores it; Keep the nodes
	// whose outputs each node's backward reads; Own what each node keeps
	// of its own (masks, indices, statistics, cast copies).
	Out  []int64
	Keep [][]int
	Own  []int64
	// Loss is what the loss keeps, counted with the input node (never
	// recomputed).
	Loss int64
	// Work is what each node's kernels hold while it runs, forward or
	// backward, beyond its output, its own and its inputs (a library's
	// copies of them in a layout of its own); nil where none is priced.
	Work []int64
	// Workspaces is, by node ID, the scratch each node's kernels may take
	// while it runs (cuDNN's per convolution on a GPU), which the device
	// term of the largest already counts; nil where none is priced.
	Workspaces []Workspace
	// ConvPath names the kernels the CPU's convs were priced on ("oneDNN
	// AMX", "oneDNN", "slow"), "" where the host is not known or the
	// graph has no conv; ConvPathWhy says why, with its source.
	ConvPath, ConvPathWhy string
	// Attention names the attention implementation that was priced
	// ("math", or a fused kernel's name), "" when the graph has none;
	// AttentionWhy says why that one, with its source.
	Attention, AttentionWhy string
	// Version is the library version the engine priced the graph for
	// (the torch engine's on a GPU: Setup.Host.Version, or the one it assumes
	// where that is ""), "" where the price depends on none;
	// VersionAssumed says it was assumed, not given.
	Version        string
	VersionAssumed bool
	// Arena is set by an engine that lays a whole step out before the
	// first step (the native engine); nil for one whose allocator frees
	// tensors as autograd drops them.
	Arena Arena
	// Allocator is set by an engine whose device memory goes through a
	// caching allocator (the torch engine); nil otherwise.
	Allocator Allocator
	// GPU is set by an engine that prices its step on a GPU term by term
	// (Setup.GPU given); nil otherwise.
	GPU GPU
}

// Arena is an engine's step laid out ahead, buffer by buffer.
type Arena interface {
	// Train lays out a training step that recomputes segs and measures
	// it per sample.
	Train(segs []Segment) Step
	// Eval is the evaluation forward's peak per sample, and the fixed
	// bytes alive then.
	Eval() (perSample, fixed int64)
	// Fixed is the training step's kept buffers that do not grow with
	// the batch (per-channel statistics).
	Fixed() int64
	// State is what the engine holds beside the parameters that is not
	// trained (running statistics, fixed sketches).
	State() int64
	// Scratch is the workers' scratch for the whole run.
	Scratch() int64
}

// Step is a training step's memory per sample: the peak of the live
// buffers, the kept buffers alive at the loss, and among those the
// input's copy.
type Step struct {
	Peak, Saved, Input int64
}

// Segment is a checkpoint segment, nodes From to To recomputed.
type Segment struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Allocator is a caching allocator's view of a set of live tensors.
type Allocator interface {
	// Reserve returns what live tensors of the given sizes take once
	// rounded (allocated) and once packed into the allocator's segments
	// (reserved).
	Reserve(sizes []int64) (allocated, reserved int64)
}

// Int8Kernel is the kernel an engine's int8 products run on a host and
// what it is known to buy there: the planner says it beside int8 and
// warns where int8 is slower than fp32. The zero value is unknown.
type Int8Kernel struct {
	// Name is the kernel ("AVX-512 VNNI", "AVX2", "Go").
	Name string
	// Speedup is fp32's forward time over int8's with this kernel, as
	// Measured says it was measured (above 1: int8 is faster).
	Speedup  float64
	Measured string
}

// Workspace is the scratch one node's kernels may take while it runs:
// Fixed bytes and PerSample a sample, held to Cap (0: no cap); Basis
// says which algorithm needs it. The zero Workspace is none.
type Workspace struct {
	Fixed, PerSample, Cap int64
	Basis                 string
}

// At is the workspace at batch b.
func (w Workspace) At(b int64) int64 {
	v := Add(w.Fixed, Mul(b, w.PerSample))
	if w.Cap > 0 {
		v = min(v, w.Cap)
	}
	return v
}
