package planner

import (
	"fmt"
	"slices"
	"strings"

	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The GPU memory model: what the device shows while the torch engine
// trains, as named terms with their sources (plan.MemoryTerm).
//
// A step has three phases (the end of the forward pass, the backward
// pass's peak, the optimizer step) and the peak is the largest, never
// their sum. Each phase's live tensors are packed through the torch
// engine's caching-allocator model (cost.Allocator); the total adds the
// CUDA context. maxBatch solves the linear parts, then bisects on the
// whole total, since the allocator's rounding only grows with the batch.
// Derivation: docs/design/gpu-memory.md.

// Library constants.
const (
	// cublasWorkspace is PyTorch's default cuBLAS workspace per handle
	// and stream (aten/src/ATen/cuda/CublasHandlePool.cpp,
	// parseChosenWorkspaceSize: ":4096:2:16:8", 2 × 4096 KiB + 8 × 16 KiB),
	// and cublasWorkspaceHopper the 32 MiB it takes on compute
	// capability 9.0. Both come from the caching allocator.
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
	// CudnnWorkspaceLimit caps the workspace cuDNN may take for one
	// convolution; the torch engine passes it as CUDNN_CONV_WSCAP_DBG
	// (in MiB, PyTorch's documented CUDA environment variable), so that
	// cudnn.benchmark's trials cannot reserve more.
	CudnnWorkspaceLimit = 1 << 30
	// cudaContext is the CUDA context with lazy module loading (the
	// default from PyTorch 1.13 and CUDA 11.7): outside the allocator.
	cudaContext = 512 << 20
	// ddpFirstBucket and ddpBucket: DDP's first gradient bucket is
	// capped at 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES), the others at
	// bucket_cap_mb, 25 MiB.
	ddpFirstBucket = 1 << 20
)

// contextBasis says where cudaContext comes from, per generation: no
// generation has a figure of its own that pipe can cite, so they share
// one, said so.
func contextBasis(capability string) string {
	gen := map[string]string{"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.7": "Ampere", "8.9": "Ada", "9.0": "Hopper"}[capability]
	if gen == "" {
		gen = "an unknown generation"
	}
	return fmt.Sprintf("bare context with lazy module loading (PyTorch >= 1.13, CUDA >= 11.7) reported at 287 MB (pytorch#86509) to about 400 MB (pytorch#109888), "+
		"rounded up to 512 MiB for the cuDNN and cuBLAS kernels a step loads; the same figure for every generation (here %s), none measured by pipe yet: gpu-check prints used - reserved to calibrate it", gen)
}

// gpuModel is what the GPU terms need beyond costModel's chain.
type gpuModel struct {
	capability string
	mixed      bool
	// params and lowp are the trainable parameters per node, and those
	// of the matmul ops autocast casts; counts, not bytes.
	params, lowp []int64
	buffers      int64
	optimizer    string
	fused        bool
	world        int
	bucket       int64
	pinned       bool
	conv, matmul bool
	// effective is the per-device effective batch, 0 without one:
	// micro-batches accumulate when it is not the batch.
	effective int64
	// act is each node's kept bytes per sample (costModel.perNode).
	act []int64
	// inX and inY are one sample's input and target bytes.
	inX, inY int64
	walk     backwardWalk
}

// backwardWalk is the backward pass's peak per sample without
// checkpointing: the saved activations still to be read and the
// activations' gradients alive at the node where their sum is largest
// (grads lists those gradients' sizes); maxLive is the most activation
// gradient bytes alive at any node, and maxLiveSizes their sizes.
type backwardWalk struct {
	saved        int64
	grads        []int64
	maxLive      int64
	maxLiveSizes []int64
}

// walkBackward visits the nodes from the last to the first as autograd
// does. At node i the saved tensors of the nodes before it are alive
// (and i's own private buffers), and the gradient of every node j <= i
// whose last reader is at or after i: born when that reader's backward
// ran, freed once j's own backward is done. Inputs have no gradient.
func walkBackward(c *chain) backwardWalk {
	n := c.n()
	before := make([]int64, n+1) // Σ stored(k) for k < i
	for i := range n {
		before[i+1] = add(before[i], c.stored(i))
	}
	alive := map[int]int64{}
	var live int64
	born := func(j int) {
		if j >= 0 && j < n && !c.fixed[j] && c.out[j] > 0 {
			if _, ok := alive[j]; !ok {
				alive[j] = c.out[j]
				live = add(live, c.out[j])
			}
		}
	}
	for j, r := range c.last {
		if r >= n {
			born(j) // the model's output: the loss's gradient
		}
	}
	var w backwardWalk
	var peak int64 = -1
	for i := n - 1; i >= 0; i-- {
		if c.fixed[i] {
			continue
		}
		for _, j := range c.endsAt[i] {
			born(j)
		}
		if live > w.maxLive {
			w.maxLive, w.maxLiveSizes = live, sizesOf(alive)
		}
		if s := add(add(before[i], c.priv[i]), live); s > peak {
			peak = s
			w.saved, w.grads = add(before[i], c.priv[i]), sizesOf(alive)
		}
		if b, ok := alive[i]; ok {
			live -= b
			delete(alive, i)
		}
	}
	return w
}

func sizesOf(m map[int]int64) []int64 {
	out := make([]int64, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// fusedOptimizer says whether the torch engine uses the fused kernel for
// an optimizer (engineDecisions says so with its reason).
func fusedOptimizer(kind string) bool { return kind == "adam" || kind == "adamw" }

// hasConv says whether g has convolutions (channels_last, cudnn.benchmark).
func hasConv(g *stdlib.Graph) bool {
	for _, n := range g.Nodes {
		if n.Op == "conv" || n.Op == "convtranspose" {
			return true
		}
	}
	return false
}

// newGPUModel adds the GPU terms' facts to m, a costModel for a GPU.
func newGPUModel(m *costModel, g *stdlib.Graph, dev plan.Device, prec plan.Precision, opt plan.Optimizer, d plan.Distributed, targetBytes int64) {
	gm := &gpuModel{capability: dev.Capability, mixed: prec.Mixed, buffers: int64(opt.StateBuffers), optimizer: opt.Kind,
		fused: fusedOptimizer(opt.Kind), world: max(d.WorldSize, 1), pinned: true, conv: hasConv(g), act: m.perNode, inY: targetBytes}
	if gm.world > 1 {
		gm.bucket = min(25<<20, max(mul(m.params, 4), 1<<20))
	}
	for _, nd := range g.Nodes {
		if nd.Params > 0 {
			gm.params = append(gm.params, nd.Params)
			if matmulOps[nd.Op] {
				gm.lowp = append(gm.lowp, nd.Params)
			}
		}
		if nd.Op == "dense" || nd.Op == "lowrank_dense" || nd.Op == "attention" || nd.Op == "random_attention" {
			gm.matmul = true
		}
		if nd.Op == "input" {
			gm.inX = add(gm.inX, mul(numel(nd.Out), 4))
		}
	}
	gm.walk = walkBackward(m.ch)
	m.gpu = gm
}

// gpuTerm is a term while it is computed: its tensors' sizes, for the
// allocator, and the phases it is live in (a bit each).
type gpuTerm struct {
	name          string
	bytes         int64
	sizes         []int64
	phases        uint8
	outside       bool
	source, basis string
}

const (
	inForward uint8 = 1 << iota
	inBackward
	inOptimizer
	inAll = inForward | inBackward | inOptimizer
)

var phaseNames = []string{plan.PhaseForward, plan.PhaseBackward, plan.PhaseOptimizer}

func scaled(xs []int64, k int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = mul(x, k)
	}
	return out
}

func total64(xs []int64) int64 { return sum(xs...) }

// terms lists the GPU terms at batch b with act bytes of kept activations
// per sample; text fills the bases (the solver does without them).
//
// accum says the micro-batches accumulate, so the gradients are alive at
// the forward's end (gm.accumulates).
func (gm *gpuModel) terms(m *costModel, b, act int64, accum, text bool) []gpuTerm {
	var ts []gpuTerm
	say := func(format string, args ...any) string {
		if !text {
			return ""
		}
		return fmt.Sprintf(format, args...)
	}
	put := func(name string, sizes []int64, ph uint8, source, basis string) {
		ts = append(ts, gpuTerm{name: name, bytes: total64(sizes), sizes: sizes, phases: ph, source: source, basis: basis})
	}
	ts = append(ts, gpuTerm{name: "CUDA context", bytes: cudaContext, phases: inAll, outside: true, source: plan.SourceConstant,
		basis: say("%s", contextBasis(gm.capability))})

	w := scaled(gm.params, 4)
	if gm.mixed {
		put("fp32 master weights", w, inAll, plan.SourceFormula, say("P × 4: under autocast the model's own fp32 parameters are the master weights the optimizer updates"))
		put("autocast weight copies", scaled(gm.lowp, 2), inForward|inBackward, plan.SourceFormula,
			say("P_matmul × 2: autocast's low-precision copies of the conv, dense and attention weights, cached for the forward and saved for the backward; the norms' parameters stay fp32"))
	} else {
		put("weights", w, inAll, plan.SourceFormula, say("P × 4, fp32"))
	}
	gradPh := inBackward | inOptimizer
	gradWhy := "absent at the forward's end: the engine zeroes them with set_to_none"
	if accum {
		gradPh = inAll
		gradWhy = "present at the forward's end too: micro-batches accumulate into them"
	}
	if gm.world > 1 {
		buckets := ddpBuckets(mul(m.params, 4), gm.bucket)
		put("gradients", nil, gradPh, plan.SourceFormula, say("0 beside the buckets: gradient_as_bucket_view makes them views into DDP's buckets"))
		put("DDP gradient buckets", buckets, inAll, plan.SourceFormula,
			say("P × 4 in %d buckets (the first 1 MiB, then %s each), allocated when DDP wraps the model and kept for the run", len(buckets), FormatBytes(gm.bucket)))
	} else {
		put("gradients", w, gradPh, plan.SourceFormula, say("P × 4, fp32; %s; counted whole at the backward's peak (a bound)", gradWhy))
	}
	var state []int64
	for range gm.buffers {
		state = append(state, w...)
	}
	put("optimizer state", state, inAll, plan.SourceFormula, say("P × 4 × %d buffers (%s)", gm.buffers, gm.optimizer))
	switch {
	case gm.fused && gm.buffers > 0:
		put("optimizer temporaries", nil, inOptimizer, plan.SourceFormula, say("0: the fused %s kernel updates in place (the foreach version would take P × 4 for sqrt(v) + eps)", gm.optimizer))
	case gm.buffers == 2:
		put("optimizer temporaries", w, inOptimizer, plan.SourceFormula, say("P × 4: foreach %s's sqrt(v) + eps list (torch/optim: _multi_tensor_adam)", gm.optimizer))
	default:
		put("optimizer temporaries", nil, inOptimizer, plan.SourceFormula, say("0: %s updates its parameters and buffers in place", gm.optimizer))
	}

	// Activations: the kept tensors per node, scaled to act when a
	// checkpoint plan keeps less than all of them.
	base := m.baseline
	actSizes := scaled(gm.act, b)
	if act != base && base > 0 {
		for i, s := range gm.act {
			actSizes[i] = mul(b, int64(float64(s)*float64(act)/float64(base)))
		}
	}
	put("saved activations", actSizes, inForward, plan.SourceFormula, say("batch × %s per sample kept for the backward (stdlib's saving rules, after checkpointing), at the forward's end", FormatBytes(act)))
	var savedB int64
	var grads []int64
	if act == base {
		savedB, grads = gm.walk.saved, gm.walk.grads
		put("saved activations (backward peak)", []int64{mul(savedB, b)}, inBackward, plan.SourceFormula,
			say("batch × %s: what the nodes not yet visited still keep where the backward peaks", FormatBytes(savedB)))
	} else {
		savedB, grads = act, gm.walk.maxLiveSizes
		put("saved activations (backward peak)", []int64{mul(act, b)}, inBackward, plan.SourceFormula,
			say("batch × %s: the checkpoint plan's peak, recomputed segments included (a bound)", FormatBytes(act)))
	}
	put("activation gradients", scaled(grads, b), inBackward, plan.SourceFormula,
		say("batch × %s: the activations' gradients alive where the backward peaks, those carried across skip connections included", FormatBytes(total64(grads))))

	batches := int64(1)
	if gm.pinned {
		batches = 2
	}
	var in []int64
	for range batches {
		in = append(in, mul(gm.inX, b), mul(gm.inY, b))
	}
	put("input batches", in, inAll, plan.SourceFormula, say("%d × batch × %s of fp32 inputs and targets: the batch computing and the next, in flight on the copy stream", batches, FormatBytes(add(gm.inX, gm.inY))))

	ws, wsWhy := int64(cublasWorkspace), "PyTorch's default ':4096:2:16:8' (CublasHandlePool.cpp)"
	if strings.HasPrefix(gm.capability, "9.") {
		ws, wsWhy = cublasWorkspaceHopper, "PyTorch's 32 MiB default on compute capability 9.0 (CublasHandlePool.cpp)"
	}
	put("cuBLAS workspace", []int64{ws, ws}, inAll, plan.SourceConstant,
		say("%d handles (the forward's thread, autograd's) × %s, %s", cublasHandles, FormatBytes(ws), wsWhy))
	if gm.matmul {
		put("cuBLASLt workspace", []int64{cublasLtWorkspace}, inForward|inBackward, plan.SourceConstant,
			say("CUBLASLT_WORKSPACE_SIZE's default 1024 KiB per matmul with a fused bias (CUDABlas.cpp); torch >= 2.5 shares the cuBLAS one, so a bound"))
	}
	if gm.conv {
		put("cuDNN workspace", []int64{CudnnWorkspaceLimit}, inForward|inBackward, plan.SourceConstant,
			say("cudnn.benchmark's trials and the chosen algorithms, capped at %s by CUDNN_CONV_WSCAP_DBG, which the engine sets; a bound", FormatBytes(CudnnWorkspaceLimit)))
	}
	put("torch.compile", nil, inAll, plan.SourceUnmodelled,
		say("unmodelled: Inductor's fused kernels may keep fewer activations and its autotuning may take workspace; gpu-check's measure shows it where compile runs"))
	if gm.world > 1 {
		ts = append(ts, gpuTerm{name: "NCCL buffers", phases: inAll, outside: true, source: plan.SourceUnmodelled,
			basis: say("unmodelled: NCCL's own channel buffers (NCCL_BUFFSIZE, 4 MiB per channel and peer) are outside the allocator")})
	}
	return ts
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

// accumulates says whether micro-batches of b accumulate into the
// gradients: an effective batch other than b (the batch divides it).
func (gm *gpuModel) accumulates(b int64) bool { return gm.effective > 0 && gm.effective != b }

// gpuPhase is one phase's figures while they are computed.
type gpuPhase struct {
	raw, allocated, reserved, device int64
}

// phases prices the three phases of the terms.
func phases(alloc cost.Allocator, ts []gpuTerm) [3]gpuPhase {
	var out [3]gpuPhase
	for p := range out {
		var sizes []int64
		var outside int64
		for _, t := range ts {
			if t.phases&(1<<p) == 0 {
				continue
			}
			if t.outside {
				outside = add(outside, t.bytes)
				continue
			}
			out[p].raw = add(out[p].raw, t.bytes)
			sizes = append(sizes, t.sizes...)
		}
		out[p].allocated, out[p].reserved = alloc.Reserve(sizes)
		out[p].device = add(out[p].reserved, outside)
	}
	return out
}

// peakOf is the index of the largest phase (the first of equals).
func peakOf(ps [3]gpuPhase) int {
	k := 0
	for p := range ps {
		if ps[p].device > ps[k].device {
			k = p
		}
	}
	return k
}

// total is what the device shows at the step's peak, at batch b with act
// bytes of kept activations per sample.
func (gm *gpuModel) total(m *costModel, b, act int64) int64 {
	ps := phases(m.alloc, gm.terms(m, b, act, gm.accumulates(b), false))
	return ps[peakOf(ps)].device
}

// linear returns each phase's device memory at batch 0 and per sample,
// without the allocator's rounding: the parts the solver can divide by.
func (gm *gpuModel) linear(m *costModel, act int64, accum bool) (fixed, per [3]int64) {
	t0, t1 := gm.terms(m, 0, act, accum, false), gm.terms(m, 1, act, accum, false)
	for p := range 3 {
		var a, c int64
		for i := range t0 {
			if t0[i].phases&(1<<p) != 0 {
				a, c = add(a, t0[i].bytes), add(c, t1[i].bytes)
			}
		}
		fixed[p], per[p] = a, sub(c, a)
	}
	return fixed, per
}

// maxBatch is the largest batch whose total fits budget: the bound of the
// linear parts, then a bisection below it with the allocator's rounding.
// The bound leaves the accumulated gradients out, so that it is one.
func (gm *gpuModel) maxBatch(m *costModel, budget, act int64) int64 {
	fixed, per := gm.linear(m, act, false)
	hi := int64(sat)
	for p := range 3 {
		if fixed[p] > budget {
			return 0
		}
		if per[p] > 0 {
			hi = min(hi, (budget-fixed[p])/per[p])
		}
	}
	hi = min(hi, plan.MaxBatch)
	if hi < 1 || gm.total(m, 1, act) > budget {
		return 0
	}
	lo := int64(1)
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if gm.total(m, mid, act) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// actBudget is the most kept activations per sample at batch b that
// leaves every phase within budget; the rounding is the one at the
// activations without checkpointing, a bound for any plan that keeps
// less.
func (gm *gpuModel) actBudget(m *costModel, budget, b int64) int64 {
	if b <= 0 {
		return -1
	}
	accum := gm.accumulates(b)
	full := phases(m.alloc, gm.terms(m, b, m.baseline, accum, false))
	fixed, per := gm.linear(m, m.baseline, accum)
	best := int64(sat)
	for p := range 3 {
		room := budget - (full[p].reserved - full[p].raw) - fixed[p]
		if room < 0 {
			return -1
		}
		// What the phase holds per sample beside the kept activations.
		other := per[p]
		if p != 2 {
			if p == 0 {
				other = sub(other, m.baseline)
			} else {
				other = add(sub(other, gm.walk.saved), gm.walk.maxLive)
				other = sub(other, total64(gm.walk.grads))
			}
			best = min(best, room/b-other)
		} else if room/b < other {
			return -1
		}
	}
	return best
}

// memory fills mem's GPU terms and phases at batch b.
func (gm *gpuModel) memory(m *costModel, mem *plan.Memory, b, act int64) {
	ts := gm.terms(m, b, act, gm.accumulates(b), true)
	ps := phases(m.alloc, ts)
	k := peakOf(ps)
	mem.Terms = mem.Terms[:0]
	var ws int64
	for _, t := range ts {
		var names []string
		for p := range 3 {
			if t.phases&(1<<p) != 0 {
				names = append(names, phaseNames[p])
			}
		}
		mem.Terms = append(mem.Terms, plan.MemoryTerm{Name: t.name, Bytes: t.bytes, Source: t.source, Basis: t.basis, Phases: names, Outside: t.outside})
		switch t.name {
		case "cuBLAS workspace", "cuBLASLt workspace", "cuDNN workspace", "optimizer temporaries":
			ws = add(ws, t.bytes)
		case "activation gradients":
			mem.ActivationGradients = t.bytes
		case "input batches":
			mem.Input = t.bytes
		case "DDP gradient buckets":
			mem.Gradients = t.bytes
		}
	}
	pk := ps[k]
	at := []string{phaseNames[k]}
	mem.Terms = append(mem.Terms,
		plan.MemoryTerm{Name: "allocator: 512-byte rounding", Bytes: pk.allocated - pk.raw, Source: plan.SourceFormula, Phases: at,
			Basis: "every tensor of the peak phase rounded up to 512 bytes (round_size, kMinBlockSize)"},
		plan.MemoryTerm{Name: "allocator: reserved - allocated", Bytes: pk.reserved - pk.allocated, Source: plan.SourceFormula, Phases: at,
			Basis: "the peak phase's blocks packed into segments: up to 1 MiB in 2 MiB blocks, 1 to 10 MiB in 20 MiB segments, larger ones rounded to 2 MiB; fragmentation beyond that perfect reuse is unmodelled"})
	mem.Phases = mem.Phases[:0]
	for p := range 3 {
		mem.Phases = append(mem.Phases, plan.MemoryPhase{Name: phaseNames[p], Allocated: ps[p].allocated, Reserved: ps[p].reserved, Device: ps[p].device})
	}
	mem.PeakPhase = phaseNames[k]
	mem.Workspace = ws
	mem.Total = pk.device
}
