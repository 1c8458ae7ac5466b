package engine

import (
	"pipe/dataset/samples"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// Adversarial is the Capabilities facet of a Model that can be trained in
// gan mode: its training step split at the output, so that a gradient
// from a second model can join the loss's, and the gradient at its input
// kept for the model that fed it.
type Adversarial interface {
	// ForwardTrain runs TrainStep's forward pass on b (training mode)
	// and writes the outputs to out, NCHW; b must stay valid until
	// BackwardTrain.
	ForwardTrain(b *samples.Batch, out []float32) error
	// BackwardTrain finishes the step ForwardTrain began: the loss against
	// b.Y scaled by scale, plus dout (NCHW, as given) at the output, then
	// the backward pass, adding to the accumulated gradients. It returns
	// the loss, unscaled.
	BackwardTrain(scale float64, dout []float32) (loss float64, err error)
	// InputGrad writes the gradient of the last training step with
	// respect to the model's input, for n samples, NCHW; the model must be
	// built with Config.InputGrad.
	InputGrad(n int, dst []float32) error
	// HoldGrads(true) keeps the parameters' accumulated gradients as they
	// are until HoldGrads(false): the backward passes between add nothing
	// to them (a discriminator's pass that only the generator's gradient
	// needs).
	HoldGrads(hold bool)
}

// GANTrainer is the Capabilities facet of a Model whose engine trains gan
// mode itself (the torch worker holds both models and both optimizers):
// AttachDiscriminator builds the discriminator d with cfg beside the
// model, which from then on trains as ganModel does (the same losses,
// order, update ratio and checkpoint layout, the discriminator's tensors
// and counters under "discriminator."). dRatio is the discriminator's
// learning rate over the generator's.
type GANTrainer interface {
	AttachDiscriminator(d *stdlib.Graph, cfg Config, set *plan.GAN, dRatio float64) error
	GANPartser
}

// GANPartser is the Capabilities facet of a gan mode Model: GANParts are
// its last micro-batch's terms, when it has them (not with lagged
// readback).
type GANPartser interface {
	GANParts() (GANParts, bool)
}

// GANParts are a gan micro-batch's losses: the discriminator's (half on
// the targets, half on the generator's output), the generator's
// adversarial term and its L1 distance, unweighted.
type GANParts struct {
	D           float64 `json:"discriminator"`
	Adversarial float64 `json:"adversarial"`
	L1          float64 `json:"l1"`
}
