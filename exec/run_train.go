package exec

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"pipe/exec/data"
	"pipe/lang/diag"
)

// The training loop.
//
// An epoch is the loader's batches of the training data, shuffled by
// (seed, epoch). Every optimizer step zeroes the gradients, trains
// AccumulationSteps micro-batches (fewer at the end of an epoch), clips
// the gradients when the file sets grad_clip, and steps with the
// schedule's learning rate. Micro-batch i of a step adds scale n_i/N of
// its gradient, N the step's samples: 1/k when the micro-batches are full,
// and the exact mean over the step's samples when the epoch's last one is
// smaller. The step's loss is the sample-weighted mean of its
// micro-batches' losses.
//
// The context is checked between optimizer steps, never inside one: a
// cancelled context finishes the step in progress, writes a checkpoint
// and returns with StatusInterrupted. Evaluation checks it between
// batches; an evaluation cut short is done again on resume.

// train runs the epochs from r.pos; false when it failed (diagnostics
// say why).
func (r *runner) train(ctx context.Context) bool {
	p := r.p
	if r.pos.Epoch >= r.set.epochs || r.pos.Step >= r.stopAt {
		r.log.Info("nothing left to train", "epoch", r.pos.Epoch, "step", r.pos.Step)
		r.res.Status = StatusCompleted
		if r.pos.Epoch < r.set.epochs {
			r.res.Status = StatusMaxSteps
		}
		r.res.Position = r.pos
		return true
	}
	k := int(max(p.AccumulationSteps, 1))
	bs := int(p.BatchSize)
	n := r.data.train.Len()
	loader := data.NewLoader(r.data.train, data.LoaderOptions{
		BatchSize: bs, Shuffle: true, Seed: r.set.seed,
		Workers: p.Loader.Workers, Prefetch: p.Loader.Prefetch,
		Augment: data.Augmentations(r.data.trainBlock),
	})
	counter := r.newCounter(true)
	valN := 0
	if r.data.val != nil {
		valN = r.data.val.Len()
	}
	if r.hooks.Start != nil {
		r.hooks.Start(StartInfo{Pipeline: p.Pipeline, Model: p.Model, Backend: r.backend.Name(), Precision: r.model.Precision(),
			Epochs: r.set.epochs, StepsPerEpoch: r.spe, TotalSteps: r.stopAt, From: r.pos,
			BatchSize: p.BatchSize, AccumulationSteps: int64(k), EffectiveBatch: p.EffectiveBatch,
			TrainSamples: n, ValSamples: valN, Workers: p.Loader.Workers, Prefetch: p.Loader.Prefetch})
	}
	// The loader outlives a cancelled ctx: the step in progress finishes.
	loadCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	size := func(i int) int64 { return int64(min(bs, n-i*bs)) }
	var trainTime time.Duration
	stepsRun := int64(0)
	lr := r.sched.lr(r.pos.Step)

	for r.pos.Epoch < r.set.epochs {
		e := r.pos.Epoch
		var epochTime time.Duration
		stop := StatusCompleted
		if r.pos.Batch < r.nb {
			it := loader.EpochContext(loadCtx, e)
			for i := 0; i < r.pos.Batch; i++ { // resuming inside the epoch
				b, err := it.Next(loadCtx)
				if err != nil {
					it.Close()
					r.sourceErr(r.data.trainBlock, err)
					return false
				}
				it.Release(b)
			}
			for r.pos.Batch < r.nb {
				if ctx.Err() != nil {
					stop = StatusInterrupted
					break
				}
				if r.pos.Step >= r.stopAt {
					stop = StatusMaxSteps
					break
				}
				t0 := time.Now()
				group := min(k, r.nb-r.pos.Batch)
				var gs int64
				for j := range group {
					gs += size(r.pos.Batch + j)
				}
				r.model.ZeroGrad()
				var lsum float64
				for range group {
					b, err := it.Next(loadCtx)
					if err != nil {
						it.Close()
						r.sourceErr(r.data.trainBlock, err)
						return false
					}
					counter.see(b)
					bn := b.N
					if s := r.data.scaling; s != nil {
						s.standardise(b.Y, bn, len(b.Y)/max(bn, 1))
					}
					loss, err := r.model.TrainStep(b, float64(bn)/float64(gs))
					it.Release(b) // b must not be read after this
					if err == nil && (math.IsNaN(loss) || math.IsInf(loss, 0)) {
						err = &NonFiniteError{Step: r.pos.Step, MicroStep: r.pos.MicroStep, Loss: loss}
					}
					if err != nil {
						it.Close()
						r.trainErr(err)
						return false
					}
					lsum += loss * float64(bn)
				}
				if r.set.gradClip > 0 {
					if _, err := r.model.ClipGradNorm(r.set.gradClip); err != nil {
						it.Close()
						r.trainErr(err)
						return false
					}
				}
				lr = r.sched.lr(r.pos.Step)
				if err := r.model.Step(lr); err != nil {
					it.Close()
					r.trainErr(err)
					return false
				}
				dt := time.Since(t0)
				trainTime += dt
				epochTime += dt
				stepsRun++
				loss := lsum / float64(gs)
				r.pos.Step++
				r.pos.MicroStep += int64(group)
				r.pos.Batch += group
				r.pos.Samples += gs
				r.pos.LossSum += lsum
				r.pos.LossSamples += gs
				r.res.StepLosses = append(r.res.StepLosses, loss)
				r.res.SamplesTrained += gs
				r.res.TrainSeconds = trainTime.Seconds()
				if r.hooks.Step != nil {
					left := r.stopAt - r.pos.Step
					r.hooks.Step(StepInfo{Epoch: e + 1, Step: r.pos.Step, EpochStep: int64((r.pos.Batch + k - 1) / k),
						StepsPerEpoch: r.spe, TotalSteps: r.stopAt, Loss: loss, LR: lr,
						Samples: r.res.SamplesTrained, SamplesPerSecond: float64(r.res.SamplesTrained) / trainTime.Seconds(),
						Elapsed: trainTime, ETA: time.Duration(float64(trainTime) / float64(stepsRun) * float64(left))})
				}
			}
			it.Close()
		}
		r.res.Position = r.pos
		switch stop {
		case StatusInterrupted:
			r.res.Status = StatusInterrupted
			r.log.Info("interrupted", "epoch", e+1, "step", r.pos.Step)
			if stepsRun == 0 {
				// Nothing new to keep, and a checkpoint of an untrained
				// model would replace an earlier run's last.ckpt.
				r.log.Info("nothing trained in this run; no checkpoint written")
				return true
			}
			return r.checkpoint("interrupt", false)
		case StatusMaxSteps:
			r.res.Status = StatusMaxSteps
			r.log.Info("step limit reached", "step", r.pos.Step)
			return r.checkpoint("max-steps", false)
		}

		// The epoch is trained: evaluate it.
		res := EpochResult{Epoch: e + 1, Step: r.pos.Step, LR: lr, Seconds: epochTime.Seconds()}
		if r.pos.LossSamples > 0 {
			res.TrainLoss = r.pos.LossSum / float64(r.pos.LossSamples)
		}
		if r.data.val != nil {
			ev, err := r.evaluate(ctx, r.data.val, r.data.valName, r.data.valPart, r.set.metrics, int(p.BatchSize))
			if err != nil {
				if ctx.Err() != nil {
					r.res.Status = StatusInterrupted
					r.log.Info("interrupted during evaluation", "epoch", e+1)
					return r.checkpoint("interrupt", false)
				}
				r.evalErr(r.data.valName, err)
				return false
			}
			res.Val = ev
		}
		r.pos = Position{Epoch: e + 1, Step: r.pos.Step, MicroStep: r.pos.MicroStep, Samples: r.pos.Samples}
		r.res.Position = r.pos
		r.res.EpochResults = append(r.res.EpochResults, res)
		r.res.Epochs = len(r.res.EpochResults)
		score := res.TrainLoss
		if res.Val != nil {
			score = res.Val.Loss
		}
		better := !math.IsNaN(score) && (!r.hasBest || score < r.bestLoss)
		if better {
			r.bestLoss, r.hasBest = score, true
		}
		if !r.checkpoint("epoch", better) {
			return false
		}
		if r.hooks.Epoch != nil {
			r.hooks.Epoch(res)
		}
		if r.pos.Step >= r.stopAt && r.pos.Epoch < r.set.epochs {
			r.res.Status = StatusMaxSteps
			return true
		}
	}
	r.res.Status = StatusCompleted
	return true
}

// trainErr turns a training failure into a diagnostic; a non-finite
// value points at the layer that produced it.
func (r *runner) trainErr(err error) {
	r.res.Position = r.pos // the steps taken before the failure count
	kept := "No checkpoint was written before it."
	if r.res.Checkpoint != "" {
		kept = fmt.Sprintf("The last good checkpoint, %s, is kept; resume from it with a lower learning rate or grad_clip.", r.res.Checkpoint)
	}
	var nf *NonFiniteError
	if errors.As(err, &nf) {
		r.res.Status = StatusNonFinite
		var at *diag.Range
		summary := fmt.Sprintf("the loss is not finite at step %d", nf.Step+1)
		if nd := nodeNamed(r.graph, nf.Node); nd != nil {
			at = rangeOf(nd.Range)
			summary = fmt.Sprintf("%s (%s) produced a non-finite value at step %d", nd.Name, nd.Op, nf.Step+1)
		} else if nf.Param != "" {
			summary = fmt.Sprintf("%s is not finite at step %d", nf.Param, nf.Step+1)
		}
		if at == nil {
			at = rangeOf(r.lmodel.NameRange)
		}
		r.errorf(at, CodeNonFinite, summary, "Training stopped: %v. %s", nf, kept)
		return
	}
	r.res.Status = StatusFailed
	summary := "training failed"
	if errors.Is(err, ErrBadBatch) {
		summary = "a batch does not fit the model"
	}
	r.errorf(rangeOf(r.lmodel.NameRange), CodeTrain, summary, "At step %d: %v. %s", r.pos.Step+1, err, kept)
}

// batchCounter measures a loader's buffers: the distinct batches it
// handed over, by their capacity (a loader recycles them, so the set stops
// growing once its ring is full).
type batchCounter struct {
	train bool
	seen  map[*data.Batch]bool
	bytes int64
}

func (r *runner) newCounter(train bool) *batchCounter {
	c := &batchCounter{train: train, seen: map[*data.Batch]bool{}}
	r.counters = append(r.counters, c)
	return c
}

func (c *batchCounter) see(b *data.Batch) {
	if c.seen[b] {
		return
	}
	c.seen[b] = true
	c.bytes += int64(cap(b.X)+cap(b.Y)+cap(b.Mask))*4 + int64(cap(b.Indices))*8
}

// loaderBytes is the training loader's buffers plus the largest
// evaluation loader's: they are never alive at the same time as another
// evaluation's.
func (r *runner) loaderBytes() int64 {
	var tr, ev int64
	for _, c := range r.counters {
		if c.train {
			tr += c.bytes
		} else {
			ev = max(ev, c.bytes)
		}
	}
	return tr + ev
}
