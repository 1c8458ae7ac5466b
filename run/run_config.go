package run

import (
	"math"
	"path/filepath"
	"pipe/engine"
	"pipe/run/folder"
	"strings"

	"pipe/planner/plan"
	"pipe/spec"
	"pipe/stdlib"
)

// ConfigFromPlan is the Config a backend builds the plan's model with: the
// batch, precision, loss, checkpoint segments, fusion groups and folds
// from the plan; the seed and the optimizer's settings from the program as
// written. Threads is left 0 (GOMAXPROCS).
func ConfigFromPlan(p *plan.Plan, prog *stdlib.Program) engine.Config {
	cfg := engine.Config{
		Batch:     int(p.BatchSize),
		Precision: p.Precision.Compute,
		Seed:      uint64(seedOf(prog.Spec)),
		Loss:      engine.Loss{Kind: p.Loss},
		Optimizer: optimizerOf(p.Optimizer.Kind, optimizerArgs(prog.Spec.Train, false)),
	}
	if cfg.Optimizer.Kind == "" { // a plan that names none trains with adam
		cfg.Optimizer.Kind = "adam"
	}
	for _, s := range p.Checkpoint.Segments {
		cfg.Checkpoint = append(cfg.Checkpoint, engine.Segment{From: s.From, To: s.To})
	}
	for _, g := range p.Fusion.Groups {
		cfg.Fusion = append(cfg.Fusion, engine.FusionGroup{Kind: g.Kind, Nodes: append([]string(nil), g.Nodes...)})
	}
	for _, f := range p.Fusion.InferenceFolds {
		if len(f) == 2 {
			cfg.Folds = append(cfg.Folds, [2]string{f[0], f[1]})
		}
	}
	cfg.Device = "cpu"
	if p.Backend == plan.BackendGPU {
		cfg.Device = "cuda"
		if strings.HasPrefix(p.Device.Name, "cuda:") {
			cfg.Device = p.Device.Name
		}
	}
	e := p.Engine
	cfg.Engine = engine.EngineSettings{Autocast: e.Autocast, GradScaler: e.GradScaler, TF32: e.TF32, CudnnBenchmark: e.CudnnBenchmark,
		CudnnWorkspaceLimit: e.CudnnWorkspaceLimit, ChannelsLast: e.ChannelsLast, Compile: e.Compile, CUDAGraph: e.CUDAGraph, FusedOptimizer: e.FusedOptimizer, PinnedMemory: e.PinnedMemory,
		LossReadback: e.LossReadback, WorldSize: p.WorldSize(), Backend: p.Distributed.Backend, BucketBytes: p.Distributed.BucketBytes,
		SyncBatchnorm: p.Distributed.SyncBatchnorm}
	return cfg
}

// seedOf is train's seed, else the file's, else 0.
func seedOf(prog *spec.Program) int64 {
	if t := prog.Train; t != nil && t.Seed != nil {
		return *t.Seed
	}
	return fileSeed(prog)
}

// fileSeed is the file's top-level seed (0 when it has none): the seed of
// splits and synthetic sources that give none.
func fileSeed(prog *spec.Program) int64 {
	if prog.Seed != nil {
		return *prog.Seed
	}
	return 0
}

// optimizerArgs is train's optimizer field as written, or for the
// discriminator (d) its d_optimizer when given; nil when there is none.
func optimizerArgs(train *spec.Train, d bool) *spec.Optimizer {
	if train == nil {
		return nil
	}
	if d && train.DOptimizer != nil {
		return train.DOptimizer
	}
	return train.Optimizer
}

// optimizerOf is an optimizer of the given kind (the plan's) with the
// settings written in args over PyTorch's defaults.
func optimizerOf(kind string, args *spec.Optimizer) engine.Optimizer {
	o := engine.Optimizer{Kind: kind, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	if o.Kind == "adamw" {
		o.WeightDecay = 0.01
	}
	if args == nil {
		return o
	}
	f := func(v *float64, dst *float64) {
		if v != nil {
			*dst = *v
		}
	}
	f(args.Momentum, &o.Momentum)
	f(args.WeightDecay, &o.WeightDecay)
	f(args.Beta1, &o.Beta1)
	f(args.Beta2, &o.Beta2)
	f(args.Eps, &o.Eps)
	if args.Nesterov != nil {
		o.Nesterov = *args.Nesterov
	}
	return o
}

// settings are what the training loop reads from the program as written.
type settings struct {
	epochs    int
	maxSteps  int64 // the file's max_steps; 0 for none
	gradClip  float64
	seed      int64
	fileSeed  int64
	metrics   []string
	ckptMode  string // auto, none, all
	ckptDir   string
	schedKind string
	every     int64
	gamma     float64
}

func settingsOf(prog *spec.Program, rc *runConfig) settings {
	s := settings{epochs: 1, seed: seedOf(prog), fileSeed: fileSeed(prog), ckptMode: "auto", schedKind: "constant", gamma: 0.1}
	train := prog.Train
	if train == nil {
		train = &spec.Train{Epochs: 1}
	}
	s.epochs = int(train.Epochs)
	s.maxSteps = train.MaxSteps
	s.gradClip = train.GradClip
	s.metrics = append(s.metrics, train.Metrics...)
	// "checkpoint" is gradient checkpointing, which the plan carries; "save"
	// says which checkpoint files to write.
	if train.Save != "" {
		s.ckptMode = train.Save
	}
	if sc := train.Schedule; sc != nil {
		if sc.Kind != "" {
			s.schedKind = sc.Kind
		}
		if sc.Every != nil {
			s.every = *sc.Every
		}
		if sc.Gamma != nil {
			s.gamma = *sc.Gamma
		}
	}
	switch {
	case rc.ckptDir != "":
		s.ckptDir = rc.ckptDir
	case train.At.Has("checkpoint_dir"):
		s.ckptDir = resolve(rc.base, train.CheckpointDir)
	default: // Run places a run given no folder first (run_folders.go)
		s.ckptDir = filepath.Join(PipelineFolder(rc.base, prog.Name), folder.LatestName)
	}
	return s
}

func resolve(base, p string) string {
	if p == "" || filepath.IsAbs(p) || base == "" {
		return p
	}
	return filepath.Join(base, p)
}

// schedule is the learning rate of every optimizer step.
//
//   - warm-up: the first warmup steps (the plan's WarmupEpochs × steps per
//     epoch) rise linearly, lr·(s+1)/warmup, then the schedule proper
//     starts from the full rate;
//   - constant: lr;
//   - cosine: lr·½(1 + cos(π·t)), t = (s − warmup)/(total − warmup) the
//     fraction of the steps after warm-up already taken (PyTorch's
//     CosineAnnealingLR with T_max those steps and eta_min 0);
//   - linear: lr·(1 − t), falling towards 0;
//   - step: lr·gamma^⌊epoch/every⌋ (StepLR stepped per epoch; every and
//     gamma are the plan's, every a third of the epochs when the file
//     does not say).
//
// total is the planned training length (epochs × steps per epoch, or the
// file's max_steps when smaller); a --max-steps short run leaves it as it
// is, so its rates are the full run's.
type schedule struct {
	kind          string
	base          float64
	warmup        int64
	total         int64
	stepsPerEpoch int64
	every         int64
	gamma         float64
}

func (s schedule) lr(step int64) float64 {
	if step < s.warmup {
		return s.base * float64(step+1) / float64(s.warmup)
	}
	span := s.total - s.warmup
	t := 0.0
	if span > 0 {
		t = float64(step-s.warmup) / float64(span)
	}
	t = math.Min(math.Max(t, 0), 1)
	switch s.kind {
	case "cosine":
		return s.base * 0.5 * (1 + math.Cos(math.Pi*t))
	case "linear":
		return s.base * (1 - t)
	case "step":
		every := max(s.every, 1)
		epoch := step / max(s.stepsPerEpoch, 1)
		return s.base * math.Pow(s.gamma, float64(epoch/every))
	}
	return s.base
}
