package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"pipe/engine"
	"slices"
	"time"

	"pipe/dataset"
	"pipe/run/metric"
)

// evaluate runs the model in evaluation mode over ds and measures the
// loss and the metrics; masked positions are left out of both.
func (r *runner) evaluate(ctx context.Context, ds dataset.Dataset, name, part string, metrics []string, batch int) (*Evaluation, error) {
	if r.hooks.Evaluating != nil {
		r.hooks.Evaluating(fmt.Sprintf("%s (%s)", name, part), ds.Len())
	}
	t0 := time.Now()
	defer func() { r.res.EvalSeconds += time.Since(t0).Seconds() }()
	task := r.task(ds)
	set, err := metric.New(metrics, task)
	if err != nil {
		return nil, err
	}
	// The baseline: the training mean everywhere, scored as the model is.
	var base *metric.Set
	mean := r.data.targetMean
	if len(mean) > 0 && task.Kind == metric.Regression && len(metrics) > 0 {
		if base, err = metric.New(metrics, task); err != nil {
			return nil, err
		}
	}
	scaling := r.data.scaling
	loader := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: batch, Workers: r.p.Loader.Workers, Prefetch: r.p.Loader.Prefetch})
	counter := r.newCounter(false)
	it := loader.EpochContext(ctx, 0)
	defer it.Close()
	o := int(numel(r.model.OutShape()))
	out := make([]float32, batch*o)
	var raw, meanOut []float32
	var lossSum float64
	var count int
	for {
		b, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		counter.see(b)
		n := b.N
		y := b.Y
		if scaling != nil {
			// The model is scored on the raw targets, in their units;
			// its loss on the standardised ones it learnt.
			raw = append(raw[:0], b.Y...)
			y = raw
			scaling.standardise(b.Y, n, len(b.Y)/max(n, 1))
		}
		loss, err := r.eval(b, out[:n*o])
		if err == nil && scaling != nil {
			scaling.restore(out[:n*o], n, o)
		}
		if err == nil {
			err = set.Add(n, out[:n*o], y, b.Mask)
		}
		if err == nil && r.hooks.Evaluated != nil {
			r.hooks.Evaluated(EvalBatch{Source: name, Part: part, N: n, X: b.X, Y: y, Mask: b.Mask, Out: out[:n*o], Loss: loss})
		}
		if err == nil && base != nil {
			if len(meanOut) < n*o {
				meanOut = make([]float32, batch*o)
				fillMean(meanOut, batch, o, mean)
			}
			err = base.Add(n, meanOut[:n*o], y, b.Mask)
		}
		it.Release(b) // b must not be read after this
		if err != nil {
			return nil, err
		}
		lossSum += loss * float64(n)
		count += n
	}
	ev := &Evaluation{Source: name, Part: part, Samples: count, Metrics: set.Values()}
	if base != nil {
		ev.Baseline = base.Values()
	}
	if count > 0 {
		ev.Loss = lossSum / float64(count)
	}
	r.log.Debug("evaluated", "source", name, "part", part, "samples", count, "loss", ev.Loss)
	return ev, nil
}

func (r *runner) evalErr(name string, err error) {
	r.res.Status = StatusFailed
	if errors.Is(err, engine.ErrBadBatch) || errors.Is(err, engine.ErrInternal) {
		r.errorf(rangeOf(r.mspec.NameRange), CodeTrain, "evaluation failed", "Evaluating on source %s: %v.", name, err)
		return
	}
	if b := r.spec.Source(name); b != nil {
		r.sourceErr(b, err)
		return
	}
	r.errorf(nil, CodeTrain, "evaluation failed", "Evaluating on source %s: %v.", name, err)
}

// finalEval measures the trained model on the evaluate source, reusing
// the last epoch's validation when it is the same pass over the same
// weights.
func (r *runner) finalEval(ctx context.Context) bool {
	d := &r.data
	var last *EpochResult
	if n := len(r.res.EpochResults); n > 0 && r.res.EpochResults[n-1].Step == r.pos.Step {
		last = &r.res.EpochResults[n-1]
	}
	ds, name, part, metrics := d.val, d.valName, d.valPart, r.set.metrics
	batch := int(r.p.BatchSize)
	if d.evalSet {
		ds, name, part, metrics = d.evalDS, d.evalName, d.evalPart, d.evalMetrics
		if v := r.spec.Evaluate.Batch; v != nil {
			batch = int(*v)
		}
	}
	if ds == nil {
		return true
	}
	if last != nil && last.Val != nil && ds == d.val && slices.Equal(metrics, r.set.metrics) && r.fp32 == nil {
		r.res.Final = last.Val
		return true
	}
	ev, err := r.evaluate(ctx, ds, name, part, metrics, batch)
	if err != nil {
		if ctx.Err() != nil {
			r.res.Status = StatusInterrupted
			return false
		}
		r.evalErr(name, err)
		return false
	}
	r.res.Final = ev
	return true
}
