package run

import (
	"context"
	"errors"
	"fmt"
	"math"
	"pipe/engine"
	"time"

	"pipe/dataset"
	"pipe/diag"
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
// say why). Each epoch is trained (steps), stopped when asked (stopped),
// or evaluated, recorded and checkpointed (endEpoch).
func (r *runner) train(ctx context.Context) bool {
	// An epoch trained but not evaluated (interrupted in its validation)
	// is evaluated, recorded and checkpointed before anything is finished.
	unevaluated := r.pos.Epoch < r.set.epochs && r.pos.Batch >= r.nb
	if !unevaluated && (r.pos.Epoch >= r.set.epochs || r.pos.Step >= r.stopAt) {
		r.log.Info("nothing left to train", "epoch", r.pos.Epoch, "step", r.pos.Step)
		r.res.Status = r.endStatus()
		r.res.Position = r.pos
		return true
	}
	if err := r.keepData(); err != nil {
		r.trainErr(err)
		return false
	}
	t := r.newTrainer()
	defer func() { r.res.SamplesRead += t.loader.SamplesRead() }()
	if pt := r.model.Capabilities().Phases; pt != nil {
		defer func() {
			if ph, ok := pt.StepPhases(); ok {
				r.res.StepPhases = &ph
			}
		}()
	}
	// The loader outlives a cancelled ctx: the step in progress finishes.
	loadCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	for r.pos.Epoch < r.set.epochs {
		e := r.pos.Epoch
		stop, ok, done := t.steps(ctx, loadCtx, e)
		if done {
			return ok
		}
		// Every step queued is finished before the epoch ends, is
		// evaluated or is saved.
		if err := t.flush(); err != nil {
			t.unwind()
			if r.stalledStop(ctx, err) {
				return true
			}
			r.trainErr(err)
			return false
		}
		r.res.Position = r.pos
		if stop != StatusCompleted {
			return t.stopped(stop, e)
		}
		if ok, done := t.endEpoch(ctx, e); done {
			return ok
		}
	}
	r.res.Status = StatusCompleted
	return t.unrecovered()
}

// keepData sends the training set to the device where the plan keeps it
// there (plan.DataOnDevice): the training loader then reads indices
// alone, which the engine gathers.
func (r *runner) keepData() error {
	if d := r.p.DataOnDevice; d == nil || !d.On {
		return nil
	}
	res := r.model.Capabilities().Resident
	if res == nil {
		return fmt.Errorf("the plan keeps the training set on the device, and the %s engine's model cannot (make the plan again)", r.backend.Name())
	}
	s, err := dataset.DeviceSamples(r.data.train)
	if err != nil {
		return err
	}
	return res.Keep(s)
}

// newTrainer opens the training loader, chooses how steps reach the
// engine, and calls the Start hook.
func (r *runner) newTrainer() *trainer {
	p := r.p
	t := &trainer{r: r, k: int(max(p.AccumulationSteps, 1)), bs: r.globalBatch(), n: r.data.train.Len()}
	// Steps of one micro-batch go to the engine in units of the plan's
	// StepsPerCommand (an engine that computes in this thread runs the
	// unit as a loop); stops, checkpoints and evaluation fall between.
	t.unit = 1
	if p.StepsPerCommand > 1 && t.k == 1 && r.prof == nil {
		t.unit = int(p.StepsPerCommand)
	}
	// On one node of several, the loader reads only this node's rows of
	// each global batch.
	t.loader = dataset.NewLoader(r.data.train, dataset.LoaderOptions{
		BatchSize: t.bs, Shuffle: true, Seed: r.set.seed,
		Workers: p.Loader.Workers, Prefetch: p.Loader.Prefetch,
		Augment: dataset.Augmentations(r.data.trainSrc),
		Rows:    r.model.Capabilities().Rows, Held: t.unit,
		IndicesOnly: p.DataOnDevice != nil && p.DataOnDevice.On,
	})
	t.counter = r.newCounter(true)
	valN := 0
	if r.data.val != nil {
		valN = r.data.val.Len()
	}
	if r.hooks.Start != nil {
		r.hooks.Start(StartInfo{Pipeline: p.Pipeline, Model: p.Model, Backend: r.backend.Name(), Precision: r.model.Precision(),
			Epochs: r.set.epochs, StepsPerEpoch: r.spe, TotalSteps: r.stopAt, From: r.pos,
			BatchSize: p.BatchSize, AccumulationSteps: int64(t.k), EffectiveBatch: p.EffectiveBatch,
			TrainSamples: t.n, ValSamples: valN, Workers: p.Loader.Workers, Prefetch: p.Loader.Prefetch})
	}
	if q := r.model.Capabilities().Queue; q != nil && r.prof == nil {
		t.q = q // a profile times each step as a whole: one at a time
	}
	if t.unit > 1 && t.q == nil {
		t.q = engine.Sequential(r.model)
	}
	t.lr = r.sched.lr(r.pos.Step)
	// Ranks in several processes stop together: a rank asked to stop
	// says so with its next step, and all stop after that one.
	t.stopper = r.model.Capabilities().Stop
	return t
}

// steps trains epoch e's steps from r.pos until the epoch ends or the
// run is to stop: stop says why it stopped (StatusCompleted: the epoch
// ended). done says train returns ok now (a failed step, or a stalled
// peer).
func (t *trainer) steps(ctx, loadCtx context.Context, e int) (stop Status, ok, done bool) {
	r := t.r
	t.epochTime, t.epochStall = 0, 0
	stop = StatusCompleted
	if r.pos.Batch >= r.nb {
		return stop, true, false
	}
	it := t.loader.EpochFrom(loadCtx, e, r.pos.Batch) // resuming inside the epoch: from its next batch
	defer it.Close()
	for r.pos.Batch < r.nb {
		if t.stopper != nil && t.stopper.Stopping() {
			return StatusInterrupted, true, false
		}
		if ctx.Err() != nil {
			if t.stopper == nil {
				return StatusInterrupted, true, false
			}
			t.stopper.RequestStop()
		}
		if r.pos.Step >= r.stopAt {
			return StatusMaxSteps, true, false
		}
		t0 := time.Now()
		group := min(t.k, r.nb-r.pos.Batch)
		var gs int64
		for j := range group {
			gs += int64(min(t.bs, t.n-(r.pos.Batch+j)*t.bs))
		}
		t.lr = r.sched.lr(r.pos.Step)
		var res []engine.StepResult
		var err error
		switch {
		case t.unit > 1:
			n := int(min(int64(min(t.unit, r.nb-r.pos.Batch)), r.stopAt-r.pos.Step))
			res, err = t.queueSteps(it, t.counter, n, e)
			t.lr = r.sched.lr(max(r.pos.Step-1, 0))
		case t.q != nil:
			res, err = t.queueStep(it, t.counter, group, gs, t.lr, e)
		default:
			res, err = t.syncStep(it, t.counter, group, gs, t.lr, e)
		}
		dt := time.Since(t0)
		t.account(dt)
		if r.prof != nil {
			r.prof.endStep(r.pos.Step, t0, dt)
		}
		if ferr := t.finish(res); ferr != nil {
			err = ferr
		}
		if err != nil {
			t.unwind()
			it.Close()
			if r.stalledStop(ctx, err) {
				return stop, true, true
			}
			if se := (*sourceError)(nil); errors.As(err, &se) {
				r.sourceErr(r.data.trainSrc, se.err)
			} else {
				r.trainErr(err)
			}
			return stop, false, true
		}
	}
	return stop, true, false
}

// stopped ends a run stopped inside epoch e (interrupted, or at the step
// limit) with its checkpoint; false when that failed.
func (t *trainer) stopped(stop Status, e int) bool {
	r := t.r
	r.res.Status = stop
	if stop == StatusMaxSteps {
		r.log.Info("step limit reached", "step", r.pos.Step)
		return r.checkpoint("max-steps", false) && t.unrecovered()
	}
	r.log.Info("interrupted", "epoch", e+1, "step", r.pos.Step)
	if t.stepsRun == 0 {
		// Nothing new to keep, and a checkpoint of an untrained
		// model would replace an earlier run's last.ckpt.
		r.log.Info("nothing trained in this run; no checkpoint written")
		return true
	}
	ok := r.checkpoint("interrupt", false)
	if t.stopper != nil {
		if err := t.stopper.StopTogether(); err != nil {
			r.log.Warn("the ranks did not stop together", "error", err.Error())
		}
	}
	return ok
}

// endEpoch evaluates the trained epoch e, records it and checkpoints it
// (best.ckpt too when it is the best yet). done says train returns ok
// now: a failure, an interrupted evaluation, or the step limit reached.
func (t *trainer) endEpoch(ctx context.Context, e int) (ok, done bool) {
	r := t.r
	res := EpochResult{Epoch: e + 1, Step: r.pos.Step, LR: t.lr, Seconds: t.epochTime.Seconds(),
		LoaderStallSeconds: t.epochStall.Seconds()}
	if r.pos.LossSamples > 0 {
		res.TrainLoss = r.pos.LossSum / float64(r.pos.LossSamples)
	}
	if r.data.val != nil && r.rc.nodeRank == 0 {
		ev, err := r.evaluate(ctx, r.data.val, r.data.valName, r.data.valPart, r.set.metrics, int(r.p.BatchSize))
		if err != nil {
			if ctx.Err() != nil {
				r.res.Status = StatusInterrupted
				r.log.Info("interrupted during evaluation", "epoch", e+1)
				return r.checkpoint("interrupt", false), true
			}
			r.evalErr(r.data.valName, err)
			return false, true
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
		return false, true
	}
	if r.hooks.Epoch != nil {
		r.hooks.Epoch(res)
	}
	if r.pos.Step >= r.stopAt && r.pos.Epoch < r.set.epochs {
		r.res.Status = r.endStatus()
		return t.unrecovered(), true
	}
	return true, false
}

// endStatus is how a run that has no step left ends: at the step limit
// when one (--max-steps, train's max_steps) stopped it before the file's
// epochs, completed otherwise (a checkpoint of longer epochs has every
// step of these).
func (r *runner) endStatus() Status {
	if r.pos.Epoch < r.set.epochs && r.stopAt < int64(r.set.epochs)*r.spe {
		return StatusMaxSteps
	}
	return StatusCompleted
}

// stalledStop ends an interrupted run whose engine gave up waiting on a
// stalled peer (err is engine.ErrInterrupted): the step in progress
// cannot finish, so no checkpoint is written, and the last one stays.
// False when err is another failure.
func (r *runner) stalledStop(ctx context.Context, err error) bool {
	if ctx.Err() == nil || !errors.Is(err, engine.ErrInterrupted) {
		return false
	}
	r.res.Status, r.res.Position, r.res.Stalled = StatusInterrupted, r.pos, err.Error()
	r.log.Info("interrupted while a peer rank was stalled; no checkpoint written", "epoch", r.pos.Epoch+1, "step", r.pos.Step)
	return true
}

// sourceError is an error of the training data's source, told apart from
// the model's so that it is reported at the source block.
type sourceError struct{ err error }

func (e *sourceError) Error() string { return e.err.Error() }
func (e *sourceError) Unwrap() error { return e.err }

// trainer is the epoch loop's step machinery: an optimizer step at a time
// (syncStep), or queued on a device that runs ahead (queueStep), with the
// losses accounted for as they come back.
type trainer struct {
	r *runner
	q engine.Queuer
	// k is the micro-batches of a step, bs a micro-batch's samples over
	// every device, n the training samples.
	k, bs, n int
	loader   *dataset.Loader
	counter  *batchCounter
	// stopper stops the ranks together (engine.Stopper); nil for one.
	stopper engine.Stopper
	// lr is the learning rate of the last step trained.
	lr float64
	// unit is the steps queued together (queueSteps), 1 for one at a time.
	unit int
	// epochTime is this invocation's training time in the epoch.
	epochTime time.Duration
	// epochStall is the part of it spent in the loader's Next.
	epochStall time.Duration
	trainTime  time.Duration
	stepsRun   int64
	// pending are the queued steps whose losses have not come back.
	pending []pendingStep
	// diverged says the divergence warning was given; highFrom is the
	// step from which the loss has stayed diverged (0: it is not).
	diverged bool
	highFrom int64
}

// pendingStep is a queued optimizer step.
type pendingStep struct {
	epoch int
	step  int64 // its number, from 1
	ns    []int // its micro-batches' sizes
	lr    float64
}

// next is the epoch's next training batch, counted, with its targets
// standardised when the run scales them.
func (t *trainer) next(it dataset.Iterator, counter *batchCounter) (*dataset.Batch, error) {
	t0 := time.Now()
	b, err := it.Next(context.Background())
	t.epochStall += time.Since(t0)
	if err != nil {
		return nil, &sourceError{err}
	}
	counter.see(b)
	if s := t.r.data.scaling; s != nil {
		s.standardise(b.Y, b.N, len(b.Y)/max(b.N, 1))
	}
	return b, nil
}

// syncStep trains one optimizer step of group micro-batches (gs samples)
// and waits for it.
func (t *trainer) syncStep(it dataset.Iterator, counter *batchCounter, group int, gs int64, lr float64, e int) ([]engine.StepResult, error) {
	r := t.r
	r.model.ZeroGrad()
	ns := make([]int, 0, group)
	losses := make([]float64, 0, group)
	var tl time.Time
	for range group {
		if r.prof != nil {
			tl = time.Now()
		}
		b, err := t.next(it, counter)
		if r.prof != nil {
			r.prof.loader(tl, time.Since(tl))
		}
		if err != nil {
			return nil, err
		}
		bn := b.Whole()
		loss, err := r.model.TrainStep(b, float64(bn)/float64(gs))
		if r.prof != nil {
			r.prof.micro(bn)
		}
		it.Release(b) // b must not be read after this
		if err == nil && (math.IsNaN(loss) || math.IsInf(loss, 0)) {
			err = &engine.NonFiniteError{Step: r.pos.Step, MicroStep: r.pos.MicroStep + int64(len(ns)), Loss: loss}
		}
		if err != nil {
			return nil, err
		}
		ns = append(ns, bn)
		losses = append(losses, loss)
	}
	if r.prof != nil {
		tl = time.Now()
	}
	if r.set.gradClip > 0 {
		if _, err := r.model.ClipGradNorm(r.set.gradClip); err != nil {
			return nil, err
		}
	}
	if err := r.model.Step(lr); err != nil {
		return nil, err
	}
	if r.prof != nil {
		r.prof.optimizer(tl, time.Since(tl))
	}
	t.advance(e, ns, lr)
	return []engine.StepResult{{Losses: losses}}, nil
}

// queueStep queues one optimizer step and takes the results that came
// back meanwhile (on a GPU with lagged readback, the step before's).
func (t *trainer) queueStep(it dataset.Iterator, counter *batchCounter, group int, gs int64, lr float64, e int) ([]engine.StepResult, error) {
	r := t.r
	ns := make([]int, 0, group)
	for j := range group {
		b, err := t.next(it, counter)
		if err != nil {
			return nil, err
		}
		bn := b.Whole()
		err = t.q.QueueTrain(b, float64(bn)/float64(gs), j == 0, j == group-1)
		it.Release(b) // the model copied it
		if err != nil {
			return nil, err
		}
		ns = append(ns, bn)
	}
	if err := t.q.QueueStep(r.set.gradClip, lr); err != nil {
		return nil, err
	}
	t.advance(e, ns, lr)
	return t.q.Results(false)
}

// queueSteps queues a unit of n optimizer steps of one micro-batch each
// (plan.StepsPerCommand) and takes the results that came back meanwhile
// (the unit before's).
func (t *trainer) queueSteps(it dataset.Iterator, counter *batchCounter, n, e int) ([]engine.StepResult, error) {
	r := t.r
	bs := make([]*dataset.Batch, 0, n)
	lrs := make([]float64, 0, n)
	defer func() {
		for _, b := range bs {
			it.Release(b) // the model copied it
		}
	}()
	for i := range n {
		b, err := t.next(it, counter)
		if err != nil {
			return nil, err
		}
		bs = append(bs, b)
		lrs = append(lrs, r.sched.lr(r.pos.Step+int64(i)))
	}
	if err := t.q.QueueSteps(bs, lrs, r.set.gradClip); err != nil {
		return nil, err
	}
	for i, b := range bs {
		t.advance(e, []int{b.Whole()}, lrs[i])
	}
	return t.q.Results(false)
}

// advance moves the position past a step whose micro-batches had ns
// samples; its losses are accounted for by finish.
func (t *trainer) advance(e int, ns []int, lr float64) {
	r := t.r
	var gs int64
	for _, n := range ns {
		gs += int64(n)
	}
	r.pos.Step++
	r.pos.MicroStep += int64(len(ns))
	r.pos.Batch += len(ns)
	r.pos.Samples += gs
	r.pos.EpochSamples += gs
	r.res.SamplesTrained += gs
	t.stepsRun++
	t.pending = append(t.pending, pendingStep{epoch: e, step: r.pos.Step, ns: ns, lr: lr})
}

// unwind takes the steps queued but not finished back out of the
// position when training fails: an engine that queues ahead (the torch
// engine sends a step before the one before it replied) has counted steps
// that the failure left untrained, and the report counts the steps
// trained before it.
func (t *trainer) unwind() {
	r := t.r
	for _, ps := range t.pending {
		var gs int64
		for _, n := range ps.ns {
			gs += int64(n)
		}
		r.pos.Step--
		r.pos.MicroStep -= int64(len(ps.ns))
		r.pos.Batch -= len(ps.ns)
		r.pos.Samples -= gs
		r.pos.EpochSamples -= gs
		r.res.SamplesTrained -= gs
		t.stepsRun--
	}
	t.pending = nil
}

// account adds a step's wall time.
func (t *trainer) account(dt time.Duration) {
	t.trainTime += dt
	t.epochTime += dt
	t.r.res.TrainSeconds = t.trainTime.Seconds()
}

// finish accounts for the steps whose losses came back, oldest first: the
// epoch's loss, the loss history, the progress hook. A non-finite loss
// stops training there.
func (t *trainer) finish(res []engine.StepResult) error {
	r := t.r
	for _, sr := range res {
		if len(t.pending) == 0 {
			return fmt.Errorf("%w: the engine returned the losses of a step that was not queued", engine.ErrInternal)
		}
		ps := t.pending[0]
		var lsum float64
		var gs int64
		for i, l := range sr.Losses {
			if math.IsNaN(l) || math.IsInf(l, 0) {
				micro := r.pos.MicroStep + int64(i)
				for _, q := range t.pending { // ps among them: it is not trained
					micro -= int64(len(q.ns))
				}
				return &engine.NonFiniteError{Step: ps.step - 1, MicroStep: micro, Loss: l}
			}
			if i < len(ps.ns) {
				lsum += l * float64(ps.ns[i])
				gs += int64(ps.ns[i])
			}
		}
		t.pending = t.pending[1:]
		loss := lsum / float64(max(gs, 1))
		if ps.epoch == r.pos.Epoch {
			r.pos.LossSum += lsum
			r.pos.LossSamples += gs
		}
		r.res.StepLosses = append(r.res.StepLosses, loss)
		if gp := r.model.Capabilities().GANParts; gp != nil {
			if parts, ok := gp.GANParts(); ok {
				r.res.GANParts = append(r.res.GANParts, parts)
			}
		}
		if err := t.watchDivergence(loss, ps.step); err != nil {
			return err
		}
		if r.hooks.Step != nil {
			left := r.stopAt - ps.step
			elapsed := t.trainTime
			var eta time.Duration
			if t.stepsRun > 0 {
				eta = time.Duration(float64(elapsed) / float64(t.stepsRun) * float64(left))
			}
			sps := 0.0
			if s := elapsed.Seconds(); s > 0 {
				sps = float64(r.res.SamplesTrained) / s
			}
			r.hooks.Step(StepInfo{Epoch: ps.epoch + 1, Step: ps.step, EpochStep: (ps.step-1)%max(r.spe, 1) + 1,
				StepsPerEpoch: r.spe, TotalSteps: r.stopAt, Loss: loss, LR: ps.lr,
				Samples: r.res.SamplesTrained, SamplesPerSecond: sps, Elapsed: elapsed, ETA: eta})
		}
	}
	return nil
}

// divergeFactor is how many times its first value the training loss may
// grow before the run warns that it diverges; divergePatience how many
// steps in a row it may stay there before training stops.
const (
	divergeFactor   = 1000
	divergePatience = 20
)

// DivergedError stops a run whose training loss stayed over divergeFactor
// times its first for divergePatience steps in a row: such a model has
// stopped learning, and every further step is spent for nothing.
type DivergedError struct {
	First, Loss float64
	From, Step  int64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("the training loss stayed over %d times its first (%.4g) from step %d to step %d, where it was %.4g",
		divergeFactor, e.First, e.From, e.Step, e.Loss)
}

// watchDivergence warns, once, when the loss has grown by orders of
// magnitude over the run's first (a loss of 1.6e39 trains nothing, NaN
// or not), and stops training (DivergedError) when it stays there. A
// GAN's losses are two models' in contest, so it only warns.
func (t *trainer) watchDivergence(loss float64, step int64) error {
	r := t.r
	if len(r.res.StepLosses) < 2 {
		return nil
	}
	first := r.res.StepLosses[0]
	if first <= 0 || loss <= first*divergeFactor {
		t.highFrom = 0
		return nil
	}
	if t.highFrom == 0 {
		t.highFrom = step
	}
	if !t.diverged {
		t.diverged = true
		r.warnf(r.optimizerAt(), CodeDiverging, "the training loss is diverging",
			"It grew from %.4g at step 1 to %.4g at step %d, more than %d times over: the model is not learning. Lower the learning rate (this run's is %.4g), set grad_clip, or check that the inputs and targets are normalised.",
			first, loss, step, divergeFactor, r.p.Optimizer.LR)
		r.log.Warn("the training loss is diverging", "first", first, "now", loss, "step", step)
	}
	if r.p.GAN == nil && step-t.highFrom+1 >= divergePatience {
		return &DivergedError{First: first, Loss: loss, From: t.highFrom, Step: step}
	}
	return nil
}

// optimizerAt is the train block's optimizer setting, where the advice
// on a diverging loss points.
func (r *runner) optimizerAt() *diag.Range {
	if train := r.spec.Train; train != nil {
		return train.At.Field("optimizer")
	}
	return nil
}

// unrecovered fails a finished run whose loss diverged and never came
// back: its last steps' mean loss is still above its first, so the model
// it leaves has learned nothing (accuracy at chance), which must not end
// as a success. It says whether the run stands.
func (t *trainer) unrecovered() bool {
	r := t.r
	ls := r.res.StepLosses
	if !t.diverged || r.p.GAN != nil || len(ls) < 2 {
		return true
	}
	last := ls[max(len(ls)-divergePatience, 1):]
	var sum float64
	for _, l := range last {
		sum += l
	}
	mean := sum / float64(len(last))
	if mean < ls[0] {
		return true
	}
	r.res.Status = StatusFailed
	r.errorf(r.optimizerAt(), CodeDiverging, "the training loss diverged and did not come back",
		"Its last %d steps' mean loss is %.4g, above its first, %.4g: the model learned nothing. Start a new run with a lower learning rate (this run's is %.4g) or grad_clip; the checkpoints are kept, but hold the diverged model.",
		len(last), mean, ls[0], r.p.Optimizer.LR)
	return false
}

// flush waits for every queued step and accounts for it.
func (t *trainer) flush() error {
	if t.q == nil || len(t.pending) == 0 {
		return nil
	}
	t0 := time.Now()
	res, err := t.q.Results(true)
	t.account(time.Since(t0))
	if ferr := t.finish(res); ferr != nil {
		return ferr
	}
	return err
}

// trainErr turns a training failure into a diagnostic; a non-finite
// value points at the layer that produced it.
func (r *runner) trainErr(err error) {
	r.res.Position = r.pos // the steps taken before the failure count
	// What to do with the checkpoint kept depends on the cause.
	keptFor := func(advice string) string {
		switch {
		case r.rank0Wrote != "":
			return fmt.Sprintf("Rank 0 keeps the run's checkpoints: it wrote %s, in the run's folder on its machine; %s", r.rank0Wrote, advice)
		case r.res.Checkpoint == "":
			return "No checkpoint was written before it."
		}
		return fmt.Sprintf("The last good checkpoint, %s, is kept; %s", r.res.Checkpoint, advice)
	}
	again := "resume from it with --resume"
	if job := r.jobID(); job != "" {
		// A job's run is continued by its id; another job (a SLURM job
		// submitted again) has an id of its own and would start afresh.
		again = fmt.Sprintf("continue it with the job's command and --run-id %s (a job submitted again has another id, and would start a new run without it)", job)
	}
	kept := keptFor(again + " once the cause above is fixed.")
	if errors.Is(err, engine.ErrWorkerLost) {
		kept = keptFor("nothing here points at the model or its settings, so " + again + " as it is.")
		if r.rc.restart != "" {
			kept = keptFor(r.rc.restart + ".")
		}
	}
	var nf *engine.NonFiniteError
	if errors.As(err, &nf) {
		kept = keptFor(fmt.Sprintf("continue from it in a new run with a lower learning rate or grad_clip: --resume=%s --set train.lr=... (a resume in place keeps the run's settings).", r.res.Checkpoint))
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
			at = rangeOf(r.mspec.NameRange)
		}
		r.errorf(at, CodeNonFinite, summary, "Training stopped: %v. %s", nf, kept)
		return
	}
	var dv *DivergedError
	if errors.As(err, &dv) {
		r.res.Status = StatusFailed
		r.errorf(r.optimizerAt(), CodeDiverging, "the training loss diverged",
			"Training stopped: %v. The model is not learning; lower the learning rate (this run's is %.4g), set grad_clip, or check that the inputs and targets are normalised. %s",
			dv, r.p.Optimizer.LR, keptFor(fmt.Sprintf("continue from it in a new run with the fix: --resume=%s --set train.lr=... (a resume in place keeps the run's settings).", r.res.Checkpoint)))
		return
	}
	var oom *engine.OutOfMemoryError
	if errors.As(err, &oom) {
		kept = keptFor("it resumes with its own batch once the device has the memory (a resume keeps the batch it was trained with); a lower batch starts afresh.")
		r.res.Status = StatusFailed
		oom.Step = r.pos.Step
		at := rangeOf(r.mspec.NameRange)
		if nd := nodeNamed(r.graph, oom.Node); nd != nil {
			at = rangeOf(nd.Range)
		}
		measured := "the device did not say how much it held"
		if oom.MaxReserved > 0 {
			measured = fmt.Sprintf("the device measured %s allocated and %s reserved at the peak", fmtBytes(oom.MaxAllocated), fmtBytes(oom.MaxReserved))
			if oom.Total > 0 {
				measured += fmt.Sprintf(", %s of its %s in use", fmtBytes(oom.Used), fmtBytes(oom.Total))
			}
		}
		where := ""
		if oom.Phase != "" {
			where = " in the " + oom.Phase + " pass"
		}
		if oom.Node != "" {
			where += " at " + oom.Node
		}
		r.errorf(at, CodeOOM, fmt.Sprintf("out of memory at step %d%s", r.pos.Step+1, where),
			"The plan estimated %s for a training step of batch %d; %s. %s Lower the batch (pipe plan --batch N shows what fits), or let checkpoint auto recompute activations. (%s)",
			fmtBytes(r.p.Memory.Total), r.p.BatchSize, measured, kept, oom.Detail)
		return
	}
	r.res.Status = StatusFailed
	summary := "training failed"
	if errors.Is(err, engine.ErrBadBatch) {
		summary = "a batch does not fit the model"
	}
	r.errorf(rangeOf(r.mspec.NameRange), CodeTrain, summary, "At step %d: %v. %s", r.pos.Step+1, err, kept)
}

// batchCounter measures a loader's buffers: the distinct batches it
// handed over, by their capacity (a loader recycles them, so the set stops
// growing once its ring is full).
type batchCounter struct {
	train bool
	seen  map[*dataset.Batch]bool
	bytes int64
}

func (r *runner) newCounter(train bool) *batchCounter {
	c := &batchCounter{train: train, seen: map[*dataset.Batch]bool{}}
	r.counters = append(r.counters, c)
	return c
}

func (c *batchCounter) see(b *dataset.Batch) {
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

// fmtBytes writes a byte count in binary units, as plans do.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
