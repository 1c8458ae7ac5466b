// Package torch is pipe's engine on PyTorch: Backend builds a model as one
// Python worker per device (the pipe_torch package, embedded and written
// out when a worker starts), and drives the workers over a typed wire: a
// JSON line each way per command (protocol.go and spec.go are the whole
// protocol; pipe_torch/protocol.py is generated from them), with batches,
// outputs and checkpoint tensors in shared memory (shm.go). Steps are
// queued ahead of their replies (queue.go); several workers, here or on
// other machines, train with DistributedDataParallel. TorchScript export
// runs in the worker too (torchscript.go).
//
// Cost (cost_*.go) is the engine's cost model: what autograd saves under
// autocast, oneDNN's copies on the CPU, and on a GPU the caching
// allocator and the libraries' workspaces, which the planner prices a
// torch plan with.
//
// It implements package engine's Backend and Model, takes stdlib graphs
// and dataset/samples batches, and never imports the native engine, the
// run loop or workflow. Design: docs/design/torch-protocol.md,
// torch-saved.md and gpu-memory.md.
package torch
