package run

import (
	"context"
	"errors"
	"fmt"
	"pipe/engine"
	"time"

	"github.com/hashicorp/go-hclog"

	"pipe/diag"
	"pipe/planner/plan"
	"pipe/run/folder"
	"pipe/spec"
	"pipe/stdlib"
)

// runner is one Run.
type runner struct {
	p     *plan.Plan
	prog  *stdlib.Program
	spec  *spec.Program
	hooks Hooks
	rc    *runConfig
	log   hclog.Logger
	start time.Time

	res   *Result
	diags diag.Diagnostics

	mspec   *spec.Model
	graph   *stdlib.Graph
	backend engine.Backend
	model   engine.Model
	fp32    engine.Model // the trained model while model is its int8 one (run_int8.go)
	cfg     engine.Config
	set     settings
	data    runData
	sched   schedule

	// nb is the micro-batches of an epoch, spe its optimizer steps;
	// stopAt the step count training stops at.
	nb     int
	spe    int64
	stopAt int64
	pos    Position

	bestLoss float64
	hasBest  bool
	counters []*batchCounter
	// folder is the checkpoint folder: its lock, whether its earlier
	// checkpoints are stale, whether the run wrote one (package folder).
	folder *folder.Folder
	// worldRestarts is the largest launcher restart count of the ranks
	// the model was built with (engine.Worlder), else this rank's.
	worldRestarts int
	// rank0Wrote is, on a rank above 0, the checkpoint rank 0 wrote at
	// the last point where this rank would have written one ("" for
	// none): the ranks step together, so it is rank 0's latest.
	rank0Wrote string
	// prof times the layers under WithProfile (profile.go).
	prof *profiler
}

func (r *runner) close() {
	if r.model != nil {
		_ = r.model.Close()
	}
	r.data.close()
	if r.folder != nil {
		r.folder.Release()
	}
	if pl := r.rc.place; pl != nil && (r.folder == nil || !r.folder.Written()) {
		// A run folder made for a run that wrote nothing goes again,
		// with the folders above it that placing it made.
		pl.Discard()
	}
}

// run does the whole job; what it did is in r.res and r.diags.
func (r *runner) run(ctx context.Context) {
	if !r.setup(ctx) {
		return
	}
	if r.rc.worldDecides {
		r.decideResume()
	}
	if r.rc.resume && !r.resume() {
		return
	}
	r.res.TargetScaling = r.data.scaling
	if r.rc.skipTrain {
		if !r.rc.resume {
			r.errorf(nil, CodeResume, "nothing to evaluate", "Skipping training needs a trained model: give --resume as well, to load the last checkpoint.")
			return
		}
		r.res.Status = StatusSkipped
	} else if !r.train(ctx) {
		return
	}
	if r.res.Status == StatusInterrupted || r.rc.nodeRank > 0 {
		return
	}
	defer r.restoreFP32()
	if r.int8Wanted(false) && !r.toInt8(ctx) {
		return
	}
	if !r.finalEval(ctx) {
		return
	}
	if r.int8Wanted(true) && r.spec.Predict != nil && !r.toInt8(ctx) {
		return
	}
	r.predict(ctx)
}

// setup checks the plan against the program, builds the graph, opens the
// data and builds the model.
func (r *runner) setup(ctx context.Context) bool {
	p, prog := r.p, r.prog
	if p == nil || prog == nil {
		r.errorf(nil, CodePlan, "nothing to run", "Run needs a plan and the program it was made from.")
		return false
	}
	engineName := p.EngineName()
	if summary, detail := refused(engineName, p); summary != "" {
		r.errorf(nil, CodeNoBackend, summary, "%s", detail)
		return false
	}
	for _, b := range r.rc.backends {
		if b.Name() == engineName {
			r.backend = b
			break
		}
	}
	if r.backend == nil {
		r.errorf(nil, CodeNoBackend, "no engine for the plan", "The plan is for the %s engine, which this run was not given.", engineName)
		return false
	}
	if !p.Fits {
		r.errorf(nil, CodeNoFit, "the plan does not fit its device",
			"The plan needs %d bytes of the %d its budget allows on %s; pipe plan shows where they go. Lower the batch, or let checkpoint auto recompute activations.",
			p.Memory.Total, p.Memory.Budget, p.Device.Name)
		return false
	}
	r.mspec = prog.Spec.Model(p.Model)
	if r.mspec == nil {
		r.errorf(nil, CodePlan, "the plan's model is not in the file", "The plan trains model %s, which the file does not declare; run pipe plan again.", p.Model)
		return false
	}
	g, ds := prog.Graph(p.Model)
	r.diags = append(r.diags, ds...)
	if ds.HasErrors() || g == nil {
		return false
	}
	r.graph = g
	if len(g.Nodes) != len(p.Layers) {
		r.errorf(nil, CodePlan, "the plan does not match the model",
			"The plan has %d layers and model %s has %d nodes; run pipe plan again.", len(p.Layers), p.Model, len(g.Nodes))
		return false
	}
	for i, n := range g.Nodes {
		if p.Layers[i].Name != n.Name {
			r.errorf(rangeOf(n.Range), CodePlan, "the plan does not match the model",
				"Layer %d is %s in the plan and %s in the model; run pipe plan again.", i, p.Layers[i].Name, n.Name)
			return false
		}
	}
	if !r.place() {
		return false
	}
	r.set = settingsOf(prog.Spec, r.rc)
	r.folder = r.rc.place.folder(r.set.ckptDir)
	r.res.EpochsPlanned = r.set.epochs
	r.res.CheckpointDir = r.set.ckptDir
	if !r.preflight() {
		return false
	}
	r.cfg = ConfigFromPlan(p, prog)
	r.cfg.Threads = r.rc.threads
	r.cfg.LauncherRestarts = r.rc.restarts
	if !r.openData() {
		return false
	}

	bs := r.globalBatch()
	r.nb = (r.data.train.Len() + bs - 1) / bs
	k := int(max(p.AccumulationSteps, 1))
	if t := r.spec.Train; t != nil && t.StepsPerEpoch > 0 {
		// steps_per_epoch: the epoch's first batches of its shuffled order.
		r.nb = int(min(int64(r.nb), t.StepsPerEpoch*int64(k)))
	}
	r.spe = int64((r.nb + k - 1) / k)
	total := int64(r.set.epochs) * r.spe
	if r.set.maxSteps > 0 {
		total = min(total, r.set.maxSteps)
	}
	r.sched = schedule{kind: r.set.schedKind, base: p.Optimizer.LR, warmup: p.Optimizer.WarmupEpochs * r.spe,
		total: total, stepsPerEpoch: r.spe, every: r.set.every, gamma: r.set.gamma}
	if sc := p.Schedule; sc.Kind != "" { // the plan decided it (plans from before schedules did not)
		r.sched.kind, r.sched.every, r.sched.gamma = sc.Kind, sc.Every, sc.Gamma
	}
	r.stopAt = total
	if r.rc.maxSteps > 0 {
		r.stopAt = min(r.stopAt, r.rc.maxSteps)
	}
	r.res.StepsPerEpoch = r.spe

	cfg := r.cfg
	cfg.Cancel = ctx.Done() // a data-parallel build waits for the other ranks
	m, err := safeBuild(r.backend, g, cfg)
	if errors.Is(err, engine.ErrInterrupted) {
		r.res.Status = StatusInterrupted
		r.errorf(nil, CodeBuild, "interrupted while the model was built",
			"The run was interrupted before training began (while the workers waited for the other ranks to join); nothing was trained or written.")
		return false
	}
	if err != nil {
		what := "the backend cannot build the model"
		if errors.Is(err, engine.ErrUnsupported) {
			what = "the backend cannot run this model"
		}
		r.errorf(rangeOf(r.mspec.NameRange), CodeBuild, what, "%s backend: %v.", r.backend.Name(), err)
		return false
	}
	r.worldRestarts = r.cfg.LauncherRestarts
	if w := m.Capabilities().World; w != nil {
		r.worldRestarts = max(r.worldRestarts, w.LauncherRestarts())
	}
	if p.GAN != nil {
		gm, ok := r.buildGAN(m)
		if !ok {
			m.Close()
			return false
		}
		m = gm
	}
	r.model = m
	r.res.Precision = m.Precision()
	if o := r.rc.profile; o != nil {
		pm := m.Capabilities().Profile
		switch {
		case p.GAN != nil:
			r.errorf(nil, CodeProfile, "profile: not supported in gan mode", "The profile times one model's layers; a gan run trains two. Run without --profile.")
			return false
		case pm == nil:
			r.errorf(nil, CodeProfile, "profile: not supported by this engine",
				"The %s engine does not time its layers; profile with the native engine (--engine native, on the CPU), or run without --profile.", r.backend.Name())
			return false
		}
		r.prof = newProfiler(pm, p, r.backend.Name(), *o, r.start)
	}
	if a := m.Capabilities().Applied; a != nil {
		r.res.Applied = a.Applied()
	}
	r.log.Info("model built", "model", p.Model, "backend", r.backend.Name(), "precision", m.Precision(),
		"batch", p.BatchSize, "accumulation", p.AccumulationSteps, "parameters", p.Parameters)
	return true
}

// place puts a run given no folder where PlaceRun says, as pipe run
// does: a new run folder, or for --resume the latest run's.
func (r *runner) place() bool {
	rc := r.rc
	if rc.ckptDir != "" {
		return true
	}
	if t := r.prog.Spec.Train; t != nil && t.At.Has("checkpoint_dir") {
		return true // settingsOf takes it
	}
	pl, err := PlaceRun(r.prog.Spec, rc.base, Where{Resume: rc.resume, ResumeAt: rc.resumeAt, Rank: rc.nodeRank})
	switch {
	case errors.Is(err, folder.ErrNoRun):
		r.errorf(nil, CodeResume, "no run to resume", "%v. Run without --resume to start one, or give the checkpoint with --resume=PATH.", err)
		return false
	case err != nil:
		r.errorf(nil, CodeCheckpoint, "cannot make the run's folder", "%s. Nothing was trained. Give a folder that can be written with --checkpoint-dir.", diskFull(err))
		return false
	}
	rc.ckptDir, rc.place = pl.Dir, &pl
	return true
}

// globalBatch is the samples of one micro-step over every device: the
// plan's batch is per device.
func (r *runner) globalBatch() int {
	return int(r.p.BatchSize) * r.p.WorldSize()
}

// safeBuild calls Build and turns a panic into an error.
func safeBuild(b engine.Backend, g *stdlib.Graph, cfg engine.Config) (m engine.Model, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %v", engine.ErrInternal, rec)
		}
	}()
	return b.Build(g, cfg)
}
