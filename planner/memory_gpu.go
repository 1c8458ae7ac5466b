package planner

import (
	"slices"

	"pipe/planner/cost"
	"pipe/planner/plan"
)

// The GPU memory model: what the device shows while the torch engine
// trains. The engine lists its step's terms (cost.GPU, beside its
// kernels); here each phase's live tensors are packed through its
// caching-allocator model (cost.Allocator), the peak phase is found, and
// maxBatch solves the linear parts, then bisects on the whole total,
// since the allocator's rounding only grows with the batch.
// Derivation: docs/design/gpu-memory.md.

// gpuModel is what the planner keeps for the GPU terms beside the
// engine's list of them.
type gpuModel struct {
	eng cost.GPU
	// effective is the per-device effective batch, 0 without one:
	// micro-batches accumulate when it is not the batch.
	effective int64
	// act is each node's kept bytes per sample (costModel.perNode).
	act  []int64
	walk backwardWalk
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

// newGPUModel adds the GPU terms of the engine's cost model (eng, nil
// when it prices none) to m, a costModel for a GPU.
func newGPUModel(m *costModel, eng cost.GPU) {
	if eng == nil || m.alloc == nil {
		return
	}
	m.gpu = &gpuModel{eng: eng, act: m.perNode, walk: walkBackward(m.ch)}
}

var phaseNames = []string{plan.PhaseForward, plan.PhaseBackward, plan.PhaseOptimizer}

// terms asks the engine for its terms at batch b with act bytes of kept
// activations per sample; text fills the bases (the solver does without
// them). accum says the micro-batches accumulate (gm.accumulates).
func (gm *gpuModel) terms(m *costModel, b, act int64, accum, text bool) []cost.Term {
	s := cost.GPUStep{Batch: b, Act: act, Baseline: m.baseline, PerNode: gm.act, Accumulate: accum, Text: text}
	s.MaxLiveGrads = gm.walk.maxLiveSizes
	if act == m.baseline {
		s.Saved, s.Grads = gm.walk.saved, gm.walk.grads
	}
	return gm.eng.Terms(s)
}

// accumulates says whether micro-batches of b accumulate into the
// gradients: an effective batch other than b (the batch divides it).
func (gm *gpuModel) accumulates(b int64) bool { return gm.effective > 0 && gm.effective != b }

// gpuPhase is one phase's figures while they are computed.
type gpuPhase struct {
	raw, allocated, reserved, device int64
	// apart is what the terms of the phase count twice: of the private
	// pools' tensors and the Apart terms', never allocated at once, the
	// side not counted in allocated.
	apart int64
}

// phases prices the three phases of the terms. A private pool's terms
// (cost.Term.Pool) are packed apart from the general pool's, and the pool
// keeps its segments in every phase at its own peak. Apart terms (an
// eager step between a graph's replays) reserve beside the held pools,
// but are allocated only while the pools' other tensors are not: a
// phase's allocated memory is the general pool's own plus the larger of
// the private pools' and the Apart terms'.
func phases(alloc cost.Allocator, ts []cost.Term) [3]gpuPhase {
	var out [3]gpuPhase
	held := map[string]int64{}
	for p := range out {
		sizes := map[string][]int64{}
		var own, apart []int64
		var outside, pooledRaw, apartRaw int64
		for _, t := range ts {
			if t.Phases&(1<<p) == 0 {
				continue
			}
			switch {
			case t.Outside:
				outside = add(outside, t.Bytes)
			case t.Apart:
				apartRaw = add(apartRaw, t.Bytes)
				apart = append(apart, t.Sizes...)
				if t.Pool == "" {
					sizes[""] = append(sizes[""], t.Sizes...)
				}
			default:
				if t.Pool == "" {
					own = append(own, t.Sizes...)
					out[p].raw = add(out[p].raw, t.Bytes)
				} else {
					pooledRaw = add(pooledRaw, t.Bytes)
				}
				sizes[t.Pool] = append(sizes[t.Pool], t.Sizes...)
			}
		}
		var pooled int64
		for pool, ss := range sizes {
			a, r := alloc.Reserve(ss)
			if pool == "" {
				out[p].reserved = add(out[p].reserved, r)
				continue
			}
			pooled = add(pooled, a)
			held[pool] = max(held[pool], r)
		}
		a, _ := alloc.Reserve(own)
		out[p].apart = apartRaw
		if b, _ := alloc.Reserve(apart); b > pooled {
			pooled, pooledRaw, out[p].apart = b, apartRaw, pooledRaw
		}
		out[p].allocated = add(a, pooled)
		out[p].raw = add(out[p].raw, pooledRaw)
		out[p].device = outside
	}
	for p := range out {
		for _, r := range held {
			out[p].reserved = add(out[p].reserved, r)
		}
		out[p].device = add(out[p].device, out[p].reserved)
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
// A capped term is not linear: at b > 0 it counts as fixed at its size
// at batch b; at b = 0 it is left out, which keeps maxBatch's bound one.
func (gm *gpuModel) linear(m *costModel, act int64, accum bool, b int64) (fixed, per [3]int64) {
	t0, t1 := gm.terms(m, 0, act, accum, false), gm.terms(m, 1, act, accum, false)
	var tb []cost.Term
	if b > 0 {
		tb = gm.terms(m, b, act, accum, false)
	}
	for p := range 3 {
		var a, c int64
		for i := range t0 {
			if t0[i].Phases&(1<<p) == 0 {
				continue
			}
			if t0[i].Capped {
				if b > 0 {
					a, c = add(a, tb[i].Bytes), add(c, tb[i].Bytes)
				}
				continue
			}
			a, c = add(a, t0[i].Bytes), add(c, t1[i].Bytes)
		}
		fixed[p], per[p] = a, sub(c, a)
	}
	return fixed, per
}

// maxBatch is the largest batch whose total fits budget: the bound of the
// linear parts, then a bisection below it with the allocator's rounding.
// The bound leaves the accumulated gradients out, so that it is one.
func (gm *gpuModel) maxBatch(m *costModel, budget, act int64) int64 {
	fixed, per := gm.linear(m, act, false, 0)
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
	fixed, per := gm.linear(m, m.baseline, accum, b)
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
				other = sub(other, sum(gm.walk.grads...))
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
			if t.Phases&(1<<p) != 0 {
				names = append(names, phaseNames[p])
			}
		}
		mem.Terms = append(mem.Terms, plan.MemoryTerm{Name: t.Name, Bytes: t.Bytes, Source: t.Source, Basis: t.Basis, Phases: names, Outside: t.Outside, Pool: t.Pool, Apart: t.Apart})
		switch t.Name {
		case "cuBLAS workspace", "cuBLASLt workspace", "cuDNN workspace (forward)", "cuDNN workspace (backward)", "optimizer temporaries", "Inductor autotuning buffer":
			ws = add(ws, t.Bytes)
		case "activation gradients":
			mem.ActivationGradients = t.Bytes
		case "input batches":
			mem.Input = t.Bytes
		case "DDP gradient buckets":
			mem.Gradients = t.Bytes
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
		mem.Phases = append(mem.Phases, plan.MemoryPhase{Name: phaseNames[p], Allocated: ps[p].allocated, Reserved: ps[p].reserved, Device: ps[p].device, NotAtOnce: ps[p].apart})
	}
	mem.PeakPhase = phaseNames[k]
	mem.Workspace = ws
	mem.Total = pk.device
}
