package planner

import (
	"context"
	"slices"

	"pipe/planner/cost"
)

// Choosing what to recompute
//
// Training keeps every tensor some op's backward formula reads (stdlib's
// saved tensors: Node.Keep, Node.Private, Node.SavedAux). When they do not
// fit, gradient checkpointing drops some of them in the forward pass and
// recomputes them in the backward. This file chooses the recomputed
// segments that cost the fewest extra FLOPs under a per-sample memory
// budget: an exact dynamic programme over the nodes in topological order,
// its Pareto fronts bucketed by memory, and for a graph of maxCuts nodes or
// more the same programme over about maxCuts cut points (the plan then says
// it is not proven optimal). It also finds the least achievable peak.
//
// Derivation: docs/design/checkpoint-solver.md.

// chain is the checkpoint solver's view of a graph: per-sample bytes and
// FLOPs of each node, in topological order.
type chain struct {
	out    []int64 // o_i: bytes of node i's output
	kept   []bool  // some op keeps node i's output for its backward
	priv   []int64 // p_i: bytes kept that belong to node i alone
	flops  []int64 // f_i: forward FLOPs
	inputs [][]int // the nodes node i reads
	// last is the last node reading node i's output; len(out) for the
	// model's output, which the loss reads after the last node; -1 when
	// nothing reads it.
	last  []int
	fixed []bool // never recomputed (the input)
	// endsAt[r] lists the nodes whose last reader is r.
	endsAt [][]int
	// cross[l] is Σ o_i over the nodes i < l that nothing keeps and that
	// are read at l or later: the tensors live across the cut before l
	// that a segment starting at l finds in its Q or its in.
	cross []wide
	// mark and gen let a walk over a segment count each input once:
	// mark[j] == gen once the current walk has counted node j.
	mark []int
	gen  int
	// cuts are the positions where a segment may start, and one past
	// where one may end, ascending from 0 to n: every position when the
	// graph is short enough for the exact programme, about maxCuts of
	// them otherwise (thin). The programme runs over cuts, not nodes.
	cuts []int
	// thinned says cuts leaves positions out: the plan is the best of
	// those whose segments start and end at cuts, not proven optimal.
	thinned bool
	// block[a] is Σ a_i over the nodes from cuts[a] to cuts[a+1]-1, what
	// storing them all costs.
	block []int64
	// rows[a] caches the segments starting at cuts[a] (segsFrom).
	rows []segRow
	// work counts the programme's steps (nodes walked, transitions
	// tried) since the chain was made: tests hold its growth with n.
	work int64
	// ctx, when set, is polled every pollEvery steps (planner.poll).
	ctx context.Context
	// arena is search's, kept between searches.
	arena []label
}

// pollEvery is how many steps of the programme pass between two looks at
// its context: well under a millisecond of work.
const pollEvery = 1 << 12

// step counts one step of the programme and, now and then, polls the
// context.
func (c *chain) step() {
	c.work++
	if c.ctx != nil && c.work%pollEvery == 0 {
		poll(c.ctx)
	}
}

// segCost is one segment starting at some cut: it ends before cut end,
// and costs cost (out + in) for the whole step, q while it is recomputed,
// and flop FLOPs.
type segCost struct {
	end           int
	cost, q, flop int64
}

// segRow is the segments starting at one cut, in order of their end, as
// far as one walk went: every one with cost + q <= lim (cost + q never
// falls as a segment grows), or all of them when complete.
type segRow struct {
	segs     []segCost
	lim      int64
	walked   bool
	complete bool
}

func (c *chain) n() int { return len(c.out) }

// stored is a_i, what node i keeps when it is not recomputed.
func (c *chain) stored(i int) int64 {
	if c.kept[i] {
		return add(c.out[i], c.priv[i])
	}
	return c.priv[i]
}

// finish fills endsAt and cross from last, once the sizes are final.
func (c *chain) finish() {
	n := c.n()
	c.endsAt = make([][]int, n)
	for i, r := range c.last {
		if r >= 0 && r < n {
			c.endsAt[r] = append(c.endsAt[r], i)
		}
	}
	// cross in one sweep: node i joins the cut after itself and leaves
	// it after its last reader. The running sum is exact (wide) and each
	// entry saturates, as a sum of its terms with add would.
	c.cross = make([]wide, n+1)
	leave := make([][]int, n+2)
	var x wide
	for l := 0; l <= n; l++ {
		if l > 0 {
			if i := l - 1; !c.kept[i] && c.last[i] >= l {
				x.add(c.out[i])
				leave[min(c.last[i], n)+1] = append(leave[min(c.last[i], n)+1], i)
			}
		}
		for _, i := range leave[l] {
			x.sub(c.out[i])
		}
		c.cross[l] = x
	}
	c.mark = make([]int, n)
	c.gen = 0
	c.thin(maxCuts)
}

// baseline is the peak without checkpointing: Σ a_i.
func (c *chain) baseline() int64 {
	var s int64
	for i := range c.out {
		s = add(s, c.stored(i))
	}
	return s
}

// segment is a run of nodes recomputed in the backward, by index into the
// graph's nodes, both ends included: cost.Segment, which the engines'
// cost models lay out.
type segment = cost.Segment

// segStats walks the segments [l, r] for r = l, l+1, ... and calls fn with
// each one's permanent cost (out + in), its recompute peak Q and its
// FLOPs, until fn returns false or a fixed node ends the run. It costs
// O(1) plus the fan-in per node walked.
func (c *chain) segStats(l int, fn func(r int, cost, q, flops int64) bool) {
	n := c.n()
	var out, in, rq, f int64
	// x starts as every tensor live across the cut before l that nothing
	// keeps: produced before l, read at l or later.
	x := c.cross[l].int()
	c.gen++
	gen := c.gen
	for r := l; r < n && !c.fixed[r]; r++ {
		f = add(f, c.flops[r])
		rq = add(rq, c.priv[r])
		if c.kept[r] {
			if c.last[r] > r {
				out = add(out, c.out[r])
			} else {
				rq = add(rq, c.out[r])
			}
		}
		for _, j := range c.inputs[r] {
			if j < l && !c.kept[j] && c.mark[j] != gen {
				c.mark[j] = gen
				in = add(in, c.out[j])
				x = sub(x, c.out[j])
			}
		}
		for _, i := range c.endsAt[r] {
			if i >= l && i < r && c.kept[i] {
				out = sub(out, c.out[i])
				rq = add(rq, c.out[i])
			}
		}
		if !fn(r, add(out, in), add(rq, x), f) {
			return
		}
	}
}

// evaluate computes a plan's peak, kept memory and extra FLOPs from the
// definitions in docs/design/checkpoint-solver.md, in one pass over the
// nodes and their inputs, for reporting; the tests hold it to a literal
// transcription of the definitions. Segments must be disjoint, sorted and
// free of fixed nodes.
func (c *chain) evaluate(segs []segment) (peak, kept, extra int64) {
	n := c.n()
	// k accumulates K over stored nodes and segments ending <= i; m is
	// the largest K≤S + Q(S).
	var k, m int64
	next := 0
	for i := 0; i < n; {
		if next >= len(segs) || segs[next].From != i {
			k = add(k, c.stored(i))
			i++
			continue
		}
		s := segs[next]
		next++
		c.gen++
		gen := c.gen
		var out, in int64
		// Q starts as every unkept tensor live across the cut before
		// the segment; those the segment reads move to in.
		q := c.cross[s.From]
		for j := s.From; j <= s.To; j++ {
			extra = add(extra, c.flops[j])
			q.add(c.priv[j])
			if c.kept[j] {
				if c.last[j] > s.To {
					out = add(out, c.out[j])
				} else {
					q.add(c.out[j])
				}
			}
			for _, x := range c.inputs[j] {
				if x < s.From && !c.kept[x] && c.mark[x] != gen {
					c.mark[x] = gen
					in = add(in, c.out[x])
					q.sub(c.out[x])
				}
			}
		}
		k = add(k, add(out, in))
		if v := add(k, q.int()); v > m {
			m = v
		}
		i = s.To + 1
	}
	peak = k
	if m > peak {
		peak = m
	}
	return peak, k, extra
}

// maxCuts bounds the positions the programme works over. A graph of up
// to maxCuts-1 nodes is solved exactly, over every position; a longer one
// over about maxCuts cuts (thin), so that the programme's fronts and
// segments stop growing with the graph and its work grows linearly, in
// the walks over the nodes.
const maxCuts = 1024

// thin chooses the cuts: every position when there are at most limit of
// them, else one in each of limit-3 windows of consecutive positions, the
// one with the fewest bytes live across it (the first on ties), where a
// checkpoint boundary costs the least; fixed nodes are cut out on both
// sides so that the nodes around them can still be recomputed.
func (c *chain) thin(limit int) {
	n := c.n()
	c.cuts = c.cuts[:0]
	c.thinned = n+1 > limit
	if !c.thinned {
		for p := 0; p <= n; p++ {
			c.cuts = append(c.cuts, p)
		}
	} else {
		// live[p]: the bytes of every output produced before p and read
		// at p or later, kept or not.
		live := make([]int64, n+1)
		leave := make([][]int, n+2)
		var x wide
		for p := 1; p <= n; p++ {
			if i := p - 1; c.last[i] >= p {
				x.add(c.out[i])
				leave[min(c.last[i], n)+1] = append(leave[min(c.last[i], n)+1], i)
			}
			for _, i := range leave[p] {
				x.sub(c.out[i])
			}
			live[p] = x.int()
		}
		// limit-3 windows over positions 1..n-1, leaving room for 0, n
		// and the cuts around the input.
		windows := limit - 3
		c.cuts = append(c.cuts, 0)
		for k := range windows {
			lo, hi := 1+k*(n-1)/windows, 1+(k+1)*(n-1)/windows
			if lo >= hi {
				continue
			}
			best := lo
			for p := lo + 1; p < hi; p++ {
				if live[p] < live[best] {
					best = p
				}
			}
			c.cuts = append(c.cuts, best)
		}
		for i, f := range c.fixed {
			if f {
				c.cuts = append(c.cuts, i, i+1)
			}
		}
		c.cuts = append(c.cuts, n)
		slices.Sort(c.cuts)
		c.cuts = slices.Compact(c.cuts)
	}
	c.block = make([]int64, len(c.cuts)-1)
	for a := range c.block {
		for i := c.cuts[a]; i < c.cuts[a+1]; i++ {
			c.block[a] = add(c.block[a], c.stored(i))
		}
	}
	c.rows = make([]segRow, len(c.cuts))
}

// segsFrom returns the segments starting at cut a and ending before a
// later cut, in order, at least as far as cost + q <= limit; a caller
// stops at its own bound. The walk is kept and walked again only for a
// larger limit.
func (c *chain) segsFrom(a int, limit int64) []segCost {
	row := &c.rows[a]
	if row.walked && (row.complete || limit <= row.lim) {
		return row.segs
	}
	row.segs, row.lim, row.walked, row.complete = row.segs[:0], limit, true, true
	l := c.cuts[a]
	if c.fixed[l] {
		return nil
	}
	next := a + 1
	c.segStats(l, func(r int, cost, q, flop int64) bool {
		c.step()
		if r+1 < c.cuts[next] {
			return true
		}
		if add(cost, q) > limit {
			row.complete = false
			return false
		}
		row.segs = append(row.segs, segCost{end: next, cost: cost, q: q, flop: flop})
		next++
		return true
	})
	return row.segs
}

// minPeak returns the smallest peak any plan reaches. feasible is the
// O(n·L) check: the least K at each position decides it. Every plan holds
// each node's a_i at its peak (stored, or in its segment's out or Q), so
// the least peak is at least the largest a_i; the search gallops up from
// there and then bisects, so that no check runs at a budget much above the
// answer, where segments could run the length of the graph.
func (c *chain) minPeak() int64 {
	hi := c.baseline()
	var lo int64
	for i := range c.out {
		lo = max(lo, c.stored(i))
	}
	for b := max(lo, 1); b < hi; b = min(add(b, b), hi) {
		if c.feasible(b) {
			hi = b
			break
		}
		lo = b + 1
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if c.feasible(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

func (c *chain) feasible(budget int64) bool {
	nc := len(c.cuts)
	minK := make([]int64, nc)
	for i := range minK {
		minK[i] = -1
	}
	minK[0] = 0
	relax := func(a int, k int64) {
		c.step()
		if k <= budget && (minK[a] < 0 || k < minK[a]) {
			minK[a] = k
		}
	}
	for a := 0; a < nc-1; a++ {
		k := minK[a]
		if k < 0 {
			continue
		}
		relax(a+1, add(k, c.block[a]))
		for _, s := range c.segsFrom(a, budget-k) {
			k2 := add(k, s.cost)
			if add(k2, s.q) > budget {
				break
			}
			relax(s.end, k2)
		}
	}
	return minK[nc-1] >= 0
}

// label is one state of the programme: the nodes before its position (a
// cut) are decided, keeping k bytes per sample and costing e extra FLOPs.
type label struct {
	k, e   int64
	parent int32 // index into the arena; -1 for the start
	from   int32 // the cut the transition into this label started from
	seg    bool  // that transition recomputed the nodes from there to here
}

// resolution is the number of memory buckets of a front: labels whose
// kept memory falls in the same budget/resolution bucket share one slot,
// which holds the label with the least extra FLOPs. With byte-sized
// problems (every test graph) a bucket is one byte and nothing is lost;
// for real models a bucket is some KiB, and Exact reports whether a label
// was ever dropped that its bucket's survivor did not dominate.
const resolution = 2048

// ckptResult is a solved plan.
type ckptResult struct {
	Segments []segment
	Peak     int64 // per sample
	Extra    int64 // FLOPs per sample
	Exact    bool  // no label was dropped undominated, and no cut left out
	// Cuts is the number of cuts segments were held to when the graph was
	// too long for the exact programme (chain.thin), 0 when they could
	// start and end anywhere.
	Cuts int
}

// solve returns the plan of least extra FLOPs whose peak is at most budget
// (per sample), and false when none exists. Ties go to the smaller kept
// memory.
func (c *chain) solve(budget int64) (ckptResult, bool) {
	if budget < 0 {
		return ckptResult{}, false
	}
	// A coarse pass finds a good plan quickly; its cost bounds the fine
	// pass, which then drops every label that already costs more.
	// (Coarse buckets may drop the only labels that stay within a tight
	// budget; then the fine pass runs unbounded.)
	togo := c.keptToGo(budget)
	ub := int64(sat)
	coarse, ok := c.search(budget, coarseResolution, ub, togo)
	if ok {
		ub = coarse.Extra
	}
	fine, fok := c.search(budget, resolution, ub, togo)
	switch {
	case fok:
		return fine, true
	case ok:
		// The fine pass lost the coarse plan to its own bucketing.
		coarse.Exact = false
		return coarse, true
	}
	return ckptResult{}, false
}

// keptToGo[a] is a lower bound on the memory the nodes from cut a on
// keep, whatever the plan: the least sum of stored and segment costs,
// ignoring the recompute peaks but for leaving out the segments that no
// plan can hold (a segment's cost and Q together are part of a peak, so
// they never exceed the budget). A label whose memory plus this exceeds
// the budget cannot be completed.
func (c *chain) keptToGo(budget int64) []int64 {
	nc := len(c.cuts)
	togo := make([]int64, nc)
	for a := nc - 2; a >= 0; a-- {
		best := add(c.block[a], togo[a+1])
		for _, s := range c.segsFrom(a, budget) {
			if add(s.cost, s.q) > budget {
				break
			}
			best = min(best, add(s.cost, togo[s.end]))
		}
		togo[a] = best
	}
	return togo
}

// coarseResolution is the bucket count of solve's first pass.
const coarseResolution = 32

// search is the programme at a given resolution, over the cuts, dropping
// labels whose extra FLOPs exceed ub or whose memory cannot be completed
// within the budget.
func (c *chain) search(budget int64, resolution int64, ub int64, togo []int64) (ckptResult, bool) {
	n := len(c.cuts) - 1 // the last cut; labels live at cuts
	unit := max(1, budget/resolution)
	// The arena outlives the search as the chain's scratch: the batch
	// search solves the same chain again and again, and the arena is
	// most of what a search allocates.
	arena := append(c.arena[:0], label{parent: -1, from: -1})
	defer func() { c.arena = arena[:0] }()
	// fronts[p].slot[b] is the label of slot b at position p, or -1;
	// fronts[p].keys lists the buckets that hold one, so that a front
	// costs what it holds and not the budget's resolution. A front is
	// taken when its position first gets a label and given back, its
	// slots emptied, once the position is done, so at most the positions
	// a segment can reach hold one.
	type bucketFront struct {
		slot []int32
		keys []int64
	}
	fronts := make([]*bucketFront, n+1)
	slots := 2 * (int(budget/unit) + 1)
	var free []*bucketFront
	get := func(pos int) *bucketFront {
		if fronts[pos] == nil {
			var f *bucketFront
			if len(free) > 0 {
				f, free = free[len(free)-1], free[:len(free)-1]
			} else {
				f = &bucketFront{slot: make([]int32, slots)}
				for i := range f.slot {
					f.slot[i] = -1
				}
			}
			fronts[pos] = f
		}
		return fronts[pos]
	}
	get(0).slot[0] = 0
	fronts[0].keys = append(fronts[0].keys, 0)
	exact := true
	// Each bucket has two slots: 2b holds its label of least e (then
	// least k), 2b+1 its label of least k (then least e), which keeps the
	// labels of least memory, and so every feasible path, alive. A slot
	// owns its arena entry: a label in a front not yet processed has no
	// children, so a slot's entry is overwritten in place.
	dominated := func(x label, f []int32, a, b int64) bool {
		for _, i := range []int64{a, b} {
			if id := f[i]; id >= 0 && arena[id].k <= x.k && arena[id].e <= x.e {
				return true
			}
		}
		return false
	}
	put := func(pos int, l label) {
		c.step()
		if l.e > ub || add(l.k, togo[pos]) > budget {
			return
		}
		fr := get(pos)
		f := fr.slot
		key := l.k / unit
		se, sk := 2*key, 2*key+1
		if f[se] < 0 && f[sk] < 0 {
			fr.keys = append(fr.keys, key)
		}
		var lost [2]label
		nlost, kept := 0, false
		take := func(slot int64, better func(a, b label) bool) {
			id := f[slot]
			switch {
			case id < 0:
				arena = append(arena, l)
				f[slot] = int32(len(arena) - 1)
			case better(l, arena[id]):
				lost[nlost] = arena[id]
				nlost++
				arena[id] = l
			default:
				return
			}
			kept = true
		}
		take(se, func(a, b label) bool { return a.e < b.e || a.e == b.e && a.k < b.k })
		take(sk, func(a, b label) bool { return a.k < b.k || a.k == b.k && a.e < b.e })
		if !kept && !dominated(l, f, se, sk) {
			exact = false
		}
		for _, x := range lost[:nlost] {
			if !dominated(x, f, se, sk) {
				exact = false
			}
		}
	}
	var front []int32
	for p := 0; p <= n; p++ {
		// Buckets are in order of k, and in a bucket the least-k slot
		// comes first, so the sweep yields the Pareto front sorted by k
		// with e falling.
		front = front[:0]
		if f := fronts[p]; f != nil {
			slices.Sort(f.keys)
			for _, b := range f.keys {
				for _, slot := range []int64{2*b + 1, 2 * b} {
					id := f.slot[slot]
					if id >= 0 && (len(front) == 0 || arena[id].e < arena[front[len(front)-1]].e) {
						front = append(front, id)
					}
					f.slot[slot] = -1
				}
			}
			f.keys = f.keys[:0]
			free = append(free, f)
			fronts[p] = nil
		}
		if p == n || len(front) == 0 {
			continue
		}
		// The segments starting at p do not depend on the label: they
		// are walked once, as far as the cheapest label allows.
		segs := c.segsFrom(p, budget-arena[front[0]].k)
		a := c.block[p]
		for _, li := range front {
			l := arena[li]
			if k := add(l.k, a); k <= budget {
				put(p+1, label{k: k, e: l.e, parent: li, from: int32(p)})
			}
			for _, s := range segs {
				k := add(l.k, s.cost)
				if add(k, s.q) > budget {
					break
				}
				put(s.end, label{k: k, e: add(l.e, s.flop), parent: li, from: int32(p), seg: true})
			}
		}
	}
	if len(front) == 0 {
		return ckptResult{}, false
	}
	// prune left the front sorted by k with e falling: the last label has
	// the least e, and the least k among those.
	best := front[len(front)-1]
	// Each label's position is where the next transition starts, so the
	// walk back from the end recovers every segment's last node.
	var out []segment
	pos := n
	for li := best; arena[li].parent >= 0; li = arena[li].parent {
		l := arena[li]
		if l.seg {
			out = append(out, segment{From: c.cuts[l.from], To: c.cuts[pos] - 1})
		}
		pos = int(l.from)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	peak, _, extra := c.evaluate(out)
	r := ckptResult{Segments: out, Peak: peak, Extra: extra, Exact: exact && !c.thinned}
	if c.thinned {
		r.Cuts = len(c.cuts)
	}
	return r, true
}
