package torch

import (
	"errors"
	"fmt"

	"pipe/engine"
	"pipe/engine/weights"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// ganPrefix names the discriminator's tensors and counters in a gan
// run's state.
const ganPrefix = engine.PrefixDiscriminator

var _ engine.GANTrainer = (*model)(nil)

// AttachDiscriminator implements engine.GANTrainer: the worker builds d
// beside the generator with its own optimizer, and from then on every
// train command is a gan micro-batch (pipe_torch/gan.py's gan_train); d
// starts from pipe's initial weights, as on the native engine.
func (m *model) AttachDiscriminator(d *stdlib.Graph, cfg engine.Config, set *plan.GAN, dRatio float64) error {
	if err := m.usable(); err != nil {
		return err
	}
	if m.world > 1 {
		return fmt.Errorf("%w: gan mode trains on one device (the plan has %d)", engine.ErrUnsupported, m.world)
	}
	spec, err := NewSpec(d, cfg, 0)
	if err != nil {
		return err
	}
	init, err := weights.Initial(d, cfg.Seed, cfg.Optimizer)
	if err != nil {
		return fmt.Errorf("the discriminator's initial weights: %w", err)
	}
	gs := GANSpec{Conditional: set.Conditional, Adversarial: set.Adversarial, AdvWeight: set.AdvWeight,
		L1: set.L1, DSteps: max(set.DSteps, 1), LRRatio: dRatio}
	r, err := m.callK(0, buildGANRequest{Spec: spec, GAN: gs})
	if err != nil {
		return fmt.Errorf("torch: building the discriminator: %w", err)
	}
	pr, err := decodeReply[paramsReply](r)
	if err != nil {
		return err
	}
	if pr.Params != d.Params() {
		return fmt.Errorf("torch: the worker's discriminator has %d parameters, pipe's graph %d", pr.Params, d.Params())
	}
	st, err := m.state0()
	if err != nil {
		return err
	}
	for _, t := range init.Tensors {
		m.addState(ganPrefix+t.Name, t.Shape)
		t.Name = ganPrefix + t.Name
		st.Tensors = append(st.Tensors, t)
	}
	for k, v := range init.Counters {
		st.Counters[ganPrefix+k] = v
	}
	last := m.layout[len(m.layout)-1]
	if err := m.remap(0, &m.ws[0].st, last.Offset+4*last.Count); err != nil {
		return err
	}
	m.gan = true
	return m.SetState(st)
}

// GANParts implements engine.GANTrainer.
func (m *model) GANParts() (engine.GANParts, bool) {
	if !m.gan || len(m.parts) != 3 {
		return engine.GANParts{}, false
	}
	return engine.GANParts{D: m.parts[0], Adversarial: m.parts[1], L1: m.parts[2]}, true
}

var errNoGAN = errors.New("torch: the state holds no discriminator: it was not written by a gan run")
