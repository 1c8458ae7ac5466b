package planner

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"strings"

	"pipe/diag"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// CodeNoFit is the code of the diagnostic that says a plan does not fit
// its device; `pipe plan` exits 3 when it is the only kind of error.
const CodeNoFit = "does-not-fit"

// CodeCancelled is the code of the diagnostic Plan returns, with a nil
// plan, when the context given with WithContext ended before it finished.
const CodeCancelled = "cancelled"

// Plan decides how a checked program trains on a device and what it
// costs: it builds the model's graph, resolves the device and the
// precision, sizes the batch together with the checkpoint segments, the
// accumulation and the learning rate, picks the fusion groups and the
// loader's sizes, and estimates a step's time. It returns the plan (even
// when it does not fit, so the numbers can be shown) and its diagnostics:
// warnings for fallbacks, an error with code CodeNoFit when the memory does
// not fit, other errors when the program cannot be planned (the plan is
// then nil or partial).
func Plan(prog *stdlib.Program, opts ...Option) (*plan.Plan, diag.Diagnostics) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	host := DetectHost
	if cfg.host != nil {
		h := *cfg.host
		host = func() HostInfo { return h }
	}
	pl := newPlanner(prog, cfg, host())
	if err := pl.runUntilStopped(); err != nil {
		return nil, diag.Diagnostics{&diag.Diagnostic{Severity: diag.Error, Code: CodeCancelled, Summary: "planning was cancelled",
			Detail: fmt.Sprintf("The planner stopped before it finished (%v), so there is no plan.", err)}}
	}
	pl.diags.Sort()
	return pl.plan, pl.diags
}

// newPlanner is a planner of dec under cfg on host.
func newPlanner(dec *stdlib.Program, cfg config, host HostInfo) *planner {
	return &planner{dec: dec, sp: dec.Spec, cfg: cfg, host: host}
}

// stopped is the panic that unwinds a cancelled planning from wherever it
// was polled back to Plan, so that no loop needs a path out of its own.
type stopped struct{ err error }

// poll unwinds the planning when ctx is done; a nil ctx never is.
func poll(ctx context.Context) {
	if ctx == nil {
		return
	}
	if err := ctx.Err(); err != nil {
		panic(stopped{err})
	}
}

func (pl *planner) poll() { poll(pl.cfg.ctx) }

// runUntilStopped runs the planning and returns the context's error if
// the planning was stopped; any other panic goes on.
func (pl *planner) runUntilStopped() (err error) {
	defer func() {
		if r := recover(); r != nil {
			s, ok := r.(stopped)
			if !ok {
				panic(r)
			}
			err = s.err
		}
	}()
	pl.run()
	return nil
}

type planner struct {
	// ganD is a gan plan's discriminator (gan_batch.go).
	ganD *ganModel
	// rooflineBound is the roofline's bound where the host floor has
	// taken plan.StepTime.Bound (steps.go).
	rooflineBound string
	// dec is the program as planned, sp its specs.
	dec   *stdlib.Program
	sp    *spec.Program
	cfg   config
	host  HostInfo
	plan  *plan.Plan
	diags diag.Diagnostics

	// train is the train block's settings; an empty one when the file
	// has none (sp.Train is nil).
	train *spec.Train
	model *spec.Model
	graph *stdlib.Graph
	dev   plan.Device
	// eng is the plan's engine's descriptor (pickEngine).
	eng  cost.Engine
	cost *costModel
	lc   loaderChoice
	// fused says fusion is on; group is each node's fusion group ID.
	fused bool
	group []int
	// processNote says where a native plan's process terms come from.
	processNote string
}

func (pl *planner) decide(what, value, reason string) {
	pl.plan.Decisions = append(pl.plan.Decisions, plan.Decision{What: what, Value: value, Reason: reason})
}

func (pl *planner) errorf(at *diag.Range, code, summary, format string, args ...any) {
	pl.diags = append(pl.diags, &diag.Diagnostic{Severity: diag.Error, Code: code, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: at})
}

func (pl *planner) warnf(at *diag.Range, code, summary, format string, args ...any) {
	pl.diags = append(pl.diags, &diag.Diagnostic{Severity: diag.Warning, Code: code, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: at})
}

func (pl *planner) run() {
	pl.poll()
	p := pl.sp
	pl.plan = &plan.Plan{Version: plan.Version, Pipeline: p.Name, Layers: []plan.Layer{}, Decisions: []plan.Decision{},
		Checkpoint: plan.Checkpoint{Segments: []plan.CheckpointSegment{}}, Fusion: plan.Fusion{Groups: []plan.FusionGroup{}, InferenceFolds: [][]string{}}}
	pl.plan.File = p.File
	if pl.cfg.src != nil {
		pl.plan.SourceSHA256 = plan.SourceHash(pl.cfg.src)
	}
	pl.setTrain()
	// A path pipe cannot serve fails here, before any data is read.
	pl.diags = append(pl.diags, stdlib.CheckLocations(p)...)
	if !pl.pickModel() {
		return
	}
	if p.Train == nil {
		pl.decide("train", "defaults", "The file has no train block: the plan is for training with the defaults (batch auto, adam, checkpoint auto).")
	}
	g, ds := pl.dec.Graph(pl.model.Name)
	pl.poll()
	pl.diags = append(pl.diags, ds...)
	if ds.HasErrors() || g == nil || len(g.Nodes) == 0 {
		return
	}
	pl.graph = g
	pl.plan.Parameters = g.Params()
	pl.plan.FLOPsPerSample = g.FLOPs()
	pl.planOnlyWarnings()
	if !pl.pickDevice() || !pl.pickEngine() {
		return
	}
	prec := pl.pickPrecision()
	opt := pl.optimizer()
	loss := pl.loss()
	pl.plan.Loss = loss
	pl.fuse()
	eng := pl.eng
	if pl.traits().InProcess {
		s := pl.costSetup(prec, loss, nil)
		s.Fusion = pl.fusedGroups()
		pl.cost = newCPUCostModel(eng, g, s, int64(opt.StateBuffers))
		if pl.cost == nil {
			pl.errorf(nil, "no-cost-model", "the "+eng.Name()+" engine's cost model has no arena", "The cost model given for %s lays out no arena (cost.Memory.Arena), which an engine in pipe's process (cost.Traits.InProcess) must.", eng.Name())
			return
		}
		pl.processTerms()
	} else {
		var gs *cost.GPUSetup
		if pl.dev.Kind == plan.BackendGPU && pl.dev.Capability != "" {
			gs = &cost.GPUSetup{Capability: pl.dev.Capability, Optimizer: opt.Kind, StateBuffers: int64(opt.StateBuffers),
				World: pl.plan.Distributed.WorldSize, TargetBytes: targetBytes(loss, g.OutShape()), L2: pl.dev.L2,
				Samples: pl.cfg.samples, SamplesExact: pl.cfg.samplesExact, GAN: pl.sp.GAN != nil, GraphOff: pl.engineHost().GraphsOff}
		}
		pl.cost = newCostModel(eng, g, pl.costSetup(prec, loss, gs), int64(opt.StateBuffers), targetBytes(loss, g.OutShape()))
		newGPUModel(pl.cost, pl.cost.gpuTerms)
		if pl.dev.Kind == plan.BackendCPU {
			pl.workerTerms()
		}
	}
	pl.cost.ch.ctx = pl.cfg.ctx
	pl.poll()
	pl.sizeAll(prec, opt)
	pl.processDecision()
	if gan := p.GAN; gan != nil {
		pl.planGAN(gan)
	}
	pl.schedule()
	pl.inference()
	pl.ganFits()
	pl.planServe()
	if p.Train == nil {
		p := pl.plan
		pl.warnf(nil, "train-defaults", "no train block: training with the defaults",
			"The file has no train block, so a run trains %s for 1 epoch with batch auto (%d here), %s lr %g, loss %s, a constant schedule and checkpoint auto. Write a train block to choose them: train { epochs 10  batch 64  optimizer adam lr 1e-3 }.",
			p.Model, p.BatchSize, p.Optimizer.Kind, p.Optimizer.LR, p.Loss)
	}
}

// setTrain sets pl.train to the train block's settings, or to those of
// an empty train block (one epoch) when the file has none.
func (pl *planner) setTrain() {
	pl.train = pl.sp.Train
	if pl.train == nil {
		pl.train = &spec.Train{Epochs: 1}
	}
}

// fuse decides the fusion groups (plan.Fusion), which the CPU's memory
// depends on.
func (pl *planner) fuse() {
	p, g := pl.plan, pl.graph
	fmode, fused := "auto", true
	if v, ok := pl.train.Fuse.Fixed(); ok {
		fused = v
		fmode = fmt.Sprint(v)
	}
	p.Fusion.Mode = fmode
	pl.fused = fused
	if fused {
		groups, grp, folds := fuse(g)
		pl.group = grp
		p.Fusion.Groups = append(p.Fusion.Groups, groups...)
		p.Fusion.InferenceFolds = append(p.Fusion.InferenceFolds, folds...)
	} else {
		pl.group = make([]int, len(g.Nodes))
	}
}

// fusedGroups lists the fusion groups by node IDs.
func (pl *planner) fusedGroups() []cost.Group {
	out := make([]cost.Group, len(pl.plan.Fusion.Groups))
	for i, fg := range pl.plan.Fusion.Groups {
		out[i].Kind = fg.Kind
	}
	for id, k := range pl.group {
		if k > 0 && k <= len(out) {
			out[k-1].IDs = append(out[k-1].IDs, id)
		}
	}
	return out
}

// pickModel finds the model to plan: the generator in gan mode, train's
// model field, else the only model.
func (pl *planner) pickModel() bool {
	p := pl.sp
	if gan := p.GAN; gan != nil {
		pl.model = p.Model(gan.Generator)
	} else if pl.train.Model != "" {
		pl.model = p.Model(pl.train.Model)
	} else if len(p.Models) == 1 {
		pl.model = p.Models[0]
	}
	if pl.model == nil {
		var at *diag.Range
		if p.Train != nil {
			at = &pl.train.At.KindRange
		}
		names := make([]string, len(p.Models))
		for i, m := range p.Models {
			names[i] = m.Name
		}
		if len(p.Models) == 0 {
			pl.errorf(at, "no-model", "nothing to plan", "The file declares no model. Add a model block: model NAME { input [...] ... }.")
		} else {
			pl.errorf(at, "ambiguous-model", "which model to plan",
				"The file declares %d models (%s); say which one train trains with: model NAME.", len(names), strings.Join(names, ", "))
		}
		return false
	}
	pl.plan.Model = pl.model.Name
	return true
}

func (pl *planner) planOnlyWarnings() {
	reg := stdlib.Schema()
	for _, n := range pl.model.Calls {
		if reg.PlanOnly(n.Name) {
			r := n.NameRange
			pl.warnf(&r, "plan-only", fmt.Sprintf("%s can be planned but not run yet", n.Name),
				"pipe plan sizes %s, but the executor has no kernels for it yet; pipe run will refuse it.", n.Name)
		}
	}
}

func (pl *planner) pickDevice() bool {
	name, at := pl.cfg.device, (*diag.Range)(nil)
	if d := pl.sp.Device; name == "" && d != nil {
		name, at = d.Value, d.At()
		if d.IsAuto {
			name = "auto"
		}
	}
	dev, why, ds := resolveDevice(pl.sp, name, at, pl.host)
	if ds.HasErrors() {
		if at != nil {
			// The checker reported the name written in the file; a GPU
			// that is not here is the planner's to say.
			for _, d := range ds {
				if d.Code != "unknown-device" {
					pl.diags = append(pl.diags, d)
				}
			}
			if len(pl.diags.Errs()) == 0 {
				pl.diags = append(pl.diags, ds...)
			}
		} else {
			pl.diags = append(pl.diags, ds...)
		}
		return false
	}
	pl.dev = dev
	pl.plan.Device = dev
	pl.plan.Backend = dev.Kind
	backend := "the CPU executor"
	if dev.Kind == plan.BackendGPU {
		backend = "a CUDA GPU"
	}
	pl.decide("device", dev.Name, fmt.Sprintf("%s; %s with %s usable.", why, backend, FormatBytes(dev.Memory)))
	return true
}

// pickPrecision resolves the precision field against the device.
func (pl *planner) pickPrecision() plan.Precision {
	req, at := "auto", (*diag.Range)(nil)
	at = pl.sp.At.Written("precision")
	if v, ok := pl.sp.Precision.Fixed(); ok {
		req = v
	}
	d := pl.dev
	compute, reason := req, ""
	fallback := func(to, why string) {
		pl.warnf(at, "precision-fallback", fmt.Sprintf("%s runs as %s on %s", req, to, d.Name),
			"%s Write precision %s to say so, or plan for another device with --device (pipe devices lists them).", why, to)
		compute, reason = to, why
	}
	if d.Kind == plan.BackendCPU && pl.traits().CPUAutocast {
		switch req {
		case "auto":
			compute, reason = "fp32", fmt.Sprintf("precision auto on the CPU: fp32 (write bf16 for bf16 autocast, which the %s engine runs on the CPU).", pl.eng.Name())
		case "fp32":
			reason = "fp32 as written."
		case "bf16":
			reason = "bf16 as written: torch.autocast on the CPU, with fp32 master weights."
		default:
			fallback("fp32", fmt.Sprintf("PyTorch on the CPU has no %s autocast, so %s falls back to fp32.", req, req))
		}
	} else if d.Kind == plan.BackendCPU {
		switch req {
		case "auto":
			compute, reason = "fp32", "precision auto on the CPU executor: it computes in fp32."
		case "fp32":
			reason = "fp32 as written."
		default:
			fallback("fp32", fmt.Sprintf("The CPU executor computes in fp32 only, so %s falls back to fp32 (activations take 4 bytes, not 2).", req))
		}
	} else {
		switch req {
		case "auto":
			switch {
			case d.HasBF16:
				compute, reason = "bf16", fmt.Sprintf("precision auto: %s supports bf16, mixed precision with fp32 master weights and no loss scaling.", d.Name)
			case d.FP16 > 0:
				compute, reason = "fp16", fmt.Sprintf("precision auto: %s has no bf16, so fp16 mixed precision with loss scaling.", d.Name)
			default:
				compute, reason = "fp32", fmt.Sprintf("precision auto: %s has neither bf16 nor fp16 rates, so fp32.", d.Name)
			}
		case "bf16":
			switch {
			case d.HasBF16:
				reason = "bf16 as written: mixed precision with fp32 master weights."
			case d.FP16 > 0:
				fallback("fp16", fmt.Sprintf("%s has no bf16, so training uses fp16 mixed precision with dynamic loss scaling (fp16's range needs it).", d.Name))
			default:
				fallback("fp32", fmt.Sprintf("%s supports neither bf16 nor fp16, so training runs in fp32.", d.Name))
			}
		case "fp16":
			if d.FP16 > 0 {
				reason = "fp16 as written: mixed precision with fp32 master weights and dynamic loss scaling."
			} else {
				fallback("fp32", fmt.Sprintf("%s has no fp16 rate, so training runs in fp32.", d.Name))
			}
		case "tf32":
			if d.HasTF32 {
				reason = "tf32 as written: convolutions and matrix products on tensor cores with fp32 storage."
			} else {
				fallback("fp32", fmt.Sprintf("%s has no tf32, so training runs in plain fp32.", d.Name))
			}
		default:
			reason = "fp32 as written."
		}
	}
	p := plan.Precision{Requested: req, Compute: compute, Activations: "fp32", ActivationBytes: 4}
	if compute == "fp16" || compute == "bf16" {
		p.Mixed, p.Activations, p.ActivationBytes = true, compute, 2
	}
	p.LossScaling = compute == "fp16"
	pl.plan.Precision = p
	pl.decide("precision", compute, reason)
	return p
}

func (pl *planner) optimizer() plan.Optimizer { return optimizerOf(pl.train.Optimizer) }

// optimizerOf is an optimizer field's settings (train's optimizer, gan
// mode's d_optimizer), with the defaults for what it leaves out.
func optimizerOf(f *spec.Optimizer) plan.Optimizer {
	o := plan.Optimizer{Kind: "adam", LRWritten: 1e-3, LRScale: 1}
	if f != nil && f.Kind != "" {
		o.Kind = f.Kind
	}
	if f != nil && f.LR != nil {
		o.LRWritten = *f.LR
	}
	switch o.Kind {
	case "sgd":
		if f != nil && f.Momentum != nil && *f.Momentum > 0 {
			o.StateBuffers = 1
		}
	default:
		o.StateBuffers = 2
	}
	o.LR = o.LRWritten
	return o
}

// loss returns the loss as written, or the one the data implies.
func (pl *planner) loss() string {
	if pl.sp.GAN != nil {
		return "mae" // the generator's L1 term; planGAN plans the adversarial loss
	}
	if pl.train.Loss != "" {
		return pl.train.Loss
	}
	if src := pl.source(); src != nil {
		switch src.Kind {
		case spec.KindGeoTIFF:
			return "mse"
		case spec.KindSynthetic:
			if !src.At.Has("classes") {
				return "mse"
			}
		}
	}
	return "cross_entropy"
}

// source is the source train reads (spec.Program.TrainSource).
func (pl *planner) source() *spec.Source { return pl.sp.TrainSource() }

// budget returns the memory a plan may use on the device, and fills the
// plan's capacity, margin and reserve.
func (pl *planner) budget() int64 {
	margin := 0.10
	if v := pl.train.MemoryMargin; v != nil {
		margin = *v
	}
	capacity := pl.dev.Memory
	var reserve int64
	if pl.dev.Kind == plan.BackendCPU {
		reserve = 1 << 30
	}
	b := sub(sub(capacity, fraction(capacity, margin)), reserve)
	m := &pl.plan.Memory
	m.Capacity, m.MarginPercent, m.Reserve, m.Budget = capacity, margin*100, reserve, b
	return b
}

// sizeAll makes every decision that depends on memory, and fills the plan.
func (pl *planner) sizeAll(prec plan.Precision, opt plan.Optimizer) {
	m, g, p := pl.cost, pl.graph, pl.plan
	budget := pl.budget()
	ld := pl.loaderFor(g)
	var extra int64 // per-sample memory the loader shares with training (CPU)
	if pl.traits().LoaderInBudget {
		extra = mul(pl.loaderBatches(ld, true), ld.SampleBytes)
	}
	// In gan mode the discriminator's memory is counted as the batch is
	// chosen, then planned at that batch by planGAN.
	m.gan = pl.ganShareOf()
	bc := pl.chooseBatch(budget, extra, prec)
	if m.gan != (ganShare{}) {
		pl.ganDecisions(bc.batch)
	}
	m.gan = ganShare{}
	b := bc.batch
	if b < 1 {
		b = 1
	}
	if !pl.traits().LoaderInBudget {
		pl.fitLoaderToHost(&ld, b)
	}
	p.BatchSize = b
	p.TrainSamples, p.TrainSamplesExact = pl.cfg.samples, pl.cfg.samplesExact
	p.AccumulationSteps = max(bc.accum, 1)
	p.EffectiveBatch = mul(mul(b, p.AccumulationSteps), int64(p.WorldSize()))
	pl.lr(opt, b, p.AccumulationSteps, bc.fileBatch)
	ld.BufferBytes = mul(mul(pl.loaderBatches(ld, false), b), ld.SampleBytes)
	p.Loader = ld
	pl.loaderDecisions(ld)

	// plan.Checkpoint.
	act := m.baseline
	var recomputed []bool
	ck := &p.Checkpoint
	ck.Mode = bc.mode
	ck.Optimal = true
	if len(bc.ck.Segments) > 0 {
		act = bc.ck.Peak
		ck.Optimal = bc.ck.Exact
		recomputed = make([]bool, len(g.Nodes))
		for _, s := range bc.ck.Segments {
			var f int64
			for i := s.From; i <= s.To; i++ {
				recomputed[i] = true
				f = add(f, g.Nodes[i].FLOPs)
			}
			ck.Segments = append(ck.Segments, plan.CheckpointSegment{First: g.Nodes[s.From].Name, Last: g.Nodes[s.To].Name,
				From: s.From, To: s.To, ExtraFLOPs: mul(f, b)})
		}
		ck.ExtraFLOPs = mul(bc.ck.Extra, b)
		if fwd := g.FLOPs(); fwd > 0 {
			ck.ExtraPercent = round2(100 * float64(bc.ck.Extra) / (3 * float64(fwd)))
		}
	}
	ck.PeakBefore = m.peakBytes(m.baseline, b)
	ck.PeakAfter = m.peakBytes(act, b)

	m.memory(&p.Memory, b, act, extra, bc.ck.Segments)
	p.Fits = p.Memory.Total <= p.Memory.Budget
	pl.fusionDecision(p.Fusion.Mode, pl.fused)
	group := pl.group

	// Layers.
	for _, nd := range g.Nodes {
		l := plan.Layer{Name: nd.Name, Op: nd.Op, Layer: nd.Layer, Out: nd.Out, Params: nd.Params, FLOPs: nd.FLOPs,
			ActivationBytes: mul(m.perNode[nd.ID], b), FusionGroup: group[nd.ID], Line: nd.Range.Start.Line}
		if l.Out == nil {
			l.Out = []int64{}
		}
		if recomputed != nil {
			l.Recomputed = recomputed[nd.ID]
		}
		if nd.ID < len(m.workspaces) && m.workspaces[nd.ID].Basis != "" {
			w := m.workspaces[nd.ID]
			l.WorkspaceBytes, l.Workspace = w.At(b), w.Basis
		}
		p.Layers = append(p.Layers, l)
	}

	p.StepTime = stepTime(g, m, pl.dev, prec, b, p.AccumulationSteps, recomputed, group, pl.fused, p.Layers)
	pl.allReduceTime()
	pl.fewerNodes(func(b int64) plan.StepTime {
		return stepTime(g, m, pl.dev, prec, b, p.AccumulationSteps, nil, group, pl.fused, nil)
	}, func(b int64) bool { return m.total(b, m.baseline, extra) <= budget })
	pl.stepsPerCommand()
	pl.dataOnDevice()
	pl.stepDecision()
	pl.engineDecisions()
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }

func (pl *planner) fusionDecision(mode string, fused bool) {
	p := pl.plan
	if !fused {
		pl.decide("fusion", "off", "fuse false: every op runs as its own kernel.")
		return
	}
	kinds := map[string]int{}
	var order []string
	for _, g := range p.Fusion.Groups {
		if kinds[g.Kind] == 0 {
			order = append(order, g.Kind)
		}
		kinds[g.Kind]++
	}
	var parts []string
	for _, k := range order {
		parts = append(parts, fmt.Sprintf("%d %s", kinds[k], k))
	}
	value := fmt.Sprintf("%d groups", len(p.Fusion.Groups))
	if len(p.Fusion.Groups) == 1 {
		value = "1 group"
	}
	reason := "fuse " + mode + ": no adjacent ops match a fusion pattern."
	if len(parts) > 0 {
		reason = fmt.Sprintf("fuse %s: %s, each joining a node to its only reader so the tensor between them stays in the kernel; saved tensors are unchanged, so memory is the same and time gains.",
			mode, strings.Join(parts, ", "))
	}
	if n := len(p.Fusion.InferenceFolds); n > 0 {
		reason = strings.TrimSuffix(reason, ".") + fmt.Sprintf("; for inference, %d batchnorms fold into the conv before them.", n)
	}
	pl.decide("fusion", value, reason)
}

func (pl *planner) stepDecision() {
	st := pl.plan.StepTime
	if st.Bound == "unknown" {
		pl.decide("step time", "unknown", fmt.Sprintf("%s has no known peak FLOP/s or bandwidth, so no estimate.", pl.dev.Name))
		return
	}
	why := fmt.Sprintf("Roofline estimate, not a measurement: %s per micro-batch (%s FLOPs, %s moved; mostly %s-bound) × %d, plus %s for the optimizer update",
		FormatSeconds(st.MicroBatchSeconds), FormatCount(int64(math.Min(st.FLOPs, float64(sat)))), FormatBytes(int64(math.Min(st.Bytes, float64(sat)))),
		cmp.Or(pl.rooflineBound, st.Bound), pl.plan.AccumulationSteps, FormatSeconds(st.OptimizerSeconds))
	if st.AllReduceSeconds > 0 {
		why += pl.allReduceReason()
	}
	if st.HostSeconds > 0 {
		why += hostFloorReason(st, pl.plan.StepsPerCommand)
	}
	why += fmt.Sprintf("; about %.0f samples/s", st.SamplesPerSecond)
	if d := pl.plan.Distributed; st.AllReduceSeconds > 0 {
		why += fmt.Sprintf(" a device, %.0f for the job of %d", st.SamplesPerSecond*float64(d.WorldSize), d.WorldSize)
	}
	why += "."
	value := fmt.Sprintf("%s (estimate)", FormatSeconds(st.StepSeconds))
	if st.HostSeconds > 0 {
		why += " Floor measured by " + st.HostSource + "."
		value = fmt.Sprintf("%s (estimate, %s-bound)", FormatSeconds(st.StepSeconds), st.Bound)
	}
	pl.decide("step time", value, why)
}

// hostFloorReason is the step time's host floor part: the floor at the
// plan's steps per command, and how it meets the roofline.
func hostFloorReason(st plan.StepTime, k int64) string {
	how := fmt.Sprintf("which adds to the roofline's %s (the CPU computes on the host's own cores)", FormatSeconds(st.RooflineSeconds))
	if st.HostOverlaps {
		how = fmt.Sprintf("against the roofline's %s: the device computes while the host prepares the next step, so the step takes the longer", FormatSeconds(st.RooflineSeconds))
	}
	return fmt.Sprintf(". The engine's host floor: %s a step and %s a command, at %d steps a command %s a step, %s",
		FormatSeconds(st.HostStepSeconds), FormatSeconds(st.HostCommandSeconds), k, FormatSeconds(st.HostSeconds), how)
}

// allReduceReason is the step time's all-reduce part, in words.
func (pl *planner) allReduceReason() string {
	p := pl.plan
	st, d := p.StepTime, p.Distributed
	var parts []string
	if st.LinkSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%s within a node, %s a device over %s (%s each way, %s's)",
			FormatSeconds(st.LinkSeconds), FormatBytes(d.AllReduceBytes), pl.dev.LinkName, FormatBandwidth(st.LinkBandwidth), pl.dev.Name))
		if pl.dev.LinkName == "" {
			parts[0] = fmt.Sprintf("%s within a node, %s a device over a link the device does not name (%s each way assumed, a PCIe 4.0 slot's)",
				FormatSeconds(st.LinkSeconds), FormatBytes(d.AllReduceBytes), FormatBandwidth(st.LinkBandwidth))
		}
	}
	if st.NetworkSeconds > 0 {
		net := fmt.Sprintf("%s between nodes, %s a node over a %s network (--network, default 100 Gb/s)",
			FormatSeconds(st.NetworkSeconds), FormatBytes(d.NetworkBytes), FormatBandwidth(st.NetworkBandwidth))
		if st.LinkBandwidth == 0 {
			net = fmt.Sprintf("%s a rank over a %s network (--network, default 100 Gb/s)", FormatBytes(d.NetworkBytes), FormatBandwidth(st.NetworkBandwidth))
			if d.NNodes <= 1 {
				net += ", which gloo's sockets go through even on one machine"
			}
		}
		parts = append(parts, net)
	}
	return fmt.Sprintf(", plus %s for the all-reduce (%s), counted in full though DDP overlaps all but its last bucket with the backward pass",
		FormatSeconds(st.AllReduceSeconds), strings.Join(parts, "; "))
}

// FormatSeconds renders a duration for people: "52.9 ms", "1.32 s",
// "4.1 min".
func FormatSeconds(s float64) string {
	switch {
	case s >= 3600*24*365:
		return fmt.Sprintf("%.3g years", s/(3600*24*365))
	case s >= 3600:
		return fmt.Sprintf("%.1f h", s/3600)
	case s >= 60:
		return fmt.Sprintf("%.1f min", s/60)
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.1f ms", s*1e3)
	default:
		return fmt.Sprintf("%.0f µs", s*1e6)
	}
}

// schedule decides the learning-rate schedule: the file's, with step's
// every defaulting to a third of the epochs (an unwritten every once meant
// a tenfold drop every epoch).
func (pl *planner) schedule() {
	sc := plan.Schedule{Kind: "constant"}
	sched := pl.train.Schedule
	if sched != nil && sched.Kind != "" {
		sc.Kind = sched.Kind
	}
	epochs := pl.train.Epochs
	why := ""
	switch sc.Kind {
	case "step":
		sc.Gamma = 0.1
		if sched.Gamma != nil {
			sc.Gamma = *sched.Gamma
		}
		if sched.Every != nil {
			sc.Every = *sched.Every
			why = fmt.Sprintf("step as written: the learning rate is multiplied by %g every %s.", sc.Gamma, plural(sc.Every, "epoch"))
		} else {
			sc.Every = max(1, epochs/3)
			why = fmt.Sprintf("step without every: every %s, a third of the %s (pipe's default), multiplying the learning rate by %g each time. Write every N to choose.",
				plural(sc.Every, "epoch"), plural(epochs, "epoch"), sc.Gamma)
		}
	case "cosine":
		why = "cosine as written: from the learning rate down to 0 over the training steps after warm-up."
	case "linear":
		why = "linear as written: from the learning rate down to 0 over the training steps after warm-up."
	default:
		why = "constant: the learning rate stays as it is after warm-up."
	}
	pl.plan.Schedule = sc
	value := sc.Kind
	if sc.Kind == "step" {
		value = fmt.Sprintf("step every %d", sc.Every)
	}
	pl.decide("schedule", value, why)
}
