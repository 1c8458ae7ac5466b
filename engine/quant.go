package engine

import (
	"errors"

	"pipe/dataset/samples"
)

// QuantReport is what QuantizeInt8 did: which layers run in int8, which
// stayed in fp32 and why, what the activation scales were calibrated on,
// and the weight bytes before and after.
type QuantReport struct {
	// Calibration is the activation-range method: "minmax" or
	// "percentile 99.99".
	Calibration string
	// CalibBatches and CalibSamples are what the scales were measured on.
	CalibBatches, CalibSamples int
	// Kernel is the int8 product's implementation ("AVX-512 VNNI",
	// "AVX2" or "Go").
	Kernel string
	Layers []QuantLayer
	// WeightBytesFP32 and WeightBytesInt8 are the quantised layers'
	// weights and biases in fp32 and as the int8 model holds them (int8
	// weights, an fp32 scale and bias per output channel).
	WeightBytesFP32, WeightBytesInt8 int64
}

// QuantLayer is one unit of the model (a layer, or a fusion group run as
// one kernel).
type QuantLayer struct {
	Name, Op string
	// Int8 says the layer runs in int8; Why says how, or why not.
	Int8 bool
	Why  string
	// InScale and InZero quantise the layer's input (int8 layers): u =
	// clamp(round(x/InScale) + InZero, 0, 255).
	InScale float32
	InZero  int
}

// Int8Layers counts the layers that run in int8.
func (r *QuantReport) Int8Layers() int {
	n := 0
	for _, l := range r.Layers {
		if l.Int8 {
			n++
		}
	}
	return n
}

// QuantOptions are QuantizeInt8's knobs.
type QuantOptions struct {
	// Percentile, when above 0, clips each activation's range at this
	// percentile of its absolute values over the calibration batches;
	// 0 takes the whole range (min/max).
	Percentile float64
}

// QuantOption sets a QuantOptions field.
type QuantOption func(*QuantOptions)

// WithPercentile calibrates activation ranges at percentile p (in
// (0, 100]) of the absolute values; WithPercentile(0) takes min/max.
func WithPercentile(p float64) QuantOption { return func(o *QuantOptions) { o.Percentile = p } }

// Int8Quantizer is the Capabilities facet of a model that can run in int8 (the
// native engine's).
type Int8Quantizer interface {
	// QuantizeInt8 returns a new model that runs the forward pass with
	// int8 weights and activations where it pays, its activation scales
	// calibrated on calib. The receiver is left as it was.
	QuantizeInt8(calib []*samples.Batch, o QuantOptions) (Model, *QuantReport, error)
}

// ErrInt8Training is returned by an int8 model's training methods.
var ErrInt8Training = errors.New("an int8 model runs inference only; train the fp32 model")

// DefaultPercentile is the calibration percentile QuantizeInt8 uses
// unless told otherwise.
const DefaultPercentile = 99.99
