package workflow

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"pipe/diag"
	"pipe/engine"
	"pipe/engine/costs"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
	"pipe/run/forecast"
	"pipe/spec"
	"pipe/stdlib"
)

// Workflow plans and sets up engines with one set of fact sources. A
// command makes one; the language server keeps one for its session, so
// that the host is measured once. It is safe for concurrent use.
type Workflow struct {
	detectHost func() planner.HostInfo
	probe      func(python string) (engine.Runtime, error)
	engines    func(engine.Setup) []engine.Backend
	python     string
	log        hclog.Logger

	hostOnce sync.Once
	host     planner.HostInfo
	// facts caches the data's facts for the language server.
	facts factCache
	// forecasts says plans may carry forecasts (WithForecasts), cached in
	// forecastCache.
	forecasts     bool
	forecastCache string
}

// Option sets an optional knob of New.
type Option func(*Workflow)

// WithHost measures the machine with f instead of DetectHost;
// tests use it so that no plan depends on the machine that runs them.
func WithHost(f func() planner.HostInfo) Option { return func(w *Workflow) { w.detectHost = f } }

// WithProbe asks an engine's worker what it has with f instead of the
// probe the engine registered (engine.Registration); tests give fakes.
func WithProbe(f func(python string) (engine.Runtime, error)) Option {
	return func(w *Workflow) { w.probe = f }
}

// WithEngines gives the engines a run may use, set up as given, instead
// of the registered ones; tests give fakes.
func WithEngines(f func(engine.Setup) []engine.Backend) Option {
	return func(w *Workflow) { w.engines = f }
}

// WithPython runs the engines' workers with this Python.
func WithPython(python string) Option { return func(w *Workflow) { w.python = python } }

// WithLogger logs the engines' set-up and their workers' stderr.
func WithLogger(l hclog.Logger) Option { return func(w *Workflow) { w.log = l } }

// New returns a Workflow that measures this machine and starts the
// registered engines, unless told otherwise.
func New(opts ...Option) *Workflow {
	w := &Workflow{
		detectHost: DetectHost,
		engines:    registered,
		python:     "python3",
		log:        hclog.NewNullLogger(),
	}
	for _, o := range opts {
		o(w)
	}
	return w
}

// registered is every registered engine, set up as s says.
func registered(s engine.Setup) []engine.Backend {
	var out []engine.Backend
	for _, r := range engine.Registered() {
		out = append(out, r.New(s))
	}
	return out
}

// hostInfo is the machine's facts, measured once per Workflow.
func (w *Workflow) hostInfo() planner.HostInfo {
	w.hostOnce.Do(func() { w.host = w.detectHost() })
	return w.host
}

// Devices lists the devices a plan can target on this machine: the
// host's, the built-in profiles and prog's device blocks (prog may be nil).
func (w *Workflow) Devices(prog *lang.Program) []plan.Device {
	var sp *spec.Program
	if prog != nil {
		dec, _ := decode(prog)
		sp = specOf(dec)
	}
	return planner.Devices(sp, w.hostInfo())
}

// Request is what a command asks to plan: the flags that override the
// file. Zero values leave the file's choice.
type Request struct {
	Purpose Purpose
	// Source is the file's bytes, whose hash the plan carries.
	Source []byte
	// Device, Batch and Engine override the file's fields (--device,
	// --batch, --engine).
	Device string
	Batch  int64
	Engine string
	// NProcPerNode and NNodes ask for data parallelism; Network is the
	// bandwidth between machines in bytes per second (planner.WithNetwork;
	// 0: planner.DefaultNetwork).
	NProcPerNode, NNodes int
	Network              float64
	// Serve plans serving when the file has no serve block.
	Serve bool
	// Overrides are the --set flags the program was read with, which the
	// plan records (plan.Plan.Overrides).
	Overrides []string
	// Forecast asks for the plan's forecast (WithForecasts), timed with
	// the engine's Threads as the run will set them.
	Forecast bool
	Threads  int
	// Node is the machine each of the plan's nodes is, where it is not
	// this one (pipe launch for a cluster's nodes); zero fields are this
	// machine's.
	Node Node
	// Versions is, by engine name, the library version to price a plan
	// for where no worker is asked (pipe plan --torch-version); none
	// leaves it to the engine, which may assume one. A run prices its
	// worker's instead.
	Versions map[string]string
	// DataElsewhere says the data is read where the plan runs, not here
	// (pipe launch: a cluster's shared file system, a pod's volume): a
	// source this machine cannot read is a warning that the plan leaves
	// its facts out, not the run's error; a shape that does not fit the
	// model stays an error.
	DataElsewhere bool
}

// Node is a cluster's node as pipe launch is told it: its CPU cores and
// memory in bytes, which the loader's workers and buffers (and on the
// CPU the device) are planned for instead of this machine's.
type Node struct {
	CPUs   int
	Memory int64
}

// on is host with the node's facts where they are given.
func (n Node) on(host planner.HostInfo) planner.HostInfo {
	if n.CPUs > 0 {
		host.Cores = n.CPUs
		host.CPUFLOPS, host.CPUBandwidth = 0, 0 // measured on this machine, not the node
	}
	if n.Memory > 0 {
		host.MemTotal, host.MemAvailable = n.Memory, n.Memory
	}
	return host
}

// Planned is a plan and what was learnt while making it.
type Planned struct {
	Plan *plan.Plan
	// Program is the file decoded into specs, once, for everything that
	// runs the plan; nil when it did not decode (the diagnostics say why).
	Program *stdlib.Program
	// Runtime is what the plan's engine's worker said, when it was asked.
	Runtime *engine.Runtime
	// FellBack is set when device auto found a GPU that the engine auto
	// took cannot use, and the plan is for the CPU instead.
	FellBack *Fallback
	purpose  Purpose
	// forecastOpts are the options its forecast was made with (nil:
	// none was), for RecordStep.
	forecastOpts *forecast.Options
	// localGPUs is the GPUs this machine showed when it was planned, -1
	// when not asked.
	localGPUs int
}

// Fallback says why a GPU found by device auto was given up.
type Fallback struct {
	Device string // the GPU given up
	Err    error  // why the engine cannot start
}

// Reason is the first line of why the engine cannot start.
func (f *Fallback) Reason() string {
	s := f.Err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// Plan gathers the facts the purpose needs and plans prog with them; the
// plan is nil, or partial, when the diagnostics have errors. ctx stops
// the planning (the language server cancels it on a newer edit).
func (w *Workflow) Plan(ctx context.Context, prog *lang.Program, req Request) (*Planned, diag.Diagnostics) {
	dec, dds := decode(prog)
	if dec == nil {
		return &Planned{purpose: req.Purpose}, dds
	}
	f := w.gather(dec.Spec, req.Purpose)
	f.host = req.Node.on(f.host)
	for name, v := range req.Versions {
		if v != "" {
			f.host = withVersion(f.host, name, v)
		}
	}
	out := &Planned{Program: dec, purpose: req.Purpose, localGPUs: len(f.host.GPUs)}
	p, ds := w.plan(ctx, dec, req, f, req.Device, 0)
	if req.Purpose.runs() {
		p, ds = w.decideRun(ctx, dec, req, f, out, p, ds)
		if v := w.runtimeForAttention(out, p); v != "" {
			// Attention's kernels, and on a GPU torch.compile and the
			// fused optimizers, and so the memory, depend on the worker's
			// library: plan again with it.
			f.host = withVersion(f.host, p.EngineName(), v)
			p, ds = w.plan(ctx, dec, req, f, req.Device, 0)
			p, ds = w.decideRun(ctx, dec, req, f, out, p, ds)
		}
	}
	out.Plan = carrySources(p, dec)
	if req.Purpose == ForPlan || req.Purpose == ForRun {
		ds = append(ds, f.read.diagnostics(dec, out.Plan, req.DataElsewhere)...)
	}
	if out.Plan != nil {
		out.Plan.Overrides = req.Overrides
		w.forecast(out, req, f.validation)
	}
	return out, append(ds, dds...)
}

// withVersion is h where engine name's library is version v.
func withVersion(h planner.HostInfo, name, v string) planner.HostInfo {
	e := h.Engines[name]
	e.Version = v
	return h.WithEngineHost(name, e)
}

// DetectHost measures this machine (planner.DetectHost) and asks each
// registered engine what it reads of it (cost.HostProber).
func DetectHost() planner.HostInfo {
	h := planner.DetectHost()
	for _, e := range costs.Engines() {
		if p, ok := e.(cost.HostProber); ok {
			h = h.WithEngineHost(e.Name(), p.ProbeHost())
		}
	}
	return h
}

// runtimeForAttention is the version of the worker's library when a
// run's plan is for an engine with a worker and prices attention, or is
// on a GPU (whose compile and fused optimizers depend on it too), the
// probe made here rather than when the engine starts; "" when not
// needed, or when the probe fails (the engine's set-up says why). The
// probe's answer is kept for the engine's check.
func (w *Workflow) runtimeForAttention(out *Planned, p *plan.Plan) string {
	if p == nil || p.Backend != plan.BackendGPU && !slices.ContainsFunc(p.Decisions, func(d plan.Decision) bool { return d.What == "attention" }) {
		return ""
	}
	probe := w.prober(p.EngineName())
	if probe == nil {
		return ""
	}
	if out.Runtime == nil {
		rt, err := probe(w.python)
		if err != nil {
			return ""
		}
		out.Runtime = &rt
	}
	return out.Runtime.Version
}

// decode decodes a checked program into its specs (stdlib.Decode); nil
// when that fails, which only a schema and spec out of step can cause.
func decode(prog *lang.Program) (*stdlib.Program, diag.Diagnostics) {
	dec, ds := stdlib.Decode(prog)
	if ds.HasErrors() {
		return nil, ds
	}
	return dec, ds
}

func specOf(dec *stdlib.Program) *spec.Program {
	if dec == nil {
		return nil
	}
	return dec.Spec
}

// carrySources gives plan p the source specs it was planned with, as the
// run will read them, without their positions in the file.
func carrySources(p *plan.Plan, dec *stdlib.Program) *plan.Plan {
	if p == nil || dec == nil {
		return p
	}
	p.Sources = make([]spec.Source, len(dec.Spec.Sources))
	for i, s := range dec.Spec.Sources {
		p.Sources[i] = *s
		p.Sources[i].At = spec.Where{}
	}
	return p
}

// plan calls the planner once: device overrides the request's device,
// and nproc is the data parallelism to take when the request gives none.
func (w *Workflow) plan(ctx context.Context, prog *stdlib.Program, req Request, f facts, device string, nproc int) (*plan.Plan, diag.Diagnostics) {
	opts := []planner.Option{planner.WithCosts(costs.Engines()...), planner.WithHost(f.host)}
	if req.Source != nil {
		opts = append(opts, planner.WithSource(req.Source))
	}
	if ctx != nil {
		opts = append(opts, planner.WithContext(ctx))
	}
	opts = append(opts, f.data...)
	if d := req.Purpose.device(); d != "" {
		device = d
	}
	if device != "" {
		opts = append(opts, planner.WithDevice(device))
	}
	if req.Batch > 0 {
		opts = append(opts, planner.WithBatch(req.Batch))
	}
	if req.Engine != "" {
		opts = append(opts, planner.WithEngine(req.Engine))
	}
	n := req.NProcPerNode
	if n == 0 {
		n = nproc
	}
	if n > 1 || req.NNodes > 1 {
		opts = append(opts, planner.WithDevices(n, req.NNodes))
	}
	if req.Network > 0 {
		opts = append(opts, planner.WithNetwork(req.Network))
	}
	if req.Serve || req.Purpose == ForServe {
		opts = append(opts, planner.WithServe())
	}
	return planner.Plan(prog, opts...)
}
