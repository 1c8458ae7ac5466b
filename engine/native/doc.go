// Package native is pipe's engine in Go: it implements engine.Backend by
// compiling a stdlib.Graph, once at Build, into a fixed list of
// hand-written forward and backward kernels over float32 slices, with
// OpenBLAS (through gonum.org/v1/netlib) for every matrix product. Its
// neighbours are package engine, whose Backend and Model it implements and
// whose Config (the plan's batch, checkpoint segments and fusion groups)
// it takes, and package stdlib, whose graph nodes it runs.
//
// Images are stored CNHW, so a convolution over a micro-batch is one
// product written in place (conv.go, winograd.go, depthwise.go); tokens
// are N·T rows (attention.go). Fusion groups run as single kernels, and
// every tensor of a step lives in one arena packed at Build (schedule.go).
// Everything is float32 but int8 inference (int8.go). Parallel loops are
// split statically and reductions summed in a fixed order, so the same
// seed and thread count give bit-identical losses. Speed is measured only
// as ratios against PyTorch, back to back (bench/cmd/ratios).
//
// Design, and why not gorgonia's graph: docs/design/native-engine.md.
package native
