package native

import (
	"pipe/planner/cost"
	"pipe/stdlib"
)

// words is a buffer's size in float32 values: per sample, and fixed.
type words struct{ per, fixed int64 }

// costUnit is one kernel of a step as the cost model sees it: a node or a
// fusion group, placed at its last node, with what its kernel keeps
// (saveIn, saveOut, aux), its temporaries, and one worker's scratch (col,
// part: see convGeom.workerScratch).
type costUnit struct {
	nodes   []*stdlib.Node
	ins     []int // unit indices
	out     int64 // output values per sample
	saveIn  []bool
	saveOut bool
	aux     []words
	tmpF    []words
	tmpB    []words
	reqGrad bool
	needDin []bool
	skipBwd bool // the loss differentiates through this unit
	params  bool
	col     int64
	part    int64
	wino    bool // a convolution the kernels run as Winograd (F(2×2) or F(4×4))
	kernel  bool // priced by its kernel (else by stdlib's rule)
}

// costArena is a graph's step as Build would lay it out (cost.Arena).
type costArena struct {
	units   []*costUnit
	outUnit int
	through bool // the loss reads the logits before a final softmax or sigmoid
	threads int
}

var _ cost.Arena = (*costArena)(nil)

// newCostArena compiles g into units as makeUnits does, with the fusion
// groups this engine fuses (fusedKinds; a final softmax or sigmoid the
// loss differentiates through leaves its group) and the nodes the
// output depends on.
func newCostArena(g *stdlib.Graph, s cost.Setup) *costArena {
	a := &costArena{threads: max(s.Threads, 1)}
	n := len(g.Nodes)
	loss := s.Loss
	groupOf := make(map[int][]int)
	for _, fg := range s.Fusion {
		ids := fg.IDs
		if !fusedKinds[fg.Kind] || len(ids) < 2 {
			continue
		}
		last := g.Nodes[ids[len(ids)-1]]
		if last.ID == g.Output && ((loss == "bce" && last.Op == "sigmoid") || (loss == "cross_entropy" && last.Op == "softmax")) {
			ids = ids[:len(ids)-1]
			if len(ids) < 2 {
				continue
			}
		}
		for _, id := range ids {
			groupOf[id] = ids
		}
	}
	live := make([]bool, n)
	if g.Output >= 0 && g.Output < n {
		live[g.Output] = true
	}
	for i := n - 1; i >= 0; i-- {
		if live[i] {
			for _, j := range g.Nodes[i].Inputs {
				live[j] = true
			}
		}
	}
	live[0] = true
	nodeUnit := make([]int, n)
	for i := range nodeUnit {
		nodeUnit[i] = -1
	}
	for _, nd := range g.Nodes {
		if !live[nd.ID] {
			continue
		}
		ids := groupOf[nd.ID]
		if ids != nil && ids[len(ids)-1] != nd.ID {
			continue
		}
		if ids == nil {
			ids = []int{nd.ID}
		}
		u := &costUnit{out: cost.Numel(nd.Out)}
		for _, id := range ids {
			u.nodes = append(u.nodes, g.Nodes[id])
		}
		for _, j := range u.nodes[0].Inputs {
			if j >= 0 && j < n && nodeUnit[j] >= 0 {
				u.ins = append(u.ins, nodeUnit[j])
			}
		}
		nodeUnit[nd.ID] = len(a.units)
		a.units = append(a.units, u)
	}
	probe := &model{} // registers parameters, allocates nothing
	for i, u := range a.units {
		u.spec(probe, a.kernelUnit(i))
	}
	if g.Output >= 0 && g.Output < n {
		a.outUnit = max(nodeUnit[g.Output], 0)
	}
	for _, u := range a.units {
		u.reqGrad = u.params
		u.needDin = make([]bool, len(u.ins))
		for k, j := range u.ins {
			if a.units[j].reqGrad {
				u.reqGrad, u.needDin[k] = true, true
			}
		}
	}
	out := a.units[a.outUnit]
	if len(out.nodes) == 1 && len(out.ins) == 1 {
		op := out.nodes[0].Op
		a.through = (loss == "cross_entropy" && op == "softmax") || (loss == "bce" && op == "sigmoid")
	}
	if a.through {
		out.skipBwd = true
	}
	return a
}

// kernelUnit is unit i as makeUnits makes it, for kernelFor; nil when a
// layout is one the engine does not run or a size is beyond what its
// kernels' int arithmetic holds (fits).
func (a *costArena) kernelUnit(i int) *unit {
	u := a.units[i]
	for _, nd := range u.nodes {
		if !fits(nd) {
			return nil
		}
	}
	out, ok := layoutOf(u.nodes[len(u.nodes)-1].Out)
	if !ok {
		return nil
	}
	ku := &unit{idx: i, nodes: u.nodes, ins: u.ins, out: out, seg: -1}
	for _, j := range u.ins {
		l, ok := layoutOf(a.units[j].nodes[len(a.units[j].nodes)-1].Out)
		if !ok {
			return nil
		}
		ku.in = append(ku.in, l)
	}
	return ku
}

// fits says a node's sizes leave the kernels' int arithmetic room to
// multiply (a dimension up to 2^20, a tensor up to 2^31 values, 2^36
// parameters): a larger graph cannot run here, and is priced by stdlib's
// rule with saturating sizes.
func fits(nd *stdlib.Node) bool {
	shapes := append([][]int64{nd.Out}, nd.In...)
	for _, sh := range shapes {
		for _, d := range sh {
			if d < 0 || d > 1<<20 {
				return false
			}
		}
		if cost.Numel(sh) > 1<<31 {
			return false
		}
	}
	a := nd.Args
	return nd.Params <= 1<<36 && a.Kernel <= 1<<10 && a.Heads <= 1<<12 && a.Features <= 1<<20 && cost.Mul(a.Terms, a.Rank) <= 1<<20
}

// spec sets what u's kernel keeps and needs, its temporaries and its
// scratch: the kernel's own, as kernelFor builds it (ku, on probe) and
// kspec and kernelScratch size it. An op this engine has no kernel for
// (a plan-only op), or a unit too large to run, is priced by autograd's
// rule from stdlib.
func (u *costUnit) spec(probe *model, ku *unit) {
	if ku != nil {
		if k := probeKernel(probe, ku); k != nil {
			sp := k.spec()
			u.saveIn, u.saveOut = sp.saveIn, sp.saveOut
			u.aux, u.tmpF, u.tmpB = costWords(sp.aux), costWords(sp.tmpF), costWords(sp.tmpB)
			u.params = hasParams(k)
			col, part, wino := kernelScratch(k)
			u.col, u.part, u.wino, u.kernel = int64(col), int64(part), wino, true
			if len(u.saveIn) != len(u.ins) {
				u.saveIn = make([]bool, len(u.ins))
			}
			return
		}
	}
	first := u.nodes[0]
	u.params = first.Params > 0
	for _, j := range first.Inputs {
		kept := false
		for _, k := range first.Keep {
			kept = kept || k == j
		}
		u.saveIn = append(u.saveIn, kept)
	}
	for _, k := range first.Keep {
		u.saveOut = u.saveOut || k == first.ID
	}
	if p := cost.Add(first.Private, (first.SavedAux+3)/4); p > 0 {
		u.aux = []words{{per: p}}
	}
	if len(u.saveIn) != len(u.ins) {
		u.saveIn = make([]bool, len(u.ins))
	}
}

// probeKernel is ku's kernel as kernelFor builds it, nil where it builds
// none; a kernel builder that panics on shapes it cannot run (Build
// recovers those too) is one without a kernel here.
func probeKernel(probe *model, ku *unit) (k kernel) {
	defer func() {
		if recover() != nil {
			k = nil
		}
	}()
	k, err := probe.kernelFor(ku)
	if err != nil {
		return nil
	}
	return k
}

// costWords is a kernel's buffer sizes as the layout counts them.
func costWords(bs []bsize) []words {
	out := make([]words, len(bs))
	for i, b := range bs {
		out[i] = words{per: int64(b.perSample), fixed: int64(b.fixed)}
	}
	return out
}
