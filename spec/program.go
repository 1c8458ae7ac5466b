package spec

import "pipe/diag"

// Program is a checked program as the planner and the stages after it
// read it: its top-level settings, the settings of its train, evaluate,
// predict and serve blocks, its sources, its device blocks and where its
// models were written. The models' layers are not here: their graphs are
// built by stdlib.
type Program struct {
	// Name is the pipeline's name; File the file's, as parsed.
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	// Seed is the file's top-level seed; nil when it gives none.
	Seed *int64 `json:"seed,omitempty"`
	// Device, Precision and Engine are the top-level fields; nil when the
	// file leaves them out.
	Device    *Auto[string] `json:"device,omitempty" pipe:"device"`
	Precision *Auto[string] `json:"precision,omitempty" pipe:"precision"`
	Engine    *Auto[string] `json:"engine,omitempty" pipe:"engine"`
	Sources   []*Source     `json:"sources"`
	Models    []*Model      `json:"models"`
	// Devices are the file's device blocks.
	Devices  []*Device `json:"devices,omitempty"`
	Train    *Train    `json:"train,omitempty"`
	Evaluate *Evaluate `json:"evaluate,omitempty"`
	Predict  *Predict  `json:"predict,omitempty"`
	Serve    *Serve    `json:"serve,omitempty"`
	Sweep    *Sweep    `json:"sweep,omitempty"`
	// GAN is train's gan settings; nil unless train is in gan mode with
	// both its models found.
	GAN *GAN `json:"gan,omitempty"`
	// At is where the top-level fields were written.
	At Where `json:"at"`
}

// Sweep is the sweep block's settings; its parameters are read with the
// file's text (lang.SweepParams), which resolving their paths needs.
type Sweep struct {
	Trials    int64   `json:"trials" pipe:"trials"`
	Parallel  int64   `json:"parallel" pipe:"parallel"`
	Metric    string  `json:"metric" pipe:"metric"`
	Goal      string  `json:"goal,omitempty" pipe:"metric.goal"`
	Sampler   string  `json:"sampler" pipe:"sampler"`
	Startup   int64   `json:"startup,omitempty" pipe:"sampler.startup"`
	Gamma     float64 `json:"gamma" pipe:"sampler.gamma"`
	EarlyStop string  `json:"early_stop" pipe:"early_stop"`
	Rung      int64   `json:"rung" pipe:"early_stop.rung"`
	Eta       int64   `json:"eta" pipe:"early_stop.eta"`
	// Seed is the sampler's; nil for the file's.
	Seed *int64 `json:"seed,omitempty" pipe:"seed"`
	At   Where  `json:"at"`
}

// Model is where a model block was written, for diagnostics about it.
type Model struct {
	Name      string     `json:"name"`
	NameRange diag.Range `json:"name_range"`
	// InputRange is the input field's; zero when the model has none.
	InputRange diag.Range `json:"input_range"`
	// Calls are the layers and families the model calls, each call once
	// in source order (lang.Model.Calls).
	Calls []Call `json:"calls,omitempty"`
}

// Call is one call of a layer or family in a model: its name and where
// the name was written.
type Call struct {
	Name      string     `json:"name"`
	NameRange diag.Range `json:"name_range"`
}

// GAN is a train block in gan mode: the generator train trains, evaluates
// and predicts with, the discriminator trained against it, and the
// adversarial settings (defaults applied). The discriminator's optimizer
// is Train.DOptimizer.
type GAN struct {
	Generator     string `json:"generator"`
	Discriminator string `json:"discriminator"`
	// Conditional: the discriminator reads the generator's input beside
	// the image (Pix2Pix).
	Conditional bool `json:"conditional,omitempty"`
	// Adversarial is bce, lsgan or hinge; AdvWeight its weight in the
	// generator's loss, L1 the L1 term's.
	Adversarial string  `json:"adversarial"`
	AdvWeight   float64 `json:"adv_weight"`
	L1          float64 `json:"l1"`
	// DSteps: the generator steps on every DSteps-th batch.
	DSteps int64 `json:"d_steps"`
}

// Train is the train block's settings that a run reads (the planner's
// decisions, such as the batch, are in the plan).
type Train struct {
	Epochs int64 `json:"epochs" pipe:"epochs"`
	// Batch is nil when left out; EffectiveBatch 0.
	Batch          *Auto[int64] `json:"batch,omitempty" pipe:"batch"`
	EffectiveBatch int64        `json:"effective_batch,omitempty" pipe:"effective_batch"`
	// Checkpoint is gradient checkpointing: auto, none or all.
	Checkpoint    *Auto[string] `json:"checkpoint,omitempty" pipe:"checkpoint"`
	Fuse          *Auto[bool]   `json:"fuse,omitempty" pipe:"fuse"`
	SyncBatchnorm *Auto[bool]   `json:"sync_batchnorm,omitempty" pipe:"sync_batchnorm"`
	// Workers and Prefetch are the loader's.
	Workers  *Auto[int64] `json:"workers,omitempty" pipe:"workers"`
	Prefetch *Auto[int64] `json:"prefetch,omitempty" pipe:"prefetch"`
	// MemoryMargin is nil for the planner's default.
	MemoryMargin *float64 `json:"memory_margin,omitempty" pipe:"memory_margin"`
	// Model, Loss and Mode are "" when left out.
	Model    string `json:"model,omitempty" pipe:"model"`
	Loss     string `json:"loss,omitempty" pipe:"loss"`
	Mode     string `json:"mode,omitempty" pipe:"mode"`
	MaxSteps int64  `json:"max_steps,omitempty" pipe:"max_steps"`
	// StepsPerEpoch cuts each epoch to this many optimizer steps; 0 for
	// every batch of the training data.
	StepsPerEpoch int64   `json:"steps_per_epoch,omitempty" pipe:"steps_per_epoch"`
	GradClip      float64 `json:"grad_clip,omitempty" pipe:"grad_clip"`
	// Seed is train's own seed; nil for the file's.
	Seed    *int64   `json:"seed,omitempty" pipe:"seed"`
	Metrics []string `json:"metrics,omitempty" pipe:"metrics"`
	// Save is auto, none or all; "" for auto.
	Save          string `json:"save,omitempty" pipe:"save"`
	CheckpointDir string `json:"checkpoint_dir,omitempty" pipe:"checkpoint_dir"`
	// Source names the source train reads; "" when the file leaves it out.
	Source     string     `json:"source,omitempty" pipe:"source"`
	Optimizer  *Optimizer `json:"optimizer,omitempty" pipe:"optimizer"`
	DOptimizer *Optimizer `json:"d_optimizer,omitempty" pipe:"d_optimizer"`
	Schedule   *Schedule  `json:"schedule,omitempty" pipe:"schedule"`
	At         Where      `json:"at"`
}

// Optimizer is an optimizer field's arguments as written; nil for those
// left out (the run applies PyTorch's defaults).
type Optimizer struct {
	Kind        string   `json:"kind,omitempty" pipe:"kind"`
	LR          *float64 `json:"lr,omitempty" pipe:"lr"`
	Momentum    *float64 `json:"momentum,omitempty" pipe:"momentum"`
	WeightDecay *float64 `json:"weight_decay,omitempty" pipe:"weight_decay"`
	Beta1       *float64 `json:"beta1,omitempty" pipe:"beta1"`
	Beta2       *float64 `json:"beta2,omitempty" pipe:"beta2"`
	Eps         *float64 `json:"eps,omitempty" pipe:"eps"`
	Nesterov    *bool    `json:"nesterov,omitempty" pipe:"nesterov"`
}

// Schedule is the schedule field's arguments as written.
type Schedule struct {
	Kind   string   `json:"kind,omitempty" pipe:"kind"`
	Warmup *int64   `json:"warmup,omitempty" pipe:"warmup"`
	Every  *int64   `json:"every,omitempty" pipe:"every"`
	Gamma  *float64 `json:"gamma,omitempty" pipe:"gamma"`
}

// Evaluate is the evaluate block.
type Evaluate struct {
	// Source is "" for the train source.
	Source  string   `json:"source,omitempty" pipe:"source"`
	Metrics []string `json:"metrics,omitempty" pipe:"metrics"`
	// Batch is nil for auto (the plan's batch).
	Batch *int64 `json:"batch,omitempty" pipe:"batch"`
	At    Where  `json:"at"`
}

// Predict is the predict block.
type Predict struct {
	// Source is "" for the train source.
	Source string `json:"source,omitempty" pipe:"source"`
	// Write is the output path; At.Has("write") says whether it is given.
	Write string `json:"write,omitempty" pipe:"write"`
	// Overlap is nil for the default (half).
	Overlap *float64 `json:"overlap,omitempty" pipe:"overlap"`
	// Batch is nil for auto (the plan's batch).
	Batch     *int64 `json:"batch,omitempty" pipe:"batch"`
	Precision string `json:"precision,omitempty" pipe:"precision"`
	// Calibrate is int8's calibration batches; nil for the default.
	Calibrate *int64 `json:"calibrate,omitempty" pipe:"calibrate"`
	At        Where  `json:"at"`
}

// Source returns the source with the given name, or nil.
func (p *Program) Source(name string) *Source {
	for _, s := range p.Sources {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// DeviceNamed returns the device block with the given name, or nil.
func (p *Program) DeviceNamed(name string) *Device {
	for _, d := range p.Devices {
		if d.Name == name {
			return d
		}
	}
	return nil
}

// Model returns the model with the given name, or nil.
func (p *Program) Model(name string) *Model {
	for _, m := range p.Models {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// TrainSource is the source train reads: the one its source field names,
// else the source named train, else the only source; nil when none is
// (lang.Program.TrainSource's rule, which the planner follows).
func (p *Program) TrainSource() *Source {
	if p.Train != nil && p.Train.Source != "" {
		return p.Source(p.Train.Source)
	}
	if s := p.Source("train"); s != nil {
		return s
	}
	if len(p.Sources) == 1 {
		return p.Sources[0]
	}
	return nil
}
