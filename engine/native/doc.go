// Package native is pipe's engine in Go: it implements engine.Backend by
// compiling a stdlib.Graph into a fixed list of kernels over float32
// slices, with OpenBLAS (through gonum.org/v1/netlib) for every matrix
// product. Its neighbours are package engine, whose Backend and Model
// interfaces it implements and whose Config it takes (the plan's batch,
// checkpoint segments and fusion groups), and package stdlib, whose graph
// nodes it runs. Parameters are also exposed as gorgonia.org/tensor Dense
// views, and gorgonia's BLAS is routed to OpenBLAS, for callers that want
// to use gorgonia on them.
//
// # Why not gorgonia's graph
//
// The alternative was to run the model as a gorgonia ExprGraph, with
// custom Ops for the fused kernels. gorgonia's own step for the same
// networks, measured on the project machine (2 cores, AVX-512, OpenBLAS
// 0.3.21; one training step with Adam at batch 64, see
// gorgonia_bench_test.go):
//
//	                                   gorgonia TapeMachine   this package
//	MLP 784-256-128-10                       5.2–5.8 ms         0.9–1.2 ms
//	Fashion CNN without batchnorm          119–130 ms          26–29 ms
//
// docs/deps.md found its transposes, max-pool and relu masks dominating a
// conv step, and its machinery allocates on every step; custom Ops would
// replace the kernels but keep the machinery and its layouts, and even
// the MLP, which is all BLAS, runs 5× slower through it. So the model is
// compiled once, at Build, into units (a node, or a fusion group run as
// one kernel) with hand-written forward and backward kernels; the
// autodiff is the graph's reverse order, fixed at Build.
//
// # Layout and kernels
//
// Images are stored CNHW (channel-major over the batch): a convolution
// over the whole micro-batch is then one product W·im2col(X) written in
// place, batchnorm reduces contiguous channel blocks, and concat along
// channels copies whole blocks. Batches arrive NCHW and outputs leave
// NCHW; the input unit, flatten and the output transpose. Tokens [T, D]
// are N·T rows of D, so dense and layernorm run on them as on vectors;
// attention.go describes the fused multi-head self-attention, randattn.go
// Performer's (random_attention). conv.go
// describes the convolutions: im2col chunks sized to the core's cache,
// each worker running single-threaded sgemm on its own columns (OpenBLAS's
// threads are off: two workers splitting the columns matched or beat
// OpenBLAS's two threads on one call, 177 against 153 GFLOP/s on the
// Fashion CNN's second conv; an MLP is the exception, see denseOnly in
// build.go), the input gradient either by col2im or,
// where measured faster, as a forward convolution with the flipped
// kernel. winograd.go runs the 3×3 stride-1 convolutions with 8 channels
// or more in and out (the U-Net's, the Fashion CNN's second) as Winograd
// F(2×2, 3×3), 2.25 times fewer multiplications, its transforms in C
// (internal/winograd) because a package with cgo cannot hold Go
// assembly. Elementwise loops (vec.go) avoid data-dependent branches —
// relu and max-pool comparisons are coin flips on real activations, and a
// branch-free max-pool ran 3× faster; the batchnorm and relu loops and
// the 2×2 max-pool have C twins in internal/cvec, the same bits,
// vectorised — and Adam runs in AVX2 assembly (adam_amd64.s),
// bit-identical to the scalar code.
//
// # Fusion, checkpointing and memory
//
// The plan's fusion groups become single kernels: conv (+bias) +
// batchnorm (+activation) writes the conv's output once, reduces it per
// channel and normalises and activates in one pass, keeping no tensor
// between batchnorm and activation; dense (+bias) + activation adds the
// bias as the product's initial value. Evaluation folds batchnorm into
// the conv's weights for the plan's folds. "elementwise" groups run op by
// op (each op is one pass already; the results are the same).
//
// schedule.go explains the working memory: every tensor of a step is a
// buffer with a lifetime over the step's events, packed into one arena
// allocated at Build. Checkpoint segments drop their internal outputs
// after the forward pass and recompute them before their backward, which
// shortens those lifetimes; the arena shrinks accordingly (a test checks
// that gradients are bit-identical and that memory is lower). Memory()
// reports the arena (allocated), the peak of live tensors (what the
// planner estimates), and runtime.MemStats's HeapInuse growth over Build
// and the first step as a process-level cross-check.
//
// # Numbers, determinism, errors
//
// Everything is float32; other precisions run as fp32 and Precision says
// so. The exception is inference in int8 (QuantizeInt8, int8.go and
// int8_gemm.go): a second model whose convs and dense layers multiply
// int8 weights and activations into int32 by AVX-512 VNNI. Every parallel loop is split statically and every reduction is
// summed in a fixed order, so the same seed and the same thread count give
// bit-identical losses; dropout's mask is a hash of (seed, node,
// micro-step, position), recomputed rather than stored. Against PyTorch
// 1.13 in float64 on the same weights and batch, this package's
// gradients agree to 5e-6 of their largest value (PyTorch's own float32
// CPU path, through oneDNN, to 5e-2 on the U-Net). A non-finite loss
// re-runs the forward pass with a check after each unit and names the
// first node whose output is not finite; bad batches and panics become
// errors at the API boundary.
//
// # Speed
//
// `make bench` compares this package's training step with PyTorch's on the
// same machine, in one run, with the networks built from the same graph
// and started from the same weights (bench/cmd/ratios). Nothing here states
// a speed of its own: timings on a shared machine move by 2× between
// minutes, and only ratios taken back to back mean anything.
package native
