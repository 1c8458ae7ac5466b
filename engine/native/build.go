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

func (m *model) kernelFor(u *unit) (kernel, error) {
	first := u.nodes[0]
	var bnNode, actNode *stdlib.Node
	for _, n := range u.nodes[1:] {
		switch {
		case n.Op == "batchnorm":
			bnNode = n
		default:
			if _, ok := actOf(n.Op); !ok {
				return nil, unsupported(n, "cannot be fused here")
			}
			actNode = n
		}
	}
	act := actNone
	if actNode != nil {
		act, _ = actOf(actNode.Op)
	}
	a := first.Args
	if k, err := m.tokenKernel(u); k != nil || err != nil {
		return k, err
	}
	switch first.Op {
	case "input":
		return inputKernel{}, nil
	case "conv":
		in, out := u.in[0], u.out
		if !in.spatial {
			return nil, unsupported(first, "needs [C, H, W]")
		}
		if in.vol() {
			return m.conv3Kernel(first, bnNode, in, out, act)
		}
		geo := convGeomOf(in, out, a)
		k := &convKernel{geo: geo, act: act}
		k.w = m.newParam(first.Name+".weight", []int64{int64(out.c), int64(geo.cig), a.Kernel, a.Kernel})
		if a.Bias {
			k.b = m.newParam(first.Name+".bias", []int64{int64(out.c)})
		}
		if bnNode != nil {
			k.bn = m.newBN(bnNode.Name, out.c, eps(bnNode.Args.Eps), bnNode.Args.Momentum)
			for _, f := range m.cfg.Folds {
				if f[0] == first.Name && f[1] == bnNode.Name {
					k.fold = k.bn
				}
			}
		}
		return k, nil
	case "convtranspose":
		in, out := u.in[0], u.out
		if !in.spatial || act != actNone || bnNode != nil {
			return nil, unsupported(first, "needs [C, H, W] and runs unfused")
		}
		if in.vol() {
			return m.convT3Kernel(first, in, out), nil
		}
		grp := int(max(a.Groups, 1))
		eq := convGeomOf(out, in, a)
		k := &convTKernel{eq: eq}
		k.w = m.newParam(first.Name+".weight", []int64{int64(in.c), int64(out.c / grp), a.Kernel, a.Kernel})
		if a.Bias {
			k.b = m.newParam(first.Name+".bias", []int64{int64(out.c)})
		}
		return k, nil
	case "dense", "lowrank_dense":
		in := u.in[0]
		if in.spatial {
			return nil, unsupported(first, "over [C, H, W] maps the last axis; the cpu backend runs dense on vectors (flatten or gap first)")
		}
		k := &denseKernel{in: in.c, out: u.out.c, act: act, rows: in.rows()}
		if first.Op == "dense" {
			k.w = m.newParam(first.Name+".weight", []int64{int64(k.out), int64(k.in)})
		} else {
			k.lowrank, k.terms, k.rank = true, int(a.Terms), int(a.Rank)
			if k.terms < 1 || k.rank < 1 {
				return nil, unsupported(first, "needs terms and rank of at least 1")
			}
			k.u = m.newParam(first.Name+".u", []int64{a.Terms, int64(k.in), a.Rank})
			k.v = m.newParam(first.Name+".v", []int64{a.Terms, a.Rank, int64(k.out)})
		}
		if a.Bias {
			k.b = m.newParam(first.Name+".bias", []int64{int64(k.out)})
		}
		return k, nil
	}
	if len(u.nodes) > 1 {
		return nil, unsupported(first, "cannot start a fused kernel")
	}
	in := layout{}
	if len(u.in) > 0 {
		in = u.in[0]
	}
	switch first.Op {
	case "sketched_dense":
		if in.spatial || a.Terms < 1 || a.Rank < 1 {
			return nil, unsupported(first, "needs a vector, and terms and rank of at least 1")
		}
		return m.skDense(first.Name, in.c, u.out.c, int(a.Terms), int(a.Rank), a.Bias), nil
	case "sketched_conv":
		if !in.spatial || a.Terms < 1 || a.Rank < 1 {
			return nil, unsupported(first, "needs [C, H, W], and terms and rank of at least 1")
		}
		geo := skConvGeomOf(in, u.out, a)
		return m.skConv(first.Name, geo, u.out.c, int(a.Terms), int(a.Rank), int(a.Kernel), a.Bias), nil
	case "batchnorm":
		return &bnKernel{st: m.newBN(first.Name, u.out.c, eps(a.Eps), a.Momentum)}, nil
	case "layernorm":
		if u.out.spatial {
			return nil, unsupported(first, "over [C, H, W] normalises the last axis only; the cpu backend runs layernorm on vectors")
		}
		f := int64(u.out.c)
		return &lnKernel{f: u.out.c, rows: u.out.rows(), eps: eps(a.Eps),
			gamma: m.newParam(first.Name+".weight", []int64{f}),
			beta:  m.newParam(first.Name+".bias", []int64{f})}, nil
	case "relu", "gelu", "sigmoid", "tanh":
		k, _ := actOf(first.Op)
		return &actKernel{a: k}, nil
	case "softmax":
		return softmaxKernel{}, nil
	case "leakyrelu":
		return &leakyKernel{slope: float32(a.Slope)}, nil
	case "instancenorm", "pixelshuffle":
		if !in.spatial {
			return nil, unsupported(first, "needs [C, H, W]")
		}
		if first.Op == "pixelshuffle" {
			return &shuffleKernel{r: int(a.Scale), h: in.h, w: in.w}, nil
		}
		k := &inKernel{c: u.out.c, eps: eps(a.Eps)}
		if a.Affine {
			c := int64(u.out.c)
			k.gamma, k.beta = m.newParam(first.Name+".weight", []int64{c}), m.newParam(first.Name+".bias", []int64{c})
		}
		return k, nil
	case "groupnorm":
		return m.groupnormKernel(first, in)
	case "maxpool", "avgpool":
		if !in.spatial {
			return nil, unsupported(first, "needs [C, H, W]")
		}
		s := a.Stride
		if s == 0 {
			s = a.Kernel
		}
		if in.vol() {
			if first.Op != "maxpool" {
				return nil, unsupported(first, "over a volume is not implemented (maxpool is)")
			}
			o := u.out
			return &pool3Kernel{c: o.c, k: int(a.Kernel), s: int(s), p: int(a.Padding), d: in.d, h: in.h, w: in.w, do: o.d, ho: o.h, wo: o.w}, nil
		}
		return &poolKernel{max: first.Op == "maxpool", c: u.out.c, k: int(a.Kernel), s: int(s), p: int(a.Padding),
			h: in.h, w: in.w, ho: u.out.h, wo: u.out.w}, nil
	case "gap":
		if !in.spatial {
			return nil, unsupported(first, "needs [C, H, W]")
		}
		return &gapKernel{keep: u.out.spatial, s: in.s()}, nil
	case "dropout":
		return &dropoutKernel{p: a.P, node: uint64(first.ID) + 1}, nil
	case "flatten":
		return flattenKernel{}, nil
	case "upsample":
		if !in.spatial {
			return nil, unsupported(first, "needs [C, H, W]")
		}
		if in.vol() {
			if a.Mode != "" && a.Mode != "nearest" && a.Mode != "trilinear" {
				return nil, unsupported(first, fmt.Sprintf("over a volume has mode %q", a.Mode))
			}
			return newUpsample3(in, u.out, a.Mode == "trilinear"), nil
		}
		if a.Mode != "" && a.Mode != "nearest" && a.Mode != "bilinear" {
			return nil, unsupported(first, fmt.Sprintf("has mode %q", a.Mode))
		}
		return newUpsample(in.h, in.w, u.out.h, u.out.w, a.Mode == "bilinear", a.AlignCorners), nil
	case "concat":
		for _, l := range u.in {
			if l.spatial != u.out.spatial {
				return nil, unsupported(first, "joins tensors of different ranks")
			}
		}
		return &concatKernel{k: len(u.ins)}, nil
	case "add":
		s := float32(1)
		if a.FlowScale > 0 {
			s = float32(a.FlowScale)
		}
		return &addKernel{k: len(u.ins), scale: s}, nil
	}
	return nil, unsupported(first, "is not implemented by the cpu backend (it can be planned, not run)")
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

// denseOnly says whether g's work is all dense products and the
// elementwise ops around them: an MLP. Such a model runs its matrix
// products on OpenBLAS's own threads and everything else on the calling
// goroutine alone (a pool of one), instead of splitting both across the
// pool. OpenBLAS shares one packing of the weights between its threads
// where the pool's halves each pack all of them, and its threads poll
// between calls where a pool worker parks; the elementwise work of an
// MLP (bias, activation, loss, Adam) is too small to pay for a fork-join
// and, split, ran beside OpenBLAS's polling thread on the other core.
// Measured on bench/models/mlp.pipe (a loop of 2,000 steps, median,
// three interleaved runs each, quiet): 0.43 ms a step (Adam 0.08)
// against 0.55 (Adam 0.12) with only the products on OpenBLAS and 0.61
// to 0.66 with everything on the pool. In any other model OpenBLAS's
// polling threads took the cores from the pool's workers: the Fashion
// CNN's step went from 11.1 to 15.0 ms and the ViT's from 116 to 157 ms
// with every product on OpenBLAS's threads (BenchmarkStep*, min of 3).
func denseOnly(g *stdlib.Graph) bool {
	dense := false
	for _, n := range g.Nodes {
		switch n.Op {
		case "dense", "lowrank_dense":
			dense = true
		case "input", "flatten", "dropout", "relu", "gelu", "sigmoid", "tanh", "leakyrelu", "softmax":
		default:
			return false
		}
	}
	return dense
}
