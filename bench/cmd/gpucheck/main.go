// Command gpucheck is make gpu-check: on a machine with an NVIDIA GPU it
// plans every example for cuda:0 with the torch engine, trains each for
// -steps optimizer steps exactly as pipe run drives the engine, on random
// batches of the plan's shapes (no data needed), and prints per example
// the plan's memory estimate beside what the device measured, pipe's
// samples/s beside a plain PyTorch loop's, and how the engine applied the
// plan. It exits 1 when a model fails to build, train or measure. It needs
// no cgo, so make gpu-bundle builds it statically for GPU machines.
//
//	gpucheck [-python python3] [-device cuda:0] [-steps 50] [-warmup 5] [-batch N] [-json FILE] [-spec-dir DIR] [-worker-log] FILE.pipe...
//
// What it compares: docs/design/gpu-check.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"pipe/bench/torchspec"
	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/torch"
	"pipe/planner"
	"pipe/planner/cost"
	"pipe/planner/plan"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Result is one example's figures; the JSON written with -json.
type Result struct {
	Example   string            `json:"example"`
	Device    string            `json:"device"`
	Batch     int64             `json:"batch"`
	Precision string            `json:"precision"`
	Applied   map[string]string `json:"applied,omitempty"`
	Steps     int               `json:"steps"`
	// CUDAGraph says the steps replayed a captured CUDA graph (the
	// worker's applied cuda_graph after the steps), so that a later
	// planner prices the row as it ran (bench/cmd/gpuplan); PlanCUDAGraph
	// is the plan's decision, which PIPE_TORCH_GRAPH=off overrides.
	CUDAGraph     bool `json:"cuda_graph"`
	PlanCUDAGraph bool `json:"plan_cuda_graph"`
	// EstimatedBytes is the plan's Memory.Total, what the device should
	// show; EstimatedReservedBytes the peak phase's reserved memory (the
	// total less the terms outside the allocator), EstimatedAllocatedBytes
	// its allocated memory, PeakPhase which phase. The device's figures
	// come from torch.cuda and mem_get_info after the steps.
	EstimatedBytes          int64  `json:"estimated_bytes"`
	EstimatedReservedBytes  int64  `json:"estimated_reserved_bytes"`
	EstimatedAllocatedBytes int64  `json:"estimated_allocated_bytes"`
	PeakPhase               string `json:"peak_phase,omitempty"`
	MeasuredBytes           int64  `json:"measured_bytes"`
	MaxReservedBytes        int64  `json:"max_reserved_bytes"`
	MaxAllocatedBytes       int64  `json:"max_allocated_bytes"`
	DeviceUsedBytes         int64  `json:"device_used_bytes"`
	// Step1ReservedBytes and Step1AllocatedBytes are the allocator's
	// peaks after the first step (its compile and cudnn.benchmark's
	// trials): the peaks above are over every step, step 1's included.
	Step1ReservedBytes  int64 `json:"step1_max_reserved_bytes,omitempty"`
	Step1AllocatedBytes int64 `json:"step1_max_allocated_bytes,omitempty"`
	// ErrorPercent is the total against MeasuredBytes (kept for older
	// readers); ErrorReservedPercent the reserved estimate against
	// max_memory_reserved, ErrorAllocatedPercent the allocated estimate
	// against max_memory_allocated, ErrorUsedPercent the total against
	// mem_get_info's used memory. OutsideBytes is used less reserved: the
	// context and whatever else is outside the allocator, what the
	// plan's "CUDA context" term is to be calibrated against.
	ErrorPercent          *float64 `json:"error_percent"`
	ErrorReservedPercent  *float64 `json:"error_reserved_percent,omitempty"`
	ErrorAllocatedPercent *float64 `json:"error_allocated_percent,omitempty"`
	ErrorUsedPercent      *float64 `json:"error_used_percent,omitempty"`
	OutsideBytes          int64    `json:"outside_bytes,omitempty"`
	// SamplesPerSecond is pipe's engine over the timed steps, Plain a
	// plain PyTorch loop's on the same network in the same worker.
	SamplesPerSecond      float64 `json:"samples_per_second"`
	PlainSamplesPerSecond float64 `json:"plain_samples_per_second"`
	Error                 string  `json:"error,omitempty"`
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gpucheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	python := fs.String("python", engine.PythonFor("", os.Getenv), "the Python with PyTorch")
	device := fs.String("device", "cuda:0", "the device to plan and train on")
	steps := fs.Int("steps", 50, "optimizer steps per example")
	warm := fs.Int("warmup", 5, "of those, the untimed first ones")
	jsonOut := fs.String("json", "", "also write the results as JSON here")
	batch := fs.Int64("batch", 0, "plan with this batch instead of the file's (0: the file's)")
	specDir := fs.String("spec-dir", "", "also write each example's worker spec (NAME.spec.json) and the worker's package here")
	workerLog := fs.Bool("worker-log", false, "copy the workers' stderr (TORCH_LOGS's graph breaks and recompiles) to stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	files := fs.Args()
	if len(files) == 0 {
		files, _ = filepath.Glob("examples/*.pipe")
	}
	if len(files) == 0 || *warm < 1 || *steps <= *warm {
		fmt.Fprintln(stderr, "usage: gpucheck [-python P] [-device cuda:0] [-steps N] [-warmup W >= 1, < N] FILE.pipe... (default examples/*.pipe)")
		return 2
	}
	info, err := torch.Probe(*python)
	if err != nil {
		fmt.Fprintln(stderr, "gpucheck:", err)
		return 1
	}
	if strings.HasPrefix(*device, "cuda") && !info.CUDA {
		fmt.Fprintf(stderr, "gpucheck: the torch of %s (%s, CUDA %q) sees no GPU\n", info.Executable, info.Torch, info.CUDAVersion)
		return 1
	}
	host := planner.DetectHost().WithEngineHost(plan.EngineTorch, cost.Host{GraphsOff: torch.GraphOff()})
	if len(host.GPUs) == 0 {
		// No nvidia-smi: the GPUs as torch sees them, all memory free.
		for _, g := range info.GPUs {
			host.GPUs = append(host.GPUs, planner.GPUInfo{Name: g.Name, MemTotal: g.Memory, MemFree: g.Memory})
		}
	}
	fmt.Fprintf(stdout, "gpucheck: torch %s (CUDA %s) from %s; %d GPUs", info.Torch, info.CUDAVersion, info.Executable, info.CUDADevices)
	for i, g := range info.GPUs {
		fmt.Fprintf(stdout, "; cuda:%d %s, %s, capability %s", i, g.Name, mib(g.Memory), g.Capability)
	}
	fmt.Fprintf(stdout, "\n%d optimizer steps an example on random batches of the plan's shapes\n\n", *steps)
	if *specDir != "" {
		// The package as this gpucheck embeds it, not an earlier one.
		if err := os.RemoveAll(filepath.Join(*specDir, torch.PackageName)); err != nil {
			fmt.Fprintln(stderr, "gpucheck:", err)
			return 1
		}
		if _, err := torch.WriteScript(*specDir); err != nil {
			fmt.Fprintln(stderr, "gpucheck:", err)
			return 1
		}
	}
	be := torch.Backend{Python: *python}
	if *workerLog {
		be.Log = hclog.New(&hclog.LoggerOptions{Name: "gpucheck", Level: hclog.Debug, Output: stderr})
	}
	var results []Result
	failed := false
	for _, f := range files {
		r := check(f, be, *device, *steps, *warm, *batch, host, *specDir)
		if r.Error != "" {
			failed = true
			fmt.Fprintf(stderr, "gpucheck: %s: %s\n", f, r.Error)
		}
		results = append(results, r)
	}
	print(stdout, results)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "gpucheck:", err)
			return 1
		}
	}
	if failed {
		return 1
	}
	return 0
}

// check plans, builds, trains and measures one example.
func check(path string, be torch.Backend, device string, steps, warm int, batch int64, host planner.HostInfo, specDir string) (r Result) {
	r = Result{Example: strings.TrimSuffix(filepath.Base(path), ".pipe"), Device: device, Steps: steps}
	fail := func(err error) Result { r.Error = err.Error(); return r }
	opts := []planner.Option{planner.WithDevice(device), planner.WithEngine(plan.EngineTorch), planner.WithHost(host)}
	if batch > 0 {
		opts = append(opts, planner.WithBatch(batch))
	}
	ld, err := torchspec.Load(path, 0, opts...)
	if err != nil {
		return fail(err)
	}
	if ld.Plan.Engine.CUDAGraph {
		// The steps are full batches, none partial: no eager last batch
		// runs beside the graph, and the plan says so.
		opts = append(opts, planner.WithBatch(ld.Plan.BatchSize), planner.WithTrainSamples(int64(steps)*ld.Plan.BatchSize, true))
		if ld, err = torchspec.Load(path, 0, opts...); err != nil {
			return fail(err)
		}
	}
	p, g, cfg := ld.Plan, ld.Graph, ld.Config
	r.Batch, r.Precision, r.EstimatedBytes = p.BatchSize, p.Precision.Compute, p.Memory.Total
	r.EstimatedReservedBytes, r.EstimatedAllocatedBytes, r.PeakPhase = estimates(p.Memory)
	if specDir != "" {
		if err := writeSpec(filepath.Join(specDir, r.Example+".spec.json"), ld, device); err != nil {
			return fail(err)
		}
	}
	m, err := be.Build(g, cfg)
	if err != nil {
		return fail(fmt.Errorf("build: %w", err))
	}
	defer m.Close()
	r.PlanCUDAGraph = p.Engine.CUDAGraph
	if a := m.Capabilities().Applied; a != nil {
		r.Applied = a.Applied()
	}
	q := m.Capabilities().Queue
	batches := make([]*dataset.Batch, 4)
	for i := range batches {
		batches[i] = dataset.RandomBatch(g.Input, g.OutShape(), cfg.Loss.Kind, int(p.BatchSize), uint64(i+1))
	}
	lr := p.Optimizer.LR
	var t0 time.Time
	for s := range steps {
		if s == warm {
			if _, err := q.Results(true); err != nil {
				return fail(err)
			}
			t0 = time.Now()
		}
		if err := q.QueueTrain(batches[s%len(batches)], 1, true, true); err != nil {
			return fail(err)
		}
		if err := q.QueueStep(0, lr); err != nil {
			return fail(err)
		}
		if _, err := q.Results(s == 0); err != nil {
			return fail(err)
		}
		if s == 0 {
			if dm, err := m.Capabilities().Devices.DeviceMemory(); err == nil && len(dm) > 0 {
				r.Step1ReservedBytes, r.Step1AllocatedBytes = dm[0].MaxReserved, dm[0].MaxAllocated
			}
		}
	}
	if _, err := q.Results(true); err != nil {
		return fail(err)
	}
	r.SamplesPerSecond = float64(int64(steps-warm)*p.BatchSize) / time.Since(t0).Seconds()
	// After the steps: the worker reports the graph's capture with them.
	if a := m.Capabilities().Applied; a != nil {
		r.Applied = a.Applied()
		r.CUDAGraph = graphRan(r.Applied)
	}
	dm, err := m.Capabilities().Devices.DeviceMemory()
	if err != nil || len(dm) == 0 {
		return fail(fmt.Errorf("device memory: %v", err))
	}
	d := dm[0]
	r.MaxReservedBytes, r.MaxAllocatedBytes, r.DeviceUsedBytes = d.MaxReserved, d.MaxAllocated, d.Used
	r.MeasuredBytes = d.Measured()
	r.ErrorPercent = errorPercent(p.Memory.Total, d.Measured())
	if d.MaxReserved > 0 {
		r.ErrorReservedPercent = errorPercent(r.EstimatedReservedBytes, d.MaxReserved)
		r.ErrorAllocatedPercent = errorPercent(r.EstimatedAllocatedBytes, d.MaxAllocated)
		r.ErrorUsedPercent = errorPercent(p.Memory.Total, d.Used)
		r.OutsideBytes = d.Used - d.MaxReserved
	}
	ms, err := torch.TimePlain(m, batches[0], lr, warm, steps-warm)
	if err != nil {
		return fail(fmt.Errorf("plain loop: %w", err))
	}
	var sum float64
	for _, v := range ms {
		sum += v
	}
	if sum > 0 {
		r.PlainSamplesPerSecond = float64(int64(len(ms))*p.BatchSize) / (sum / 1e3)
	}
	return r
}

// graphRan says the worker's applied settings report a captured CUDA
// graph (pipe_torch/graphs.py: "captured after …"; "eager (…)" or
// "pending: …" where the steps ran eagerly).
func graphRan(applied map[string]string) bool {
	return strings.HasPrefix(applied["cuda_graph"], "captured")
}

// writeSpec writes the spec the worker builds the example from, for a
// script that builds pipe's network in its own process beside a
// hand-written one (bench/gpu/mlp_split.py).
func writeSpec(path string, ld *torchspec.Model, device string) error {
	s, err := torch.NewSpec(ld.Graph, ld.Config, ld.Plan.Optimizer.LR)
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	s.Engine.Device = device
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// estimates returns the plan's reserved and allocated memory at its peak
// phase; a plan without phases (the CPU) gives its total for both.
func estimates(m plan.Memory) (reserved, allocated int64, phase string) {
	if ph, ok := m.Peak(); ok {
		return ph.Reserved, ph.Allocated, ph.Name
	}
	return m.Total, m.Total, ""
}

// errorPercent is (estimate - measured) / measured in percent, nil when
// nothing was measured.
func errorPercent(estimate, measured int64) *float64 {
	if measured <= 0 {
		return nil
	}
	e := 100 * float64(estimate-measured) / float64(measured)
	return &e
}

func pct(e *float64) string {
	if e == nil {
		return "?"
	}
	return fmt.Sprintf("%+.1f%%", *e)
}

// printMemory prints, per example, each estimate beside what the device
// measured, with the error.
func printMemory(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "\n%-12s %-9s %11s %11s %8s %11s %11s %8s %11s %11s %8s %11s %11s\n", "example", "peak", "plan MiB", "used MiB", "error",
		"plan rsv", "max rsv", "error", "plan alloc", "max alloc", "error", "plan ctx", "used-rsv")
	for _, r := range rs {
		if r.Error != "" {
			continue
		}
		ctx := r.EstimatedBytes - r.EstimatedReservedBytes
		fmt.Fprintf(w, "%-12s %-9s %11s %11s %8s %11s %11s %8s %11s %11s %8s %11s %11s\n", r.Example, r.PeakPhase,
			mib(r.EstimatedBytes), mib(r.DeviceUsedBytes), pct(r.ErrorUsedPercent),
			mib(r.EstimatedReservedBytes), mib(r.MaxReservedBytes), pct(r.ErrorReservedPercent),
			mib(r.EstimatedAllocatedBytes), mib(r.MaxAllocatedBytes), pct(r.ErrorAllocatedPercent),
			mib(ctx), mib(r.OutsideBytes))
	}
	fmt.Fprintln(w, "\nplan: the plan's total (its peak phase on the device); used: mem_get_info's used memory (every process on the")
	fmt.Fprintln(w, "device); plan rsv / alloc: the peak phase's reserved and allocated memory; max rsv / alloc: max_memory_reserved and")
	fmt.Fprintln(w, "max_memory_allocated; plan ctx: the terms outside the allocator (the CUDA context); used-rsv: what calibrates it.")
}

func print(w io.Writer, rs []Result) {
	fmt.Fprintf(w, "%-12s %6s %5s %12s %12s %12s %8s %11s %11s %6s  %s\n", "example", "batch", "prec", "planned MiB",
		"measured MiB", "alloc'd MiB", "error", "pipe smp/s", "plain smp/s", "ratio", "applied")
	for _, r := range rs {
		if r.Error != "" {
			fmt.Fprintf(w, "%-12s FAILED: %s\n", r.Example, firstLine(r.Error))
			continue
		}
		e := "?"
		if r.ErrorPercent != nil {
			e = fmt.Sprintf("%+.1f%%", *r.ErrorPercent)
		}
		ratio := math.NaN()
		if r.PlainSamplesPerSecond > 0 {
			ratio = r.SamplesPerSecond / r.PlainSamplesPerSecond
		}
		keys := make([]string, 0, len(r.Applied))
		for k := range r.Applied {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var ap []string
		for _, k := range keys {
			ap = append(ap, k+" "+r.Applied[k])
		}
		fmt.Fprintf(w, "%-12s %6d %5s %12s %12s %12s %8s %11.0f %11.0f %6.3f  %s\n", r.Example, r.Batch, r.Precision,
			mib(r.EstimatedBytes), mib(r.MeasuredBytes), mib(r.MaxAllocatedBytes), e, r.SamplesPerSecond,
			r.PlainSamplesPerSecond, ratio, strings.Join(ap, "; "))
	}
	fmt.Fprintln(w, "\nplanned: the plan's total; measured and alloc'd: torch.cuda.max_memory_reserved and max_memory_allocated")
	fmt.Fprintln(w, "(on the CPU, measured is the worker's peak resident memory); error: (planned - measured) / measured;")
	fmt.Fprintln(w, "ratio: pipe's samples/s over a plain PyTorch loop's on the same network in the same worker.")
	printMemory(w, rs)
}

func mib(n int64) string { return fmt.Sprintf("%.1f", float64(n)/(1<<20)) }

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
