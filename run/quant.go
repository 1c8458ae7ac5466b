package run

import (
	"errors"
	"fmt"
	"pipe/engine"

	"pipe/dataset"
)

// QuantizeInt8 swaps t.Model for an int8 model: dense and conv weights
// quantised per output channel (batchnorm folded first where the plan
// folds it), activations per tensor with scales calibrated on the
// normalised batches calib (training batches, without targets needed),
// by default at the 99.99th percentile. Predict then runs in int8. The
// fp32 model is closed.
func (t *Trained) QuantizeInt8(calib []*dataset.Batch, opts ...engine.QuantOption) (*engine.QuantReport, error) {
	o := engine.QuantOptions{Percentile: engine.DefaultPercentile}
	for _, f := range opts {
		f(&o)
	}
	if o.Percentile < 0 || o.Percentile > 100 {
		return nil, fmt.Errorf("percentile %g: it must be in (0, 100], or 0 for min/max", o.Percentile)
	}
	if len(calib) == 0 {
		return nil, errors.New("int8 needs at least one calibration batch to measure the activations' ranges")
	}
	q := t.Model.Capabilities().Int8
	if q == nil {
		return nil, fmt.Errorf("int8 inference runs on the native engine; this model runs in %s (load it with the native backend)", t.Model.Precision())
	}
	m, rep, err := q.QuantizeInt8(calib, o)
	if err != nil {
		return nil, fmt.Errorf("int8: %w", err)
	}
	t.Model.Close()
	t.Model = m
	return rep, nil
}
