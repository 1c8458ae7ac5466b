package planner

import (
	"context"

	"pipe/planner/cost"
)

// Option sets an optional knob of Plan.
type Option func(*config)

type config struct {
	device string
	engine string
	batch  int64
	host   *HostInfo
	src    []byte
	nproc  int
	nnodes int
	// network is the bandwidth between machines (WithNetwork), 0 for
	// DefaultNetwork.
	network float64
	// samples is the training set's size, 0 when unknown; samplesExact
	// says it is exact (a raster's is an upper bound).
	samples      int64
	samplesExact bool
	ctx          context.Context
	data         func(inElems int64) (int64, string)
	predict      func(outChannels int64) (int64, string)
	// predictW and predictH are the scene predict reads (a geotiff
	// source), 0 when unknown.
	predictW, predictH int64
	// serve plans serving without a serve block (planner.WithServe).
	serve bool
	// costs are the engines' cost models (WithCosts).
	costs []cost.Engine
	// largest keeps an auto batch on the CPU at the largest that fits,
	// without cpuSaturation: the planner's tests of the memory bounds.
	largest bool
	// deviceData is the training set's form on a device (WithDeviceData);
	// onCPU lets the CPU's torch worker keep it too (WithDataOnDevice).
	deviceData *DeviceData
	onCPU      bool
}

// WithCosts gives the engines' cost models, by which the planner prices
// a plan's memory as the plan's engine runs it (package cost). The
// planner imports no engine, so its callers hand them in; a plan for an
// engine without one stops at an error diagnostic.
func WithCosts(engines ...cost.Engine) Option {
	return func(c *config) { c.costs = append(c.costs, engines...) }
}

// WithPredictRaster gives the size in pixels of the scene a geotiff
// predict reads: the native engine counts the output it blends and
// writes (process.go), on a grid as many times finer as the model's
// output is larger than its input (super-resolution).
func WithPredictRaster(width, height int64) Option {
	return func(c *config) { c.predictW, c.predictH = width, height }
}

// WithDevice plans for the named device instead of the file's device
// field: cpu, auto, cuda:N, a built-in profile or a device block of the
// file. An unknown name is an error diagnostic with a "did you mean".
func WithDevice(name string) Option { return func(c *config) { c.device = name } }

// WithBatch asks "does this batch fit?": the plan uses batch n whatever
// the file says, and reports at the file's batch line when it does not fit.
func WithBatch(n int64) Option { return func(c *config) { c.batch = n } }

// WithHost gives the facts of the machine instead of measuring it with
// DetectHost; golden tests use it so that no plan depends on the machine
// that runs them.
func WithHost(h HostInfo) Option { return func(c *config) { hc := h; c.host = &hc } }

// WithSource gives the bytes of the file the program was checked from, so
// the plan carries their sha256 and the executor can refuse a plan whose
// source changed (Plan.Verify).
func WithSource(src []byte) Option { return func(c *config) { c.src = src } }

// WithEngine plans for the named engine instead of the file's engine
// field: auto, native or torch.
func WithEngine(name string) Option { return func(c *config) { c.engine = name } }

// WithDevices plans data-parallel training on nprocPerNode devices on
// each of nnodes machines (torchrun's --nproc-per-node and --nnodes): the
// batch is per device, and the effective batch is batch × devices ×
// accumulation. Zero values mean one.
func WithDevices(nprocPerNode, nnodes int) Option {
	return func(c *config) { c.nproc, c.nnodes = nprocPerNode, nnodes }
}

// WithTrainSamples gives the training set's size (after its split), as
// the data layer counts it without loading it: an explicit batch larger
// than it is an error, and an auto batch keeps at least MinStepsPerEpoch
// optimizer steps an epoch. exact is false for an upper bound.
func WithTrainSamples(n int64, exact bool) Option {
	return func(c *config) { c.samples, c.samplesExact = n, exact }
}

// WithContext lets ctx stop the planning: once ctx is done, Plan returns
// a nil plan and one error diagnostic with code CodeCancelled, within a few
// thousand steps of whatever it was doing (the checkpoint programme polls
// ctx as it works). The language server passes the context that a newer
// edit of the file cancels.
func WithContext(ctx context.Context) Option { return func(c *config) { c.ctx = ctx } }

// DeviceData is what the training set's samples take on a device that
// keeps them and gathers batches by index there, as the data layer says
// from the source's spec and headers (dataset.DeviceFormOf): Bytes, and
// What they are; or Not, why a device cannot make the loader's batches
// from them exactly.
type DeviceData struct {
	Bytes int64
	What  string
	Not   string
}

// WithDeviceData gives the training set's form on a device, which the
// plan's data-on-device decision reads (plan.DataOnDevice); without it
// the data stays on the host.
func WithDeviceData(d DeviceData) Option { return func(c *config) { c.deviceData = &d } }

// WithDataOnDevice lets a plan on the CPU keep the training set in the
// torch worker and gather its batches there, as on a GPU, where the
// plan would otherwise leave it in pipe's process (the worker reads
// batches from shared memory with no copy): the device path run on the
// CPU, which tests hold to the host path's losses.
func WithDataOnDevice(onCPU bool) Option { return func(c *config) { c.onCPU = onCPU } }

// WithDataMemory gives what the sources a run opens hold in memory, as a
// function of the model's input size per sample (a CSV source's rows
// become the input): the bytes and what they are. The CPU backend counts
// them in the process's total (process.go); dataset's ResidentBytes
// computes them without loading the data.
func WithDataMemory(f func(inElems int64) (bytes int64, what string)) Option {
	return func(c *config) { c.data = f }
}
