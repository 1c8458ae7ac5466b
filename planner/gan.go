package planner

import (
	"fmt"

	"pipe/planner/plan"
	"pipe/spec"
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
func (pl *planner) planGAN(gan *spec.GAN) {
	p := pl.plan
	d := pl.ganCost(gan)
	if d == nil {
		return
	}
	g, m, opt := d.g, d.m, d.opt
	pg := &plan.GAN{Discriminator: gan.Discriminator, Conditional: gan.Conditional, Adversarial: gan.Adversarial,
		AdvWeight: gan.AdvWeight, L1: gan.L1, DSteps: gan.DSteps, Parameters: g.Params(), FLOPsPerSample: g.FLOPs(),
		Layers: []plan.Layer{}}
	opt.LRScale, opt.ReferenceBatch, opt.WarmupEpochs = p.Optimizer.LRScale, p.Optimizer.ReferenceBatch, p.Optimizer.WarmupEpochs
	opt.LR = opt.LRWritten * opt.LRScale
	pg.Optimizer = opt
	b := p.BatchSize
	pg.Memory = pl.ganMemory(d, b)
	gm := &pg.Memory
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

// ganDecisions says in the batch decision that the discriminator's share
// was counted.
func (pl *planner) ganDecisions(b int64) {
	p, s := pl.plan, pl.cost.gan
	for i := range p.Decisions {
		if d := &p.Decisions[i]; d.What == "batch" {
			d.Reason += fmt.Sprintf(" Gan mode: the discriminator %s is counted beside the generator, %s at batch %d (%s of parameters, gradients and optimizer state, %s a sample).",
				pl.sp.GAN.Discriminator, FormatBytes(s.at(b)), b, FormatBytes(s.fixed), FormatBytes(s.per))
		}
	}
}

// ganFits says, in the batch decision, when the discriminator planned at
// the batch chosen makes the plan not fit after all (its share in the
// batch solve is a line through batches 1 and 2).
func (pl *planner) ganFits() {
	p := pl.plan
	if p == nil || p.GAN == nil || p.Fits {
		return
	}
	for i := range p.Decisions {
		if d := &p.Decisions[i]; d.What == "batch" {
			d.Reason += fmt.Sprintf(" With the discriminator's %s at this batch the plan does not fit; lower the batch.", FormatBytes(p.GAN.Memory.Total))
		}
	}
}
