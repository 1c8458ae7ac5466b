package run

import (
	"fmt"
	"math"
	"pipe/engine"
	"strings"

	"pipe/dataset"
	"pipe/planner/plan"
)

// ganPrefix names the discriminator's tensors and counters in a gan
// run's State, beside the generator's under their own names: one
// checkpoint holds both models and both optimizers, written atomically
// and resumed as any other.
const ganPrefix = engine.PrefixDiscriminator

// ganStepCounter counts a gan run's optimizer steps, for d_steps.
const ganStepCounter = "gan.step"

// ganModel trains a generator G and a discriminator D against each other
// behind the Model interface, so the training loop, its checkpoints,
// evaluation and prediction run unchanged: Eval, OutShape and predict are
// G's. Each TrainStep accumulates D's gradient on real and fake, then G's
// (adversarial term through D, plus l1 × the L1 distance) on the steps
// where G trains; Step steps D, and G when it trained. D's updates never
// reach G's gradient within a step, so accumulation computes what one
// larger batch would. The loss returned is G's objective.
//
// The step in detail: docs/design/gan-training.md.
type ganModel struct {
	g, d   engine.Model
	ga, da engine.Adversarial
	set    *plan.GAN
	// dRatio is D's learning rate over G's as planned.
	dRatio    float64
	gIn       []int64 // G's input shape per sample
	gOut, dIn int     // values per sample of G's output and D's input
	dOut      int
	steps     int64 // optimizer steps taken, for d_steps
	gTrained  bool  // G has gradients to step this step
	fake, dX  []float32
	dGrad     []float32
	z, dz     []float32
	labels    []float32
	// Parts are the last micro-batch's terms (for logs and the report).
	Parts engine.GANParts
}

// buildGAN builds the discriminator beside the generator g already built
// and wraps both.
func (r *runner) buildGAN(g engine.Model) (engine.Model, bool) {
	p, prog := r.p, r.prog
	set := p.GAN
	lm := prog.Spec.Model(set.Discriminator)
	if lm == nil {
		r.errorf(nil, CodePlan, "the plan's discriminator is not in the file", "The plan's discriminator is %s, which the file does not declare; run pipe plan again.", set.Discriminator)
		return nil, false
	}
	dg, ds := prog.Graph(set.Discriminator)
	r.diags = append(r.diags, ds...)
	if ds.HasErrors() || dg == nil {
		return nil, false
	}
	cfg := r.cfg
	// D's losses are computed here (advLoss) and handed to its backward
	// pass as the gradient at its output; its own loss is scaled by 0.
	cfg.Loss = engine.Loss{Kind: "mse"}
	cfg.Optimizer = optimizerOf(set.Optimizer.Kind, optimizerArgs(prog.Spec.Train, true))
	cfg.Checkpoint, cfg.Fusion, cfg.Folds = nil, nil, nil
	cfg.InputGrad = true
	cfg.Seed = r.cfg.Seed + 1
	var ratio float64
	if p.Optimizer.LR > 0 {
		ratio = set.Optimizer.LR / p.Optimizer.LR
	}
	if gt := g.Capabilities().GAN; gt != nil {
		if err := gt.AttachDiscriminator(dg, cfg, set, ratio); err != nil {
			r.errorf(rangeOf(lm.NameRange), CodeBuild, "the backend cannot build the discriminator", "%s backend: %v.", r.backend.Name(), err)
			return nil, false
		}
		r.log.Info("discriminator built", "model", set.Discriminator, "parameters", set.Parameters, "adversarial", set.Adversarial)
		return g, true
	}
	ga := g.Capabilities().Adversarial
	if ga == nil {
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "this engine cannot train gan mode",
			"The %s engine does not train two models against each other yet; run it with --engine native.", r.backend.Name())
		return nil, false
	}
	d, err := safeBuild(r.backend, dg, cfg)
	if err != nil {
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "the backend cannot build the discriminator", "%s backend: %v.", r.backend.Name(), err)
		return nil, false
	}
	da := d.Capabilities().Adversarial
	if da == nil {
		d.Close()
		r.errorf(rangeOf(lm.NameRange), CodeBuild, "this engine cannot train gan mode",
			"The %s engine does not train two models against each other yet; run it with --engine native.", r.backend.Name())
		return nil, false
	}
	m := &ganModel{g: g, d: d, ga: ga, da: da, set: set, gIn: r.graph.Input,
		gOut: int(numel(g.OutShape())), dIn: int(numel(dg.Input)), dOut: int(numel(dg.OutShape())), dRatio: ratio}
	r.log.Info("discriminator built", "model", set.Discriminator, "parameters", set.Parameters, "adversarial", set.Adversarial)
	return m, true
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

// dPass runs D on img (with x beside it when conditional) for n samples
// and its backward pass from scale × the adversarial loss of role; with
// inputGrad, D's parameters' gradients are held and the gradient at the
// image is written to m.dGrad's first n × gOut values. It returns the
// loss, unscaled.
func (m *ganModel) dPass(x, img []float32, n int, role advRole, scale float64, inputGrad bool) (float64, error) {
	in := m.discInput(x, img, n)
	m.z, m.dz = grow(m.z, n*m.dOut), grow(m.dz, n*m.dOut)
	if len(m.labels) < n*m.dOut {
		m.labels = make([]float32, n*m.dOut)
	}
	if inputGrad {
		m.da.HoldGrads(true)
		defer m.da.HoldGrads(false)
	}
	if err := m.da.ForwardTrain(&dataset.Batch{N: n, X: in, Y: m.labels[:n*m.dOut]}, m.z); err != nil {
		return 0, err
	}
	loss := advLoss(m.set.Adversarial, role, m.z, m.dz, scale)
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return loss, &engine.NonFiniteError{Loss: loss}
	}
	if _, err := m.da.BackwardTrain(0, m.dz); err != nil {
		return 0, err
	}
	if !inputGrad {
		return loss, nil
	}
	m.dGrad = grow(m.dGrad, n*m.dIn)
	if err := m.da.InputGrad(n, m.dGrad); err != nil {
		return 0, err
	}
	if m.set.Conditional {
		xs := int(numel(m.gIn))
		for i := 0; i < n; i++ {
			copy(m.dGrad[i*m.gOut:(i+1)*m.gOut], m.dGrad[i*m.dIn+xs:(i+1)*m.dIn])
		}
	}
	return loss, nil
}

// TrainStep implements Model (see ganModel).
func (m *ganModel) TrainStep(b *dataset.Batch, scale float64) (float64, error) {
	n := b.N
	m.fake = grow(m.fake, n*m.gOut)
	if err := m.ga.ForwardTrain(b, m.fake); err != nil {
		return 0, err
	}
	lr, err := m.dPass(b.X, b.Y, n, advReal, 0.5*scale, false)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the targets: %w", err)
	}
	lf, err := m.dPass(b.X, m.fake, n, advFake, 0.5*scale, false)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the generator's output: %w", err)
	}
	adv, err := m.dPass(b.X, m.fake, n, advGen, m.set.AdvWeight*scale, true)
	if err != nil {
		return 0, fmt.Errorf("the discriminator on the generator's output: %w", err)
	}
	var l1 float64
	if m.steps%max(m.set.DSteps, 1) == 0 {
		if l1, err = m.ga.BackwardTrain(m.set.L1*scale, m.dGrad[:n*m.gOut]); err != nil {
			return 0, err
		}
		m.gTrained = true
	} else {
		l1 = m.l1(b)
	}
	m.Parts = engine.GANParts{D: 0.5 * (lr + lf), Adversarial: adv, L1: l1}
	return m.set.AdvWeight*adv + m.set.L1*l1, nil
}

// GANParts implements GANPartser.
func (m *ganModel) GANParts() (engine.GANParts, bool) { return m.Parts, true }

// l1 is the generator's L1 distance to the targets over the valid values.
func (m *ganModel) l1(b *dataset.Batch) float64 {
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

// Step implements Model: D's step, and G's when it trained.
func (m *ganModel) Step(lr float64) error {
	m.steps++
	if err := m.d.Step(lr * m.dRatio); err != nil {
		return fmt.Errorf("the discriminator's step: %w", err)
	}
	if !m.gTrained {
		return nil
	}
	m.gTrained = false
	return m.g.Step(lr)
}

// ZeroGrad implements Model: both models'.
func (m *ganModel) ZeroGrad() {
	m.g.ZeroGrad()
	m.d.ZeroGrad()
	m.gTrained = false
}

func (m *ganModel) ClipGradNorm(max float64) (float64, error) { return m.g.ClipGradNorm(max) }

func (m *ganModel) Eval(b *dataset.Batch, out []float32) (float64, error) { return m.g.Eval(b, out) }

func (m *ganModel) OutShape() []int64 { return m.g.OutShape() }

// Capabilities implements engine.Model: the pair reports its last terms.
func (m *ganModel) Capabilities() engine.Capabilities {
	return engine.Capabilities{GANParts: m}
}

func (m *ganModel) Precision() string { return m.g.Precision() }

// State implements Model: G's tensors and counters, then D's under
// ganPrefix, and the count of optimizer steps for d_steps.
func (m *ganModel) State() engine.State {
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
	s.Counters[ganStepCounter] = m.steps
	return s
}

// SetState implements Model.
func (m *ganModel) SetState(s engine.State) error {
	var g, d engine.State
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
	steps, ok := s.Counters[ganStepCounter]
	for k, v := range s.Counters {
		if name, ok := strings.CutPrefix(k, ganPrefix); ok {
			d.Counters[name] = v
		} else if k != ganStepCounter {
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
		m.steps = steps
	}
	return nil
}

// Memory implements Model: both models'.
func (m *ganModel) Memory() engine.MemStats {
	a, b := m.g.Memory(), m.d.Memory()
	return engine.MemStats{Parameters: a.Parameters + b.Parameters, Gradients: a.Gradients + b.Gradients,
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
