package native

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"pipe/engine"
	"pipe/engine/weights"
	"pipe/stdlib"
)

// Backend is the CPU backend. Its zero value is ready to use.
type Backend struct{}

var _ engine.Backend = Backend{}

// Name implements engine.Backend.
func (Backend) Name() string { return "native" }

var blasOnce sync.Once

// useBLAS sets up the BLAS once (blas.go, blas_purego.go).
func useBLAS() { blasOnce.Do(setupBLAS) }

// Build implements engine.Backend.
func (Backend) Build(g *stdlib.Graph, cfg engine.Config) (mod engine.Model, err error) {
	defer recoverErr(&err)
	m, err := build(g, cfg, false)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// fusedKinds are the fusion patterns this backend runs as one kernel.
// The planner's "elementwise" chains run op by op: each op is already one
// pass, and the results are the same.
var fusedKinds = map[string]bool{
	"conv+batchnorm+activation": true,
	"conv+batchnorm":            true,
	"conv+activation":           true,
	"dense+bias+activation":     true,
}

// build compiles g; with paramsOnly it stops once the parameters are
// initialised, allocating no working memory (InitialState).
func build(g *stdlib.Graph, cfg engine.Config, paramsOnly bool) (*model, error) {
	if g == nil || len(g.Nodes) == 0 || g.Nodes[0].Op != "input" {
		return nil, fmt.Errorf("cpu: the graph has no input node")
	}
	if g.Node(g.Output) == nil {
		return nil, fmt.Errorf("cpu: the graph's output %d is not a node", g.Output)
	}
	if cfg.Batch < 1 {
		return nil, fmt.Errorf("cpu: batch %d; it must be at least 1", cfg.Batch)
	}
	useBLAS()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	threads := cfg.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	m := &model{cfg: cfg, g: g, threads: threads, seed: cfg.Seed}
	m.heapBefore = ms.HeapInuse
	decls, err := weights.Of(g)
	if err != nil {
		return nil, err
	}
	m.decls = make(map[string]weights.Tensor, len(decls))
	for _, d := range decls {
		m.decls[d.Name] = d
	}

	opt, states, err := newOptimizer(cfg.Optimizer)
	if err != nil {
		return nil, err
	}
	m.opt = opt

	groups, err := fusionGroups(g, cfg)
	if err != nil {
		return nil, err
	}
	if err := m.makeUnits(g, groups); err != nil {
		return nil, err
	}
	if err := m.makeKernels(); err != nil {
		return nil, err
	}
	if err := m.assignSegments(cfg.Checkpoint); err != nil {
		return nil, err
	}
	out := m.units[m.outUnit]
	// The model's last op (fusionGroups split a final sigmoid or softmax
	// off its group when the loss differentiates through it).
	lastOp := out.nodes[len(out.nodes)-1].Op
	m.loss, err = newLoss(cfg.Loss.Kind, out.out, lastOp, len(out.nodes) == 1, threads)
	if err != nil {
		return nil, err
	}
	if m.loss.throughLast {
		out.skipBwd = true
	}
	m.gradFlags()
	m.allocParams(states)
	m.deadGrads = deadParams(g, m.params)
	if paramsOnly {
		return m, nil
	}
	if threads > 1 && denseOnly(g) {
		m.pool, m.gemmThreads = newPool(1), threads
	} else {
		m.pool = newPool(threads)
	}
	m.allocScratch()
	m.train = m.buildTrain(cfg.Batch)
	return m, nil
}

// deadParams are the parameters among ps that g.ZeroGradients names: their
// computed gradient is rounding noise, which Adam would turn into steps
// of random sign (docs/design/zero-gradients.md).
func deadParams(g *stdlib.Graph, ps []*param) []*param {
	dead := map[string]bool{}
	for _, name := range g.ZeroGradients() {
		dead[name] = true
	}
	var out []*param
	for _, p := range ps {
		if dead[p.name] {
			out = append(out, p)
		}
	}
	return out
}

// fusionGroups resolves the plan's groups to node IDs, keeping those this
// backend fuses and whose nodes form a chain (each the only reader of the
// one before). When the loss reads the logits before a final sigmoid or
// softmax, that activation leaves its group.
func fusionGroups(g *stdlib.Graph, cfg engine.Config) ([][]int, error) {
	byName := make(map[string]int, len(g.Nodes))
	for _, n := range g.Nodes {
		byName[n.Name] = n.ID
	}
	readers := make([]int, len(g.Nodes))
	for _, n := range g.Nodes {
		for _, j := range n.Inputs {
			if j >= 0 && j < len(readers) {
				readers[j]++
			}
		}
	}
	var out [][]int
	used := make(map[int]bool)
	for _, fg := range cfg.Fusion {
		var ids []int
		for _, name := range fg.Nodes {
			id, ok := byName[name]
			if !ok {
				return nil, fmt.Errorf("cpu: fusion group %s names node %q, which the graph does not have", fg.Kind, name)
			}
			ids = append(ids, id)
		}
		if !fusedKinds[fg.Kind] || len(ids) < 2 {
			continue
		}
		chain := true
		for i := 1; i < len(ids); i++ {
			n := g.Nodes[ids[i]]
			if len(n.Inputs) != 1 || n.Inputs[0] != ids[i-1] || readers[ids[i-1]] != 1 || ids[i-1] == g.Output || used[ids[i]] {
				chain = false
			}
		}
		if !chain || used[ids[0]] {
			return nil, fmt.Errorf("cpu: fusion group %s (%s) is not a chain of single-reader nodes", fg.Kind, strings.Join(fg.Nodes, ", "))
		}
		last := g.Nodes[ids[len(ids)-1]]
		if last.ID == g.Output && ((cfg.Loss.Kind == "bce" && last.Op == "sigmoid") || (cfg.Loss.Kind == "cross_entropy" && last.Op == "softmax")) {
			ids = ids[:len(ids)-1]
			if len(ids) < 2 {
				continue
			}
		}
		for _, id := range ids {
			used[id] = true
		}
		out = append(out, ids)
	}
	return out, nil
}

// makeUnits turns the live nodes into units, a fusion group into one unit
// placed at its last node.
func (m *model) makeUnits(g *stdlib.Graph, groups [][]int) error {
	live := make([]bool, len(g.Nodes))
	live[g.Output] = true
	for i := g.Output; i >= 0; i-- {
		if live[i] {
			for _, j := range g.Nodes[i].Inputs {
				live[j] = true
			}
		}
	}
	live[0] = true
	groupOf := make(map[int][]int)
	for _, ids := range groups {
		for _, id := range ids {
			groupOf[id] = ids
		}
	}
	nodeUnit := make([]int, len(g.Nodes))
	for i := range nodeUnit {
		nodeUnit[i] = -1
	}
	for _, n := range g.Nodes {
		if !live[n.ID] {
			continue
		}
		ids := groupOf[n.ID]
		if ids != nil && ids[len(ids)-1] != n.ID {
			continue
		}
		if ids == nil {
			ids = []int{n.ID}
		}
		u := &unit{idx: len(m.units), seg: -1}
		for _, id := range ids {
			u.nodes = append(u.nodes, g.Nodes[id])
		}
		l, ok := layoutOf(n.Out)
		if !ok {
			return fmt.Errorf("%w: %s (%s) produces %v per sample; the cpu backend runs vectors [F], tokens [T, D] and images [C, H, W]", engine.ErrUnsupported, n.Name, n.Op, n.Out)
		}
		u.out = l
		for _, j := range u.nodes[0].Inputs {
			if nodeUnit[j] < 0 {
				return fmt.Errorf("cpu: %s reads %s, which is inside a fusion group", u.nodes[0].Name, g.Nodes[j].Name)
			}
			u.ins = append(u.ins, nodeUnit[j])
			u.in = append(u.in, m.units[nodeUnit[j]].out)
		}
		nodeUnit[n.ID] = u.idx
		m.units = append(m.units, u)
	}
	m.outUnit = nodeUnit[g.Output]
	if o := m.units[m.outUnit]; o.out.seq() {
		return unsupported(o.nodes[len(o.nodes)-1], fmt.Sprintf("ends the model with tokens %v; the losses read a vector or an image: end with select_token or mean_tokens (then dense)", o.nodes[len(o.nodes)-1].Out))
	}
	return nil
}

// makeKernels builds each unit's kernel and registers its parameters.
func (m *model) makeKernels() error {
	for _, u := range m.units {
		k, err := m.kernelFor(u)
		if err != nil {
			return err
		}
		u.k = k
		u.sp = k.spec()
		if len(u.sp.saveIn) != len(u.ins) {
			u.sp.saveIn = make([]bool, len(u.ins))
		}
	}
	// Batchnorms folded into a separate conv for evaluation.
	for _, pair := range m.cfg.Folds {
		var cu *unit
		for _, u := range m.units {
			if len(u.nodes) == 1 && u.nodes[0].Name == pair[0] {
				cu = u
			}
		}
		for _, u := range m.units {
			bk, ok := u.k.(*bnKernel)
			if !ok || len(u.nodes) != 1 || u.nodes[0].Name != pair[1] || cu == nil || len(u.ins) != 1 || u.ins[0] != cu.idx {
				continue
			}
			if ck, ok := cu.k.(*convKernel); ok && ck.bn == nil && ck.act == actNone {
				ck.fold = bk.st
				bk.folded = true
			}
		}
	}
	return nil
}

func unsupported(n *stdlib.Node, why string) error {
	return fmt.Errorf("%w: %s (%s) %s", engine.ErrUnsupported, n.Name, n.Op, why)
}

// opKernel is how the cpu backend runs one op. Each kernel's file
// registers the ops it runs (registerKernel, in its init), so that a new
// op's kernel and its dispatch sit in one file.
type opKernel struct {
	// build makes the kernel of unit u, whose first node is the op's;
	// t is the fused tail after it.
	build func(m *model, u *unit, t tail) (kernel, error)
	// fuses says the op may head a fused unit, its build reading t;
	// a unit headed by any other op is refused.
	fuses bool
	// tokens says the op runs on tokens [T, D], or makes or reads them
	// (checking their shape in build); the others refuse tokens.
	tokens bool
}

// tail is what a fused unit runs after its first node: a batchnorm and
// an activation, each optional.
type tail struct {
	bn  *stdlib.Node
	act actKind
}

// opKernels maps an op's name to its kernel, filled by registerKernel.
var opKernels = map[string]opKernel{}

// registerKernel adds op's kernel to opKernels; it runs in the package's
// initialisation, where a second registration of op is a bug.
func registerKernel(op string, k opKernel) {
	if _, dup := opKernels[op]; dup {
		panic("native: op " + op + " registered twice")
	}
	opKernels[op] = k
}

// kernelFor builds unit u's kernel from its first op's registration.
func (m *model) kernelFor(u *unit) (kernel, error) {
	first := u.nodes[0]
	t, err := tailOf(u)
	if err != nil {
		return nil, err
	}
	k, ok := opKernels[first.Op]
	if !k.tokens && u.onTokens() {
		return nil, unsupported(first, "on tokens [T, D] is not implemented by the cpu backend")
	}
	if !ok {
		return nil, unsupported(first, "is not implemented by the cpu backend (it can be planned, not run)")
	}
	if len(u.nodes) > 1 && !k.fuses {
		return nil, unsupported(first, "cannot start a fused kernel")
	}
	return k.build(m, u, t)
}

// tailOf reads a fused unit's nodes after the first: a batchnorm and an
// activation, refusing any other op.
func tailOf(u *unit) (tail, error) {
	var t tail
	var actNode *stdlib.Node
	for _, n := range u.nodes[1:] {
		switch {
		case n.Op == "batchnorm":
			t.bn = n
		default:
			if _, ok := actOf(n.Op); !ok {
				return tail{}, unsupported(n, "cannot be fused here")
			}
			actNode = n
		}
	}
	if actNode != nil {
		t.act, _ = actOf(actNode.Op)
	}
	return t, nil
}

// onTokens says whether the unit reads or writes tokens [T, D].
func (u *unit) onTokens() bool {
	seq := u.out.seq()
	for _, l := range u.in {
		seq = seq || l.seq()
	}
	return seq
}

// in0 is the unit's first input layout, the zero layout when it has none.
func (u *unit) in0() layout {
	if len(u.in) > 0 {
		return u.in[0]
	}
	return layout{}
}

func eps(e float64) float64 {
	if e <= 0 {
		return 1e-5
	}
	return e
}

// assignSegments marks the units inside each checkpoint segment. A fused
// unit belongs to a segment only when all its nodes do.
func (m *model) assignSegments(segs []engine.Segment) error {
	for si, s := range segs {
		if s.From < 1 || s.To < s.From || s.To >= len(m.g.Nodes) {
			return fmt.Errorf("cpu: checkpoint segment %d covers nodes %d to %d; the graph has nodes 1 to %d (node 0 is the input)", si, s.From, s.To, len(m.g.Nodes)-1)
		}
		for _, u := range m.units[1:] {
			in := true
			for _, n := range u.nodes {
				if n.ID < s.From || n.ID > s.To {
					in = false
				}
			}
			if in && u.seg < 0 {
				u.seg = si
			}
		}
	}
	return nil
}

// gradFlags marks the units whose outputs need a gradient: those with
// parameters and everything downstream of them.
func (m *model) gradFlags() {
	for _, u := range m.units {
		u.reqGrad = hasParams(u.k) || (u.idx == 0 && m.cfg.InputGrad)
		u.needDin = make([]bool, len(u.ins))
		for k, j := range u.ins {
			if m.units[j].reqGrad {
				u.reqGrad = true
				u.needDin[k] = true
			}
		}
	}
}

func hasParams(k kernel) bool {
	switch k := k.(type) {
	case *convKernel, *convTKernel, *denseKernel, *lnKernel, *skDenseKernel, *skConvKernel, *attnKernel, *randAttnKernel, *classTokenKernel, *posEmbedKernel:
		return true
	case *bnKernel:
		return k != nil
	case *inKernel:
		return k.gamma != nil
	}
	return false
}

// allocScratch gives each worker the largest column buffer and partial
// weight gradient any kernel needs.
func (m *model) allocScratch() {
	col, part := 0, 0
	for _, u := range m.units {
		c, p, _ := kernelScratch(u.k)
		col, part = max(col, c), max(part, p)
	}
	if m.pool.n == 1 {
		part = 0
	}
	m.scratch = make([][]float32, m.pool.n)
	m.partial = make([][]float32, m.pool.n)
	for w := range m.scratch {
		m.scratch[w] = make([]float32, col)
		m.partial[w] = make([]float32, part)
	}
	m.scratchWords = m.pool.n * (col + part)
}

// kernelScratch is one worker's scratch for a kernel, as allocScratch
// and the cost model (cost_arena.go) size it: the column buffer and
// partial weight gradient of a convolution (and whether it runs as
// Winograd), the attention kernels' per-head buffers.
func kernelScratch(k kernel) (col, part int, wino bool) {
	var geo *convGeom
	var vol *volGeom
	switch k := k.(type) {
	case *attnKernel:
		return k.scratchNeed(), 0, false
	case *randAttnKernel:
		return k.scratchNeed(), 0, false
	case *convKernel:
		geo, vol = &k.geo, k.vol
	case *convTKernel:
		geo, vol = &k.eq, k.vol
	case *skConvKernel:
		geo = &k.geo
	}
	switch {
	case vol != nil:
		col, part = vol.workerScratch()
		return col, part, false
	case geo != nil:
		col, part = geo.workerScratch()
		return col, part, geo.wino
	}
	return 0, 0, false
}
