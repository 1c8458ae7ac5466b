package planner

import (
	"pipe/planner/plan"
	"pipe/stdlib"
)

// The CPU executor's memory
//
// exec/cpu compiles the model at Build into units (a node, or a fusion
// group run as one kernel) and lays every tensor of a training step out
// in one arena before the first step: each tensor is a buffer with a
// lifetime over the step's events (the forward of each unit, the loss,
// then the backward of each unit in reverse order, each checkpoint
// segment recomputed before its first backward), and buffers whose
// lifetimes do not overlap share bytes (exec/cpu/schedule.go). Nothing is
// allocated while training. The plan counts, in plan.Memory:
//
//   - Parameters: the parameters, the batchnorm running statistics
//     (2 per channel) and the fixed sketches of Panther's layers
//     (Node.Buffers), in fp32; Gradients the parameters' gradients;
//     Optimizer P × 4 per state buffer (as on a GPU);
//   - Activations, ActivationGradients and Input: the arena's peak, the
//     largest sum of the buffers alive at one event, computed by laying
//     the step out event by event as Build does, from the graph's shapes
//     and each kernel's rule for what it keeps (below). Activations is
//     what is kept at the end of the forward pass; ActivationGradients
//     what the backward adds at the peak (the activations' gradients, a
//     segment's recomputed tensors, kernels' temporaries); Input the
//     model's copy of the inputs. The arena itself packs the buffers
//     first-fit, within a few percent of this peak;
//   - Workspace: each worker thread's scratch, one thread per core of the
//     device: an im2col column buffer sized for the core's cache (the
//     column matrix is cut into chunks of at most colBudget values, or
//     one output row when a row is larger) and, with more than one
//     thread, a partial weight gradient as large as the largest conv's
//     weights. It does not grow with the batch, which is why the CPU's
//     workspace is not the largest op's im2col matrix;
//   - Eval: the evaluation forward's own arena, kept beside the training
//     step's once the first evaluation ran, at the plan's batch: each
//     output lives until its last reader;
//   - Loader: the loaders' batches (loader.go): Workers × Prefetch in
//     flight and the one in use, for training and again for evaluation
//     when the file evaluates.
//
// What each kernel keeps is the executor's, not autograd's: a max-pool
// keeps 4-byte indices of its maxima and not its input; dropout keeps no
// mask (it is a hash of the step and the position, recomputed); average
// and global pooling, flatten, upsample, concat and add keep nothing; a
// fused conv + batchnorm keeps the conv's output before normalisation and
// the per-channel statistics; relu, sigmoid and tanh keep their output,
// gelu its input, conv, dense, batchnorm and layernorm their input;
// attention its input, q, k, v, the probabilities once (dropout's mask is
// recomputed) and the heads' output; random_attention its input, q, k, v,
// o, φ(q), φ(k) and the stabilisers' positions (stdlib's Private, the
// default rule); the token ops (tokens, class_token,
// pos_embed, select_token, mean_tokens) nothing. Ops
// the executor cannot run (plan-only ones) are priced by stdlib's rules.
// The checkpoint programme (checkpoint.go) sees the same rules per node.
//
// exec/cpu's memory_plan_test.go builds every example at its plan and
// holds these figures to what the executor reports (engine.MemStats).

// colBudget is exec/cpu's column buffer per worker, in float32 values.
const colBudget = 128 << 10

// words is a buffer's size in float32 values: per sample, and fixed.
type words struct{ per, fixed int64 }

// cpuUnit is one kernel of the executor: a node or a fusion group, placed
// at its last node.
type cpuUnit struct {
	nodes   []*stdlib.Node
	ins     []int // unit indices
	out     int64 // output values per sample
	saveIn  []bool
	saveOut bool
	aux     []words // kept from the forward to the backward
	tmpF    []words // the forward's temporaries
	tmpB    []words // the backward's temporaries
	reqGrad bool
	needDin []bool
	skipBwd bool // the loss differentiates through this unit
	// params says the kernel has parameters; col and part are the scratch
	// a convolution needs per worker.
	params    bool
	col, part int64
}

// cpuModel is the executor's step for one graph and fusion.
type cpuModel struct {
	units   []*cpuUnit
	outUnit int
	through bool // the loss reads the logits before a final softmax or sigmoid
	// overhead is the step's peak without checkpointing less the chain's
	// kept memory, per sample: what solve takes off the programme's budget.
	overhead int64
	// fixedTrain and fixedEval are the per-channel buffers of the training
	// step and of evaluation, in bytes: the batch does not scale them.
	fixedTrain, fixedEval int64
	low                   int64 // the chain's least peak, once computed
}

// cpuFusedKinds are the fusion patterns exec/cpu runs as one kernel; it
// runs "elementwise" groups op by op.
var cpuFusedKinds = map[string]bool{
	"conv+batchnorm+activation": true,
	"conv+batchnorm":            true,
	"conv+activation":           true,
	"dense+bias+activation":     true,
}

// newCPUCostModel prices g for the CPU executor with the given fusion
// groups (node IDs and kind), loss, optimizer buffers and worker threads.
func newCPUCostModel(g *stdlib.Graph, groups []fusedGroup, loss string, buffers int64, threads int) *costModel {
	m := &costModel{backend: plan.BackendCPU, elem: 4, buffers: buffers, params: g.Params()}
	c := newChain(g, 4, cpuSaved)
	c.finish()
	m.ch = c
	m.perNode = make([]int64, len(g.Nodes))
	for i := range m.perNode {
		m.perNode[i] = c.stored(i)
	}
	cm := newCPUModel(g, groups, loss)
	m.cpu = cm
	base := cm.train(nil)
	m.baseline = base.peak
	cm.overhead = base.peak - c.baseline()
	ev, evFixed := cm.evalPeak()
	m.eval = ev
	cm.fixedEval = evFixed
	var col, part, bnStats int64
	for _, u := range cm.units {
		col, part = max(col, u.col), max(part, u.part)
		for _, a := range u.aux {
			cm.fixedTrain = add(cm.fixedTrain, mul(a.fixed, 4))
		}
		for _, nd := range u.nodes {
			if nd.Op == "batchnorm" && len(nd.Out) > 0 {
				bnStats = add(bnStats, mul(2, nd.Out[0]))
			}
			bnStats = add(bnStats, nd.Buffers) // fixed sketches
		}
	}
	threads = max(threads, 1)
	if threads == 1 {
		part = 0
	}
	p := m.params
	m.static.parameters = mul(add(p, bnStats), 4)
	m.static.gradients = mul(p, 4)
	m.static.optimizer = mul(p, mul(4, buffers))
	m.static.scratch = mul(int64(threads), mul(add(col, part), 4))
	m.static.fixed = add(cm.fixedTrain, cm.fixedEval)
	return m
}

// cpuSaved is the executor's saving rule per node (see above).
func cpuSaved(nd *stdlib.Node) (keep []int, priv int64) {
	in := func() []int {
		if len(nd.Inputs) > 0 {
			return nd.Inputs[:1]
		}
		return nil
	}
	switch nd.Op {
	case "input", "avgpool", "gap", "dropout", "flatten", "upsample", "concat", "add":
		return nil, 0
	case "conv", "convtranspose", "dense", "batchnorm", "gelu":
		return in(), 0
	case "lowrank_dense":
		return in(), mul(mul(nd.Args.Terms, nd.Args.Rank), 4)
	case "sketched_dense": // x and the L·k values x·U2_i
		return in(), mul(mul(nd.Args.Terms, nd.Args.Rank), 4)
	case "sketched_conv": // x; the gradient reaching its convolution is U·dy
		return in(), 0
	case "layernorm":
		return in(), mul(tokenRows(nd.Out), 2*4)
	case "relu", "sigmoid", "tanh", "softmax":
		return []int{nd.ID}, 0
	case "tokens", "class_token", "pos_embed", "select_token", "mean_tokens":
		return nil, 0
	case "attention":
		return in(), mul(attnKept(nd), 4)
	case "maxpool":
		return nil, mul(numel(nd.Out), 4)
	}
	return nd.Keep, add(mul(nd.Private, 4), nd.SavedAux)
}

// chainMin is the checkpoint programme's least peak, computed once.
func (cm *cpuModel) chainMin(c *chain) int64 {
	if cm.low == 0 {
		cm.low = c.minPeak()
	}
	return cm.low
}

// fusedGroup is a fusion group by node IDs.
type fusedGroup struct {
	kind string
	ids  []int
}

// newCPUModel compiles g into the executor's units: the fusion groups it
// fuses (a final softmax or sigmoid the loss differentiates through
// leaves its group), the nodes the output depends on, and each kernel's
// buffers.
func newCPUModel(g *stdlib.Graph, groups []fusedGroup, loss string) *cpuModel {
	cm := &cpuModel{}
	n := len(g.Nodes)
	groupOf := make(map[int][]int)
	for _, fg := range groups {
		ids := fg.ids
		if !cpuFusedKinds[fg.kind] || len(ids) < 2 {
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
		u := &cpuUnit{out: numel(nd.Out)}
		for _, id := range ids {
			u.nodes = append(u.nodes, g.Nodes[id])
		}
		for _, j := range u.nodes[0].Inputs {
			if j >= 0 && j < n && nodeUnit[j] >= 0 {
				u.ins = append(u.ins, nodeUnit[j])
			}
		}
		nodeUnit[nd.ID] = len(cm.units)
		cm.units = append(cm.units, u)
	}
	if g.Output >= 0 && g.Output < n {
		cm.outUnit = max(nodeUnit[g.Output], 0)
	}
	for _, u := range cm.units {
		u.spec()
		u.reqGrad = u.params
		u.needDin = make([]bool, len(u.ins))
		for k, j := range u.ins {
			if cm.units[j].reqGrad {
				u.reqGrad, u.needDin[k] = true, true
			}
		}
	}
	out := cm.units[cm.outUnit]
	if len(out.nodes) == 1 && len(out.ins) == 1 {
		op := out.nodes[0].Op
		cm.through = (loss == "cross_entropy" && op == "softmax") || (loss == "bce" && op == "sigmoid")
	}
	if cm.through {
		out.skipBwd = true
	}
	return cm
}

// spec sets what u's kernel keeps and needs, as exec/cpu's kernels do.
func (u *cpuUnit) spec() {
	first := u.nodes[0]
	var bn, act *stdlib.Node
	for _, nd := range u.nodes[1:] {
		if nd.Op == "batchnorm" {
			bn = nd
		} else {
			act = nd
		}
	}
	fromOut := act != nil && (act.Op == "relu" || act.Op == "sigmoid" || act.Op == "tanh")
	gelu := act != nil && act.Op == "gelu"
	one := []bool{true}
	switch first.Op {
	case "input":
	case "conv":
		u.saveIn, u.saveOut, u.params = one, fromOut, true
		if bn != nil {
			u.aux = []words{{per: u.out}, {fixed: 2 * channels(first.Out)}}
		} else if gelu {
			u.aux = []words{{per: u.out}}
		}
		if len(first.In) == 1 && len(first.In[0]) == 3 && len(first.Out) == 3 {
			in, out, a := first.In[0], first.Out, first.Args
			u.col, u.part = convScratch(in[0], in[1], in[2], out[0], out[1], out[2], a)
		}
		if len(first.In) == 1 && len(first.In[0]) == 4 && len(first.Out) == 4 {
			u.col, u.part = volScratch(first.In[0], first.Out, first.Args)
		}
	case "convtranspose":
		u.saveIn, u.params = one, true
		if len(first.In) == 1 {
			u.tmpB = []words{{per: numel(first.In[0])}}
		}
		if len(first.In) == 1 && len(first.In[0]) == 3 && len(first.Out) == 3 {
			// The transposed convolution is the input gradient of the
			// convolution from its output to its input.
			in, out, a := first.In[0], first.Out, first.Args
			u.col, u.part = convScratch(out[0], out[1], out[2], in[0], in[1], in[2], a)
		}
		if len(first.In) == 1 && len(first.In[0]) == 4 && len(first.Out) == 4 {
			u.col, u.part = volScratch(first.Out, first.In[0], first.Args)
		}
	case "dense", "lowrank_dense":
		u.saveIn, u.saveOut, u.params = one, fromOut, true
		if gelu {
			u.aux = append(u.aux, words{per: u.out})
		}
		if first.Op == "lowrank_dense" {
			tr := mul(first.Args.Terms, first.Args.Rank)
			u.aux = append(u.aux, words{per: tr})
			u.tmpB = []words{{per: tr}}
		}
	case "sketched_dense":
		lk := []words{{per: mul(first.Args.Terms, first.Args.Rank)}}
		u.saveIn, u.params = one, true
		u.aux, u.tmpF, u.tmpB = lk, lk, lk
	case "sketched_conv":
		u.saveIn, u.params = one, true
		if len(first.In) == 1 && len(first.In[0]) == 3 && len(first.Out) == 3 {
			in, out, a := first.In[0], first.Out, first.Args
			mid := mul(2, mul(a.Terms, a.Rank))
			t := []words{{per: mul(mid, mul(out[1], out[2]))}}
			u.tmpF, u.tmpB = t, t
			a.Dilation, a.Groups = 1, 1
			u.col, u.part = convScratch(in[0], in[1], in[2], mid, out[1], out[2], a)
		}
	case "batchnorm":
		u.saveIn, u.params = one, true
		u.aux = []words{{fixed: 2 * channels(first.Out)}}
	case "layernorm":
		u.saveIn, u.params = one, true
		u.aux = []words{{per: 2 * tokenRows(first.Out)}}
	case "tokens", "select_token", "mean_tokens":
	case "class_token", "pos_embed":
		u.params = true
	case "attention":
		// exec/cpu/attention.go: qkv, the probabilities and the heads'
		// output kept; dqkv and dO in the backward; two T × T matrices
		// of scratch per worker.
		t, d := first.Out[0], first.Out[1]
		u.saveIn, u.params = one, true
		u.aux = []words{{per: 3 * t * d}, {per: first.Args.Heads * t * t}, {per: t * d}}
		u.tmpB = []words{{per: 3 * t * d}, {per: t * d}}
		u.col = 2 * t * t
	case "random_attention":
		// exec/cpu/randattn.go: q, k, v, o, φ(q), φ(k) and the
		// stabilisers' positions kept; dq, dk, dv and dO in the backward;
		// one head's sums, gradients and feature-map gradients of scratch
		// per worker.
		t, d, h, mf := first.Out[0], first.Out[1], first.Args.Heads, first.Args.Features
		dh, htm := d/max(h, 1), h*t*mf
		u.saveIn, u.params = one, true
		u.aux = []words{{per: 4 * t * d}, {per: 2 * htm}, {per: h * (t + 1)}}
		u.tmpB = []words{{per: 4 * t * d}}
		u.col = 2*mf*dh + 2*mf + 2*t + t*dh + 2*t*mf
	case "relu", "sigmoid", "tanh", "softmax":
		u.saveIn, u.saveOut = []bool{false}, true
	case "gelu":
		u.saveIn = one
	case "maxpool":
		u.aux = []words{{per: u.out}}
	case "avgpool", "gap", "dropout", "flatten", "upsample", "concat", "add":
	default:
		// An op the executor has no kernel for: autograd's rule.
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
		if p := add(first.Private, (first.SavedAux+3)/4); p > 0 {
			u.aux = []words{{per: p}}
		}
	}
	if len(u.saveIn) != len(u.ins) {
		u.saveIn = make([]bool, len(u.ins))
	}
}

// tokenRows is the rows of a shape's last axis: the tokens of [T, D], 1 for a
// vector.
func tokenRows(shape []int64) int64 {
	if len(shape) < 2 {
		return 1
	}
	return numel(shape[:len(shape)-1])
}

// attnKept is what exec/cpu's attention keeps per sample besides its
// input: q, k, v, the probabilities (one copy: dropout's mask is
// recomputed) and the heads' output.
func attnKept(nd *stdlib.Node) int64 {
	if len(nd.Out) != 2 {
		return nd.Private
	}
	t, d := nd.Out[0], nd.Out[1]
	return add(mul(4, mul(t, d)), mul(nd.Args.Heads, mul(t, t)))
}

func channels(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return shape[0]
}

// convScratch is the column buffer and the partial weight gradient one
// worker needs for a convolution from [ci, h, w] to [co, ho, wo], as
// exec/cpu/conv.go sizes them: the column matrix of a chunk of output
// rows, none for a pointwise convolution, and, where the input gradient
// runs as a convolution of the output gradient with the flipped kernel,
// that convolution's columns too. A depthwise convolution at stride 1
// that keeps its size has no columns (exec/cpu/depthwise.go).
func convScratch(ci, h, w, co, ho, wo int64, a stdlib.OpArgs) (col, part int64) {
	k, s, p := a.Kernel, max(a.Stride, 1), a.Padding
	d, g := max(a.Dilation, 1), max(a.Groups, 1)
	if g > 1 && ci == g && co == g && k > 1 && s == 1 && h == ho && w == wo {
		// exec/cpu/depthwise.go: no columns, channels owned by workers
		// (no partial gradient), and a tap's wrapping columns saved.
		return mul(h, min(w, max(p, d*(k-1)-p))), 0
	}
	ckk, col := convColumns(ci/g, h, w, ho, wo, k, s, p)
	part = mul(co, ckk)
	if winoEligible(ci, h, w, co, ho, wo, k, s, p, d, g) {
		// exec/cpu/winograd.go: V and M for a block of tiles, the row
		// buffers and U; its input gradient is a Winograd convolution
		// of the same size.
		tb := max(16, winoBudget/(16*(ci+co)))
		return 16*(ci+co)*tb + 4*(w+4) + 16*ci*co, part
	}
	if pf := d*(k-1) - p; s == 1 && g == 1 && col > 0 && pf >= 0 && (ci > co || ci == co && h*w >= 1024) {
		_, fcol := convColumns(co, ho, wo, h, w, k, 1, pf)
		col = max(col, fcol)
	}
	return col, part
}

// winoBudget and winoMinChannels are exec/cpu/winograd.go's; a build of
// exec/cpu without cgo runs these convolutions through im2col instead.
const (
	winoBudget      = 256 << 10
	winoMinChannels = 8
)

// winoEligible is exec/cpu/winograd.go's rule: a 3×3 convolution at
// stride 1 with padding 1 and at least winoMinChannels channels in and out
// runs as Winograd F(2×2, 3×3).
func winoEligible(ci, h, w, co, ho, wo, k, s, p, d, g int64) bool {
	return k == 3 && s == 1 && p == 1 && d == 1 && g == 1 && h == ho && w == wo &&
		ci >= winoMinChannels && co >= winoMinChannels
}

// convColumns is a convolution's column rows (cig·k·k) and the values
// of one worker's column buffer: whole output rows, as many as fit
// colBudget and at least one; none when the convolution is pointwise.
func convColumns(cig, h, w, ho, wo, k, s, p int64) (ckk, col int64) {
	ckk = mul(cig, mul(k, k))
	if k == 1 && s == 1 && p == 0 && h == ho && w == wo {
		return ckk, 0
	}
	row := max(mul(ckk, wo), 1)
	return ckk, mul(max(1, colBudget/row), row)
}

// cpuBuf is one buffer of the step: words and a lifetime in events.
type cpuBuf struct {
	words
	first, last int
	saved       bool
}

func (b *cpuBuf) touch(t int) {
	if b == nil {
		return
	}
	if b.first < 0 || t < b.first {
		b.first = t
	}
	if t > b.last {
		b.last = t
	}
}

// stepLayout is a step's buffers and events.
type stepLayout struct {
	bufs []*cpuBuf
	t    int
}

func (l *stepLayout) buf(w words, saved bool) *cpuBuf {
	b := &cpuBuf{words: w, first: -1, last: -1, saved: saved}
	l.bufs = append(l.bufs, b)
	return b
}

func (l *stepLayout) temps(ws []words) []*cpuBuf {
	out := make([]*cpuBuf, len(ws))
	for i, w := range ws {
		out[i] = l.buf(w, false)
		out[i].touch(l.t)
	}
	return out
}

func touchAll(bs []*cpuBuf, t int) {
	for _, b := range bs {
		b.touch(t)
	}
}

// stepMem is a training step's memory per sample, in bytes: the peak of
// the live buffers, the kept buffers alive at the loss, and among those
// the input's copy.
type stepMem struct {
	peak, saved, input int64
}

// train lays out a training step with the checkpoint segments segs, event
// by event as exec/cpu's buildTrain does, and measures it.
func (cm *cpuModel) train(segs []segment) stepMem {
	units := cm.units
	nu := len(units)
	// seg[i] is the segment that holds all of unit i's nodes, or -1;
	// members[s] are segment s's units in order.
	seg := make([]int, nu)
	members := make([][]int, len(segs))
	var nodeSeg []int // by node ID, -1 outside every segment
	for si, s := range segs {
		for len(nodeSeg) <= s.To {
			nodeSeg = append(nodeSeg, -1)
		}
		for id := s.From; id <= s.To; id++ {
			nodeSeg[id] = si
		}
	}
	segOf := func(id int) int {
		if id < len(nodeSeg) {
			return nodeSeg[id]
		}
		return -1
	}
	for i, u := range units {
		seg[i] = -1
		if i == 0 {
			continue
		}
		si := segOf(u.nodes[0].ID)
		ok := si >= 0
		for _, nd := range u.nodes[1:] {
			ok = ok && segOf(nd.ID) == si
		}
		if ok {
			seg[i] = si
			members[si] = append(members[si], i)
		}
	}
	l := &stepLayout{}
	actF, actR := make([]*cpuBuf, nu), make([]*cpuBuf, nu)
	auxF, auxR := make([][]*cpuBuf, nu), make([][]*cpuBuf, nu)
	grad := make([]*cpuBuf, nu)
	for i, u := range units {
		actF[i] = l.buf(words{per: u.out}, true)
		for _, a := range u.aux {
			auxF[i] = append(auxF[i], l.buf(a, true))
		}
		if seg[i] >= 0 {
			actR[i] = l.buf(words{per: u.out}, true)
			for _, a := range u.aux {
				auxR[i] = append(auxR[i], l.buf(a, true))
			}
		}
		if u.reqGrad {
			grad[i] = l.buf(words{per: u.out}, false)
		}
	}
	actOf := func(j, i int) *cpuBuf {
		if seg[j] >= 0 && seg[j] == seg[i] {
			return actR[j]
		}
		return actF[j]
	}
	for i, u := range units {
		for _, j := range u.ins {
			actF[j].touch(l.t)
		}
		touchAll(auxF[i], l.t)
		l.temps(u.tmpF)
		actF[i].touch(l.t)
		l.t++
	}
	lossAt := l.t
	actF[cm.outUnit].touch(lossAt)
	seedUnit := cm.outUnit
	if cm.through {
		seedUnit = units[cm.outUnit].ins[0]
		actF[seedUnit].touch(lossAt)
	}
	written := make([]bool, nu)
	if units[seedUnit].reqGrad {
		grad[seedUnit].touch(lossAt)
		written[seedUnit] = true
	}
	l.t++
	done := make([]bool, len(segs))
	for i := nu - 1; i >= 1; i-- {
		u := units[i]
		if !u.reqGrad || u.skipBwd || !written[i] {
			continue
		}
		if seg[i] >= 0 && !done[seg[i]] {
			done[seg[i]] = true
			for _, v := range members[seg[i]] {
				vu := units[v]
				for _, j := range vu.ins {
					actOf(j, v).touch(l.t)
				}
				touchAll(auxR[v], l.t)
				l.temps(vu.tmpF)
				actR[v].touch(l.t)
				l.t++
			}
		}
		for k, j := range u.ins {
			if u.saveIn[k] {
				actOf(j, i).touch(l.t)
			}
			if u.needDin[k] {
				grad[j].touch(l.t)
				written[j] = true
			}
		}
		if u.saveOut {
			actOf(i, i).touch(l.t)
		}
		if seg[i] >= 0 {
			touchAll(auxR[i], l.t)
		} else {
			touchAll(auxF[i], l.t)
		}
		l.temps(u.tmpB)
		grad[i].touch(l.t)
		l.t++
	}
	peak, _ := l.peak()
	var s stepMem
	s.peak = mul(peak, 4)
	for _, b := range l.bufs {
		if b.saved && b.first >= 0 && b.first <= lossAt && lossAt <= b.last {
			s.saved = add(s.saved, mul(b.per, 4))
		}
	}
	if b := actF[0]; b.first >= 0 && b.last >= lossAt {
		s.input = mul(b.per, 4)
	}
	return s
}

// evalPeak lays out the evaluation forward as exec/cpu's buildEval does
// and returns its peak per sample and the fixed bytes alive then.
func (cm *cpuModel) evalPeak() (perSample, fixed int64) {
	l := &stepLayout{}
	act := make([]*cpuBuf, len(cm.units))
	for i, u := range cm.units {
		act[i] = l.buf(words{per: u.out}, true)
	}
	for i, u := range cm.units {
		for _, j := range u.ins {
			act[j].touch(l.t)
		}
		l.temps(u.aux)
		l.temps(u.tmpF)
		act[i].touch(l.t)
		l.t++
	}
	act[cm.outUnit].touch(l.t)
	if cm.through {
		act[cm.units[cm.outUnit].ins[0]].touch(l.t)
	}
	l.t++
	p, f := l.peak()
	return mul(p, 4), mul(f, 4)
}

// peak returns the largest sum of the per-sample words of the buffers
// alive at one event, and the fixed words alive then.
func (l *stepLayout) peak() (per, fixed int64) {
	dp := make([]int64, l.t+1)
	df := make([]int64, l.t+1)
	for _, b := range l.bufs {
		if b.first < 0 {
			continue
		}
		dp[b.first] += b.per
		dp[b.last+1] -= b.per
		df[b.first] += b.fixed
		df[b.last+1] -= b.fixed
	}
	var lp, lf int64
	for t := 0; t < l.t; t++ {
		lp += dp[t]
		lf += df[t]
		if lp > per || lp == per && lf > fixed {
			per, fixed = lp, lf
		}
	}
	return per, fixed
}
