// Package plan is the plan as data: what planner.Plan decides and what
// run.Run consumes, as plain structs that marshal to versioned JSON
// (Terraform keeps its plans apart from its engine the same way). It
// imports only the standard library and the typed specs (package spec), so
// the executor reads a plan without importing the planner, and never
// re-decides anything in it.
//
// A plan carries the sha256 of the .pipe source it was made from; Load
// reads a plan file and Verify refuses it when the source has changed.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"

	"pipe/spec"
)

// Version is the version of the plan format this package writes and
// reads. It changes whenever a field changes meaning or disappears; adding
// a field does not change it.
const Version = 1

// Backends.
const (
	BackendCPU = "cpu" // pipe's own executor on the host
	BackendGPU = "gpu" // a CUDA device (an nvidia-smi GPU or a profile)
)

// Plan is everything the executor needs to run a pipeline, decided before
// any compute: the device, the precision, the batch and accumulation, what
// is recomputed and fused, the loader's sizes, and what it all costs. Every
// automatic choice is in Decisions with its reason. A Plan is plain data;
// it marshals to the versioned JSON that `pipe plan --out` writes and the
// executor runs unchanged.
type Plan struct {
	Version int `json:"version"`
	// SourceSHA256 is the hex sha256 of the .pipe file the plan was made
	// from; Verify compares it with the file before a run.
	SourceSHA256 string `json:"source_sha256"`
	// File is the file's name as it was given; Pipeline its pipeline name
	// and Model the model trained.
	File     string `json:"file"`
	Pipeline string `json:"pipeline"`
	// Overrides are the --set flags the file was read with (PATH=VALUE,
	// in order); SourceSHA256 is of the file with them applied, and a
	// run of the plan applies them again.
	Overrides []string `json:"overrides,omitempty"`
	Model     string   `json:"model"`
	Device    Device   `json:"device"`
	// Backend is BackendCPU or BackendGPU: the kind of device.
	Backend string `json:"backend"`
	// Engine is what computes and how it applies the plan; Distributed
	// the data-parallel layout (one device when WorldSize is 1).
	Engine      Engine      `json:"engine"`
	Distributed Distributed `json:"distributed"`
	Precision   Precision   `json:"precision"`
	// Parameters is the number of trainable parameters; FLOPsPerSample the
	// forward cost of one sample.
	Parameters     int64 `json:"parameters"`
	FLOPsPerSample int64 `json:"flops_per_sample"`
	// BatchSize is the micro-batch: samples per forward and backward pass.
	// AccumulationSteps micro-batches make one optimizer update of
	// EffectiveBatch samples.
	BatchSize         int64 `json:"batch_size"`
	AccumulationSteps int64 `json:"accumulation_steps"`
	EffectiveBatch    int64 `json:"effective_batch"`
	// StepsPerCommand is how many optimizer steps the run loop hands the
	// engine as one unit (engine.Queuer.QueueSteps), run with nothing
	// between them; stops, checkpoints, evaluation and progress fall
	// between units. 0 (plans written before it) and 1 are a step at a
	// time.
	StepsPerCommand int64 `json:"steps_per_command,omitempty"`
	// DataOnDevice says whether the training set's samples lie on the
	// device, sent once, each batch gathered there by index; nil in
	// plans that do not train or were written before it.
	DataOnDevice *DataOnDevice `json:"data_on_device,omitempty"`
	// TrainSamples is the training set's size the plan was made for (0:
	// unknown), and TrainSamplesExact whether it is exact or an upper
	// bound.
	TrainSamples      int64 `json:"train_samples,omitempty"`
	TrainSamplesExact bool  `json:"train_samples_exact,omitempty"`
	// Fits says whether Memory.Total is within Memory.Budget.
	Fits       bool       `json:"fits"`
	Memory     Memory     `json:"memory"`
	Checkpoint Checkpoint `json:"checkpoint"`
	Fusion     Fusion     `json:"fusion"`
	// Loss is the loss minimised: as written, or the one the data implies
	// (mse for rasters and unlabelled synthetic data, else cross_entropy).
	Loss      string    `json:"loss"`
	Optimizer Optimizer `json:"optimizer"`
	Schedule  Schedule  `json:"schedule"`
	Loader    Loader    `json:"loader"`
	StepTime  StepTime  `json:"step_time"`
	// Forecast is the step and epoch time measured for this plan on this
	// machine, beside StepTime's roofline; nil where
	// the plan was made without asking (tests, the language server).
	Forecast  *Forecast  `json:"forecast,omitempty"`
	Layers    []Layer    `json:"layers"`
	Decisions []Decision `json:"decisions"`
	// GAN is set in gan mode: Model is then the generator, and this the
	// discriminator and the adversarial settings (gan.go).
	GAN *GAN `json:"gan,omitempty"`
	// Serve is how pipe serve answers requests (serve.go): set when the
	// file has a serve block or the planner was asked (planner.WithServe).
	Serve *Serve `json:"serve,omitempty"`
	// Inference is how predict runs the trained model; nil when the file
	// does not predict.
	Inference *Inference `json:"inference,omitempty"`
	// Sources are the file's source blocks as decoded specs, as the run
	// reads them: the data the plan was made for.
	Sources []spec.Source `json:"sources,omitempty"`
}

// DataOnDevice is the plan's data-on-device decision: On, the training
// source's samples (Bytes, as the loader reads them before it normalises,
// priced in Memory.DeviceData) are sent to the device once, and each
// command carries the batches' sample indices, which the device gathers,
// normalises and lays out; off, each batch is read on the host. Reason
// says why.
type DataOnDevice struct {
	On     bool   `json:"on"`
	Bytes  int64  `json:"bytes,omitempty"`
	Reason string `json:"reason"`
}

// Inference is the arithmetic predict runs the trained model in.
type Inference struct {
	// Precision is "fp32" or "int8".
	Precision string `json:"precision"`
	// CalibrateBatches is how many training batches int8 calibrates its
	// activation scales on.
	CalibrateBatches int64 `json:"calibrate_batches,omitempty"`
	// Int8Layers are the nodes that run in int8; the others stay fp32.
	Int8Layers []string `json:"int8_layers,omitempty"`
	// WeightsFP32 and WeightsInt8 are those layers' weights and biases in
	// bytes, in fp32 and quantised (int8 weights, an fp32 scale and bias
	// per output channel).
	WeightsFP32 int64 `json:"weights_fp32,omitempty"`
	WeightsInt8 int64 `json:"weights_int8,omitempty"`
}

// Device is the device a plan is made for, whatever described it: the
// local machine, a built-in profile or a device block.
type Device struct {
	Name string `json:"name"`
	// Kind is "cpu" or "gpu".
	Kind string `json:"kind"`
	// Origin is "local" (measured on this machine), "profile" (built in)
	// or "file" (a device block).
	Origin string `json:"origin"`
	Doc    string `json:"doc,omitempty"`
	// Memory is the memory the plan may use before its margin, in bytes:
	// a profile's capacity, a local GPU's free memory, the host's
	// available memory for the CPU.
	Memory int64 `json:"memory"`
	// Bandwidth in bytes per second.
	Bandwidth float64 `json:"bandwidth"`
	// Peaks are the rates in FLOP/s, 0 where the precision is not
	// supported; Peak reads one. Embedded, they keep their place in the
	// plan's JSON.
	spec.Peaks
	HasBF16 bool `json:"bf16_supported"`
	HasTF32 bool `json:"tf32_supported"`
	// Capability is a GPU's CUDA compute capability ("8.0" for an A100),
	// empty when not known; the memory model's per-generation terms (the
	// cuBLAS workspace) read it.
	Capability string `json:"capability,omitempty"`
	// Link is how fast a GPU reaches the other GPUs of its machine, in
	// bytes per second each way, and LinkName the link ("NVLink 4"); 0
	// and "" where not known.
	Link     float64 `json:"link,omitempty"`
	LinkName string  `json:"link_name,omitempty"`
	// L2 is a GPU's L2 cache in bytes, 0 where not known: Inductor's
	// autotuning takes a buffer of its size.
	L2 int64 `json:"l2,omitempty"`
	// Cores and HostMemory describe the host (the CPU device itself, or the
	// machine a GPU sits in).
	Cores      int   `json:"cores,omitempty"`
	HostMemory int64 `json:"host_memory,omitempty"`
	// Kernels names the BLAS kernels the native engine runs on this
	// machine's CPU ("OpenBLAS 0.3.21, SkylakeX kernels (AVX-512), ..."),
	// empty for other devices or where not known.
	Kernels string `json:"kernels,omitempty"`
}

// Engines.
const (
	EngineNative = "native" // pipe's own executor, on the CPU
	EngineTorch  = "torch"  // PyTorch, driven by pipe (engine/torch)
)

// Engine is the engine that runs the plan and how it applies it. The
// torch engine's settings each have a Decision with its reason; the
// native engine ignores them.
type Engine struct {
	// Name is a registered engine's (spec.Engines; empty in plans written
	// before engines: native); Requested what the file or --engine asked
	// for.
	Name      string `json:"name"`
	Requested string `json:"requested"`
	// Autocast is the torch.autocast dtype ("bf16", "fp16"), empty for
	// none; GradScaler scales the loss (fp16); TF32 allows TF32 matrix
	// products and convolutions.
	Autocast   string `json:"autocast,omitempty"`
	GradScaler bool   `json:"grad_scaler,omitempty"`
	TF32       bool   `json:"tf32,omitempty"`
	// CudnnBenchmark lets cuDNN pick its fastest algorithms for the
	// fixed shapes; ChannelsLast stores images NHWC on the device.
	CudnnBenchmark bool `json:"cudnn_benchmark,omitempty"`
	// CudnnWorkspaceLimit caps the workspace cuDNN may take for one
	// convolution, in bytes (0: no cap); the memory model counts it.
	CudnnWorkspaceLimit int64 `json:"cudnn_workspace_limit,omitempty"`
	ChannelsLast        bool  `json:"channels_last,omitempty"`
	// Torch is the torch version a GPU plan is priced for (the worker's,
	// pipe plan --torch-version's, or one assumed where neither is known:
	// VersionAssumed); the attention path, torch.compile and the fused
	// optimizers depend on it. Empty where the plan depends on none.
	Torch          string `json:"torch,omitempty"`
	VersionAssumed bool   `json:"torch_assumed,omitempty"`
	// Compile runs the model through torch.compile where the worker's
	// torch has it (2.x) on CUDA; the run report says what ran.
	Compile bool `json:"compile,omitempty"`
	// CUDAGraph captures each training step of the plan's batch as one
	// CUDA graph and replays it; batches of another shape run eagerly,
	// and the run report says what ran.
	CUDAGraph bool `json:"cuda_graph,omitempty"`
	// FusedOptimizer uses the fused Adam/AdamW kernels.
	FusedOptimizer bool `json:"fused_optimizer,omitempty"`
	// PinnedMemory copies batches through pinned memory on a copy stream,
	// the next batch in flight while the current step runs.
	PinnedMemory bool `json:"pinned_memory,omitempty"`
	// LossReadback is "sync" or "lagged" (losses read one optimizer step
	// late, so the host never waits for the device).
	LossReadback string `json:"loss_readback,omitempty"`
}

// Distributed is data-parallel training with DistributedDataParallel.
type Distributed struct {
	// NProcPerNode devices on each of NNodes machines: WorldSize in all.
	NProcPerNode int `json:"nproc_per_node"`
	NNodes       int `json:"nnodes"`
	WorldSize    int `json:"world_size"`
	// Backend is the process group's backend: nccl on GPUs, gloo on CPUs.
	Backend string `json:"backend,omitempty"`
	// BucketBytes is DDP's gradient bucket size; AllReduceBytes the
	// gradient bytes each device sends (and receives) per optimizer step
	// over the link to the other devices of its machine: 2(G−1)/G of the
	// gradients for G GPUs a node (a flat ring's 2(W−1)/W over W ranks on
	// the CPU, whose gloo sockets carry it all). NetworkBytes is what each
	// machine sends over the network between machines, 2(N−1)/N of them
	// for N machines of GPUs (docs/design/roofline.md).
	BucketBytes    int64 `json:"bucket_bytes,omitempty"`
	AllReduceBytes int64 `json:"allreduce_bytes,omitempty"`
	NetworkBytes   int64 `json:"network_bytes,omitempty"`
	// SyncBatchnorm computes batchnorm's batch statistics over every
	// rank's samples (SyncBatchNorm) instead of each device's own.
	SyncBatchnorm bool `json:"sync_batchnorm,omitempty"`
}

// EngineName is the plan's engine, native for plans that name none.
func (p *Plan) EngineName() string {
	if p.Engine.Name == "" {
		return EngineNative
	}
	return p.Engine.Name
}

// WorldSize is the number of devices training together, at least 1.
func (p *Plan) WorldSize() int {
	return max(p.Distributed.WorldSize, 1)
}

// Precision is what runs where.
type Precision struct {
	// Requested is what the file (or auto) asked for.
	Requested string `json:"requested"`
	// Compute is the arithmetic of convolutions and matrix products:
	// fp32, tf32, fp16 or bf16.
	Compute string `json:"compute"`
	// Activations is the type activations are stored in, and
	// ActivationBytes its size.
	Activations     string `json:"activations"`
	ActivationBytes int64  `json:"activation_bytes"`
	// Mixed is set for fp16 and bf16: parameters are kept in fp32 (the
	// master weights) and cast for the forward.
	Mixed bool `json:"mixed"`
	// LossScaling is set for fp16, whose range needs it.
	LossScaling bool `json:"loss_scaling"`
}

// Memory is the estimated peak memory of one training step on the device,
// in bytes at the chosen batch, and the budget it must fit. Total is the
// sum of the components; which of them a backend fills, and how, is
// planner/memory.go's memory model: a GPU plan models a PyTorch-like
// caching allocator, a CPU plan what pipe's CPU executor allocates.
type Memory struct {
	// Parameters is the working copy of the weights (fp32, or the fp16/bf16
	// copy under mixed precision; on the CPU with the batchnorm running
	// statistics); Master the fp32 master weights under mixed precision;
	// Gradients fp32 gradients; Optimizer its state.
	Parameters int64 `json:"parameters"`
	Master     int64 `json:"master"`
	Gradients  int64 `json:"gradients"`
	Optimizer  int64 `json:"optimizer"`
	// Activations is what is kept for the backward pass at its peak, after
	// checkpointing; ActivationsBefore the same without checkpointing.
	Activations       int64 `json:"activations"`
	ActivationsBefore int64 `json:"activations_before_checkpointing"`
	// LossSaved is the part of Activations the loss keeps for its
	// backward (a cross-entropy's fp32 log-softmax and its targets): the
	// layer table's rows and it add up to ActivationsBefore. The torch
	// engine's; 0 on the native engine.
	LossSaved int64 `json:"loss_saved,omitempty"`
	// ActivationGradients is what the backward pass adds, at the step's
	// peak, to the activations kept for it: the activations' gradients
	// live at that point, a checkpoint segment's recomputed tensors and the
	// kernels' temporaries, less the kept tensors already freed. On a GPU
	// it is the activations' gradients live at the backward pass's peak
	// (those carried across skip connections included).
	ActivationGradients int64 `json:"activation_gradients"`
	// Workspace is, on a GPU, the libraries' workspaces (cuBLAS,
	// cuBLASLt, cuDNN's capped one) and the foreach optimizer's
	// temporaries. On the CPU it is
	// the executor's per-thread scratch: the im2col column buffers and the
	// partial weight gradients, whatever the batch.
	Workspace int64 `json:"workspace"`
	// Eval is the working memory of the evaluation forward pass when it is
	// allocated beside the training step's (the CPU backend keeps both);
	// 0 on a GPU, where evaluation reuses the training step's memory.
	Eval int64 `json:"eval"`
	// Input is the batch on the device: on a GPU the inputs in fp32 and
	// the targets; on the CPU the model's copy of the inputs (the targets
	// are read from the loader's batch, counted in Loader).
	Input int64 `json:"input"`
	// Loader is the loader's buffers when they share the device's memory
	// (the CPU backend: the training loader's and the evaluation loader's
	// batches); on a GPU they are in Loader.BufferBytes, on the host.
	Loader int64 `json:"loader"`
	// The rest of a native run's process, which the CPU backend counts so
	// that Total is the process's peak resident memory: Runtime what the
	// process holds before any data or model (its code and libraries and
	// the Go runtime, measured at start-up), Data the sources' samples as
	// they are held in memory, Checkpoint the copy of the model's state a
	// checkpoint is written from, and Headroom the garbage collector's
	// room for garbage under the soft memory limit the run sets (GCLimit).
	Runtime    int64 `json:"runtime,omitempty"`
	Data       int64 `json:"data,omitempty"`
	Checkpoint int64 `json:"checkpoint,omitempty"`
	Headroom   int64 `json:"gc_headroom,omitempty"`
	// DeviceData is the training set's samples on the device where the
	// plan keeps them there (DataOnDevice), in Total.
	DeviceData int64 `json:"device_data,omitempty"`
	// Folds is the part of Eval that holds the evaluation's folded conv
	// weights (batchnorm folded in), which the CPU executor keeps beside
	// the trained ones, outside its arenas.
	Folds int64 `json:"folds,omitempty"`
	// GCLimit is the soft memory limit a native run gives the Go runtime
	// (runtime/debug.SetMemoryLimit): Total less Runtime.
	GCLimit int64 `json:"gc_limit,omitempty"`
	// Total is the sum of the above; Budget the memory the plan may use:
	// Capacity minus the margin (MarginPercent of it, plus Reserve).
	// Terms, Phases and PeakPhase are a GPU plan's (the torch engine's
	// model, planner/memory_gpu.go): every term of the estimate as a named
	// line with its source, and the peak of each phase of a step. Total is
	// then the largest phase's Device figure, not the sum of the fields
	// above (the phases are not summed). Empty on the CPU.
	Terms     []MemoryTerm  `json:"terms,omitempty"`
	Phases    []MemoryPhase `json:"phases,omitempty"`
	PeakPhase string        `json:"peak_phase,omitempty"`
	// Total is, on the CPU, the sum of the above, and on a GPU what the
	// device shows at the step's peak phase; Budget the memory the plan
	// may use: Capacity minus the margin (MarginPercent of it, plus
	// Reserve).
	Total         int64   `json:"total"`
	Budget        int64   `json:"budget"`
	Capacity      int64   `json:"capacity"`
	MarginPercent float64 `json:"margin_percent"`
	Reserve       int64   `json:"reserve"`
}

// Sources of a memory term: where its figure comes from.
const (
	// SourceConstant is a documented figure (a library's default, a
	// published measurement), stated with its reference.
	SourceConstant = "constant"
	// SourceFormula is computed from the graph, the batch and the
	// settings by a stated rule.
	SourceFormula = "formula"
	// SourceCalibration is fitted to measurements, stated with what was
	// measured and under which versions.
	SourceCalibration = "calibration"
	// SourceUnmodelled is a term the model knows of and does not price
	// (0 bytes or a stated bound), said so rather than left out.
	SourceUnmodelled = "unmodelled"
)

// Phases of a training step whose peaks a GPU plan compares.
const (
	PhaseForward   = "forward"   // the end of the forward pass
	PhaseBackward  = "backward"  // the backward pass's peak
	PhaseOptimizer = "optimizer" // the optimizer step
)

// MemoryTerm is one named line of a GPU plan's memory: its bytes at the
// plan's batch, where the figure comes from, and the phases of the step
// it is live in.
type MemoryTerm struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// Source is SourceConstant, SourceFormula, SourceCalibration or
	// SourceUnmodelled; Basis says it in a line: the reference, the rule
	// or the measurement.
	Source string `json:"source"`
	Basis  string `json:"basis"`
	// Phases are the phases (PhaseForward, ...) the term is live in.
	// Allocator terms are the peak phase's. Outside says the memory is
	// not the caching allocator's (the CUDA context): the device shows it,
	// torch.cuda.max_memory_reserved does not.
	Phases  []string `json:"phases"`
	Outside bool     `json:"outside_allocator,omitempty"`
	// Pool is the allocator pool the term's tensors come from where it is
	// not the general one: "cuda graph", a captured step's private pool,
	// held whole in every phase.
	Pool string `json:"pool,omitempty"`
	// Apart says the term lives only in an eager step between a captured
	// graph's replays: it reserves beside the graph's pool, but is never
	// allocated together with the pool's other terms.
	Apart bool `json:"apart,omitempty"`
}

// MemoryPhase is one phase's peak: Allocated is what the live tensors
// take as torch.cuda.memory_allocated counts it (sizes rounded to 512
// bytes), Reserved the caching allocator's segments that hold them, and
// Device that plus the memory outside the allocator: what the device
// shows (torch.cuda.mem_get_info's used memory, nvidia-smi).
type MemoryPhase struct {
	Name      string `json:"name"`
	Allocated int64  `json:"allocated"`
	Reserved  int64  `json:"reserved"`
	Device    int64  `json:"device"`
	// NotAtOnce is what the phase's terms count twice: the smaller of a
	// graph's pool's terms and the Apart ones, never allocated at once.
	// The phase's terms less NotAtOnce make Device.
	NotAtOnce int64 `json:"not_at_once,omitempty"`
}

// Peak is the phase a GPU plan's memory peaks in (PeakPhase), whose
// Reserved is torch.cuda.max_memory_reserved's counterpart and Device
// (the Total) the device's used memory's; false for a plan without
// phases (the CPU's, a device block's linear model).
func (m Memory) Peak() (MemoryPhase, bool) {
	for _, ph := range m.Phases {
		if ph.Name == m.PeakPhase {
			return ph, true
		}
	}
	return MemoryPhase{}, false
}

// Checkpoint is the gradient-checkpointing plan.
type Checkpoint struct {
	// Mode is what the file asked for: auto, none or all.
	Mode string `json:"mode"`
	// Segments are the runs of nodes recomputed in the backward.
	Segments []CheckpointSegment `json:"segments"`
	// PeakBefore and PeakAfter are the activations at their peak, in bytes
	// at the chosen batch, without and with the segments. On the CPU they
	// are the training step's whole working memory at its peak (kept
	// activations, their gradients, the input's copy and the kernels'
	// temporaries), which is what the executor measures as its peak of
	// live tensors.
	PeakBefore int64 `json:"peak_before"`
	PeakAfter  int64 `json:"peak_after"`
	// ExtraFLOPs is the recomputation's cost per micro-batch, and
	// ExtraPercent that as a percentage of the step's training FLOPs
	// (forward and backward, 3× the forward).
	ExtraFLOPs   int64   `json:"extra_flops"`
	ExtraPercent float64 `json:"extra_percent"`
	// Optimal says the segments were proven optimal under the memory
	// model (the search was never cut short).
	Optimal bool `json:"optimal"`
}

// CheckpointSegment is a run of consecutive nodes (in the order of Layers)
// recomputed in the backward from the tensor before it.
type CheckpointSegment struct {
	First string `json:"first"`
	Last  string `json:"last"`
	// From and To index Layers, both included.
	From int `json:"from"`
	To   int `json:"to"`
	// ExtraFLOPs is the segment's forward cost per micro-batch, paid again.
	ExtraFLOPs int64 `json:"extra_flops"`
}

// Fusion lists the ops the executor runs as one kernel.
type Fusion struct {
	// Mode is what the file asked for: auto, true or false.
	Mode   string        `json:"mode"`
	Groups []FusionGroup `json:"groups"`
	// InferenceFolds are the conv and batchnorm pairs whose batchnorm is
	// folded into the conv's weights when the model is evaluated or
	// predicts (never while it trains).
	InferenceFolds [][]string `json:"inference_folds"`
}

// FusionGroup is one fused kernel.
type FusionGroup struct {
	// ID numbers groups from 1, as Layer.FusionGroup refers to them.
	ID int `json:"id"`
	// Kind is the pattern: "conv+batchnorm+activation", "conv+batchnorm",
	// "conv+activation", "dense+bias+activation" or "elementwise".
	Kind  string   `json:"kind"`
	Nodes []string `json:"nodes"`
}

// Optimizer is the optimizer as it runs, with the learning rate scaled to
// the batch that runs.
type Optimizer struct {
	Kind string `json:"kind"`
	// StateBuffers is the number of fp32 buffers per parameter it keeps
	// (0 for SGD, 1 with momentum, 2 for Adam and AdamW).
	StateBuffers int `json:"state_buffers"`
	// LRWritten is the learning rate in the file (the default when it
	// gives none); LR what runs, LRWritten × LRScale.
	LRWritten float64 `json:"lr_written"`
	LR        float64 `json:"lr"`
	LRScale   float64 `json:"lr_scale"`
	// ReferenceBatch is the batch LRWritten was written for: the file's
	// batch, else its effective_batch, else 0 (none, so no scaling).
	ReferenceBatch int64 `json:"reference_batch"`
	// WarmupEpochs of linear warm-up from 0.
	WarmupEpochs int64 `json:"warmup_epochs"`
}

// Schedule is how the learning rate changes after warm-up (warm-up is
// Optimizer.WarmupEpochs): constant, cosine or linear to 0 over the run,
// or step, multiplying it by Gamma every Every epochs.
type Schedule struct {
	Kind  string  `json:"kind"`
	Every int64   `json:"every,omitempty"`
	Gamma float64 `json:"gamma,omitempty"`
}

// Loader is the data loader's sizing.
type Loader struct {
	Source string `json:"source"`
	Kind   string `json:"kind"`
	// Workers loading in parallel, each Prefetch batches ahead.
	Workers  int `json:"workers"`
	Prefetch int `json:"prefetch"`
	// SampleBytes is one sample with its target as the loader hands it
	// over. BufferBytes is Workers × Prefetch × BatchSize of them on a GPU
	// host; on the CPU backend, the batches the training loader allocates:
	// Workers × Prefetch in flight and the one training (one when Workers
	// is 0).
	SampleBytes int64 `json:"sample_bytes"`
	BufferBytes int64 `json:"buffer_bytes"`
	// Held is, where the loader's batches are outside the training
	// budget, the batches the run loop holds for a unit of steps
	// (StepsPerCommand) while it hands them to the engine, which
	// BufferBytes counts beside Workers × Prefetch; 0 elsewhere.
	Held int64 `json:"held_batches,omitempty"`
	// HostBudget is the host memory the buffers may use.
	HostBudget int64 `json:"host_budget"`
}

// StepTime is a roofline estimate of one step, not a measurement: each
// node takes the longer of its FLOPs at the device's peak and its bytes at
// the device's bandwidth, and the nodes run one after another.
type StepTime struct {
	Estimate bool `json:"estimate"`
	// MicroBatchSeconds is one forward and backward pass (with
	// recomputation); OptimizerSeconds the update; StepSeconds one
	// optimizer step, AccumulationSteps micro-batches and an update.
	MicroBatchSeconds float64 `json:"micro_batch_seconds"`
	OptimizerSeconds  float64 `json:"optimizer_seconds"`
	StepSeconds       float64 `json:"step_seconds"`
	SamplesPerSecond  float64 `json:"samples_per_second"`
	// FLOPs and Bytes of one micro-batch's forward and backward.
	FLOPs float64 `json:"flops"`
	Bytes float64 `json:"bytes"`
	// Bound is "compute" or "memory": which side of the roofline most of
	// the time is on; "host" when the engine's host floor is the larger
	// part of the step; "unknown" when the device's peaks are not known.
	Bound string `json:"bound"`
	// RooflineSeconds is the step at the device's peak rates (the
	// all-reduce included), before the host floor: StepSeconds when the
	// engine states no floor. HostSeconds is the engine's host floor a
	// step at the plan's StepsPerCommand: HostStepSeconds a step and
	// HostCommandSeconds a command, shared by its steps. HostOverlaps
	// says the device computes while the host prepares the next step (a
	// GPU): StepSeconds is then the longer of the roofline and the floor,
	// else their sum (the CPU computes on the host's cores). HostSource
	// says what measured the floor. All zero without a floor.
	RooflineSeconds    float64 `json:"roofline_seconds,omitempty"`
	HostSeconds        float64 `json:"host_seconds,omitempty"`
	HostStepSeconds    float64 `json:"host_step_seconds,omitempty"`
	HostCommandSeconds float64 `json:"host_command_seconds,omitempty"`
	HostOverlaps       bool    `json:"host_overlaps,omitempty"`
	HostSource         string  `json:"host_source,omitempty"`
	// AllReduceSeconds is a data-parallel step's gradient all-reduce,
	// LinkSeconds within each machine and NetworkSeconds between them.
	// Network names what the step's all-reduce waits on: "network" when
	// it crosses the network between machines (or gloo's sockets),
	// else the GPUs' link ("NVLink 4"). NetworkBandwidth is that
	// network's, or on one machine the link's, in bytes per second each
	// way; LinkBandwidth the GPUs' link. StepSeconds counts the
	// all-reduce in full; DDP overlaps all but its last bucket with the
	// backward pass.
	AllReduceSeconds float64 `json:"allreduce_seconds,omitempty"`
	LinkSeconds      float64 `json:"link_seconds,omitempty"`
	NetworkSeconds   float64 `json:"network_seconds,omitempty"`
	Network          string  `json:"network,omitempty"`
	NetworkBandwidth float64 `json:"network_bandwidth,omitempty"`
	LinkBandwidth    float64 `json:"link_bandwidth,omitempty"`
}

// Roofline is the step at the device's peak rates, without the host
// floor.
func (st StepTime) Roofline() float64 {
	if st.RooflineSeconds > 0 {
		return st.RooflineSeconds
	}
	return st.StepSeconds
}

// Forecast is how long a step and an epoch of the plan take on this
// machine, from the plan's own steps timed on its engine (synthetic
// batches, the loader left out) or from a previous run of the same plan
// here: Source says which. Without a measurement, StepSeconds is 0 and
// Missing says why.
type Forecast struct {
	StepSeconds float64 `json:"step_seconds,omitempty"`
	// EvalBatchSeconds is one evaluation batch of BatchSize samples.
	EvalBatchSeconds float64 `json:"eval_batch_seconds,omitempty"`
	// StepsPerEpoch and ValidationBatches are an epoch's optimizer steps
	// and validation batches; EpochSeconds both, timed.
	StepsPerEpoch     int64   `json:"steps_per_epoch,omitempty"`
	ValidationBatches int64   `json:"validation_batches,omitempty"`
	EpochSeconds      float64 `json:"epoch_seconds,omitempty"`
	// Epochs is the training's epochs, TotalSeconds all of them.
	Epochs           int64   `json:"epochs,omitempty"`
	TotalSeconds     float64 `json:"total_seconds,omitempty"`
	SamplesPerSecond float64 `json:"samples_per_second,omitempty"`
	Source           string  `json:"source,omitempty"`
	Missing          string  `json:"missing,omitempty"`
}

// Layer is one node of the model's graph.
type Layer struct {
	Name string `json:"name"`
	Op   string `json:"op"`
	// Layer is the layer or family written in the source.
	Layer string  `json:"layer"`
	Out   []int64 `json:"out"`
	// Params is the node's trainable parameters; FLOPs its forward cost per
	// sample.
	Params int64 `json:"params"`
	FLOPs  int64 `json:"flops"`
	// ActivationBytes is what the node keeps for the backward pass at the
	// chosen batch without checkpointing: its output if some op keeps it,
	// and its private buffers.
	ActivationBytes int64 `json:"activation_bytes"`
	// Recomputed says a checkpoint segment holds the node.
	Recomputed bool `json:"recomputed,omitempty"`
	// WorkspaceBytes is the scratch the node's kernels may take while it
	// runs at the chosen batch (a convolution's cuDNN workspace on a GPU:
	// the largest algorithm family cuDNN offers for its shape, held to the
	// plan's cap), Workspace what needs it. The memory's workspace term
	// is the largest of them: one runs at a time.
	WorkspaceBytes int64  `json:"workspace_bytes,omitempty"`
	Workspace      string `json:"workspace,omitempty"`
	// FusionGroup is the ID of the node's fusion group, 0 when none.
	FusionGroup int `json:"fusion_group,omitempty"`
	// Line is the source line of the layer that made the node.
	Line int `json:"line"`
	// Roofline is the node's part of StepTime's estimate; nil for the
	// input, for a gan's discriminator and when the device's peaks are
	// not known.
	Roofline *LayerRoofline `json:"roofline,omitempty"`
}

// LayerRoofline is one node's roofline estimate for one micro-batch, as
// StepTime sums it: a pass takes the longer of its FLOPs at the peak and
// its bytes at the bandwidth. The backward pass costs twice the forward
// (the gradients of the inputs and of the weights), three times for a
// recomputed node, whose forward runs again in the backward.
type LayerRoofline struct {
	// ForwardFLOPs and ForwardBytes are one forward pass's over the
	// micro-batch: FLOPs × batch, and the inputs, the output and the
	// weights moved (a tensor kept inside a fusion group moves nothing).
	ForwardFLOPs float64 `json:"forward_flops"`
	ForwardBytes float64 `json:"forward_bytes"`
	// Peak is the FLOP/s the node's arithmetic runs at: the compute
	// precision's for convolutions, dense layers and attention, fp32's
	// for the rest.
	Peak float64 `json:"peak"`
	// ForwardSeconds and BackwardSeconds are the estimates of its passes.
	ForwardSeconds  float64 `json:"forward_seconds"`
	BackwardSeconds float64 `json:"backward_seconds"`
	// Bound is "compute" or "memory": the side of the roofline it is on.
	Bound string `json:"bound"`
}

// Decision is one automatic choice and why.
type Decision struct {
	What   string `json:"what"`
	Value  string `json:"value"`
	Reason string `json:"reason"`
}

// ErrSourceChanged is wrapped by Verify when the source is not the one the
// plan was made from.
var ErrSourceChanged = errors.New("the source changed since the plan was made")

// SourceHash is the hex sha256 of a source, as Plan.SourceSHA256 holds it.
func SourceHash(src []byte) string {
	h := sha256.Sum256(src)
	return hex.EncodeToString(h[:])
}

// Verify reports whether src is the source the plan was made from; the
// executor refuses to run a plan when it is not.
func (p *Plan) Verify(src []byte) error {
	if p.SourceSHA256 == "" {
		return fmt.Errorf("plan of %s carries no source hash: %w", p.File, ErrSourceChanged)
	}
	if got := SourceHash(src); got != p.SourceSHA256 {
		return fmt.Errorf("plan of %s was made from source sha256 %s, the file now has %s; run pipe plan again: %w",
			p.File, short(p.SourceSHA256), short(got), ErrSourceChanged)
	}
	return nil
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Encode writes the plan as indented JSON.
func (p *Plan) Encode(w io.Writer) error {
	b, err := p.MarshalIndent()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// MarshalIndent returns the plan as indented JSON ending in a newline.
func (p *Plan) MarshalIndent() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("encoding the plan: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode reads a plan written by Encode and checks its version.
func Decode(r io.Reader) (*Plan, error) {
	var p Plan
	dec := json.NewDecoder(r)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("reading the plan: %w", err)
	}
	if p.Version != Version {
		return nil, fmt.Errorf("the plan has format version %d; this pipe reads version %d: run pipe plan again", p.Version, Version)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Limits a plan is held to when it is read: what the planner can produce,
// so that a plan edited by hand is refused with a message rather than
// failing in the executor.
const (
	MaxBatch        = 1 << 24
	MaxAccumulation = 1 << 20
	MaxWorkers      = 1024
	// MaxStepsPerCommand bounds StepsPerCommand: the unit's batches lie
	// side by side in the engine's input memory.
	MaxStepsPerCommand = 64
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("the plan is not one pipe plan writes")

// Validate checks that the plan is one the planner could have written:
// sizes in their ranges and agreeing with each other, segments and fusion
// groups on the plan's layers, known precisions, and an engine this
// program links (spec.Engines, where the engines register their names).
func (p *Plan) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s; run pipe plan again rather than editing a plan", ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case p.BatchSize < 1 || p.BatchSize > MaxBatch:
		return bad("batch_size %d is outside 1 to %d", p.BatchSize, MaxBatch)
	case p.AccumulationSteps < 1 || p.AccumulationSteps > MaxAccumulation:
		return bad("accumulation_steps %d is outside 1 to %d", p.AccumulationSteps, MaxAccumulation)
	case p.StepsPerCommand < 0 || p.StepsPerCommand > MaxStepsPerCommand:
		return bad("steps_per_command %d is outside 0 to %d", p.StepsPerCommand, MaxStepsPerCommand)
	case p.StepsPerCommand > 1 && (p.AccumulationSteps > 1 || p.WorldSize() > 1):
		return bad("steps_per_command %d with accumulation_steps %d over %d devices: a unit of steps is of one micro-batch each, on one device", p.StepsPerCommand, p.AccumulationSteps, p.WorldSize())
	case p.WorldSize() > 1<<16:
		return bad("world_size %d", p.Distributed.WorldSize)
	case p.EffectiveBatch != p.BatchSize*p.AccumulationSteps*int64(p.WorldSize()):
		return bad("effective_batch %d is not batch_size %d × accumulation_steps %d × %d devices", p.EffectiveBatch, p.BatchSize, p.AccumulationSteps, p.WorldSize())
	case p.Distributed.WorldSize > 1 && p.Distributed.NProcPerNode*p.Distributed.NNodes != p.Distributed.WorldSize:
		return bad("world_size %d is not nproc_per_node %d × nnodes %d", p.Distributed.WorldSize, p.Distributed.NProcPerNode, p.Distributed.NNodes)
	case len(p.Layers) == 0:
		return bad("it has no layers")
	case p.Backend != BackendCPU && p.Backend != BackendGPU:
		return bad("backend %q", p.Backend)
	case p.Engine.Name != "" && !slices.Contains(spec.Engines(), p.Engine.Name):
		return bad("engine %q", p.Engine.Name)
	case p.Loader.Workers < 0 || p.Loader.Workers > MaxWorkers || p.Loader.Prefetch < 0 || p.Loader.Prefetch > MaxWorkers:
		return bad("loader workers %d and prefetch %d", p.Loader.Workers, p.Loader.Prefetch)
	case !(p.Optimizer.LR > 0) || math.IsInf(p.Optimizer.LR, 0):
		return bad("learning rate %v", p.Optimizer.LR)
	}
	switch p.Precision.Compute {
	case "fp32", "tf32", "fp16", "bf16":
	default:
		return bad("precision %q", p.Precision.Compute)
	}
	last := -1
	for _, s := range p.Checkpoint.Segments {
		if s.From <= last || s.To < s.From || s.To >= len(p.Layers) {
			return bad("checkpoint segment %d..%d is not on the plan's %d layers in order", s.From, s.To, len(p.Layers))
		}
		last = s.To
	}
	names := make(map[string]bool, len(p.Layers))
	for _, l := range p.Layers {
		names[l.Name] = true
	}
	for _, g := range p.Fusion.Groups {
		for _, n := range g.Nodes {
			if !names[n] {
				return bad("fusion group %d names %q, which is no layer", g.ID, n)
			}
		}
	}
	for _, v := range []int64{p.Memory.Total, p.Memory.Budget, p.Memory.Activations, p.Memory.Parameters} {
		if v < 0 {
			return bad("a negative memory figure")
		}
	}
	return nil
}

// Load reads a plan file written by `pipe plan --out`.
func Load(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
