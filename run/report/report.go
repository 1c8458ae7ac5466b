package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"

	"pipe/engine"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/run/metric"
)

// Report is the JSON record of a run that `pipe run --report` writes. Values
// that are not numbers (a metric over no sample) are null.
type Report struct {
	Pipeline     string `json:"pipeline"`
	File         string `json:"file"`
	SourceSHA256 string `json:"source_sha256"`
	// Overrides are the --set flags the file was run with.
	Overrides []string `json:"overrides,omitempty"`
	Model     string   `json:"model"`
	Device    string   `json:"device"`
	Backend   string   `json:"backend"`
	// Engine is the engine that ran (native, torch) and EngineApplied how
	// it applied the plan where that depends on the machine
	// (torch.compile or eager, the fused optimizer or not).
	Engine        string            `json:"engine"`
	EngineApplied map[string]string `json:"engine_applied,omitempty"`
	Precision     string            `json:"precision"`
	// Status is how the run ended: completed, max-steps, interrupted,
	// non-finite, failed, not-trained.
	Status string `json:"status"`

	WallSeconds  float64 `json:"wall_seconds"`
	TrainSeconds float64 `json:"train_seconds"`
	EvalSeconds  float64 `json:"eval_seconds"`

	EpochsPlanned int   `json:"epochs_planned"`
	Epochs        int   `json:"epochs"`
	StepsPerEpoch int64 `json:"steps_per_epoch"`
	Steps         int64 `json:"steps"`
	MicroSteps    int64 `json:"micro_steps"`
	// SamplesTrained and SamplesPerSecond are this invocation's (a
	// resumed run counts from where it resumed);
	// EstimatedSamplesPerSecond is the plan's roofline estimate.
	// SamplesRead is how many training samples this process read: on one
	// node of a multi-node run its share, about SamplesTrained / nodes.
	SamplesTrained            int64   `json:"samples_trained"`
	SamplesRead               int64   `json:"samples_read"`
	SamplesPerSecond          float64 `json:"samples_per_second"`
	EstimatedSamplesPerSecond float64 `json:"estimated_samples_per_second"`
	// Step time: the plan's forecast (EstimatedStepSeconds, from
	// StepTimeSource; ForecastMissing says why there is none), this
	// invocation's training seconds over its steps, their error
	// (estimated − measured) / measured, the forecast's epoch, and the
	// roofline, the lower bound.
	EstimatedStepSeconds  float64 `json:"estimated_step_seconds,omitempty"`
	EstimatedEpochSeconds float64 `json:"estimated_epoch_seconds,omitempty"`
	StepTimeSource        string  `json:"step_time_source,omitempty"`
	ForecastMissing       string  `json:"forecast_missing,omitempty"`
	MeasuredStepSeconds   float64 `json:"measured_step_seconds,omitempty"`
	// StepPhases is where the training steps' time went in the engine,
	// in ms a step, when it was asked to time them (PIPE_TORCH_PHASES=1).
	StepPhases           *StepPhases `json:"step_phases,omitempty"`
	StepTimeErrorPercent *float64    `json:"step_time_error_percent,omitempty"`
	RooflineStepSeconds  float64     `json:"roofline_step_seconds,omitempty"`
	ResumedFrom          *Resumed    `json:"resumed_from,omitempty"`

	// EstimatedPeakBytes is the plan's Memory.Total (on a GPU with the
	// CUDA context), EstimatedReservedBytes a GPU plan's reserved memory
	// at its peak phase; MeasuredPeakBytes what the OS or the device
	// measured (MeasuredBy names it): with the native engine the
	// process's peak resident memory (VmHWM); with the torch engine rank
	// 0's max_memory_reserved on a GPU, its worker's peak resident memory
	// on the CPU; Devices has every rank's figures; NotMeasured says why
	// there is no figure (the torch workers exited before they were
	// asked). EstimateErrorPercent is (estimated − measured) / measured,
	// like with like: the reserved estimate against max_memory_reserved
	// on a GPU, else the total.
	// Memory breaks the executor's own accounting down beside them.
	EstimatedPeakBytes     int64          `json:"estimated_peak_bytes"`
	EstimatedReservedBytes int64          `json:"estimated_reserved_bytes,omitempty"`
	MeasuredPeakBytes      int64          `json:"measured_peak_bytes"`
	MeasuredBy             string         `json:"measured_by,omitempty"`
	NotMeasured            string         `json:"not_measured,omitempty"`
	EstimateErrorPercent   *float64       `json:"estimate_error_percent,omitempty"`
	Memory                 Memory         `json:"memory"`
	Devices                []DeviceReport `json:"devices,omitempty"`

	// Metrics are the final evaluation's; FinalLoss its loss.
	Metrics    map[string]*float64 `json:"metrics"`
	FinalLoss  *float64            `json:"final_loss"`
	Evaluation *Evaluated          `json:"evaluation,omitempty"`
	// BaselineMetrics are the final evaluation's metrics for predicting
	// the training mean everywhere (a regression with a known mean).
	BaselineMetrics map[string]*float64 `json:"baseline_metrics,omitempty"`
	// TargetScaling is how the regression targets were standardised for
	// training; losses are in those units, metrics in the target's.
	TargetScaling *run.TargetScaling `json:"target_scaling,omitempty"`
	// LossesPerEpoch holds every completed epoch; StepLosses every
	// optimizer step's training loss.
	LossesPerEpoch []Epoch    `json:"losses_per_epoch"`
	StepLosses     []*float64 `json:"step_losses"`
	// GAN is gan mode's account of the training loss, nil otherwise.
	GAN *GAN `json:"gan,omitempty"`

	Checkpoint string `json:"checkpoint,omitempty"`
	// RunID is the job the run belongs to (its folder's job file), absent
	// for a run started by hand.
	RunID       string           `json:"run_id,omitempty"`
	LossCurve   string           `json:"loss_curve,omitempty"`
	Predictions []run.Prediction `json:"predictions,omitempty"`
	// Int8 is what int8 quantisation did for evaluation or predict.
	Int8 *engine.QuantReport `json:"int8,omitempty"`
	// Plan echoes the plan's decisions.
	Plan Plan `json:"plan"`
	// Profile is the time per layer, measured by the clock, beside the
	// plan's roofline (pipe run --profile); nil without it.
	Profile *run.Profile `json:"profile,omitempty"`
}

// GAN says what a gan run's training loss is: the generator's objective,
// AdversarialWeight × its adversarial term plus L1Weight × its L1
// distance; StepParts are the unweighted terms (and the discriminator's
// loss) of this invocation's steps, each its last micro-batch's.
type GAN struct {
	Loss              string            `json:"loss"`
	AdversarialWeight float64           `json:"adversarial_weight"`
	L1Weight          float64           `json:"l1_weight"`
	StepParts         []engine.GANParts `json:"step_parts"`
}

// Resumed is where a resumed run started.
type Resumed struct {
	Epoch int   `json:"epoch"`
	Batch int   `json:"batch"`
	Step  int64 `json:"step"`
	// Samples are the samples trained before, every epoch's.
	Samples int64 `json:"samples"`
}

// Memory details the measured memory.
type Memory struct {
	Parameters     int64 `json:"parameters"`
	Gradients      int64 `json:"gradients"`
	Optimizer      int64 `json:"optimizer"`
	Arena          int64 `json:"arena"`
	PeakLive       int64 `json:"peak_live"`
	Saved          int64 `json:"saved"`
	Scratch        int64 `json:"scratch"`
	EvalArena      int64 `json:"eval_arena"`
	ModelTotal     int64 `json:"model_total"`
	HeapInuseDelta int64 `json:"heap_inuse_delta"`
	LoaderBytes    int64 `json:"loader_bytes"`
	// ProcessMaxRSS is the process's peak resident memory (VmHWM),
	// everything included: the data sets held in memory, the Go runtime.
	ProcessMaxRSS int64 `json:"process_max_rss_bytes"`
	// Accounted is ModelTotal plus LoaderBytes: the executor's own
	// account, a breakdown, not a measurement.
	Accounted int64 `json:"accounted"`
}

// DeviceReport is one device's memory as the device and its OS measured
// it, beside the plan's estimate per device.
type DeviceReport struct {
	Rank   int    `json:"rank"`
	Device string `json:"device"`
	// MaxAllocatedBytes and MaxReservedBytes are torch.cuda's peaks;
	// DeviceUsedBytes the device's used memory from mem_get_info at the
	// end of the run (every process's), DeviceTotalBytes its capacity.
	MaxAllocatedBytes int64 `json:"max_allocated_bytes,omitempty"`
	MaxReservedBytes  int64 `json:"max_reserved_bytes,omitempty"`
	DeviceUsedBytes   int64 `json:"device_used_bytes,omitempty"`
	DeviceTotalBytes  int64 `json:"device_total_bytes,omitempty"`
	// WorkerMaxRSSBytes is the worker process's peak resident memory;
	// AtExit says it is the kernel's account at the worker's exit, as the
	// worker died or was stopped after a failure (the device's figures
	// are then lost).
	WorkerMaxRSSBytes int64 `json:"worker_max_rss_bytes"`
	AtExit            bool  `json:"at_exit,omitempty"`
	// EstimatedBytes is the plan's total per device (on a GPU with the
	// CUDA context) and EstimatedReservedBytes its reserved memory at the
	// peak phase. ErrorPercent is (estimated − measured)/measured, like
	// with like: the reserved estimate against the reserved peak on a
	// GPU, the total against the worker's peak resident memory on the
	// CPU; UsedErrorPercent the total against the device's used memory.
	EstimatedBytes         int64    `json:"estimated_bytes"`
	EstimatedReservedBytes int64    `json:"estimated_reserved_bytes,omitempty"`
	ErrorPercent           *float64 `json:"error_percent"`
	UsedErrorPercent       *float64 `json:"used_error_percent,omitempty"`
}

// Evaluated says what the final metrics were measured on.
type Evaluated struct {
	Source  string `json:"source"`
	Part    string `json:"part"`
	Samples int    `json:"samples"`
}

// Epoch is one epoch's losses and scores.
type Epoch struct {
	Epoch     int                 `json:"epoch"`
	Step      int64               `json:"step"`
	TrainLoss *float64            `json:"train_loss"`
	ValLoss   *float64            `json:"val_loss,omitempty"`
	Metrics   map[string]*float64 `json:"metrics,omitempty"`
	LR        float64             `json:"lr"`
	Seconds   float64             `json:"seconds"`
	// LoaderStallSeconds is the part of Seconds the training step waited
	// for its next batch.
	LoaderStallSeconds float64 `json:"loader_stall_seconds"`
}

// Plan echoes what the plan decided.
type Plan struct {
	BatchSize         int64           `json:"batch_size"`
	AccumulationSteps int64           `json:"accumulation_steps"`
	EffectiveBatch    int64           `json:"effective_batch"`
	LR                float64         `json:"lr"`
	LRWritten         float64         `json:"lr_written"`
	LRScale           float64         `json:"lr_scale"`
	WarmupEpochs      int64           `json:"warmup_epochs"`
	Precision         string          `json:"precision"`
	Segments          []string        `json:"checkpoint_segments"`
	FusionGroups      int             `json:"fusion_groups"`
	InferenceFolds    int             `json:"inference_folds"`
	Workers           int             `json:"workers"`
	Prefetch          int             `json:"prefetch"`
	Fits              bool            `json:"fits"`
	Decisions         []plan.Decision `json:"decisions"`
}

// num is v, or nil when v is not a number JSON can hold.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func metrics(ev *run.Evaluation) map[string]*float64 {
	if ev == nil {
		return nil
	}
	return values(ev.Metrics)
}

func values(vs []metric.Value) map[string]*float64 {
	m := make(map[string]*float64, len(vs))
	for _, v := range vs {
		m[v.Name] = num(v.Value)
	}
	return m
}

// New builds the report of a run of p.
func New(res *run.Result, p *plan.Plan) *Report {
	r := &Report{
		Pipeline: res.Pipeline, Model: res.Model, Backend: res.Backend, Precision: res.Precision, Status: string(res.Status),
		WallSeconds: res.WallSeconds, TrainSeconds: res.TrainSeconds, EvalSeconds: res.EvalSeconds,
		EpochsPlanned: res.EpochsPlanned, Epochs: res.Epochs, StepsPerEpoch: res.StepsPerEpoch,
		Steps: res.Position.Step, MicroSteps: res.Position.MicroStep,
		SamplesTrained: res.SamplesTrained, SamplesRead: res.SamplesRead, SamplesPerSecond: res.SamplesPerSecond,
		EstimatedPeakBytes: res.Memory.Estimated, MeasuredPeakBytes: res.Memory.Measured, MeasuredBy: res.Memory.MeasuredBy, NotMeasured: res.Memory.NotMeasured,
		Metrics: map[string]*float64{}, LossesPerEpoch: []Epoch{}, StepLosses: make([]*float64, len(res.StepLosses)),
		Checkpoint: res.Checkpoint, RunID: res.Job, Predictions: res.Predictions, Int8: res.Int8, Profile: res.Profile,
	}
	mm := res.Memory.Model
	r.Memory = Memory{Parameters: mm.Parameters, Gradients: mm.Gradients, Optimizer: mm.Optimizer, Arena: mm.Arena,
		PeakLive: mm.PeakLive, Saved: mm.Saved, Scratch: mm.Scratch, EvalArena: mm.EvalArena, ModelTotal: mm.Total,
		HeapInuseDelta: mm.HeapInuseDelta, LoaderBytes: res.Memory.Loader, ProcessMaxRSS: res.Memory.ProcessMaxRSS, Accounted: res.Memory.Accounted}
	r.EstimatedReservedBytes = res.Memory.EstimatedReserved
	if m, e := res.Memory.Measured, res.Memory.HeldTo(); m > 0 && e > 0 {
		r.EstimateErrorPercent = num(100 * float64(e-m) / float64(m))
	}
	r.Engine, r.EngineApplied = res.Engine, res.Applied
	if ph := res.StepPhases; ph != nil && ph.Steps > 0 {
		per := func(s float64, n int64) float64 { return 1e3 * s / float64(max(n, 1)) }
		r.StepPhases = &StepPhases{Steps: ph.Steps, TotalMS: per(ph.Total, ph.Steps), CopyMS: per(ph.Copy, ph.Steps),
			QueueMS: per(ph.Queue, ph.Steps), HostMS: per(ph.Host, ph.Steps), DeviceMS: per(ph.Device, ph.DeviceSteps), DeviceSteps: ph.DeviceSteps}
	}
	r.MeasuredStepSeconds, r.RooflineStepSeconds = res.StepSeconds(), res.RooflineStepSeconds
	if f := res.Forecast; f != nil {
		r.EstimatedStepSeconds, r.EstimatedEpochSeconds, r.StepTimeSource, r.ForecastMissing = f.StepSeconds, f.EpochSeconds, f.Source, f.Missing
		if m := r.MeasuredStepSeconds; m > 0 && f.StepSeconds > 0 {
			r.StepTimeErrorPercent = num(100 * (f.StepSeconds - m) / m)
		}
	}
	for _, d := range res.Memory.Device {
		est := res.Memory.Estimated
		dr := DeviceReport{Rank: d.Rank, Device: d.Device, MaxAllocatedBytes: d.MaxAllocated, MaxReservedBytes: d.MaxReserved,
			DeviceUsedBytes: d.Used, DeviceTotalBytes: d.Total, WorkerMaxRSSBytes: d.MaxRSS, AtExit: d.AtExit, EstimatedBytes: est}
		if d.MaxReserved > 0 && res.Memory.EstimatedReserved > 0 {
			dr.EstimatedReservedBytes = res.Memory.EstimatedReserved
			dr.ErrorPercent = num(100 * float64(dr.EstimatedReservedBytes-d.MaxReserved) / float64(d.MaxReserved))
			if d.Used > 0 {
				dr.UsedErrorPercent = num(100 * float64(est-d.Used) / float64(d.Used))
			}
		} else if m := d.Measured(); m > 0 {
			dr.ErrorPercent = num(100 * float64(est-m) / float64(m))
		}
		r.Devices = append(r.Devices, dr)
	}
	if res.ResumedFrom != nil {
		r.ResumedFrom = &Resumed{Epoch: res.ResumedFrom.Epoch, Batch: res.ResumedFrom.Batch, Step: res.ResumedFrom.Step, Samples: res.ResumedFrom.Samples}
	}
	if res.Final != nil {
		r.Metrics = metrics(res.Final)
		r.FinalLoss = num(res.Final.Loss)
		r.Evaluation = &Evaluated{Source: res.Final.Source, Part: res.Final.Part, Samples: res.Final.Samples}
		if len(res.Final.Baseline) > 0 {
			r.BaselineMetrics = values(res.Final.Baseline)
		}
	}
	r.TargetScaling = res.TargetScaling
	for _, e := range res.EpochResults {
		ep := Epoch{Epoch: e.Epoch, Step: e.Step, TrainLoss: num(e.TrainLoss), LR: e.LR, Seconds: e.Seconds, LoaderStallSeconds: e.LoaderStallSeconds}
		if e.Val != nil {
			ep.ValLoss = num(e.Val.Loss)
			ep.Metrics = metrics(e.Val)
		}
		r.LossesPerEpoch = append(r.LossesPerEpoch, ep)
	}
	for i, l := range res.StepLosses {
		r.StepLosses[i] = num(l)
	}
	if p != nil && p.GAN != nil {
		r.GAN = &GAN{Loss: fmt.Sprintf("%g × %s adversarial + %g × l1", p.GAN.AdvWeight, p.GAN.Adversarial, p.GAN.L1),
			AdversarialWeight: p.GAN.AdvWeight, L1Weight: p.GAN.L1, StepParts: res.GANParts}
	}
	if p != nil {
		r.File, r.SourceSHA256, r.Device, r.Overrides = p.File, p.SourceSHA256, p.Device.Name, p.Overrides
		r.EstimatedSamplesPerSecond = p.StepTime.SamplesPerSecond
		r.Plan = Plan{BatchSize: p.BatchSize, AccumulationSteps: p.AccumulationSteps, EffectiveBatch: p.EffectiveBatch,
			LR: p.Optimizer.LR, LRWritten: p.Optimizer.LRWritten, LRScale: p.Optimizer.LRScale, WarmupEpochs: p.Optimizer.WarmupEpochs,
			Precision: p.Precision.Compute, Segments: []string{}, FusionGroups: len(p.Fusion.Groups), InferenceFolds: len(p.Fusion.InferenceFolds),
			Workers: p.Loader.Workers, Prefetch: p.Loader.Prefetch, Fits: p.Fits, Decisions: p.Decisions}
		for _, s := range p.Checkpoint.Segments {
			r.Plan.Segments = append(r.Plan.Segments, s.First+".."+s.Last)
		}
	}
	return r
}

// Encode writes the report as indented JSON.
func (r *Report) Encode(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// Write writes the report to path atomically.
func (r *Report) Write(path string) error {
	return folder.WriteFileAtomic(path, r.Encode)
}

// StepPhases is engine.StepPhases per step, in ms: the total in the
// worker, its parts (copy, queue, host) and the device's own time,
// averaged over the DeviceSteps steps it was read for.
type StepPhases struct {
	Steps       int64   `json:"steps"`
	TotalMS     float64 `json:"total_ms"`
	CopyMS      float64 `json:"copy_ms"`
	QueueMS     float64 `json:"queue_ms"`
	HostMS      float64 `json:"host_ms"`
	DeviceMS    float64 `json:"device_ms"`
	DeviceSteps int64   `json:"device_steps"`
}
