package run

import (
	"context"
	"fmt"
	"io"
	"pipe/engine"

	"pipe/dataset"
	"pipe/diag"
)

// int8 in a run. The plan's Inference says predict runs in int8
// (predict { precision int8 }); WithEvalPrecision("int8") runs the final
// evaluation in int8 as well, so that its metrics are the int8 model's.
// Either way the trained fp32 model is quantised once (QuantizeInt8),
// calibrated on the first batches of the training split in order,
// without augmentation, and the fp32 model comes back once the run has
// predicted: checkpoints and the memory report stay the fp32 model's.

// WithEvalPrecision runs the final evaluation and predict in precision
// p: "int8" (the native engine), or "fp32" (whatever predict says).
func WithEvalPrecision(p string) Option { return func(c *runConfig) { c.evalPrecision = p } }

// int8Wanted says whether the stage about to run (the final evaluation,
// or predict when forPredict) runs in int8.
func (r *runner) int8Wanted(forPredict bool) bool {
	switch r.rc.evalPrecision {
	case "int8":
		return true
	case "fp32":
		return false
	}
	return forPredict && r.p.Inference != nil && r.p.Inference.Precision == "int8"
}

// toInt8 swaps r.model for its int8 model, once; the fp32 model is kept in
// r.fp32 and restoreFP32 puts it back.
func (r *runner) toInt8(ctx context.Context) bool {
	if r.fp32 != nil {
		return true
	}
	at := r.int8Range()
	q := r.model.Capabilities().Int8
	if q == nil {
		r.errorf(at, CodePredict, "int8 needs the native engine",
			"int8 inference runs on the native engine (CPU); this run's engine is %s. Plan with --engine native, or predict in fp32.", r.p.EngineName())
		return false
	}
	n := 8
	if r.p.Inference != nil && r.p.Inference.CalibrateBatches > 0 {
		n = int(r.p.Inference.CalibrateBatches)
	}
	calib, err := r.calibrationBatches(ctx, n)
	if err == nil && len(calib) == 0 {
		err = fmt.Errorf("the training split has no samples")
	}
	if err != nil {
		r.errorf(at, CodePredict, "int8 calibration failed", "Reading calibration batches from source %s: %v.", r.data.trainSrc.Name, err)
		return false
	}
	m, rep, err := q.QuantizeInt8(calib, engine.QuantOptions{Percentile: engine.DefaultPercentile})
	if err != nil {
		r.errorf(at, CodePredict, "int8 quantisation failed", "%v.", err)
		return false
	}
	r.fp32, r.model, r.res.Int8 = r.model, m, rep
	r.log.Info("int8", "layers", rep.Int8Layers(), "calibration", rep.Calibration, "batches", rep.CalibBatches,
		"weights_fp32", rep.WeightBytesFP32, "weights_int8", rep.WeightBytesInt8, "kernel", rep.Kernel)
	return true
}

// restoreFP32 closes the int8 model and puts the fp32 one back.
func (r *runner) restoreFP32() {
	if r.fp32 == nil {
		return
	}
	r.model.Close()
	r.model, r.fp32 = r.fp32, nil
}

func (r *runner) int8Range() *diag.Range {
	if pb := r.spec.Predict; pb != nil {
		return pb.At.Field("precision")
	}
	return nil
}

// calibrationBatches copies the first n batches of the training split,
// in order, at the plan's batch size.
func (r *runner) calibrationBatches(ctx context.Context, n int) ([]*dataset.Batch, error) {
	ds := r.data.train
	if ds == nil {
		return nil, fmt.Errorf("no training data")
	}
	loader := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: int(r.p.BatchSize), Workers: 1, Prefetch: 1})
	it := loader.EpochContext(ctx, 0)
	defer it.Close()
	var out []*dataset.Batch
	for len(out) < n {
		b, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &dataset.Batch{N: b.N, X: append([]float32(nil), b.X...)})
		it.Release(b)
	}
	return out, nil
}
