package torch

import (
	"fmt"
	"strconv"
	"strings"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The torch engine's step on a GPU as named terms with their sources
// (cost.GPU): what the device shows while PyTorch trains, beside the
// caching allocator that packs them (cost_alloc.go). The planner finds
// the peak phase and solves for the batch; the libraries' constants and
// what this engine keeps (autocast copies, fused optimizers, two input
// batches in flight, DDP's buckets) are here, where the engine is.
// Derivation: docs/design/gpu-memory.md.

// Library constants.
const (
	// cublasWorkspace is PyTorch's default cuBLAS workspace per handle
	// and stream (aten/src/ATen/cuda/CublasHandlePool.cpp,
	// parseChosenWorkspaceSize: ":4096:2:16:8", 2 × 4096 KiB + 8 × 16 KiB),
	// and cublasWorkspaceHopper the 32 MiB it takes on compute
	// capabilities 9 to 12 (Hopper, Blackwell). Both come from the
	// caching allocator, at a handle's first cuBLAS call.
	cublasWorkspace       = 4096*1024*2 + 16*1024*8
	cublasWorkspaceHopper = 4096 * 8 * 1024
	// cublasHandles: the forward runs on the Python thread and the
	// backward on autograd's device thread, each with its own cuBLAS
	// handle and so its own workspace.
	cublasHandles = 2
	// cublasLtWorkspace is the workspace PyTorch's cuBLASLt matmuls
	// (addmm with a fused bias) allocate per call, CUBLASLT_WORKSPACE_SIZE's
	// default of 1024 KiB (aten/src/ATen/cuda/CUDABlas.cpp); torch 2.5 and
	// later reuse the cuBLAS workspace instead, so this is a bound.
	cublasLtWorkspace = 1 << 20
	// cudaContext is the CUDA context with lazy module loading (the
	// default from PyTorch 1.13 and CUDA 11.7): outside the allocator.
	cudaContext = 512 << 20
	// cudaContextHopper is what make gpu-smoke measured outside the
	// allocator on an H100 (bench/gpu/nvidia-h100-80gb-hbm3.json).
	cudaContextHopper = 841 << 20
	// ddpFirstBucket and ddpBucket: DDP's first gradient bucket is
	// capped at 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES), the others at
	// bucket_cap_mb, 25 MiB.
	ddpFirstBucket = 1 << 20
)

// contextOf is the CUDA context's bytes, source and basis per
// generation: measured on Hopper, a cited figure elsewhere.
func contextOf(capability string) (int64, string, string) {
	if capability == "9.0" {
		return cudaContextHopper, plan.SourceCalibration, "measured by make gpu-smoke on an H100 80GB HBM3 (PyTorch 2.11, CUDA 13.0): mem_get_info's used memory less " +
			"max_memory_reserved was 709 to 841 MiB over five models (bench/gpu/nvidia-h100-80gb-hbm3.json); the largest, so a bound for Hopper"
	}
	gen := map[string]string{"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.7": "Ampere", "8.9": "Ada"}[capability]
	if gen == "" {
		gen = "an unknown generation"
	}
	return cudaContext, plan.SourceConstant, fmt.Sprintf("bare context with lazy module loading (PyTorch >= 1.13, CUDA >= 11.7) reported at 287 MB (pytorch#86509) to about 400 MB (pytorch#109888), "+
		"rounded up to 512 MiB for the cuDNN and cuBLAS kernels a step loads; not measured by pipe on %s (on Hopper it measured 709 to 841 MiB): gpu-check prints used - reserved to calibrate it", gen)
}

// Terms implements cost.GPU: the step's terms at s's batch and kept
// activations; where the step runs as a CUDA graph, its transient terms
// in the graph's pool and the eager last batch beside it (graphPool).
func (gm *gpuTerms) Terms(s cost.GPUStep) []cost.Term {
	ts := gm.stepTerms(s)
	if on, _ := cudaGraph(gm.graphCase(s)); on {
		last, exact := lastBatch(gm.samples, gm.samplesExact, s.Batch)
		at := s
		at.Batch = last
		ts = graphPool(ts, gm.stepTerms(at), last, exact)
		var why string
		if s.Text {
			why = "batch × (inputs + targets), a third copy beside the input batches: the worker copies each batch into the tensors the graph was captured on (graphs.py's graph_in), allocated before capture in the general pool and kept"
		}
		ts = append(ts, cost.Term{Name: "CUDA graph static inputs", Bytes: cost.Mul(cost.Add(gm.inX, gm.inY), s.Batch),
			Sizes: []int64{cost.Mul(gm.inX, s.Batch), cost.Mul(gm.inY, s.Batch)}, Phases: cost.InAll, Source: plan.SourceFormula, Basis: why})
		ts = append(ts, cost.Term{Name: "CUDA graph private pool", Phases: cost.InAll, Source: plan.SourceFormula, Pool: cost.PoolCUDAGraph,
			Basis: graphPoolBasis(s.Text)})
	}
	return ts
}

// graphCase is the graph decision's case at step s.
func (gm *gpuTerms) graphCase(s cost.GPUStep) graphCase {
	return graphCase{torch: gm.torch, optimizer: gm.optimizer, world: gm.world, gan: gm.gan, gradScaler: gm.fp16,
		accumulate: s.Accumulate, recompute: s.Baseline > 0 && s.Act != s.Baseline, off: gm.graphOff}
}

// graphPoolBasis says how the pool is priced (no bytes of its own: the
// terms in pool "cuda graph" are its tensors).
func graphPoolBasis(text bool) string {
	if !text {
		return ""
	}
	return "0 beside the terms marked pool \"cuda graph\": captured, the step's tensors that live in some phases only come from the graph's private pool, " +
		"packed apart from the general pool and held whole, at the pool's own peak, in every phase while the graph lives (CUDACachingAllocator.cpp's private pools; " +
		"torch.cuda.graph's pool); the eager warm-up's blocks are released before capture (torch.cuda.empty_cache), so they are not held twice"
}

// stepTerms is the step's terms, eager.
func (gm *gpuTerms) stepTerms(s cost.GPUStep) []cost.Term {
	b, act, accum, text := s.Batch, s.Act, s.Accumulate, s.Text
	var ts []cost.Term
	say := func(format string, args ...any) string {
		if !text {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	put := func(name string, sizes []int64, ph uint8, source, basis string) {
		ts = append(ts, cost.Term{Name: name, Bytes: cost.Sum(sizes...), Sizes: sizes, Phases: ph, Source: source, Basis: basis})
	}
	ctx, ctxSource, ctxBasis := contextOf(gm.capability)
	ts = append(ts, cost.Term{Name: "CUDA context", Bytes: ctx, Phases: cost.InAll, Outside: true, Source: ctxSource, Basis: say("%s", ctxBasis)})

	w := scaled(gm.params, 4)
	if gm.mixed {
		put("fp32 master weights", w, cost.InAll, plan.SourceFormula, say("P × 4: under autocast the model's own fp32 parameters are the master weights the optimizer updates"))
		put("autocast weight copies", scaled(gm.lowp, 2), cost.InForward|cost.InBackward, plan.SourceFormula,
			say("P_matmul × 2: autocast's low-precision copies of the conv, dense and attention weights, cached for the forward and saved for the backward; the norms' parameters stay fp32"))
	} else {
		put("weights", w, cost.InAll, plan.SourceFormula, say("P × 4, fp32"))
	}
	gradPh := cost.InBackward | cost.InOptimizer
	gradWhy := "absent at the forward's end: the engine zeroes them with set_to_none"
	if accum {
		gradPh = cost.InAll
		gradWhy = "present at the forward's end too: micro-batches accumulate into them"
	}
	if gm.world > 1 {
		buckets := ddpBuckets(cost.Mul(gm.total, 4), gm.bucket)
		put("gradients", nil, gradPh, plan.SourceFormula, say("0 beside the buckets: gradient_as_bucket_view makes them views into DDP's buckets"))
		put("DDP gradient buckets", buckets, cost.InAll, plan.SourceFormula,
			say("P × 4 in %d buckets (the first 1 MiB, then %s each), allocated when DDP wraps the model and kept for the run", len(buckets), cost.FormatBytes(gm.bucket)))
	} else {
		put("gradients", w, gradPh, plan.SourceFormula, say("P × 4, fp32; %s; counted whole at the backward's peak (a bound)", gradWhy))
	}
	var state []int64
	for range gm.buffers {
		state = append(state, w...)
	}
	put("optimizer state", state, cost.InAll, plan.SourceFormula, say("P × 4 × %d buffers (%s)", gm.buffers, gm.optimizer))
	unfused := ""
	if fusedOptimizer(gm.optimizer) && !gm.fused {
		unfused = fmt.Sprintf(" (torch %s has no fused %s)", gm.torch, gm.optimizer)
	}
	switch {
	case gm.fused && gm.buffers == 2:
		put("optimizer temporaries", nil, cost.InOptimizer, plan.SourceFormula, say("0: the fused %s kernel updates in place (the foreach version would take P × 4 for sqrt(v) + eps)", gm.optimizer))
	case gm.fused && gm.buffers > 0:
		put("optimizer temporaries", nil, cost.InOptimizer, plan.SourceFormula, say("0: the fused %s kernel updates in place", gm.optimizer))
	case gm.buffers == 2:
		put("optimizer temporaries", w, cost.InOptimizer, plan.SourceFormula, say("P × 4: foreach %s's sqrt(v) + eps list (torch/optim: _multi_tensor_adam)%s", gm.optimizer, unfused))
	default:
		put("optimizer temporaries", nil, cost.InOptimizer, plan.SourceFormula, say("0: %s updates its parameters and buffers in place%s", gm.optimizer, unfused))
	}

	// Activations: the kept tensors per node, scaled to act when a
	// checkpoint plan keeps less than all of them.
	base := s.Baseline
	actSizes := scaled(s.PerNode, b)
	if act != base && base > 0 {
		for i, a := range s.PerNode {
			actSizes[i] = cost.Mul(b, int64(float64(a)*float64(act)/float64(base)))
		}
	}
	put("saved activations", actSizes, cost.InForward, plan.SourceFormula, say("batch × %s per sample kept for the backward (%s, after checkpointing), at the forward's end", cost.FormatBytes(act), savingRules(gm.compiled)))
	var savedB int64
	var grads []int64
	if act == base {
		savedB, grads = s.Saved, s.Grads
		put("saved activations (backward peak)", []int64{cost.Mul(savedB, b)}, cost.InBackward, plan.SourceFormula,
			say("batch × %s: what the nodes not yet visited still keep where the backward peaks", cost.FormatBytes(savedB)))
	} else {
		savedB, grads = act, s.MaxLiveGrads
		put("saved activations (backward peak)", []int64{cost.Mul(act, b)}, cost.InBackward, plan.SourceFormula,
			say("batch × %s: the checkpoint plan's peak, recomputed segments included (a bound)", cost.FormatBytes(act)))
	}
	put("activation gradients", scaled(grads, b), cost.InBackward, plan.SourceFormula,
		say("batch × %s: the activations' gradients alive where the backward peaks, those carried across skip connections included", cost.FormatBytes(cost.Sum(grads...))))

	batches := int64(1)
	if gm.pinned {
		batches = 2
	}
	var in []int64
	for range batches {
		in = append(in, cost.Mul(gm.inX, b), cost.Mul(gm.inY, b))
	}
	put("input batches", in, cost.InAll, plan.SourceFormula, say("%d × batch × %s of fp32 inputs and targets: the batch computing and the next, in flight on the copy stream", batches, cost.FormatBytes(cost.Add(gm.inX, gm.inY))))

	ws, wsWhy := cublasWorkspaceOf(gm.capability)
	if gm.blas {
		put("cuBLAS workspace", []int64{ws, ws}, cost.InAll, plan.SourceConstant,
			say("%d handles (the forward's thread, autograd's) × %s, %s, allocated by the first cuBLAS call on each and kept", cublasHandles, cost.FormatBytes(ws), wsWhy))
	} else {
		put("cuBLAS workspace", nil, cost.InAll, plan.SourceConstant,
			say("0: no layer of the network calls cuBLAS (convolutions run on cuDNN), and PyTorch allocates a handle's workspace at its first cuBLAS call (CublasHandlePool.cpp, setWorkspaceForHandle)"))
	}
	if gm.matmul {
		put("cuBLASLt workspace", []int64{cublasLtWorkspace}, cost.InForward|cost.InBackward, plan.SourceConstant,
			say("CUBLASLT_WORKSPACE_SIZE's default 1024 KiB per matmul with a fused bias (CUDABlas.cpp); torch >= 2.5 shares the cuBLAS one, so a bound"))
	}
	if len(gm.convWS) > 0 {
		ts = append(ts, gm.cudnnTerms(s)...)
	}
	switch {
	case !gm.compiled:
		put("Inductor autotuning buffer", nil, cost.InForward|cost.InBackward, plan.SourceFormula,
			say("0: torch %s has no torch.compile, so nothing is autotuned", gm.torch))
	case gm.l2 > 0:
		put("Inductor autotuning buffer", []int64{gm.l2}, cost.InForward|cost.InBackward, plan.SourceFormula,
			say("the device's L2 cache, %s: at the first compiled step Inductor autotunes each kernel with several configs as it first runs, "+
				"flushing L2 between trials with a buffer of the L2's size (torch/_inductor/runtime/benchmarking.py, InductorBenchmarker.benchmark_gpu); "+
				"it is freed after, and its segment stays reserved", cost.FormatBytes(gm.l2)))
	default:
		put("Inductor autotuning buffer", nil, cost.InForward|cost.InBackward, plan.SourceUnmodelled,
			say("unmodelled: Inductor's autotuning flushes L2 with a buffer of its size, and this device's L2 is not known"))
	}
	if gm.compiled {
		put("torch.compile", nil, cost.InAll, plan.SourceFormula,
			say("0 beside the saved activations, which follow AOTAutograd's min-cut partition (torch/_functorch/partitioners.py): a relu no conv or matmul reads in the backward keeps a 1-byte mask, or nothing after a batchnorm; %s; other ops keep eager's tensors (a bound)", poolSaying(gm.torch)))
	} else {
		put("torch.compile", nil, cost.InAll, plan.SourceFormula,
			say("0: torch %s has no torch.compile, so the step runs eager, whose saving rules the saved activations follow", gm.torch))
	}
	if gm.world > 1 {
		ts = append(ts, cost.Term{Name: "NCCL buffers", Phases: cost.InAll, Outside: true, Source: plan.SourceUnmodelled,
			Basis: say("unmodelled: NCCL's own channel buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer) are outside the allocator")})
	}
	return ts
}

// cublasWorkspaceOf is a cuBLAS handle's workspace on a device of the
// given compute capability, and why: parseChosenWorkspaceSize in
// CublasHandlePool.cpp.
func cublasWorkspaceOf(capability string) (int64, string) {
	m, _, _ := strings.Cut(capability, ".")
	if major, err := strconv.Atoi(m); err == nil && major >= 9 && major <= 12 {
		return cublasWorkspaceHopper, "PyTorch's 32 MiB default on compute capabilities 9 to 12 (CublasHandlePool.cpp, parseChosenWorkspaceSize)"
	}
	return cublasWorkspace, "PyTorch's default ':4096:2:16:8' (CublasHandlePool.cpp, parseChosenWorkspaceSize)"
}

// ddpBuckets splits g bytes of gradients as DDP does: a first bucket of
// at most 1 MiB, then buckets of at most bucket bytes.
func ddpBuckets(g, bucket int64) []int64 {
	var out []int64
	first := min(g, ddpFirstBucket)
	if first > 0 {
		out = append(out, first)
		g -= first
	}
	for g > 0 && bucket > 0 {
		k := min(g, bucket)
		out = append(out, k)
		g -= k
	}
	return out
}

// gpuTerms is what the GPU terms need of the graph and the plan.
type gpuTerms struct {
	capability string
	mixed      bool
	// params and lowp are the trainable parameters per node, and those
	// of the ops whose weights autocast casts; counts, not bytes. total
	// is all of them.
	params, lowp []int64
	total        int64
	buffers      int64
	optimizer    string
	fused        bool
	world        int
	bucket       int64
	pinned       bool
	matmul, blas bool
	// benchmark says the engine runs cudnn.benchmark (and sets
	// CUDNN_CONV_WSCAP_DBG to cudnnCap, 0 otherwise); channelsLast that it
	// lays 2-D activations out as NHWC (cudnnSetup).
	benchmark, channelsLast bool
	cudnnCap                int64
	// l2 is the device's L2 bytes (0: not known); torch is the torch the
	// terms are priced for, assumed when the worker's was not known
	// (gpuTorch); compiled says it has torch.compile (2.x), and fused that
	// it has the optimizer's fused kernel (fusedIn).
	l2       int64
	compiled bool
	torch    string
	assumed  bool
	// convWS is each convolution's workspaces (cost_cudnn.go).
	convWS []convWorkspace
	// inX and inY are one sample's input and target bytes.
	inX, inY int64
	// samples and samplesExact are the training set's size; gan and fp16
	// (loss scaling) what the CUDA graph decision reads beside the step.
	samples           int64
	samplesExact, gan bool
	fp16              bool
	// graphOff is why the workers keep graphs off (GPUSetup.GraphOff).
	graphOff string
}

// newGPUTerms reads g and the plan's choices for the terms; torch is the
// worker's torch version, "" when not known.
func newGPUTerms(g *stdlib.Graph, prec plan.Precision, s cost.GPUSetup, torch string) *gpuTerms {
	torch, assumed := gpuTorch(torch)
	gm := &gpuTerms{capability: s.Capability, mixed: prec.Mixed, buffers: s.StateBuffers, optimizer: s.Optimizer,
		fused: fusedOptimizer(s.Optimizer) && fusedIn(s.Optimizer, torch), world: max(s.World, 1), pinned: true, total: g.Params(), inY: s.TargetBytes,
		l2: s.L2, torch: torch, assumed: assumed, compiled: torchMajor(torch) >= 2,
		samples: s.Samples, samplesExact: s.SamplesExact, gan: s.GAN, fp16: prec.Compute == "fp16", graphOff: s.GraphOff}
	if gm.world > 1 {
		gm.bucket = min(25<<20, max(cost.Mul(gm.total, 4), 1<<20))
	}
	for _, nd := range g.Nodes {
		if nd.Params > 0 {
			gm.params = append(gm.params, nd.Params)
			if torchOps[nd.Op].lowp {
				gm.lowp = append(gm.lowp, nd.Params)
			}
		}
		gm.matmul = gm.matmul || torchOps[nd.Op].matmul
		gm.blas = gm.blas || torchOps[nd.Op].blas
		if nd.Op == "input" {
			gm.inX = cost.Add(gm.inX, cost.Mul(cost.Numel(nd.Out), 4))
		}
	}
	elem := int64(4)
	if gm.mixed {
		elem = 2
	}
	gm.channelsLast, gm.benchmark = cudnnSetup(g)
	if gm.benchmark {
		gm.cudnnCap = CudnnWorkspaceLimit
	}
	gm.convWS = convWorkspaces(g, elem, gm.channelsLast)
	return gm
}

func scaled(xs []int64, k int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = cost.Mul(x, k)
	}
	return out
}
