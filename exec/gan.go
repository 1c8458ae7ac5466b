package exec

import "pipe/exec/data"

// Adversarial is an optional interface of a Model that can be trained in
// gan mode: its training step split at the output, so that a gradient
// from a second model can join the loss's, and the gradient at its input
// kept for the model that fed it.
type Adversarial interface {
	// ForwardTrain runs TrainStep's forward pass on b (training mode)
	// and writes the outputs to out, NCHW; b must stay valid until
	// BackwardTrain.
	ForwardTrain(b *data.Batch, out []float32) error
	// BackwardTrain finishes the step ForwardTrain began: the loss against
	// b.Y scaled by scale, plus dout (NCHW, as given) at the output, then
	// the backward pass, adding to the accumulated gradients. It returns
	// the loss, unscaled.
	BackwardTrain(scale float64, dout []float32) (loss float64, err error)
	// InputGrad writes the gradient of the last training step with
	// respect to the model's input, for n samples, NCHW; the model must be
	// built with Config.InputGrad.
	InputGrad(n int, dst []float32) error
}
