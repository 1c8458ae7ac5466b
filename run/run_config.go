package run

import (
	"math"
	"path/filepath"
	"pipe/engine"
	"strings"

	"pipe/lang"
	"pipe/planner/plan"
)

// ConfigFromPlan is the Config a backend builds the plan's model with: the
// batch, precision, loss, checkpoint segments, fusion groups and folds
// from the plan; the seed and the optimizer's settings from the program as
// written. Threads is left 0 (GOMAXPROCS).
func ConfigFromPlan(p *plan.Plan, prog *lang.Program) engine.Config {
	train := prog.Block("train")
	cfg := engine.Config{
		Batch:     int(p.BatchSize),
		Precision: p.Precision.Compute,
		Seed:      uint64(seedOf(prog)),
		Loss:      engine.Loss{Kind: p.Loss},
		Optimizer: optimizerOf(p, train),
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
		CudnnWorkspaceLimit: e.CudnnWorkspaceLimit, ChannelsLast: e.ChannelsLast, Compile: e.Compile, FusedOptimizer: e.FusedOptimizer, PinnedMemory: e.PinnedMemory,
		LossReadback: e.LossReadback, WorldSize: p.WorldSize(), Backend: p.Distributed.Backend, BucketBytes: p.Distributed.BucketBytes}
	return cfg
}

// seedOf is train's seed, else the file's, else 0.
func seedOf(prog *lang.Program) int64 {
	if v := prog.Block("train").Field("seed").First(); v != nil {
		return v.Int
	}
	if v := prog.Top.Field("seed").First(); v != nil {
		return v.Int
	}
	return 0
}

// fileSeed is the file's top-level seed (0 when it has none): the seed of
// splits and synthetic sources that give none.
func fileSeed(prog *lang.Program) int64 {
	if v := prog.Top.Field("seed").First(); v != nil {
		return v.Int
	}
	return 0
}

// optimizerOf reads the optimizer's settings with PyTorch's defaults; the
// plan gives the kind.
func optimizerOf(p *plan.Plan, train *lang.Block) engine.Optimizer {
	o := engine.Optimizer{Kind: p.Optimizer.Kind, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	if o.Kind == "" {
		o.Kind = "adam"
	}
	if o.Kind == "adamw" {
		o.WeightDecay = 0.01
	}
	f := func(name string, dst *float64) {
		if v := train.Arg("optimizer", name); v != nil {
			*dst = v.Float
		}
	}
	f("momentum", &o.Momentum)
	f("weight_decay", &o.WeightDecay)
	f("beta1", &o.Beta1)
	f("beta2", &o.Beta2)
	f("eps", &o.Eps)
	if v := train.Arg("optimizer", "nesterov"); v != nil {
		o.Nesterov = v.Bool
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

func settingsOf(prog *lang.Program, rc *runConfig) settings {
	train := prog.Block("train")
	s := settings{epochs: 1, seed: seedOf(prog), fileSeed: fileSeed(prog), ckptMode: "auto", schedKind: "constant", gamma: 0.1}
	if v := train.Field("epochs").First(); v != nil {
		s.epochs = int(v.Int)
	}
	if v := train.Field("max_steps").First(); v != nil {
		s.maxSteps = v.Int
	}
	if v := train.Field("grad_clip").First(); v != nil {
		s.gradClip = v.Float
	}
	if v := train.Field("metrics").First(); v != nil {
		for _, e := range v.List {
			s.metrics = append(s.metrics, e.Str)
		}
	}
	// "checkpoint" is gradient checkpointing, which the plan carries; "save"
	// says which checkpoint files to write.
	if v := train.Field("save").First(); v != nil && !v.Auto {
		s.ckptMode = v.Str
	}
	if v := train.Arg("schedule", "kind"); v != nil {
		s.schedKind = v.Str
	}
	if v := train.Arg("schedule", "every"); v != nil {
		s.every = v.Int
	}
	if v := train.Arg("schedule", "gamma"); v != nil {
		s.gamma = v.Float
	}
	switch {
	case rc.ckptDir != "":
		s.ckptDir = rc.ckptDir
	case train.Field("checkpoint_dir") != nil:
		s.ckptDir = resolve(rc.base, train.Field("checkpoint_dir").First().Str)
	default:
		s.ckptDir = resolve(rc.base, filepath.Join("out", prog.Name, "checkpoints"))
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
