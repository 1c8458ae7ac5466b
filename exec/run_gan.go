package exec

import (
	"fmt"
	"math"
	"strings"

	"pipe/exec/data"
	"pipe/lang"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// ganPrefix names the discriminator's tensors and counters in a gan
// run's State, beside the generator's under their own names: one
// checkpoint holds both models and both optimizers, written atomically
// and resumed as any other.
const ganPrefix = "discriminator."

// ganModel trains a generator G and a discriminator D against each other
// behind the Model interface, so the training loop, its checkpoints,
// evaluation and prediction run unchanged: Eval, OutShape and predict are
// G's. Each TrainStep (one micro-batch):
//
//  1. G runs forward on the inputs x (training mode) to fake = G(x).
//  2. D takes one optimizer step of its own on the adversarial loss of
//     real (the targets, label 1) and fake (label 0), each half the loss;
//     conditional, D reads x beside the image (concatenated along
//     channels). Its learning rate is its optimizer's, scaled as the
//     schedule scales the generator's at the last Step.
//  3. On every d_steps-th micro-batch G accumulates the gradient of
//     adversarial weight × the adversarial loss of D(fake) against label
//     1 (the gradient reaches fake through D's input gradient; D's own
//     gradients from it are dropped) plus l1 × the L1 distance to the
//     targets; Step then steps G. On the other micro-batches G is not
//     stepped.
//
// The loss it reports is G's L1 distance to the targets (mae, the
// validation loss too), whichever model stepped.
type ganModel struct {
	g, d   Model
	ga, da Adversarial
	set    *plan.GAN
	// dRatio is D's learning rate over G's as planned; lr the generator's
	// learning rate of the last Step.
	dRatio, lr float64
	gIn        []int64 // G's input shape per sample
	gOut, dIn  int     // values per sample of G's output and D's input
	dOut       int
	micro      int64 // micro-batches trained, for d_steps
	gTrained   bool  // G has gradients to step this step
	fake, dX   []float32
	dGrad      []float32
	ones, zero []float32
	// DLoss and AdvLoss are the last micro-batch's discriminator loss and
	// the generator's adversarial loss (for logs).
	DLoss, AdvLoss float64
}

// buildGAN builds the discriminator beside the generator g already built
// and wraps both.
func (r *runner) buildGAN(g Model) (Model, bool) {
	p, prog := r.p, r.prog
	set := p.GAN
	lm := prog.Model(set.Discriminator)
	if lm == nil {
		r.errorf(nil, CodePlan, "the plan's discriminator is not in the file", "The plan's discriminator is %s, which the file does not declare; run pipe plan again.", set.Discriminator)
		return nil, false
	}
	dg, ds := stdlib.BuildGraph(lm)
	r.diags = append(r.diags, ds...)
	if ds.HasErrors() || dg == nil {
		return nil, false
	}
	ga, ok := g.(Adversarial)
	if !ok {
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "this engine cannot train gan mode",
			"The %s engine does not train two models against each other yet; run it with --engine native.", r.backend.Name())
		return nil, false
	}
	cfg := r.cfg
	cfg.Loss = Loss{Kind: "bce"}
	if set.Adversarial == "lsgan" {
		cfg.Loss.Kind = "mse"
	}
	cfg.Optimizer = ganOptimizer(set.Optimizer, prog.Block("train"))
	cfg.Checkpoint, cfg.Fusion, cfg.Folds = nil, nil, nil
	cfg.InputGrad = true
	cfg.Seed = r.cfg.Seed + 1
	d, err := safeBuild(r.backend, dg, cfg)
	if err != nil {
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "the backend cannot build the discriminator", "%s backend: %v.", r.backend.Name(), err)
		return nil, false
	}
	da, ok := d.(Adversarial)
	if !ok {
		d.Close()
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "this engine cannot train gan mode",
			"The %s engine does not train two models against each other yet; run it with --engine native.", r.backend.Name())
		return nil, false
	}
	m := &ganModel{g: g, d: d, ga: ga, da: da, set: set, lr: p.Optimizer.LR, gIn: r.graph.Input,
		gOut: int(numel(g.OutShape())), dIn: int(numel(dg.Input)), dOut: int(numel(dg.OutShape()))}
	if p.Optimizer.LR > 0 {
		m.dRatio = set.Optimizer.LR / p.Optimizer.LR
	}
	r.log.Info("discriminator built", "model", set.Discriminator, "parameters", set.Parameters, "adversarial", set.Adversarial)
	return m, true
}

// ganOptimizer is the discriminator's optimizer: d_optimizer's settings,
// else train's optimizer's.
func ganOptimizer(o plan.Optimizer, train *lang.Block) Optimizer {
	field := "optimizer"
	if train.Field("d_optimizer") != nil {
		field = "d_optimizer"
	}
	out := Optimizer{Kind: o.Kind, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	if out.Kind == "adamw" {
		out.WeightDecay = 0.01
	}
	f := func(name string, dst *float64) {
		if v := train.Arg(field, name); v != nil {
			*dst = v.Float
		}
	}
	f("momentum", &out.Momentum)
	f("weight_decay", &out.WeightDecay)
	f("beta1", &out.Beta1)
	f("beta2", &out.Beta2)
	f("eps", &out.Eps)
	if v := train.Arg(field, "nesterov"); v != nil {
		out.Nesterov = v.Bool
	}
	return out
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// discInput writes D's input for n samples of image img: img itself, or
// x and img concatenated along channels, sample by sample (NCHW).
func (m *ganModel) discInput(x, img []float32, n int) []float32 {
	if !m.set.Conditional {
		return img
	}
	xs := int(numel(m.gIn))
	m.dX = grow(m.dX, n*m.dIn)
	for i := 0; i < n; i++ {
		o := m.dX[i*m.dIn : (i+1)*m.dIn]
		copy(o, x[i*xs:(i+1)*xs])
		copy(o[xs:], img[i*m.gOut:(i+1)*m.gOut])
	}
	return m.dX
}

func (m *ganModel) labels(n int, v float32) []float32 {
	buf := &m.zero
	if v == 1 {
		buf = &m.ones
	}
	if len(*buf) < n*m.dOut {
		*buf = make([]float32, n*m.dOut)
		for i := range *buf {
			(*buf)[i] = v
		}
	}
	return (*buf)[:n*m.dOut]
}

// TrainStep implements Model (see ganModel).
func (m *ganModel) TrainStep(b *data.Batch, scale float64) (float64, error) {
	n := b.N
	m.fake = grow(m.fake, n*m.gOut)
	if err := m.ga.ForwardTrain(b, m.fake); err != nil {
		return 0, err
	}
	// The discriminator's step: real against fake.
	m.d.ZeroGrad()
	lr, err := m.d.TrainStep(&data.Batch{N: n, X: m.discInput(b.X, b.Y, n), Y: m.labels(n, 1)}, 0.5)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the targets: %w", err)
	}
	lf, err := m.d.TrainStep(&data.Batch{N: n, X: m.discInput(b.X, m.fake, n), Y: m.labels(n, 0)}, 0.5)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the generator's output: %w", err)
	}
	m.DLoss = 0.5 * (lr + lf)
	if err := m.d.Step(m.lr * m.dRatio); err != nil {
		return 0, fmt.Errorf("the discriminator's step: %w", err)
	}
	m.micro++
	if (m.micro-1)%max(m.set.DSteps, 1) != 0 {
		return m.l1(b), nil
	}
	// The generator's gradient: through D to fake, plus the L1 term.
	m.d.ZeroGrad()
	adv, err := m.d.TrainStep(&data.Batch{N: n, X: m.discInput(b.X, m.fake, n), Y: m.labels(n, 1)}, 1)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the generator's output: %w", err)
	}
	m.AdvLoss = adv
	m.dGrad = grow(m.dGrad, n*m.dIn)
	if err := m.da.InputGrad(n, m.dGrad); err != nil {
		return 0, err
	}
	m.d.ZeroGrad()
	dfake := m.dGrad
	if m.set.Conditional {
		xs := int(numel(m.gIn))
		for i := 0; i < n; i++ {
			copy(m.dGrad[i*m.gOut:(i+1)*m.gOut], m.dGrad[i*m.dIn+xs:(i+1)*m.dIn])
		}
		dfake = m.dGrad[:n*m.gOut]
	}
	w := float32(m.set.AdvWeight * scale)
	for i := range dfake {
		dfake[i] *= w
	}
	l1, err := m.ga.BackwardTrain(m.set.L1*scale, dfake)
	if err != nil {
		return 0, err
	}
	m.gTrained = true
	return l1, nil
}

// l1 is the generator's L1 distance to the targets over the valid values.
func (m *ganModel) l1(b *data.Batch) float64 {
	var s, k float64
	for i, y := range b.Y {
		if b.Mask != nil && b.Mask[i] == 0 {
			continue
		}
		s += math.Abs(float64(m.fake[i] - y))
		k++
	}
	if k == 0 {
		return 0
	}
	return s / k
}

// Step implements Model: G's step, when it has trained since the last.
func (m *ganModel) Step(lr float64) error {
	m.lr = lr
	if !m.gTrained {
		return nil
	}
	m.gTrained = false
	return m.g.Step(lr)
}

func (m *ganModel) ZeroGrad() { m.g.ZeroGrad() }

func (m *ganModel) ClipGradNorm(max float64) (float64, error) { return m.g.ClipGradNorm(max) }

func (m *ganModel) Eval(b *data.Batch, out []float32) (float64, error) { return m.g.Eval(b, out) }

func (m *ganModel) OutShape() []int64 { return m.g.OutShape() }

func (m *ganModel) Precision() string { return m.g.Precision() }

// State implements Model: G's tensors and counters, then D's under
// ganPrefix, and the count of micro-batches for d_steps.
func (m *ganModel) State() State {
	s := m.g.State()
	d := m.d.State()
	for _, t := range d.Tensors {
		t.Name = ganPrefix + t.Name
		s.Tensors = append(s.Tensors, t)
	}
	if s.Counters == nil {
		s.Counters = map[string]int64{}
	}
	for k, v := range d.Counters {
		s.Counters[ganPrefix+k] = v
	}
	s.Counters["gan.micro_step"] = m.micro
	return s
}

// SetState implements Model.
func (m *ganModel) SetState(s State) error {
	var g, d State
	g.Counters, d.Counters = map[string]int64{}, map[string]int64{}
	for _, t := range s.Tensors {
		if name, ok := strings.CutPrefix(t.Name, ganPrefix); ok {
			t.Name = name
			d.Tensors = append(d.Tensors, t)
		} else {
			g.Tensors = append(g.Tensors, t)
		}
	}
	if len(d.Tensors) == 0 {
		return fmt.Errorf("the state holds no discriminator (no %s tensors): it was not written by a gan run", ganPrefix)
	}
	micro, ok := s.Counters["gan.micro_step"]
	for k, v := range s.Counters {
		if name, ok := strings.CutPrefix(k, ganPrefix); ok {
			d.Counters[name] = v
		} else if k != "gan.micro_step" {
			g.Counters[k] = v
		}
	}
	if err := m.g.SetState(g); err != nil {
		return err
	}
	if err := m.d.SetState(d); err != nil {
		return fmt.Errorf("the discriminator: %w", err)
	}
	if ok {
		m.micro = micro
	}
	return nil
}

// Memory implements Model: both models'.
func (m *ganModel) Memory() MemStats {
	a, b := m.g.Memory(), m.d.Memory()
	return MemStats{Parameters: a.Parameters + b.Parameters, Gradients: a.Gradients + b.Gradients,
		Optimizer: a.Optimizer + b.Optimizer, Arena: a.Arena + b.Arena, PeakLive: a.PeakLive + b.PeakLive,
		Saved: a.Saved + b.Saved, Scratch: a.Scratch + b.Scratch, EvalArena: a.EvalArena + b.EvalArena,
		Total: a.Total + b.Total, HeapInuseDelta: a.HeapInuseDelta + b.HeapInuseDelta}
}

// Close implements Model.
func (m *ganModel) Close() error {
	e1, e2 := m.g.Close(), m.d.Close()
	if e1 != nil {
		return e1
	}
	return e2
}
