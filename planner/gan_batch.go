package planner

import (
	"fmt"

	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// ganShare is the discriminator's memory as the batch solve counts it, a
// line in the batch: fixed bytes (its parameters, gradients and optimizer
// state) and bytes per sample (its activations and their gradients, its
// input batch, the generator's output and the gradient at its input).
// It is measured from the discriminator's plan at batches 1 and 2
// (ganMemory); planGAN then adds the discriminator at the batch chosen.
type ganShare struct {
	fixed, per int64
}

func (s ganShare) at(b int64) int64 { return add(s.fixed, mul(s.per, max(b, 0))) }

// total is the step's memory at batch b: the model's (modelTotal) and the
// discriminator's share while the batch is chosen.
func (m *costModel) total(b, act, extra int64) int64 {
	return add(m.modelTotal(b, act, extra), m.gan.at(b))
}

// maxBatch is the largest batch whose total fits budget at the given
// activations per sample, 0 when not even one sample fits.
func (m *costModel) maxBatch(budget, act, extra int64) int64 {
	if m.gan == (ganShare{}) {
		return m.modelMaxBatch(budget, act, extra)
	}
	hi := m.modelMaxBatch(budget-m.gan.fixed, act, extra)
	lo := int64(0)
	for lo < hi { // the largest b in [0, hi] whose total fits
		mid := lo + (hi-lo+1)/2
		if m.total(mid, act, extra) <= budget {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// actBudget is the activation budget per sample at batch b: what is left
// of budget once everything else, the discriminator's share included, is
// paid for.
func (m *costModel) actBudget(budget, b, extra int64) int64 {
	return m.modelActBudget(budget-m.gan.at(b), b, extra)
}

// ganModel is a gan plan's discriminator: its graph, its optimizer and
// its cost model on the plan's device.
type ganModel struct {
	g   *stdlib.Graph
	opt plan.Optimizer
	m   *costModel
}

// ganCost builds the discriminator's cost model; nil when its graph does
// not build (its diagnostics are added).
func (pl *planner) ganCost(gan *spec.GAN) *ganModel {
	if pl.ganD != nil {
		return pl.ganD
	}
	g, ds := pl.dec.Graph(gan.Discriminator)
	pl.diags = append(pl.diags, ds...)
	if ds.HasErrors() || g == nil || len(g.Nodes) == 0 {
		return nil
	}
	opt := pl.optimizer()
	if f := pl.train.DOptimizer; f != nil {
		opt = optimizerOf(f)
	}
	p := pl.plan
	loss := ganLoss(gan.Adversarial)
	eng := pl.eng
	var m *costModel
	if pl.traits().InProcess {
		m = newCPUCostModel(eng, g, pl.costSetup(p.Precision, loss, nil), int64(opt.StateBuffers))
	} else {
		m = newCostModel(eng, g, pl.costSetup(p.Precision, loss, nil), int64(opt.StateBuffers), targetBytes(loss, g.OutShape()))
	}
	if m == nil {
		return nil
	}
	m.ch.ctx = pl.cfg.ctx
	pl.ganD = &ganModel{g: g, opt: opt, m: m}
	return pl.ganD
}

// ganMemory is the discriminator's memory at batch b (plan.GANMemory
// says what is counted when).
func (pl *planner) ganMemory(d *ganModel, b int64) plan.GANMemory {
	var mem plan.Memory
	d.m.memory(&mem, b, d.m.baseline, 0, nil)
	var gm plan.GANMemory
	gm.Parameters, gm.Gradients, gm.Optimizer = add(mem.Parameters, mem.Master), mem.Gradients, mem.Optimizer
	gm.Activations, gm.ActivationGradients = mem.Activations, mem.ActivationGradients
	gm.Workspace, gm.Input = mem.Workspace, mem.Input
	gm.Fake = mul(mul(numel(pl.graph.OutShape()), 4), b)
	gm.InputGradient = mul(mul(numel(d.g.Input), 4), b)
	gm.Total = sum(gm.Parameters, gm.Gradients, gm.Optimizer, gm.Activations, gm.ActivationGradients, gm.Workspace, gm.Input, gm.Fake, gm.InputGradient)
	return gm
}

// ganShareOf is the discriminator's share for the batch solve: its
// memory at batch 1 and the growth from 1 to 2 samples a sample.
func (pl *planner) ganShareOf() ganShare {
	gan := pl.sp.GAN
	if gan == nil {
		return ganShare{}
	}
	d := pl.ganCost(gan)
	if d == nil {
		return ganShare{}
	}
	one, two := pl.ganMemory(d, 1).Total, pl.ganMemory(d, 2).Total
	per := max(two-one, 0)
	return ganShare{fixed: max(one-per, 0), per: per}
}

// ganNoFit is what the no-fit diagnostic says of the discriminator's
// share at batch b.
func (pl *planner) ganNoFit(b int64) string {
	s := pl.cost.gan
	if s == (ganShare{}) {
		return ""
	}
	return fmt.Sprintf(" Of that, the discriminator %s takes %s: %s of parameters, gradients and optimizer state, and %s per sample (its activations and their gradients, its input, the generator's output and the gradient at its input).",
		pl.sp.GAN.Discriminator, FormatBytes(s.at(b)), FormatBytes(s.fixed), FormatBytes(s.per))
}
