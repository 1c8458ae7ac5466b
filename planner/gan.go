package planner

import (
	"fmt"

	"pipe/lang"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// ganLoss is the discriminator's loss as the executors compute it: bce on
// logits, or mse (lsgan) against 0 and 1.
func ganLoss(adversarial string) string {
	if adversarial == "lsgan" {
		return "mse"
	}
	return "bce"
}

// planGAN plans the discriminator of a gan-mode train block at the
// generator's batch and adds it to the plan's memory (plan.GANMemory says
// what is counted when).
func (pl *planner) planGAN(gan *lang.GAN) {
	p := pl.plan
	g, ds := stdlib.BuildGraph(gan.Discriminator)
	pl.diags = append(pl.diags, ds...)
	if ds.HasErrors() || g == nil || len(g.Nodes) == 0 {
		return
	}
	pg := &plan.GAN{Discriminator: gan.Discriminator.Name, Conditional: gan.Conditional, Adversarial: gan.Adversarial,
		AdvWeight: gan.AdvWeight, L1: gan.L1, DSteps: int64(gan.DSteps), Parameters: g.Params(), FLOPsPerSample: g.FLOPs(),
		Layers: []plan.Layer{}}
	opt := pl.optimizer()
	if f := gan.DOptimizer; f != nil {
		opt = optimizerOfField(f)
	}
	opt.LRScale, opt.ReferenceBatch, opt.WarmupEpochs = p.Optimizer.LRScale, p.Optimizer.ReferenceBatch, p.Optimizer.WarmupEpochs
	opt.LR = opt.LRWritten * opt.LRScale
	pg.Optimizer = opt
	b := p.BatchSize
	loss := ganLoss(gan.Adversarial)
	var m *costModel
	if pl.native() {
		m = newCPUCostModel(g, nil, loss, int64(opt.StateBuffers), pl.dev.Cores)
	} else {
		m = newCostModel(g, pl.dev.Kind, p.Precision, int64(opt.StateBuffers), targetBytes(loss, g.OutShape()), loss)
	}
	m.ch.ctx = pl.cfg.ctx
	var mem plan.Memory
	m.memory(&mem, b, m.baseline, 0, nil)
	gm := &pg.Memory
	gm.Parameters, gm.Gradients, gm.Optimizer = add(mem.Parameters, mem.Master), mem.Gradients, mem.Optimizer
	gm.Activations, gm.ActivationGradients = mem.Activations, mem.ActivationGradients
	gm.Workspace, gm.Input = mem.Workspace, mem.Input
	in := mul(mul(numel(g.Input), 4), b)
	gm.Fake = mul(mul(numel(pl.graph.OutShape()), 4), b)
	gm.InputGradient = in
	gm.Total = sum(gm.Parameters, gm.Gradients, gm.Optimizer, gm.Activations, gm.ActivationGradients, gm.Workspace, gm.Input, gm.Fake, gm.InputGradient)
	for _, nd := range g.Nodes {
		l := plan.Layer{Name: nd.Name, Op: nd.Op, Layer: nd.Layer, Out: nd.Out, Params: nd.Params, FLOPs: nd.FLOPs,
			ActivationBytes: mul(m.perNode[nd.ID], b), Line: nd.Range.Start.Line}
		if l.Out == nil {
			l.Out = []int64{}
		}
		pg.Layers = append(pg.Layers, l)
	}
	p.GAN = pg
	if mm := &p.Memory; len(mm.Terms) > 0 {
		// A GPU plan's phases: the discriminator is live in each.
		var phases []string
		for i := range mm.Phases {
			ph := &mm.Phases[i]
			ph.Allocated, ph.Reserved, ph.Device = add(ph.Allocated, gm.Total), add(ph.Reserved, gm.Total), add(ph.Device, gm.Total)
			phases = append(phases, ph.Name)
		}
		mm.Terms = append(mm.Terms, plan.MemoryTerm{Name: "discriminator", Bytes: gm.Total, Source: plan.SourceFormula,
			Basis: "gan mode: the discriminator's parameters, gradients, optimizer state, activations and input gradient at the generator's batch (plan.GANMemory)", Phases: phases})
	}
	p.Memory.Total = add(p.Memory.Total, gm.Total)
	if p.Memory.GCLimit > 0 {
		p.Memory.GCLimit = add(p.Memory.GCLimit, gm.Total)
	}
	p.Fits = p.Memory.Total <= p.Memory.Budget
	pl.decide("gan", fmt.Sprintf("discriminator %s", pg.Discriminator),
		fmt.Sprintf("gan mode: %s generates and %s discriminates (%s, weight %g; l1 %g; the discriminator takes every optimizer step, the generator one in %d). The discriminator adds %s at batch %d: its parameters, gradients and optimizer state, and in the generator's update its activations and the gradient at its input beside the generator's kept activations.",
			p.Model, pg.Discriminator, pg.Adversarial, pg.AdvWeight, pg.L1, pg.DSteps, FormatBytes(gm.Total), b))
}

// optimizerOfField reads an optimizer field (d_optimizer) as
// planner.optimizer reads train's.
func optimizerOfField(f *lang.Field) plan.Optimizer {
	o := plan.Optimizer{Kind: "adam", LRWritten: 1e-3, LRScale: 1}
	if v := f.Args["kind"]; v != nil {
		o.Kind = v.Str
	}
	if v := f.Args["lr"]; v != nil {
		o.LRWritten = v.Float
	}
	switch o.Kind {
	case "sgd":
		if v := f.Args["momentum"]; v != nil && v.Float > 0 {
			o.StateBuffers = 1
		}
	default:
		o.StateBuffers = 2
	}
	o.LR = o.LRWritten
	return o
}

// ganFits says, in the batch and checkpoint decisions, which sized the
// generator alone, when the discriminator makes the plan not fit.
func (pl *planner) ganFits() {
	p := pl.plan
	if p == nil || p.GAN == nil || p.Fits {
		return
	}
	for i := range p.Decisions {
		if d := &p.Decisions[i]; d.What == "batch" || d.What == "checkpoint" {
			d.Reason += fmt.Sprintf(" That is the generator alone: with the discriminator's %s the plan does not fit; lower the batch.", FormatBytes(p.GAN.Memory.Total))
		}
	}
}
