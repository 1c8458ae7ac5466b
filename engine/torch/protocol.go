package torch

import (
	"encoding/json"
	"math"
	"strings"
)

// The wire between pipe and a worker. pipe writes one envelope a line on
// the worker's stdin; the worker answers each with one JSON line on its
// stdout, in order: a failure (ok false) or the command's reply (ok true
// and the reply's fields). Tensors never cross the pipe: batches, outputs
// and checkpoint tensors lie in shared-memory regions (shm.go) that the
// requests point into. The worker's first line, unasked, is the hello.
//
// The structs below, with the Spec of spec.go, are the whole protocol.
// The worker's Python reads them, and the versions, from
// pipe_torch/protocol.py, which TestProtocolPython generates from them
// (go generate; the test fails while the file is stale); the worker
// checks every request it reads and every reply it writes against it.
//
//go:generate go test -run ^TestProtocolPython$ -update .

// protocolVersion is the wire's version, said in the hello; pipe refuses
// a worker with another.
const protocolVersion = 6

// envelope is one line to the worker.
type envelope struct {
	Cmd  string  `json:"cmd"`
	Args request `json:"args"`
}

// request is the arguments of one command; command is its name.
type request interface{ command() string }

// commands lists every command with its reply, for the generated Python
// and the tests.
var commands = []struct {
	req   request
	reply any
}{
	{helloRequest{}, Info{}},
	{quitRequest{}, emptyReply{}},
	{mapRequest{}, emptyReply{}},
	{buildRequest{}, buildReply{}},
	{buildGANRequest{}, paramsReply{}},
	{layoutRequest{}, layoutReply{}},
	{setStateRequest{}, emptyReply{}},
	{getStateRequest{}, stateReply{}},
	{trainRequest{}, trainReply{}},
	{stepRequest{}, stepReply{}},
	{trainStepsRequest{}, trainReply{}},
	{flushRequest{}, stepReply{}},
	{zeroRequest{}, emptyReply{}},
	{clipRequest{}, normReply{}},
	{evalRequest{}, evalReply{}},
	{memoryRequest{}, memoryReply{}},
	{savedRequest{}, savedReply{}},
	{timePlainRequest{}, timePlainReply{}},
	{torchscriptRequest{}, torchscriptReply{}},
	{barrierRequest{}, emptyReply{}},
	{resumeRequest{}, emptyReply{}},
	{residentRequest{}, emptyReply{}},
}

// helloRequest asks again for the hello (Info).
type helloRequest struct{}

// quitRequest ends the worker after its reply.
type quitRequest struct{}

// mapRequest maps the shared-memory file at Path, Size bytes, as the
// region named Region ("in", "out" or "state"), replacing any before.
type mapRequest struct {
	Region string `json:"region"`
	Path   string `json:"path"`
	Size   int    `json:"size"`
}

// buildRequest builds the model of Spec (and joins the process group of
// Spec.Engine.Distributed).
type buildRequest struct {
	Spec *Spec `json:"spec"`
}

// buildGANRequest builds a gan's discriminator beside the model (gan.go).
type buildGANRequest struct {
	Spec *Spec   `json:"spec"`
	GAN  GANSpec `json:"gan"`
}

// GANSpec is a gan's settings as the worker's build_gan reads them.
type GANSpec struct {
	Conditional bool    `json:"conditional"`
	Adversarial string  `json:"adversarial"`
	AdvWeight   float64 `json:"adversarial_weight"`
	L1          float64 `json:"l1"`
	DSteps      int64   `json:"d_steps"`
	LRRatio     float64 `json:"lr_ratio"`
}

// layoutRequest asks for the state's names and shapes, of a model whose
// weights are the worker's own initialisation.
type layoutRequest struct{}

// setStateRequest loads the tensors of Layout from the "state" region,
// and the counters.
type setStateRequest struct {
	Layout   []stateEntry     `json:"layout"`
	Counters map[string]int64 `json:"counters"`
}

// getStateRequest writes the tensors of Layout into the "state" region.
type getStateRequest struct {
	Layout []stateEntry `json:"layout"`
}

// stateEntry is one tensor of the state, where it lies in the state region.
type stateEntry struct {
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"`
	Offset int     `json:"offset"`
	Count  int     `json:"count"`
}

// regionRef is a run of float32 values in a region: its byte offset and
// its count.
type regionRef [2]int

// batchRef is a batch of N samples in the "in" region: inputs, targets
// (none to evaluate without a loss) and the targets' mask; or, with Rows
// (a training batch where the worker keeps the training set,
// residentRequest), the samples' indices in it, and no region.
type batchRef struct {
	N    int        `json:"n"`
	X    *regionRef `json:"x"`
	Y    *regionRef `json:"y,omitempty"`
	Mask *regionRef `json:"mask,omitempty"`
	Rows []int      `json:"rows,omitempty"`
}

// residentRequest keeps a training set on the worker's device
// (plan.DataOnDevice, samples.Resident): the shared-memory file at Path,
// Size bytes, holds N samples of Per bytes from byte XOff, their labels
// (a byte each) from YOff and the loader's 256 float32 values, byte v's
// input, from LUTOff. The worker copies them to the device and unmaps
// the file; a batch with Rows is gathered from them.
type residentRequest struct {
	Path   string `json:"path"`
	Size   int    `json:"size"`
	N      int    `json:"n"`
	Per    int    `json:"per"`
	XOff   int    `json:"x_off"`
	YOff   int    `json:"y_off"`
	LUTOff int    `json:"lut_off"`
}

// trainRequest is one micro-batch: forward, loss, backward of the loss
// times Scale. Zero clears the gradients first; Sync says it is the last
// of its step (data parallelism all-reduces on it); Profile times the
// nodes; Step, on a step's last micro-batch, is the optimizer step that
// follows it in the same command.
type trainRequest struct {
	batchRef
	Scale   float64      `json:"scale"`
	Zero    bool         `json:"zero"`
	Sync    bool         `json:"sync"`
	Profile bool         `json:"profile,omitempty"`
	Step    *stepRequest `json:"step,omitempty"`
}

// stepRequest clips the gradients' norm to Clip (0: no clipping), then
// takes one optimizer step at LR. Stop says this rank was asked to stop:
// with data parallelism every rank all-reduces it with the step, and the
// reply's Stop says whether any rank was.
type stepRequest struct {
	LR   float64 `json:"lr"`
	Clip float64 `json:"clip"`
	Stop bool    `json:"stop,omitempty"`
}

// trainStepsRequest is len(Steps) optimizer steps of one micro-batch
// each, run by the worker with no message between them: each zeroes the
// gradients, trains its batch at its Scale, clips at Clip (0: no
// clipping) and steps at its LR, as a train command with its step would.
// The reply's Done holds the steps finished (lagged readback: those of
// the command before); a failure's Done those finished before it.
type trainStepsRequest struct {
	Steps []stepBatch `json:"steps"`
	Clip  float64     `json:"clip"`
}

// stepBatch is one step of a trainStepsRequest: its batch, the scale of
// its gradient and its learning rate.
type stepBatch struct {
	batchRef
	Scale float64 `json:"scale"`
	LR    float64 `json:"lr"`
}

// barrierRequest waits until every rank has sent it (the ranks' stop
// group): ranks that stopped together leave together, so that no
// launcher takes one's early exit for a failure while rank 0 still
// writes the checkpoint.
type barrierRequest struct{}

// flushRequest waits for the device and returns the losses still held
// (lagged readback).
type flushRequest struct{}

// zeroRequest clears the gradients.
type zeroRequest struct{}

// resumeRequest follows a training command's failure once pipe has read
// it: the training commands sent before it were refused (kindSkipped),
// and those after it run again.
type resumeRequest struct{}

// clipRequest clips the gradients' norm to Max now.
type clipRequest struct {
	Max float64 `json:"max"`
}

// evalRequest is a forward pass in evaluation mode, its outputs written
// to Out in the "out" region when set.
type evalRequest struct {
	batchRef
	Out     *regionRef `json:"out,omitempty"`
	Profile bool       `json:"profile,omitempty"`
}

// memoryRequest asks for the device's and the process's peaks; Reset
// starts the device's peaks again after reading them.
type memoryRequest struct {
	Reset bool `json:"reset,omitempty"`
}

// savedRequest is one training forward pass under saved-tensor hooks
// (Saved), the checkpoint segments left out with NoCheckpoint.
type savedRequest struct {
	batchRef
	NoCheckpoint bool `json:"no_checkpoint"`
}

// timePlainRequest times a plain PyTorch loop on the batch (TimePlain).
type timePlainRequest struct {
	batchRef
	LR     float64 `json:"lr"`
	Warmup int     `json:"warmup"`
	Steps  int     `json:"steps"`
}

// torchscriptRequest saves the model, in evaluation mode, as TorchScript
// at Path: traced (checked on a second input), else scripted. Extra are
// the file's extra files, by name. With TargetMean and TargetStd the
// output is restored to the target's units (y·std + mean per output
// channel, or one value for all).
type torchscriptRequest struct {
	Path       string            `json:"path"`
	Extra      map[string]string `json:"extra"`
	TargetMean []float64         `json:"target_mean,omitempty"`
	TargetStd  []float64         `json:"target_std,omitempty"`
}

func (torchscriptRequest) command() string { return "torchscript" }

func (helloRequest) command() string      { return "hello" }
func (quitRequest) command() string       { return "quit" }
func (mapRequest) command() string        { return "map" }
func (buildRequest) command() string      { return "build" }
func (buildGANRequest) command() string   { return "build_gan" }
func (layoutRequest) command() string     { return "layout" }
func (setStateRequest) command() string   { return "set_state" }
func (getStateRequest) command() string   { return "get_state" }
func (trainRequest) command() string      { return "train" }
func (stepRequest) command() string       { return "step" }
func (trainStepsRequest) command() string { return "train_steps" }
func (flushRequest) command() string      { return "flush" }
func (zeroRequest) command() string       { return "zero" }
func (clipRequest) command() string       { return "clip" }
func (evalRequest) command() string       { return "eval" }
func (memoryRequest) command() string     { return "memory" }
func (savedRequest) command() string      { return "saved" }
func (timePlainRequest) command() string  { return "time_plain" }
func (barrierRequest) command() string    { return "barrier" }
func (resumeRequest) command() string     { return "resume" }
func (residentRequest) command() string   { return "resident" }

// The failure kinds.
const (
	kindError       = "error"       // anything else, with a trace
	kindNoTorch     = "no-torch"    // the hello of a Python without torch
	kindOOM         = "oom"         // out of memory
	kindNonFinite   = "nonfinite"   // a NaN or an infinity
	kindUnsupported = "unsupported" // a model or setting this worker does not build
	kindBadBatch    = "bad-batch"   // a batch that does not fit the model
	kindSkipped     = "skipped"     // a training command sent behind one that failed, not run
)

var failureKinds = []string{kindError, kindNoTorch, kindOOM, kindNonFinite, kindUnsupported, kindBadBatch, kindSkipped}

// failure is what every reply carries: OK, and when it is false what went
// wrong. A non-finite value says where (Step to Input), an out-of-memory
// where and how much (Node, Phase, Memory), a Python without torch which
// (Executable, Python).
type failure struct {
	OK    bool   `json:"ok"`
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
	Trace string `json:"trace,omitempty"`

	Step      int64   `json:"step,omitempty"`
	MicroStep int64   `json:"micro_step,omitempty"`
	Loss      *jfloat `json:"loss,omitempty"`
	Node      string  `json:"node,omitempty"`
	Op        string  `json:"op,omitempty"`
	Param     string  `json:"param,omitempty"`
	Input     bool    `json:"input,omitempty"`

	Phase  string       `json:"phase,omitempty"`
	Memory *memoryReply `json:"memory,omitempty"`

	Executable string `json:"executable,omitempty"`
	Python     string `json:"python,omitempty"`

	// Done are the steps of a train_steps command finished before it
	// failed.
	Done []doneStep `json:"done,omitempty"`
}

// response is one line from a worker: its failure part, and its bytes,
// which the command's reply is decoded from (decodeReply).
type response struct {
	failure
	raw []byte
}

// decodeReply reads r as the reply T.
func decodeReply[T any](r response) (T, error) {
	var v T
	err := json.Unmarshal(r.raw, &v)
	return v, err
}

// emptyReply is the reply of a command that answers only ok.
type emptyReply struct{}

// Info is what a worker's Python and torch are and can do: the worker's
// first message.
type Info struct {
	// Protocol is the worker's protocolVersion.
	Protocol        int    `json:"protocol"`
	Python          string `json:"python"`
	Executable      string `json:"executable"`
	Torch           string `json:"torch"`
	CUDA            bool   `json:"cuda"`
	CUDADevices     int    `json:"cuda_devices"`
	CUDAVersion     string `json:"cuda_version"`
	Compile         bool   `json:"compile"`
	Distributed     bool   `json:"distributed"`
	Gloo            bool   `json:"gloo"`
	NCCL            bool   `json:"nccl"`
	CPUBF16Autocast bool   `json:"cpu_bf16_autocast"`
	Threads         int    `json:"threads"`
	GPUs            []GPU  `json:"gpus,omitempty"`
}

// GPU is one CUDA device as torch sees it.
type GPU struct {
	Name       string `json:"name"`
	Memory     int64  `json:"memory"`
	Capability string `json:"capability"`
	BF16       bool   `json:"bf16"`
}

// buildReply is the model built: its parameter count, the engine settings
// applied (and how), its device and the worker's torch.
type buildReply struct {
	Params  int64             `json:"params"`
	Applied map[string]string `json:"applied"`
	Device  string            `json:"device"`
	Torch   string            `json:"torch"`
	// WorldRestarts is the largest Distributed.Restarts of the ranks that
	// met at the rendezvous; 0 without one.
	WorldRestarts int `json:"world_restarts,omitempty"`
}

// paramsReply is a discriminator built: its parameter count.
type paramsReply struct {
	Params int64 `json:"params"`
}

// layoutReply is the state's tensors, their names and shapes, in pipe's
// order (parameters, buffers, the optimizer's buffers).
type layoutReply struct {
	Layout []stateEntry `json:"layout"`
}

// stateReply is the counters of a state written into the state region.
type stateReply struct {
	Counters map[string]int64 `json:"counters"`
}

// stepReply is an optimizer step's: the gradients' norm when it clipped
// them (not with lagged readback), and the steps whose losses came back
// late (lagged readback).
type stepReply struct {
	Norm *jfloat    `json:"norm,omitempty"`
	Done []doneStep `json:"done,omitempty"`
	// Stop: some rank was asked to stop, and every rank stops after this
	// step (data parallelism only).
	Stop bool `json:"stop,omitempty"`
}

// doneStep is an optimizer step whose losses came back late.
type doneStep struct {
	Step   int64    `json:"step"`
	Losses []jfloat `json:"losses"`
	N      []int    `json:"n"`
}

// trainReply is a micro-batch's: its loss (not with lagged readback); a
// gan micro-batch's terms (the discriminator's loss, the generator's
// adversarial term and its L1 distance); when profiled, the spans
// (profile.go); and the step's reply when it carried one.
type trainReply struct {
	stepReply
	Loss *jfloat `json:"loss,omitempty"`
	// Applied is what changed in how the plan is applied since the build
	// reply: torch.compile that failed at the first step falls back to
	// eager, and says why here.
	Applied map[string]string `json:"applied,omitempty"`
	GAN     []jfloat          `json:"gan,omitempty"`
	Spans   [][4]int64        `json:"spans,omitempty"`
	// Phases is where a command's time went in the worker, on a step's
	// command, under PIPE_TORCH_PHASES=1 (phases.go).
	Phases *stepPhases `json:"phases,omitempty"`
}

// stepPhases is one training command's time in the worker by phase (see
// pipe_torch/phases.py), in ms: its steps, the time from the command's
// line read to its reply, the batches' copies, the queueing of the
// steps' work (on the CPU, the work itself, which is then the device's),
// the rest on the host, and the device's time of DeviceSteps steps
// whose end the device had reached.
type stepPhases struct {
	Steps       int     `json:"steps"`
	Total       float64 `json:"total_ms"`
	Copy        float64 `json:"copy_ms"`
	Queue       float64 `json:"queue_ms"`
	Host        float64 `json:"host_ms"`
	Device      float64 `json:"device_ms"`
	DeviceSteps int     `json:"device_steps"`
}

// normReply is the gradients' norm before clipping.
type normReply struct {
	Norm *jfloat `json:"norm"`
}

// evalReply is an evaluation's mean loss (0 without targets) and, when
// profiled, its spans.
type evalReply struct {
	Loss  *jfloat    `json:"loss"`
	Spans [][4]int64 `json:"spans,omitempty"`
}

// memoryReply is the worker's memory: the process's peak, and on a CUDA
// device the allocator's peaks and now, and the device's use.
type memoryReply struct {
	Device       string `json:"device,omitempty"`
	MaxRSS       int64  `json:"max_rss_bytes"`
	MaxAllocated int64  `json:"max_allocated_bytes,omitempty"`
	MaxReserved  int64  `json:"max_reserved_bytes,omitempty"`
	Allocated    int64  `json:"allocated_bytes,omitempty"`
	Reserved     int64  `json:"reserved_bytes,omitempty"`
	Used         int64  `json:"device_used_bytes,omitempty"`
	Total        int64  `json:"device_total_bytes,omitempty"`
}

// savedReply is the bytes autograd saved (Saved): by kind, the
// activations by dtype, and the activations by node ID ("loss" for the
// loss's).
type savedReply struct {
	Bytes              map[string]int64     `json:"bytes"`
	ActivationsByDtype map[string]int64     `json:"activations_by_dtype"`
	Nodes              map[string]SavedPart `json:"nodes"`
}

// SavedPart is the saved bytes of one node or of the loss, by dtype.
type SavedPart struct {
	Bytes  int64            `json:"bytes"`
	Dtypes map[string]int64 `json:"dtypes"`
}

// timePlainReply is the plain loop's timed steps, in milliseconds.
type timePlainReply struct {
	MS []float64 `json:"ms"`
}

// torchscriptReply is how the model became TorchScript ("trace" or
// "script"), the saved graph's node count and the torch that wrote it.
type torchscriptReply struct {
	Method string `json:"method"`
	Nodes  int    `json:"nodes"`
	Torch  string `json:"torch"`
}

// jfloat reads a JSON number, or the strings NaN, Infinity and -Infinity
// (JSON has no non-finite numbers; the worker writes them as strings).
type jfloat float64

func (f *jfloat) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch strings.ToLower(s) {
	case "nan":
		*f = jfloat(math.NaN())
		return nil
	case "inf", "infinity":
		*f = jfloat(math.Inf(1))
		return nil
	case "-inf", "-infinity":
		*f = jfloat(math.Inf(-1))
		return nil
	}
	var v float64
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return err
	}
	*f = jfloat(v)
	return nil
}
