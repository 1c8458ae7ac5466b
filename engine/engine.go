// Package engine is the contract between the run loop and the engines
// that compute: a Backend compiles a stdlib.Graph into a Model for one
// micro-batch size, and a Model trains and evaluates on batches. What an
// engine can do beyond that (queued steps, device memory, GAN training,
// profiling, int8) it says in one Capabilities value.
//
// The engines are siblings under this package (engine/native computes in
// Go on the CPU, engine/torch drives PyTorch workers) and never import
// each other. Package run drives a Model; nothing here re-decides what the
// plan decided (batch, precision, checkpoint segments, fusion groups),
// which comes in through Config. A training step, as run.Run drives it:
//
//	m.ZeroGrad()
//	for k := 0; k < plan.AccumulationSteps; k++ {
//		loss, err := m.TrainStep(batch[k], 1/float64(plan.AccumulationSteps))
//		...
//	}
//	m.ClipGradNorm(max) // when the file sets grad_clip
//	m.Step(lr)          // lr from the schedule
package engine

import (
	"errors"
	"fmt"
	"strings"

	"pipe/dataset/samples"
	"pipe/stdlib"
)

// Backend compiles models for one kind of device.
type Backend interface {
	// Name is the engine's name as plans spell it: "native", "torch".
	Name() string
	// Build compiles g into a model that trains on micro-batches of up to
	// cfg.Batch samples, initialising its parameters from cfg.Seed. It
	// fails, wrapping ErrUnsupported and naming the node, on an op or a
	// setting the backend cannot run; fusion kinds it does not fuse run
	// op by op, with the same results.
	Build(g *stdlib.Graph, cfg Config) (Model, error)
}

// Model is a compiled model with its parameters, gradients, optimizer state
// and working memory. Its methods are not safe for concurrent use. None
// panics: bad batches, non-finite losses and failures inside the
// numerical libraries come back as errors.
type Model interface {
	// TrainStep runs the forward pass in training mode (batch statistics,
	// dropout), the loss and the backward pass on one micro-batch of
	// b.N <= Config.Batch samples, and adds scale times the gradient of
	// the batch's mean loss to the accumulated gradients. With
	// accumulation over k micro-batches, scale is 1/k, so the sum is the
	// gradient of the mean over the effective batch, as PyTorch's
	// (loss/k).backward() gives. It returns the micro-batch's mean loss
	// (unscaled). A non-finite loss returns a *NonFiniteError naming the
	// first node whose output is not finite, and leaves the gradients and
	// the batchnorm statistics as they were.
	TrainStep(b *samples.Batch, scale float64) (loss float64, err error)
	// Step applies the optimizer to the accumulated gradients with the
	// learning rate lr and counts one optimizer step. It does not zero
	// the gradients. A non-finite gradient returns a *NonFiniteError and
	// changes nothing.
	Step(lr float64) error
	// ZeroGrad sets the accumulated gradients to zero.
	ZeroGrad()
	// ClipGradNorm scales the accumulated gradients so that their global
	// L2 norm is at most max (PyTorch's clip_grad_norm_) and returns the
	// norm before clipping.
	ClipGradNorm(max float64) (norm float64, err error)
	// Eval runs the forward pass in evaluation mode (running statistics,
	// no dropout, batchnorm folded into convs where the plan says) on b.
	// When out is non-nil it receives the outputs, b.N·prod(OutShape())
	// values laid out NCHW like the batch. When b.Y is non-nil it returns
	// the batch's mean loss, else 0. Eval accepts batches of any size.
	Eval(b *samples.Batch, out []float32) (loss float64, err error)
	// OutShape is the shape of one sample's output.
	OutShape() []int64
	// Precision is the arithmetic the model runs in ("fp32"), whatever
	// Config asked for.
	Precision() string
	// State returns a copy of everything a checkpoint must hold to resume
	// training exactly: parameters, batchnorm running statistics,
	// optimizer state and the step counters.
	State() State
	// SetState restores a State returned by State on a model built from
	// the same graph and config. Every tensor must be present with its
	// shape; unknown names are errors.
	SetState(State) error
	// Memory reports the memory the model holds and measured.
	Memory() MemStats
	// Capabilities says what the model can do beyond this interface.
	Capabilities() Capabilities
	// Close releases the model's workers and memory.
	Close() error
}

// Capabilities is what a Model can do beyond the Model interface, one
// facet a field: a nil facet is a capability the model does not have.
// The run loop reads it once after Build, in place of probing the model
// with type assertions.
type Capabilities struct {
	// Queue runs optimizer steps ahead of the host (the torch engine):
	// the run loop queues steps instead of calling TrainStep and Step.
	Queue Queuer
	// Devices reports memory as the devices and their OS measured it,
	// for a model that computes in other processes.
	Devices DeviceMeasurer
	// Applied reports how the plan was applied where the machine decides.
	Applied Applier
	// Adversarial splits a training step at the output, so that the run
	// loop's GAN trainer can join a discriminator's gradient to the loss.
	Adversarial Adversarial
	// GAN trains gan mode inside the engine (the torch worker holds both
	// models and their optimizers).
	GAN GANTrainer
	// GANParts reports a gan micro-batch's terms.
	GANParts GANPartser
	// Profile times the model's kernels by the clock.
	Profile Profiler
	// Int8 makes an int8 copy of the model for inference.
	Int8 Int8Quantizer
	// Liveness tells at once when a worker process the model computes in
	// has died.
	Liveness Liveness
	// Stop, set when the model's ranks span processes (data parallelism
	// over nodes, or ranks a launcher started one a process), makes the
	// ranks stop after the same step.
	Stop Stopper
	// World, set when the model's ranks met at a rendezvous (ranks a
	// launcher started one a process), says what the ranks said there.
	World Worlder
	// Phases reports where the training steps' time went by phase,
	// when the engine was asked to time them.
	Phases PhaseTimer
	// Rows, set on one node of several, gives the rows [lo, hi) of a
	// training batch of n samples that this node's ranks train on, so that
	// the run loop reads only those (dataset.LoaderOptions.Rows); the
	// model is then given batches of those rows (Batch.Offset, Global).
	Rows func(n int) (lo, hi int)
	// Resident keeps a training set on the device and gathers batches of
	// indices alone there (plan.DataOnDevice).
	Resident Resident
}

// Liveness is the Capabilities facet of a Model that computes in other
// processes (the torch engine): Lost is closed once one of them has
// exited, after which the model's calls fail with errors matching
// ErrWorkerLost. A server watches it to notice a death between requests.
// Close ends the processes too, so Lost closes after Close.
type Liveness interface {
	Lost() <-chan struct{}
	// Kill ends the processes at once, a hung one too (stopped,
	// deadlocked, or waiting on a wedged device): Lost closes, and a
	// call in flight returns an error matching ErrWorkerLost. A server
	// calls it on a worker that has not answered in time.
	Kill()
}

// Queuer is the Capabilities facet of a Model whose device runs ahead of
// the host (the torch engine). Run uses it in place of ZeroGrad,
// TrainStep, ClipGradNorm and Step: it queues an optimizer step's
// micro-batches and the step itself, and takes the losses as they come
// back, so the host never waits for the device between steps.
type Queuer interface {
	// QueueTrain queues one micro-batch, as TrainStep trains it: zero
	// says it is its step's first (the gradients are zeroed before it),
	// last its step's last. b may be released once it returns.
	QueueTrain(b *samples.Batch, scale float64, zero, last bool) error
	// QueueStep queues gradient clipping at clip (0 for none), then an
	// optimizer step at lr.
	QueueStep(clip, lr float64) error
	// QueueSteps queues len(bs) optimizer steps of one micro-batch each,
	// as one unit that the engine runs with nothing between its steps:
	// step i zeroes the gradients, trains bs[i] at scale 1, clips at clip
	// (0 for none) and steps at lrs[i], with the results QueueTrain and
	// QueueStep give step by step. Results reports them one a step; a
	// failure stops the unit at the failed step, and its steps after it
	// are not trained. bs may be released once it returns.
	QueueSteps(bs []*samples.Batch, lrs []float64, clip float64) error
	// Results returns the queued steps that finished since the last call,
	// oldest first; with wait it waits for all of them. A non-finite loss
	// (*NonFiniteError), a device out of memory (*OutOfMemoryError) or a
	// failed worker is returned as the error, with the steps that
	// finished before it.
	Results(wait bool) ([]StepResult, error)
}

// PhaseTimer is the Capabilities facet of a Model that can time its
// training steps by phase (the torch engine, under PIPE_TORCH_PHASES=1):
// ok is false when it was not asked to, or has timed no step.
type PhaseTimer interface {
	StepPhases() (p StepPhases, ok bool)
}

// StepPhases is where training steps' time went, summed over Steps steps
// of rank 0: Total from each command's arrival in the worker to its
// reply, of which Copy went to the batches (their copies to the device
// queued), Queue to running the forward, backward and optimizer step on
// the host (on a GPU, queueing their kernels), and Host to the rest (the
// command read, the checks, the readback, the reply made). Device is the
// device's own time for DeviceSteps of the steps (CUDA events); on the
// CPU the compute is the device's, Device is Queue's time and Queue 0.
type StepPhases struct {
	Steps                            int64
	Total, Copy, Queue, Host, Device float64 // seconds
	DeviceSteps                      int64
}

// Stopper is the Capabilities facet of a Model whose ranks train in
// several processes. A rank asked to stop (Ctrl-C, SLURM's SIGUSR1) cannot
// stop alone: its peers would wait in their next all-reduce for a step it
// never takes, and the checkpoint would never be written. RequestStop has
// the next optimizer step carry the request; every rank's worker
// all-reduces it with that step, and Stopping then reports true on every
// rank, asked or not, after the same step.
// Once stopped, every rank calls StopTogether after rank 0 has written
// its checkpoint: it returns when all have, so that no rank exits first
// and has its launcher (srun --kill-on-bad-exit) kill rank 0 mid-write.
type Stopper interface {
	RequestStop()
	Stopping() bool
	StopTogether() error
}

// Worlder is the Capabilities facet of a Model whose ranks met at a
// rendezvous when it was built. LauncherRestarts is the largest
// Config.LauncherRestarts among them: a launcher that restarts failed
// ranks counts only those (torchrun's healthy ranks, restarted because
// another node rejoined, keep their count), so a rank learns here
// whether its world was restarted. Without the facet, a model's world
// is itself and the count its own.
type Worlder interface {
	LauncherRestarts() int
}

// StepResult is the outcome of one queued optimizer step.
type StepResult struct {
	// Losses are its micro-batches' mean losses, in order.
	Losses []float64
}

// DeviceMemory is memory as a device and the operating system measured
// it, not as pipe computed it.
type DeviceMemory struct {
	// Rank is the device's rank; Device its name ("cuda:0", "cpu").
	Rank   int
	Device string
	// MaxAllocated and MaxReserved are torch.cuda.max_memory_allocated
	// and max_memory_reserved; Used is the device's used memory from
	// torch.cuda.mem_get_info (every process's), Total its capacity.
	// All 0 on the CPU.
	MaxAllocated, MaxReserved, Used, Total int64
	// MaxRSS is the peak resident memory of the process that computed
	// (getrusage).
	MaxRSS int64
	// AtExit says the process had exited (it died, or was stopped after
	// a failure) and could not be asked: MaxRSS is what the kernel
	// counted when it was reaped (0 when that cannot be told from what
	// its parent's exec carried over), and the device's own figures are
	// lost.
	AtExit bool
}

// Measured is the device's figure for a run's peak: the caching
// allocator's reserved peak on a GPU (what the device holds for the run),
// the worker's peak resident memory on the CPU; 0 for a GPU whose
// process had exited (its host memory is not what a GPU plan counts),
// and when unknown.
func (d DeviceMemory) Measured() int64 {
	if d.MaxReserved > 0 {
		return d.MaxReserved
	}
	if d.AtExit && d.Device != "cpu" {
		return 0
	}
	return d.MaxRSS
}

// DeviceMeasurer is the Capabilities facet of a Model that computes in
// other processes: what their devices and their OS measured.
type DeviceMeasurer interface {
	DeviceMemory() ([]DeviceMemory, error)
}

// Applier is the Capabilities facet of a Model that reports how it applied
// the plan where the result depends on the machine: "compile" is
// "torch.compile" or "eager (why)", "optimizer" says fused or not.
type Applier interface {
	Applied() map[string]string
}

// Config is what a backend needs to build a model; Run fills it from the
// plan and the program (ConfigFromPlan).
type Config struct {
	// Cancel, when closed, ends a Build that waits (for the other ranks
	// of a data-parallel run) with ErrInterrupted; nil waits to the end.
	// Once built, a model whose ranks share collectives ends a call that
	// waits on a stalled peer with an error that is ErrInterrupted, and
	// is unusable after: the run loop, which stops between steps, could
	// not finish the step.
	Cancel <-chan struct{}
	// Batch is the micro-batch size the working memory is sized for.
	Batch int
	// Precision is the plan's compute precision. Backends that cannot run
	// it run fp32 (the planner records that fallback); Model.Precision
	// says what runs.
	Precision string
	// Seed drives parameter initialisation and dropout: the same seed
	// gives the same weights and the same losses, run after run.
	Seed uint64
	// Loss is the loss minimised.
	Loss Loss
	// Optimizer is the optimizer and its settings; the learning rate is
	// given to each Step.
	Optimizer Optimizer
	// Checkpoint lists the runs of graph nodes whose outputs are dropped
	// in the forward pass and recomputed in the backward.
	Checkpoint []Segment
	// Fusion lists the groups of nodes run as one kernel.
	Fusion []FusionGroup
	// Folds are the conv and batchnorm pairs whose batchnorm is folded
	// into the conv's weights for Eval.
	Folds [][2]string
	// Threads is the number of worker threads; 0 uses GOMAXPROCS.
	// Results are identical run to run for the same Threads.
	Threads int
	// Device is where an engine that can choose computes: "cpu", "cuda"
	// (each rank's own GPU) or "cuda:N". The native engine computes on
	// the CPU whatever it says.
	Device string
	// Engine is how the torch engine applies the plan; the native engine
	// ignores it.
	Engine EngineSettings
	// LauncherRestarts is how often the launcher that started this rank
	// started it again after a failure (torchrun's
	// TORCHELASTIC_RESTART_COUNT, SLURM's requeues); 0 for none. The
	// ranks say theirs when they meet (Worlder).
	LauncherRestarts int
	// InputGrad makes TrainStep keep the gradient with respect to the
	// model's input, for InputGrad (a GAN's discriminator, whose input
	// gradient trains the generator).
	InputGrad bool
}

// EngineSettings are the plan's decisions that only the torch engine
// applies (plan.Engine and plan.Distributed say why each was taken).
type EngineSettings struct {
	// Autocast is "bf16" or "fp16" for mixed precision under
	// torch.autocast, "" for none; GradScaler scales the loss (fp16).
	Autocast   string
	GradScaler bool
	// TF32 allows TF32 in matrix products and convolutions.
	TF32 bool
	// CudnnBenchmark lets cuDNN time its algorithms for the fixed shapes;
	// CudnnWorkspaceLimit caps one convolution's workspace (bytes, 0: none).
	CudnnBenchmark      bool
	CudnnWorkspaceLimit int64
	// ChannelsLast stores images NHWC on the device.
	ChannelsLast bool
	// Compile runs the model through torch.compile where the worker's
	// torch has it and the device is CUDA, else eagerly.
	Compile bool
	// CUDAGraph captures each training step of the plan's batch as one
	// CUDA graph and replays it (batches of another shape run eagerly).
	CUDAGraph bool
	// FusedOptimizer uses the fused Adam/AdamW kernels (CUDA).
	FusedOptimizer bool
	// PinnedMemory copies batches through pinned host memory on a copy
	// stream, the next batch in flight while the current step runs.
	PinnedMemory bool
	// LossReadback is "sync" (each micro-batch's loss read back at once)
	// or "lagged" (a step's losses come back with the next step's reply,
	// so the host never waits for the device).
	LossReadback string
	// WorldSize is the number of devices training together (ranks of
	// DistributedDataParallel); Backend their process group's
	// backend (nccl, gloo) and BucketBytes DDP's gradient bucket size.
	WorldSize   int
	Backend     string
	BucketBytes int64
	// SyncBatchnorm computes batchnorm's batch statistics over all the
	// ranks' samples.
	SyncBatchnorm bool
}

// Loss names the loss and its settings.
type Loss struct {
	// Kind is cross_entropy, bce, mse, mae or dice.
	//
	//   - cross_entropy: log-softmax over the channel axis and negative
	//     log-likelihood, fused. Targets are class indices (one value per
	//     output position) or probabilities (one per output element).
	//   - bce: binary cross-entropy on logits.
	//   - mse, mae: mean squared and absolute error.
	//   - dice: 1 - the mean over channels of the soft Dice coefficient
	//     (2·Σpt + 1)/(Σp + Σt + 1), sums over the batch and the pixels,
	//     p the sigmoid of the output.
	//
	// A model that ends in sigmoid (for bce and dice) or softmax (for
	// cross_entropy) hands the loss the values before that activation, so
	// the activation is never applied twice and the loss is computed
	// from logits, stably. Batches with a validity mask leave out the
	// positions whose mask is 0; the mean is over the valid ones.
	Kind string
}

// Optimizer holds an optimizer's settings with PyTorch's semantics.
type Optimizer struct {
	// Kind is sgd, adam or adamw.
	Kind string
	// Momentum and Nesterov are SGD's (torch.optim.SGD, dampening 0).
	Momentum float64
	Nesterov bool
	// WeightDecay is an L2 term added to the gradient for sgd and adam,
	// and decoupled decay (p -= lr·wd·p) for adamw. It applies to every
	// parameter, as PyTorch's default parameter groups do.
	WeightDecay float64
	// Beta1, Beta2 and Eps are Adam's and AdamW's.
	Beta1, Beta2, Eps float64
}

// Segment is a run of graph nodes, by ID, both ends included, recomputed
// in the backward pass.
type Segment struct {
	From, To int
}

// FusionGroup is a run of graph nodes, by name, executed as one kernel.
// Kind is the planner's pattern: "conv+batchnorm+activation",
// "conv+batchnorm", "conv+activation", "dense+bias+activation" or
// "elementwise".
type FusionGroup struct {
	Kind  string
	Nodes []string
}

// State is a model's complete training state.
type State struct {
	// Tensors are named float32 tensors in a fixed order: the parameters
	// and buffers under their graph node's name ("conv1.weight",
	// "batchnorm1.running_var", PyTorch's state_dict keys), then the
	// optimizer's buffers ("optimizer.conv1.weight.exp_avg").
	Tensors []Tensor
	// Counters are exact integer counters: "optimizer.step" (optimizer
	// steps taken), "exec.micro_step" (micro-batches trained) and
	// "exec.seed" (the seed), which together key dropout's random
	// stream, and each batchnorm's "<name>.num_batches_tracked".
	Counters map[string]int64
}

// Tensor is a named float32 tensor, row-major in the shape given
// (PyTorch's layouts: a conv weight is [out, in/groups, k, k], a dense
// weight [out, in]).
type Tensor struct {
	Name  string
	Shape []int64
	Data  []float32
}

// Lookup returns the tensor with the given name, or nil.
func (s State) Lookup(name string) *Tensor {
	for i := range s.Tensors {
		if s.Tensors[i].Name == name {
			return &s.Tensors[i]
		}
	}
	return nil
}

// MemStats is the memory a model holds, in bytes. The arena, the scratch
// and the parameter arrays are allocated at Build (the evaluation arena at
// the first Eval) and never grow while training, so Arena is the training
// step's actual activation memory. PeakLive is the largest sum of the
// tensors alive at one point of a step (what the planner estimates,
// without packing losses), and HeapInuseDelta a process-level
// cross-check from runtime.MemStats.
type MemStats struct {
	// Parameters, Gradients and Optimizer are the parameter tensors
	// (with batchnorm running statistics), their accumulated gradients
	// and the optimizer's buffers.
	Parameters int64
	Gradients  int64
	Optimizer  int64
	// Arena holds a training step's activations, the tensors kept for the
	// backward pass, the activations' gradients and kernels' temporaries,
	// packed by lifetime. PeakLive is the largest sum of the sizes of the
	// tensors alive at once during a step; Arena >= PeakLive.
	Arena    int64
	PeakLive int64
	// Saved is the part of PeakLive at the end of the forward pass:
	// the tensors kept for the backward (the planner's activation
	// estimate, measured).
	Saved int64
	// Scratch is the per-worker workspace (im2col columns, partial weight
	// gradients).
	Scratch int64
	// EvalArena is the working memory of Eval, allocated on first use.
	EvalArena int64
	// Total is Parameters + Gradients + Optimizer + Arena + Scratch +
	// EvalArena.
	Total int64
	// HeapInuseDelta is runtime.MemStats.HeapInuse after the first
	// training step minus before Build: everything the model allocated on
	// the Go heap, measured (0 before the first step). It is exact only
	// when nothing else allocates or frees meanwhile; a collection of
	// other garbage makes it smaller.
	HeapInuseDelta int64
}

// NonFiniteError reports a NaN or an infinity: in a loss, in a node's
// output or in a gradient.
type NonFiniteError struct {
	// Step is the number of optimizer steps taken before the failure and
	// MicroStep the number of micro-batches trained.
	Step, MicroStep int64
	// Loss is the loss value (NaN or ±Inf), 0 when the failure is in a
	// gradient.
	Loss float64
	// Node and Op name the first node (in the forward order) whose output
	// holds a non-finite value; empty when every output is finite (the
	// loss itself overflowed) or when Param is set.
	Node, Op string
	// Param names a parameter, or the gradient of one, that is not
	// finite.
	Param string
	// Input says the batch's input itself holds non-finite values.
	Input bool
}

func (e *NonFiniteError) Error() string {
	var b strings.Builder
	// Step and MicroStep count what was trained before; the failing ones
	// are the next, numbered from 1 as progress numbers them.
	fmt.Fprintf(&b, "non-finite value at step %d (micro-batch %d)", e.Step+1, e.MicroStep+1)
	switch {
	case e.Input:
		b.WriteString(": the input batch holds NaN or Inf; check the data and its normalisation")
	case e.Param != "":
		fmt.Fprintf(&b, ": %s is not finite; lower the learning rate or clip gradients (grad_clip)", e.Param)
	case e.Node != "":
		fmt.Fprintf(&b, ": loss %v; the first non-finite output is %s (%s); lower the learning rate or check that layer's input", e.Loss, e.Node, e.Op)
	default:
		fmt.Fprintf(&b, ": loss %v although every layer's output is finite; the loss overflowed", e.Loss)
	}
	return b.String()
}

// OutOfMemoryError reports that a device ran out of memory. Run stops the
// run cleanly with it: the last checkpoint is kept, and the diagnostic
// puts the plan's estimate beside what the device measured.
type OutOfMemoryError struct {
	// Step is the optimizer steps taken before the failure; Rank the
	// device's rank (0 without data parallelism).
	Step int64
	Rank int
	// Phase is forward, backward, optimizer or evaluation; Node the
	// layer running when it is known (the forward pass).
	Phase, Node string
	// Device names the device; MaxAllocated and MaxReserved are the
	// caching allocator's peaks and Used the device's used memory
	// (mem_get_info) at the failure, Total its capacity; 0 when unknown.
	Device                          string
	MaxAllocated, MaxReserved, Used int64
	Total                           int64
	// Detail is the library's message.
	Detail string
}

func (e *OutOfMemoryError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "out of memory at step %d", e.Step+1)
	if e.Device != "" {
		fmt.Fprintf(&b, " on %s", e.Device)
	}
	if e.Phase != "" {
		fmt.Fprintf(&b, " in the %s pass", e.Phase)
	}
	if e.Node != "" {
		fmt.Fprintf(&b, " at %s", e.Node)
	}
	if e.MaxReserved > 0 {
		fmt.Fprintf(&b, " (the device measured %d bytes allocated and %d reserved at the peak", e.MaxAllocated, e.MaxReserved)
		if e.Total > 0 {
			fmt.Fprintf(&b, ", %d of %d used", e.Used, e.Total)
		}
		b.WriteString(")")
	}
	if e.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Detail)
	}
	return b.String()
}

// ErrBadBatch is wrapped by the errors that reject a batch: wrong sizes,
// labels out of range, a batch larger than the model was built for.
var ErrBadBatch = errors.New("bad batch")

// ErrWorkerLost is matched (errors.Is) by the errors of a model whose
// worker process died or whose peer rank went away: a cause outside the
// model and its settings, so a checkpoint resumes as it is.
var ErrWorkerLost = errors.New("a worker process was lost")

// ErrInterrupted is returned by a Build that stopped waiting (for other
// ranks to join), and by a model's call that stopped waiting on a stalled
// peer, because Config.Cancel was closed.
var ErrInterrupted = errors.New("interrupted")

// ErrUnsupported is wrapped by Build's errors for ops, fusion kinds or
// settings a backend cannot run.
var ErrUnsupported = errors.New("not supported")

// ErrInternal is wrapped by errors recovered from a panic inside a
// backend or a numerical library.
var ErrInternal = errors.New("internal error")

// The counters of a State that every engine keeps, under these names in
// checkpoints. Dropout's random stream is keyed by the seed and the
// micro-step.
const (
	CounterStep      = "optimizer.step"  // optimizer steps taken
	CounterMicroStep = "exec.micro_step" // micro-batches trained
	CounterSeed      = "exec.seed"       // the run's seed
	// SuffixBatchesTracked follows a batchnorm's name: the batches its
	// running statistics have seen.
	SuffixBatchesTracked = ".num_batches_tracked"
	// PrefixDiscriminator leads the names of a gan run's discriminator's
	// tensors and counters in the pair's State.
	PrefixDiscriminator = "discriminator."
)

// OptimizerSlots are PyTorch's names of the optimizer's per-parameter
// buffers: SGD's momentum when it has one, Adam's two moments.
func OptimizerSlots(o Optimizer) []string {
	switch {
	case o.Kind == "sgd" && o.Momentum > 0:
		return []string{"momentum_buffer"}
	case o.Kind == "adam" || o.Kind == "adamw":
		return []string{"exp_avg", "exp_avg_sq"}
	}
	return nil
}

// OptimizerKey is the State's name of parameter param's optimizer buffer
// slot: "optimizer.conv1.weight.exp_avg".
func OptimizerKey(param, slot string) string { return "optimizer." + param + "." + slot }
