package run

// Run is the executor's entry point: it takes a plan and the checked
// program it was made from, and does what the plan says. It checks that
// the data fits the model (run_data.go), trains (run_train.go) with a
// checkpoint after every epoch and on cancellation (run_checkpoint.go,
// into a run folder: package folder), then evaluates and writes
// predictions (run_predict.go). It decides
// nothing the plan decided; what the plan does not hold (epochs, schedule,
// metrics, the optimizer's settings, sources) is read from the program. A
// resumed run reproduces the uninterrupted run's losses bit for bit.
//
// Overview and determinism: docs/design/run-loop.md.

import (
	"context"
	"fmt"
	"io"
	"os"
	"pipe/engine"
	"pipe/run/folder"
	"runtime/debug"
	"time"

	"github.com/hashicorp/go-hclog"

	"pipe/dataset"
	"pipe/diag"
	"pipe/planner/plan"
	"pipe/run/metric"
	"pipe/stdlib"
)

// Codes of the diagnostics Run returns.
const (
	CodeNoBackend   = "no-backend"
	CodeNoFit       = "does-not-fit" // the planner's code for the same condition
	CodePlan        = "plan-mismatch"
	CodeData        = "data"
	CodeShape       = "data-shape"
	CodeBuild       = "build"
	CodeTrain       = "train"
	CodeNonFinite   = "non-finite"
	CodeCheckpoint  = "checkpoint"
	CodeResume      = "resume"
	CodePredict     = "predict"
	CodeMetric      = "metric"
	CodeEvalOnTrain = "evaluate-on-train"
	CodeOOM         = "out-of-memory"
	CodeLocked      = "folder-in-use"
	// CodeOtherFolder refuses a fresh run into a folder whose checkpoints
	// are another pipeline's.
	CodeOtherFolder = "another-pipelines-folder"
	// CodeOtherJob refuses a run into a folder that records another
	// job's run (folder.CheckJob).
	CodeOtherJob  = "another-jobs-folder"
	CodeDiverging = "diverging"
	CodeEvalLeak  = "test-selects-model"
	CodeProfile   = "profile"
)

// Status says how a run ended.
type Status string

// Statuses.
const (
	StatusCompleted   Status = "completed"   // every epoch trained
	StatusMaxSteps    Status = "max-steps"   // stopped at the step limit
	StatusInterrupted Status = "interrupted" // the context was cancelled
	StatusNonFinite   Status = "non-finite"  // a NaN or Inf stopped training
	StatusFailed      Status = "failed"      // any other error
	StatusSkipped     Status = "not-trained" // --skip-train: evaluated and predicted only
)

// Hooks observe a run. Any field may be nil. They are called on Run's
// goroutine, so a slow hook slows training.
type Hooks struct {
	// Start is called once the model is built and the data opened,
	// before the first step.
	Start func(StartInfo)
	// Step is called after every optimizer step.
	Step func(StepInfo)
	// Evaluating is called before an evaluation pass over n samples.
	Evaluating func(what string, n int)
	// Evaluated is called after each batch of an evaluation pass with
	// the batch as the model saw it and what the model gave for it.
	Evaluated func(EvalBatch)
	// Epoch is called after every epoch's evaluation and checkpoint.
	Epoch func(EpochResult)
	// Checkpoint is called after a checkpoint file is written.
	Checkpoint func(path, reason string)
}

// Join returns hooks that call h's, then o's.
func (h Hooks) Join(o Hooks) Hooks {
	return Hooks{
		Start:      join1(h.Start, o.Start),
		Step:       join1(h.Step, o.Step),
		Evaluating: join2(h.Evaluating, o.Evaluating),
		Evaluated:  join1(h.Evaluated, o.Evaluated),
		Epoch:      join1(h.Epoch, o.Epoch),
		Checkpoint: join2(h.Checkpoint, o.Checkpoint),
	}
}

func join1[T any](a, b func(T)) func(T) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(v T) { a(v); b(v) }
}

func join2[T, U any](a, b func(T, U)) func(T, U) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(t T, u U) { a(t, u); b(t, u) }
}

// StartInfo describes the run about to train.
type StartInfo struct {
	Pipeline, Model, Backend, Precision string
	// Epochs is the number of epochs the file asks for; StepsPerEpoch
	// the optimizer steps in each, and TotalSteps the steps the run will
	// take in all (fewer under a step limit).
	Epochs        int
	StepsPerEpoch int64
	TotalSteps    int64
	// From is where training starts: zero, or the resumed position.
	From Position
	// BatchSize, AccumulationSteps and EffectiveBatch are the plan's.
	BatchSize, AccumulationSteps, EffectiveBatch int64
	// TrainSamples and ValSamples are the sizes of the training data and
	// of the per-epoch validation data (0 when there is none).
	TrainSamples, ValSamples int
	Workers, Prefetch        int
}

// StepInfo is one optimizer step's outcome.
type StepInfo struct {
	// Epoch is 1-based; Step is the number of optimizer steps taken so
	// far (this one included), EpochStep the same within the epoch.
	Epoch         int
	Step          int64
	EpochStep     int64
	StepsPerEpoch int64
	TotalSteps    int64
	// Loss is the step's mean loss over its samples; LR the learning
	// rate it used.
	Loss float64
	LR   float64
	// Samples is the samples trained so far in this invocation, and
	// SamplesPerSecond their rate (training time only).
	Samples          int64
	SamplesPerSecond float64
	// Elapsed is the training time of this invocation; ETA the estimate
	// of the training time left.
	Elapsed, ETA time.Duration
}

// Position is where a run stands: Epoch (0-based) is the epoch in
// progress and Batch the number of its micro-batches already trained;
// Batch equal to the epoch's batch count means the epoch is trained but
// not yet evaluated. Step, MicroStep and Samples count everything trained
// since the start; EpochSamples the samples of the epoch in progress,
// which is where the epoch stands whatever the batch, the accumulation
// and the number of devices (0 in checkpoints written before it was
// kept, which give it as Batch batches of their own size).
type Position struct {
	Epoch        int
	Batch        int
	Step         int64
	MicroStep    int64
	Samples      int64
	EpochSamples int64
	// LossSum and LossSamples accumulate the epoch in progress's
	// sample-weighted training loss.
	LossSum     float64
	LossSamples int64
}

// EpochResult is one epoch's outcome.
type EpochResult struct {
	// Epoch is 1-based; Step the optimizer steps taken at its end.
	Epoch int
	Step  int64
	// TrainLoss is the sample-weighted mean of the epoch's training
	// losses.
	TrainLoss float64
	// Val is the evaluation after the epoch; nil without validation data.
	Val *Evaluation
	// LR is the learning rate of the epoch's last step.
	LR float64
	// Seconds is the epoch's training time (this invocation's part of it
	// for an epoch that was resumed).
	Seconds float64
	// LoaderStallSeconds is the part of Seconds the step spent waiting
	// for its next batch: the loader's Next, timed by the clock around
	// each call. Near Seconds, the data is the bottleneck; near 0, the
	// model.
	LoaderStallSeconds float64
}

// Evaluation is a pass over a dataset in evaluation mode.
type Evaluation struct {
	// Source names the source block and Part which samples of it:
	// "validation split", "all".
	Source, Part string
	Samples      int
	// Loss is the sample-weighted mean loss; Metrics the values asked
	// for, in the order asked.
	Loss    float64
	Metrics []metric.Value
	// Baseline holds the same metrics for predicting the training
	// source's mean target everywhere, on the same positions: the score a
	// model must beat. Only for a regression whose training mean is known
	// (a geotiff source with a target); nil otherwise.
	Baseline []metric.Value
}

// EvalBatch is one batch of an evaluation pass. Its slices are the run's
// and are reused after the Evaluated hook returns: copy what is kept.
type EvalBatch struct {
	// Source and Part are the Evaluation's.
	Source, Part string
	// N samples: X their inputs as the model read them (normalised), Y
	// their targets in the target's units, Mask which target values
	// count (nil: all).
	N          int
	X, Y, Mask []float32
	// Out is the model's outputs in the target's units; Loss the batch's
	// mean loss as Model.Eval gave it (on the standardised targets when
	// the run standardises them).
	Out  []float32
	Loss float64
}

// Metric returns the named metric's value and whether it was computed.
func (e *Evaluation) Metric(name string) (float64, bool) {
	if e == nil {
		return 0, false
	}
	for _, m := range e.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Memory is what the run used, against the plan's estimate.
type Memory struct {
	// Estimated is the plan's Memory.Total (on a GPU what the device
	// shows, the CUDA context included), and EstimatedReserved a GPU
	// plan's caching-allocator memory at its peak phase (the total less
	// what is outside the allocator), 0 where the plan has no phases.
	Estimated         int64
	EstimatedReserved int64
	// GCLimit is the soft memory limit the run gave the Go runtime (the
	// plan's Memory.GCLimit), 0 when none was set.
	GCLimit int64
	// Model is the model's Memory() after training.
	Model engine.MemStats
	// Loader is the bytes of the batch buffers the training and
	// evaluation loaders allocated, counted as they were handed over.
	Loader int64
	// Accounted is Model.Total plus Loader: the run's working memory as
	// the executor accounts for it (parameters, gradients, optimizer
	// state, activations, workspace, batches), a breakdown of Measured,
	// not a measurement.
	Accounted int64
	// ProcessMaxRSS is this process's peak resident memory, as the OS
	// measured it (VmHWM, getrusage where there is none), everything included.
	ProcessMaxRSS int64
	// Measured is the peak the OS or the device measured, what
	// HeldTo is compared with: the process's peak resident memory for
	// the native engine; rank 0's DeviceMemory.Measured for the torch
	// engine (the device's reserved memory on a GPU, the worker's peak
	// resident memory on the CPU). MeasuredBy names it.
	Measured   int64
	MeasuredBy string
	// NotMeasured says why Measured is 0 for an engine that computes in
	// other processes (its workers exited before they were asked): the
	// plan is then held to nothing, never to this process's memory.
	NotMeasured string
	// Device is what the devices and their OS measured, one entry a
	// rank, for engines that compute in other processes (the torch
	// engine); nil otherwise.
	Device []engine.DeviceMemory
}

// HeldTo is the plan's figure for what Measured measures: the reserved
// estimate where Measured is max_memory_reserved (both leave out the
// CUDA context), else the total.
func (m Memory) HeldTo() int64 {
	if len(m.Device) > 0 && m.Device[0].MaxReserved > 0 && m.EstimatedReserved > 0 {
		return m.EstimatedReserved
	}
	return m.Estimated
}

// Prediction is one file predict wrote.
type Prediction struct {
	Source, Path string
	// Format is "geotiff" or "csv"; Samples the samples (windows for a
	// raster) predicted.
	Format  string
	Samples int
}

// Result is what a run did. Run returns it even when it fails, filled as
// far as the run got.
type Result struct {
	// Backend is the plan's kind of device (cpu, gpu), Engine the engine
	// that ran (native, torch).
	Pipeline, Model, Backend, Engine, Precision string
	Status                                      Status
	// Stalled is, for an interrupted run that gave up waiting on a
	// stalled peer, the engine's account of the wait: the step in
	// progress could not finish, so no checkpoint was written for the
	// interrupt, and Checkpoint is the last one before it.
	Stalled string
	// EpochsPlanned is the file's epochs; Epochs the epochs completed
	// (trained and evaluated), resumed ones included.
	EpochsPlanned int
	Epochs        int
	StepsPerEpoch int64
	// Position is where training stopped.
	Position Position
	// ResumedFrom is the checkpoint's position when the run resumed.
	ResumedFrom *Position
	// StepLosses holds every optimizer step's loss since the start
	// (resumed steps included); EpochResults every completed epoch.
	StepLosses   []float64
	EpochResults []EpochResult
	// GANParts are, in gan mode, the terms of each optimizer step of this
	// invocation (its last micro-batch's) whose loss StepLosses holds.
	GANParts []engine.GANParts
	// Final is the evaluation on the evaluate source (or the last
	// validation); nil when there was nothing to evaluate on.
	Final *Evaluation
	// Seconds of this invocation: training, evaluation and wall.
	TrainSeconds, EvalSeconds, WallSeconds float64
	// SamplesTrained and SamplesPerSecond are this invocation's;
	// SamplesRead is how many training samples this process read (on one
	// node of several, its share).
	SamplesTrained   int64
	SamplesRead      int64
	SamplesPerSecond float64
	Memory           Memory
	// Checkpoint is the last checkpoint written or read; CheckpointDir
	// where checkpoints go.
	Checkpoint    string
	CheckpointDir string
	// Job is the id of the job the run belongs to (Place.Job), "" for a
	// run started by hand.
	Job         string
	Predictions []Prediction
	// TargetScaling is how the regression targets were standardised for
	// training (run_target.go); nil when they were not.
	TargetScaling *TargetScaling
	// Applied is how the engine applied the plan where that depends on
	// the machine (Applier); nil for the native engine.
	Applied map[string]string
	// StepPhases is where the training steps' time went in the engine, by
	// phase (engine.PhaseTimer, the torch engine under PIPE_TORCH_PHASES=1);
	// nil when it was not timed.
	StepPhases *engine.StepPhases `json:",omitempty"`
	// Int8 is what int8 quantisation did, when the final evaluation or
	// predict ran in int8 (run_int8.go); nil otherwise.
	Int8 *engine.QuantReport `json:",omitempty"`
	// Profile is the time per layer (WithProfile); nil without it.
	Profile *Profile
	// Forecast is the plan's forecast of the step's time, which the
	// summary holds against TrainSeconds over the steps trained; nil
	// when the plan has none.
	Forecast *plan.Forecast
	// RooflineStepSeconds is the plan's roofline step, its lower bound.
	RooflineStepSeconds float64
}

// StepSeconds is this invocation's training time over the optimizer
// steps it trained, 0 when it trained none.
func (r *Result) StepSeconds() float64 {
	n := r.Position.Step
	if r.ResumedFrom != nil {
		n -= r.ResumedFrom.Step
	}
	if n <= 0 || r.TrainSeconds <= 0 {
		return 0
	}
	return r.TrainSeconds / float64(n)
}

// Option sets an optional knob of Run.
type Option func(*runConfig)

type runConfig struct {
	backends  []engine.Backend
	maxSteps  int64
	resume    bool
	resumeAt  string
	skipTrain bool
	ckptDir   string
	// place is where PlaceRun put the run (WithPlace, or Run itself
	// without a folder given); nil for a folder given as it is.
	place *Place
	// evalPrecision is WithEvalPrecision's (run_int8.go).
	evalPrecision string
	base          string
	log           hclog.Logger
	threads       int
	nodeRank      int
	profile       *ProfileOptions
	// restart is how the run goes on after a failure when its launcher
	// starts it again by itself (WithRestart); "" for --resume.
	restart string
	// restarts is the launcher's restart count of this rank
	// (WithLauncherRestarts); worldDecides that the run continues its
	// folder's last checkpoint if its world was restarted
	// (WithContinueIfRestarted).
	restarts     int
	worldDecides bool
	// settings are recorded in the run's folder (WithSettings); nil
	// records none.
	settings *folder.Settings
	// wrapCheckpoint wraps the checkpoint file's writer (tests inject
	// failures with it).
	wrapCheckpoint func(w io.Writer) io.Writer
	// wrapTrain wraps the training data (tests slow it down); nil keeps it.
	wrapTrain func(dataset.Dataset) dataset.Dataset
}

// WithBackend offers a backend; Run uses the one whose Name is the plan's
// Backend. Give it once per backend available.
func WithBackend(b engine.Backend) Option {
	return func(c *runConfig) { c.backends = append(c.backends, b) }
}

// WithRestart says that a launcher starts the run again after it fails
// for a lost rank, and continues it from its checkpoint: how is the
// phrase the failure's diagnostic gives in place of --resume.
func WithRestart(how string) Option { return func(c *runConfig) { c.restart = how } }

// WithLauncherRestarts says how often the launcher that started this
// rank started it again after a failure (engine.Config.LauncherRestarts).
func WithLauncherRestarts(n int) Option { return func(c *runConfig) { c.restarts = n } }

// WithContinueIfRestarted makes the run continue its folder's last
// checkpoint, as WithResume("") would, when any rank of its world was
// restarted by the launcher, and start afresh otherwise: every rank
// decides the same once the ranks have met (engine.Worlder), where a
// rank's own count would not (torchrun counts only the ranks it
// restarted for a failure). Design: docs/design/run-identity.md.
func WithContinueIfRestarted() Option { return func(c *runConfig) { c.worldDecides = true } }

// WithMaxSteps stops training after n optimizer steps in all, resumed
// steps included (the file's max_steps does the same; the smaller wins).
// The schedule is unchanged, so a short run is a prefix of the full one.
func WithMaxSteps(n int64) Option { return func(c *runConfig) { c.maxSteps = n } }

// WithResume continues from a checkpoint: from names a checkpoint file or
// a folder holding last.ckpt; "" is the run's checkpoint folder.
func WithResume(from string) Option {
	return func(c *runConfig) { c.resume, c.resumeAt = true, from }
}

// WithSkipTrain evaluates and predicts without training; it needs
// WithResume.
func WithSkipTrain() Option { return func(c *runConfig) { c.skipTrain = true } }

// WithCheckpointDir writes checkpoints to dir instead of the train block's
// checkpoint_dir (or a new folder under out/PIPELINE/runs when it has
// none): dir is the run's folder, and out/PIPELINE/latest is left alone.
func WithCheckpointDir(dir string) Option {
	return func(c *runConfig) { c.ckptDir, c.place = dir, nil }
}

// WithPlace writes checkpoints where PlaceRun put the run, and points its
// pipeline's latest at the folder once the run wrote a checkpoint there.
func WithPlace(p Place) Option { return func(c *runConfig) { c.ckptDir, c.place = p.Dir, &p } }

// WithBase resolves the paths the file names (data, predict's write,
// checkpoint_dir) against dir; the working directory by default.
func WithBase(dir string) Option { return func(c *runConfig) { c.base = dir } }

// WithLogger logs what Run does (data opened, checkpoints, warnings) to l.
func WithLogger(l hclog.Logger) Option { return func(c *runConfig) { c.log = l } }

// WithThreads sets Config.Threads: the backend's worker threads, 0 for
// GOMAXPROCS. A resumed run reproduces the losses of the first only with
// the same number.
func WithThreads(n int) Option { return func(c *runConfig) { c.threads = n } }

// WithNodeRank says which machine of a data-parallel run this is: only
// node 0 evaluates, writes checkpoints and predicts; the others train
// their share of every batch.
func WithNodeRank(rank int) Option { return func(c *runConfig) { c.nodeRank = rank } }

// Run executes the plan p of the decoded program prog (stdlib.Decode): it trains, evaluates
// and predicts as the plan and the program say, reporting progress to
// hooks. It returns what it did, and diagnostics: errors when it could not
// run or failed (a NaN names the layer, at its source line), warnings for
// what it worked around. A cancelled ctx stops training at the end of the
// current optimizer step, writes a checkpoint (none when it trained no
// step, so that an earlier run's is not replaced by an untrained model),
// and returns a Result with Status StatusInterrupted and no error; a step
// that cannot finish because a peer rank stalled is given up, and the
// Result says so (Stalled). Before it trains, Run checks that its
// checkpoint folder and its predictions can be written (CheckWritable).
func Run(ctx context.Context, p *plan.Plan, prog *stdlib.Program, hooks Hooks, opts ...Option) (*Result, diag.Diagnostics) {
	rc := &runConfig{}
	for _, o := range opts {
		o(rc)
	}
	if rc.log == nil {
		rc.log = hclog.NewNullLogger()
	}
	if rc.wrapCheckpoint == nil {
		rc.wrapCheckpoint = func(w io.Writer) io.Writer { return w }
	}
	r := &runner{p: p, prog: prog, hooks: hooks, rc: rc, log: rc.log, start: time.Now()}
	if prog != nil {
		r.spec = prog.Spec
	}
	r.res = &Result{Status: StatusFailed}
	if rc.place != nil {
		r.res.Job = rc.place.Job.ID
	}
	if p != nil {
		r.res.Pipeline, r.res.Model, r.res.Backend, r.res.Engine = p.Pipeline, p.Model, p.Backend, p.EngineName()
		r.res.Memory.Estimated = p.Memory.Total
		if ph, ok := p.Memory.Peak(); ok {
			r.res.Memory.EstimatedReserved = ph.Reserved
		}
		r.res.Forecast, r.res.RooflineStepSeconds = p.Forecast, p.StepTime.Roofline()
	}
	if p != nil && p.Memory.GCLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// The plan's total is the process's peak: the collector is told
		// the heap's share of it, so that garbage cannot grow the heap
		// past it (planner/process.go). GOMEMLIMIT, when set, wins.
		prev := debug.SetMemoryLimit(p.Memory.GCLimit)
		defer debug.SetMemoryLimit(prev)
		r.res.Memory.GCLimit = p.Memory.GCLimit
	}
	defer r.close()
	r.run(ctx)
	r.res.WallSeconds = time.Since(r.start).Seconds()
	if r.res.TrainSeconds > 0 {
		r.res.SamplesPerSecond = float64(r.res.SamplesTrained) / r.res.TrainSeconds
	}
	// An engine that computes in other processes (the torch engine's
	// workers) is measured there: the plan is never held to this
	// process's memory, even when they cannot be asked.
	var elsewhere bool
	var devErr error
	if r.model != nil {
		r.res.Memory.Model = r.model.Memory()
		if dm := r.model.Capabilities().Devices; dm != nil {
			elsewhere = true
			if r.res.Memory.Device, devErr = dm.DeviceMemory(); devErr != nil {
				r.log.Debug("device memory unavailable", "error", devErr)
			}
		}
	}
	if r.prof != nil {
		r.res.Profile = r.prof.finish()
	}
	r.res.Memory.Loader = r.loaderBytes()
	mem := &r.res.Memory
	mem.Accounted = mem.Model.Total + mem.Loader
	mem.ProcessMaxRSS = ProcessMaxRSS()
	mem.Measured, mem.MeasuredBy = mem.ProcessMaxRSS, "the process's peak resident memory (VmHWM)"
	if elsewhere {
		mem.Measured, mem.MeasuredBy = 0, ""
		mem.NotMeasured = "its workers could not be asked"
		if devErr != nil {
			mem.NotMeasured += ": " + devErr.Error()
		}
	}
	if d := mem.Device; len(d) > 0 {
		mem.NotMeasured = ""
		mem.Measured = d[0].Measured()
		mem.MeasuredBy = "the torch worker's peak resident memory"
		switch {
		case d[0].MaxReserved > 0:
			mem.MeasuredBy = "torch.cuda.max_memory_reserved"
		case d[0].AtExit && mem.Measured > 0:
			mem.MeasuredBy = "the torch worker's peak resident memory at its exit"
		case d[0].AtExit:
			mem.MeasuredBy, mem.NotMeasured = "", fmt.Sprintf("rank %d's worker exited before it was measured", d[0].Rank)
		}
	}
	r.diags.Sort()
	return r.res, r.diags
}

func (r *runner) errorf(at *diag.Range, code, summary, format string, args ...any) {
	r.diags = append(r.diags, &diag.Diagnostic{Severity: diag.Error, Code: code, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: at})
}

func (r *runner) warnf(at *diag.Range, code, summary, format string, args ...any) {
	r.diags = append(r.diags, &diag.Diagnostic{Severity: diag.Warning, Code: code, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: at})
}

func (r *runner) notef(at *diag.Range, code, summary, format string, args ...any) {
	r.diags = append(r.diags, &diag.Diagnostic{Severity: diag.Note, Code: code, Summary: summary,
		Detail: fmt.Sprintf(format, args...), Subject: at})
}

func rangeOf(r diag.Range) *diag.Range {
	if r.File == "" && r.Start.Line == 0 {
		return nil
	}
	return &r
}
