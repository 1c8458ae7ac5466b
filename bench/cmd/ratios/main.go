// Command ratios times pipe's training step beside PyTorch's on the same
// machine, in one run, and prints the ratio pipe/PyTorch per model; and
// times pipe's torch engine beside a plain PyTorch loop on the same
// network, which prints the engine's overhead:
//
//	go run ./bench/cmd/ratios [-rounds 5] [-warmup 5] [-round-time 1.5s] [-threads 0] [-quiet 0.2]
//	                          [-json bench/results.json] [FILE.pipe...]
//
// (make bench runs it after the Go benchmarks). Both sides must compute the
// same numbers on the same batch before anything is timed; they then take
// turns within each round, rounds on a busy machine are run again, and the
// figures are medians. Nothing here asserts a time.
//
// Method: docs/design/bench-ratios.md.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"pipe/bench/torchspec"
	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"
	enginetorch "pipe/engine/torch"
	"pipe/internal/memrun"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	rounds, warmup, steps, threads int
	sgemmN                         int
	engine                         bool
	roundTime, quietWait           time.Duration
	quiet                          float64
	python, script, jsonOut        string
	files                          []string
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ratios", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of interleaved timing")
	fs.IntVar(&o.warmup, "warmup", 5, "untimed steps of each side before its first timed steps (later rounds: 1)")
	fs.IntVar(&o.steps, "steps", 0, "timed steps per side and round (0: from -round-time)")
	fs.DurationVar(&o.roundTime, "round-time", 1500*time.Millisecond, "with -steps 0, about how long one side's timed steps of a round take")
	fs.IntVar(&o.threads, "threads", 0, "compute threads of both sides (0: GOMAXPROCS)")
	fs.BoolVar(&o.engine, "torch-engine", true, "time pipe's torch engine and the plain loop in its worker too (false: pipe and PyTorch only, a shorter run)")
	fs.IntVar(&o.sgemmN, "sgemm-n", 2048, "each round, time an n×n SGEMM through pipe's BLAS on the same threads, the reference for the models' GFLOP/s (0: do not)")
	fs.Float64Var(&o.quiet, "quiet", 0.2, "run a model's round again (at most 3 times) when other processes kept more than this share of the CPUs busy during it; 0: keep every round")
	fs.DurationVar(&o.quietWait, "quiet-wait", time.Minute, "with -quiet, before each model's round, wait up to this long for a second in which other processes stay under -quiet")
	fs.StringVar(&o.python, "python", torchspec.DefaultPython(), "the Python that imports torch (Debian's python3-torch)")
	fs.StringVar(&o.script, "script", "bench/torch_step.py", "PyTorch's side")
	fs.StringVar(&o.jsonOut, "json", "bench/results.json", "write the results here as JSON (empty: do not)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ratios [flags] [FILE.pipe...]   (default bench/models/*.pipe; run from the repository root)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.files = fs.Args()
	if len(o.files) == 0 {
		o.files = defaultFiles()
		if len(o.files) == 0 {
			fmt.Fprintln(stderr, "ratios: no bench/models/*.pipe here; run from the repository root or name the files")
			return 2
		}
	}
	if o.rounds < 1 || o.warmup < 1 || o.steps < 0 || o.threads < 0 {
		fmt.Fprintln(stderr, "ratios: -rounds and -warmup must be at least 1; -steps and -threads not negative")
		return 2
	}
	if o.threads == 0 {
		o.threads = runtime.GOMAXPROCS(0)
	}
	res, err := measure(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "ratios:", err)
		return 1
	}
	res.print(stdout)
	if o.jsonOut != "" {
		if err := memrun.WriteJSON(o.jsonOut, res); err != nil {
			fmt.Fprintln(stderr, "ratios:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.jsonOut)
	}
	return 0
}

// firstModels are the models of the issue, in its order; any other file
// of bench/models follows them.
var firstModels = []string{"mlp.pipe", "fashion_cnn.pipe", "unet_small.pipe"}

func defaultFiles() []string {
	all, _ := filepath.Glob("bench/models/*.pipe")
	var out []string
	for _, f := range firstModels {
		if p := filepath.Join("bench", "models", f); slices.Contains(all, p) {
			out = append(out, p)
		}
	}
	for _, p := range all {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// Results is what one run measured; it is also the JSON written.
type Results struct {
	Date       string `json:"date"`
	Host       Host   `json:"host"`
	Torch      string `json:"torch"`
	Threads    int    `json:"threads"`
	Rounds     int    `json:"rounds"`
	Warmup     int    `json:"warmup"`
	LoadBefore string `json:"loadavg_before"`
	LoadAfter  string `json:"loadavg_after"`
	// Quiet is the -quiet threshold rounds were held to (0: none).
	Quiet float64 `json:"quiet"`
	// SGEMM is the reference matrix product of the same run.
	SGEMM  SGEMM   `json:"sgemm"`
	Models []Model `json:"models"`
}

// SGEMM is an n × n float32 matrix product through pipe's BLAS on the
// run's threads (engine/native.SgemmGFLOPS), timed once per round: GFLOPS is
// the median of the rounds' best calls.
type SGEMM struct {
	N      int       `json:"n"`
	GFLOPS float64   `json:"gflops"`
	Rounds []float64 `json:"round_best_gflops"`
}

// targets are issue 31's ratios pipe/PyTorch per model file: pipe's
// training step at most half of PyTorch's on each of the three.
var targets = map[string]float64{"mlp.pipe": 0.5, "fashion_cnn.pipe": 0.5, "unet_small.pipe": 0.5}

// Host is the machine, as far as the run can tell.
type Host struct {
	CPUs int    `json:"cpus"`
	CPU  string `json:"cpu"`
	Go   string `json:"go"`
	// BLAS is the kernels pipe's products ran on, and who chose them;
	// TorchCore the OPENBLAS_CORETYPE PyTorch's workers inherited ("":
	// the library's own choice, where PyTorch links OpenBLAS).
	BLAS      string `json:"blas"`
	TorchCore string `json:"torch_openblas_coretype,omitempty"`
}

// Model is one model's comparison.
type Model struct {
	Name    string  `json:"name"`
	File    string  `json:"file"`
	Batch   int     `json:"batch"`
	Params  int64   `json:"params"`
	Steps   int     `json:"steps_per_round"`
	Pipe    Side    `json:"pipe"`
	Torch   Side    `json:"torch"`
	Ratio   float64 `json:"ratio_pipe_over_torch"`
	RatioLo float64 `json:"ratio_round_min"`
	RatioHi float64 `json:"ratio_round_max"`
	// Engine is pipe's torch engine on the same network as Torch, and
	// Plain a plain PyTorch loop on the engine's own network inside its
	// worker (the same process, threads and memory, so that nothing but
	// the engine differs); EngineRatio is Engine over Plain: the
	// engine's overhead.
	Engine        Side    `json:"torch_engine"`
	Plain         Side    `json:"plain_loop_in_worker"`
	EngineRatio   float64 `json:"ratio_engine_over_torch"`
	EngineRatioLo float64 `json:"engine_ratio_round_min"`
	EngineRatioHi float64 `json:"engine_ratio_round_max"`
	// Others is, per kept round, the share of all CPUs' time that
	// processes other than the two sides kept busy (from /proc; -1 where
	// unknown); Discarded counts the rounds run again because it was
	// above -quiet.
	Others    []float64 `json:"others_busy_per_round"`
	Discarded int       `json:"discarded_rounds"`
	// Check is torch_step.py's comparison of its numbers with pipe's.
	Check map[string]float64 `json:"check"`
	// StepFLOPs is the plan's FLOPs of one step's forward and backward
	// (plan.StepTime.FLOPs); GFLOPS that over pipe's median step, and
	// SGEMMShare that as a share of the run's SGEMM.
	StepFLOPs  float64 `json:"step_flops"`
	GFLOPS     float64 `json:"gflops"`
	SGEMMShare float64 `json:"sgemm_share,omitempty"`
}

// Side is one side's times in milliseconds per step.
type Side struct {
	Median       float64   `json:"median_ms"`
	Best         float64   `json:"best_ms"`
	RoundMedians []float64 `json:"round_medians_ms"`
	all          []float64
}

func (s *Side) add(ms []float64) {
	s.all = append(s.all, ms...)
	s.RoundMedians = append(s.RoundMedians, memrun.Median(ms))
	s.Median = memrun.Median(s.all)
	s.Best = slices.Min(s.all)
}

// bench is one model on every side.
type bench struct {
	m      *torchspec.Model
	spec   *torchspec.Spec
	model  engine.Model
	engine engine.Model // the torch engine
	batch  *dataset.Batch
	res    Model
	// noEngine leaves the torch engine's side out of the rounds.
	noEngine bool
}

func measure(o options, log io.Writer) (res *Results, err error) {
	dir, err := os.MkdirTemp("", "pipe-ratios-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	res = &Results{Date: time.Now().UTC().Format(time.RFC3339), Threads: o.threads, Rounds: o.rounds, Warmup: o.warmup, Quiet: o.quiet,
		Host: Host{CPUs: runtime.NumCPU(), CPU: memrun.CPUName(), Go: runtime.Version(),
			BLAS: native.BLASKernels(), TorchCore: os.Getenv("OPENBLAS_CORETYPE")}, LoadBefore: memrun.LoadAvg()}
	var benches []*bench
	defer func() {
		for _, b := range benches {
			if b.model != nil {
				b.model.Close()
			}
			if b.engine != nil {
				b.engine.Close()
			}
		}
	}()
	var specs []string
	for _, f := range o.files {
		m, err := torchspec.Load(f, o.threads)
		if err != nil {
			return nil, err
		}
		path, spec, err := m.Write(dir)
		if err != nil {
			return nil, err
		}
		specs = append(specs, path)
		benches = append(benches, &bench{m: m, spec: spec,
			res: Model{Name: spec.Name, File: f, Batch: spec.Batch, Params: spec.Params}})
	}

	// The plain loop builds the network with the torch engine's module.
	if _, err := enginetorch.WriteScript(dir); err != nil {
		return nil, err
	}
	py, err := startTorch(o, dir, log)
	if err != nil {
		return nil, err
	}
	defer py.close()
	for i, b := range benches {
		var info struct {
			Name     string             `json:"name"`
			Params   int64              `json:"params"`
			OutShape []int64            `json:"out_shape"`
			Check    map[string]float64 `json:"check"`
			Torch    string             `json:"torch"`
			Threads  int                `json:"threads"`
		}
		if err := py.call(map[string]any{"cmd": "load", "spec": specs[i]}, &info); err != nil {
			return nil, fmt.Errorf("%s: %w", b.res.File, err)
		}
		// torch_step.py checks these too; checked here again so that a
		// change to either side cannot silently drop the check.
		if info.Params != b.spec.Params {
			return nil, fmt.Errorf("%s: torch has %d parameters, pipe %d", b.res.File, info.Params, b.spec.Params)
		}
		if !slices.Equal(info.OutShape, b.spec.OutShape) {
			return nil, fmt.Errorf("%s: torch's output shape is %v, pipe's %v", b.res.File, info.OutShape, b.spec.OutShape)
		}
		if info.Threads != o.threads {
			return nil, fmt.Errorf("torch runs %d threads, pipe %d", info.Threads, o.threads)
		}
		b.res.Check = info.Check
		res.Torch = info.Torch
		if b.model, err = b.m.Build(); err != nil {
			return nil, fmt.Errorf("%s: %w", b.res.File, err)
		}
		if b.engine, err = (enginetorch.Backend{Python: o.python}).Build(b.m.Graph, b.m.Config); err != nil {
			return nil, fmt.Errorf("%s: the torch engine: %w", b.res.File, err)
		}
		b.noEngine = !o.engine
		b.batch = torchspec.RandomBatch(b.m.Graph, b.m.Config.Loss.Kind, b.spec.Batch, 1)
	}

	pids := []int{py.cmd.Process.Pid}
	for _, b := range benches {
		pids = append(pids, enginetorch.PIDs(b.engine)...)
	}
	res.SGEMM.N = o.sgemmN
	for r := 0; r < o.rounds; r++ {
		if o.sgemmN > 0 {
			g := native.SgemmGFLOPS(o.sgemmN, o.threads, 500*time.Millisecond)
			res.SGEMM.Rounds = append(res.SGEMM.Rounds, g)
			fmt.Fprintf(log, "ratios: round %d/%d sgemm %d×%d: %.1f GFLOP/s (best call)\n", r+1, o.rounds, o.sgemmN, o.sgemmN, g)
		}
		// The first round warms up fully (caches, oneDNN's primitives,
		// page faults); later rounds run one step to bring the side's
		// working set back into the caches after the other side ran.
		warm := min(o.warmup, 1)
		if r == 0 {
			warm = o.warmup
		}
		for _, b := range benches {
			if r == 0 {
				b.res.Steps = o.steps
			}
			var pipeMS, torchMS, engineMS, plainMS []float64
			var others float64
			for attempt := 1; ; attempt++ {
				if o.quiet > 0 {
					waitQuiet(pids, o.quiet, o.quietWait)
				}
				clock := startBusy(pids)
				if pipeMS, torchMS, engineMS, plainMS, err = b.round(py, warm, r, o.roundTime); err != nil {
					return nil, fmt.Errorf("%s: %w", b.res.File, err)
				}
				others = clock.others()
				if o.quiet <= 0 || others <= o.quiet || attempt == maxAttempts {
					break
				}
				b.res.Discarded++
				fmt.Fprintf(log, "ratios: round %d/%d %-12s pipe %8.2f ms  torch %8.2f ms  others busy %3.0f%%: discarded, running it again\n",
					r+1, o.rounds, b.res.Name, memrun.Median(pipeMS), memrun.Median(torchMS), 100*others)
			}
			b.res.Pipe.add(pipeMS)
			b.res.Torch.add(torchMS)
			if !b.noEngine {
				b.res.Engine.add(engineMS)
				b.res.Plain.add(plainMS)
			}
			b.res.Others = append(b.res.Others, others)
			if b.noEngine {
				fmt.Fprintf(log, "ratios: round %d/%d %-12s pipe %8.2f ms  torch %8.2f ms  others busy %3.0f%%\n",
					r+1, o.rounds, b.res.Name, memrun.Median(pipeMS), memrun.Median(torchMS), 100*others)
				continue
			}
			fmt.Fprintf(log, "ratios: round %d/%d %-12s pipe %8.2f ms  torch %8.2f ms  torch engine %8.2f ms (plain loop in its worker %8.2f ms)  others busy %3.0f%%\n",
				r+1, o.rounds, b.res.Name, memrun.Median(pipeMS), memrun.Median(torchMS), memrun.Median(engineMS), memrun.Median(plainMS), 100*others)
		}
	}
	res.LoadAfter = memrun.LoadAvg()
	if len(res.SGEMM.Rounds) > 0 {
		res.SGEMM.GFLOPS = memrun.Median(res.SGEMM.Rounds)
	}
	for _, b := range benches {
		m := &b.res
		m.StepFLOPs = b.m.Plan.StepTime.FLOPs
		m.GFLOPS = m.StepFLOPs / (m.Pipe.Median / 1e3) / 1e9
		if res.SGEMM.GFLOPS > 0 {
			m.SGEMMShare = m.GFLOPS / res.SGEMM.GFLOPS
		}
		m.Ratio = m.Pipe.Median / m.Torch.Median
		m.EngineRatio = m.Engine.Median / m.Plain.Median
		m.RatioLo, m.RatioHi = math.Inf(1), 0
		m.EngineRatioLo, m.EngineRatioHi = math.Inf(1), 0
		for r := range m.Pipe.RoundMedians {
			q := m.Pipe.RoundMedians[r] / m.Torch.RoundMedians[r]
			m.RatioLo, m.RatioHi = min(m.RatioLo, q), max(m.RatioHi, q)
			if b.noEngine {
				continue
			}
			q = m.Engine.RoundMedians[r] / m.Plain.RoundMedians[r]
			m.EngineRatioLo, m.EngineRatioHi = min(m.EngineRatioLo, q), max(m.EngineRatioHi, q)
		}
		if b.noEngine {
			m.EngineRatio, m.EngineRatioLo, m.EngineRatioHi = 0, 0, 0
		}
		res.Models = append(res.Models, *m)
	}
	return res, nil
}

// maxAttempts is how often a model's round is run when other processes
// keep the machine busy during it; the last attempt is kept.
const maxAttempts = 3

// round runs one round of a model: warm untimed and then b.res.Steps
// timed steps of each side, in an order that turns with the round r. The
// first round (b.res.Steps 0) runs pipe first and chooses the steps from
// its warm-up.
func (b *bench) round(py *torch, warm, r int, roundTime time.Duration) (pipeMS, torchMS, engineMS, plainMS []float64, err error) {
	pipe := func() error {
		ms, err := b.pipeSteps(warm)
		if err != nil {
			return err
		}
		if b.res.Steps == 0 {
			n := float64(roundTime) / float64(time.Millisecond) / memrun.Median(ms)
			b.res.Steps = min(max(int(math.Ceil(n)), 5), 1000)
		}
		pipeMS, err = b.pipeSteps(b.res.Steps)
		return err
	}
	torch := func() error {
		var t struct {
			MS []float64 `json:"ms"`
		}
		if err := py.call(map[string]any{"cmd": "time", "name": b.spec.Name, "warmup": warm, "steps": b.res.Steps}, &t); err != nil {
			return err
		}
		if len(t.MS) != b.res.Steps {
			return fmt.Errorf("torch timed %d steps, not %d", len(t.MS), b.res.Steps)
		}
		torchMS = t.MS
		return nil
	}
	// The engine and the plain loop in its worker, in turns.
	engine := func() error {
		eng := func() error {
			if _, err := b.engineSteps(warm); err != nil {
				return err
			}
			var err error
			engineMS, err = b.engineSteps(b.res.Steps)
			return err
		}
		plain := func() error {
			var err error
			plainMS, err = enginetorch.TimePlain(b.engine, b.batch, b.m.LR, warm, b.res.Steps)
			return err
		}
		pair := []func() error{eng, plain}
		if r%2 == 1 {
			pair = []func() error{plain, eng}
		}
		for _, f := range pair {
			if err := f(); err != nil {
				return err
			}
		}
		return nil
	}
	sides := []func() error{pipe, torch, engine}
	if b.noEngine {
		sides = sides[:2]
	}
	if b.res.Steps > 0 {
		k := r % len(sides)
		sides = append(sides[k:], sides[:k]...)
	}
	for _, f := range sides {
		if err := f(); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	return pipeMS, torchMS, engineMS, plainMS, nil
}

// engineSteps runs n training steps of the torch engine's model, each
// waited for, and returns each one's milliseconds (bench/cmd/protocol
// times them queued ahead, as pipe run drives the engine).
func (b *bench) engineSteps(n int) ([]float64, error) {
	q := b.engine.Capabilities().Queue
	ms := make([]float64, 0, n)
	lr := b.m.LR
	for range n {
		t0 := time.Now()
		if err := q.QueueTrain(b.batch, 1, true, true); err != nil {
			return nil, err
		}
		if err := q.QueueStep(0, lr); err != nil {
			return nil, err
		}
		if _, err := q.Results(true); err != nil {
			return nil, err
		}
		ms = append(ms, float64(time.Since(t0))/float64(time.Millisecond))
	}
	return ms, nil
}

// pipeSteps runs n training steps of pipe's model and returns each one's
// milliseconds.
func (b *bench) pipeSteps(n int) ([]float64, error) {
	ms := make([]float64, 0, n)
	lr := b.m.LR
	for range n {
		t0 := time.Now()
		b.model.ZeroGrad()
		if _, err := b.model.TrainStep(b.batch, 1); err != nil {
			return nil, err
		}
		if err := b.model.Step(lr); err != nil {
			return nil, err
		}
		ms = append(ms, float64(time.Since(t0))/float64(time.Millisecond))
	}
	return ms, nil
}

func (r *Results) print(w io.Writer) {
	fmt.Fprintf(w, "\npipe against PyTorch %s on %s: %d threads each, %d interleaved rounds, median ms per training step\n",
		r.Torch, r.Host.CPU, r.Threads, r.Rounds)
	fmt.Fprintf(w, "(load average %s before, %s after; others: the share of the CPUs other processes kept busy in a kept round, at most)\n\n",
		r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(w, "pipe's BLAS: %s\n", r.Host.BLAS)
	if r.Host.TorchCore != "" {
		fmt.Fprintf(w, "PyTorch's workers ran with OPENBLAS_CORETYPE=%s\n", r.Host.TorchCore)
	}
	fmt.Fprintln(w)
	if r.SGEMM.GFLOPS > 0 {
		fmt.Fprintf(w, "SGEMM %d×%d through pipe's BLAS on %d threads: %.1f GFLOP/s (median over the rounds of each round's best call)\n\n",
			r.SGEMM.N, r.SGEMM.N, r.Threads, r.SGEMM.GFLOPS)
	}
	fmt.Fprintf(w, "%-12s %5s %7s %8s %9s %9s %10s %14s %7s %9s %9s %7s\n", "model", "batch", "params", "steps",
		"pipe ms", "torch ms", "pipe/torch", "rounds' ratios", "others", "discarded", "GFLOP/s", "/SGEMM")
	noisy := false
	limit := r.Quiet
	if limit <= 0 {
		limit = 0.2
	}
	for _, m := range r.Models {
		others := "?"
		if _, hi, ok := othersRange(m.Others); ok {
			others = fmt.Sprintf("%.0f%%", 100*hi)
			noisy = noisy || hi > limit
		}
		share := "-"
		if m.SGEMMShare > 0 {
			share = fmt.Sprintf("%.0f%%", 100*m.SGEMMShare)
		}
		fmt.Fprintf(w, "%-12s %5d %7s %8s %9.2f %9.2f %10.2f %14s %7s %9d %9.1f %7s\n", m.Name, m.Batch, count(m.Params),
			fmt.Sprintf("%dx%d", r.Rounds, m.Steps), m.Pipe.Median, m.Torch.Median, m.Ratio,
			fmt.Sprintf("%.2f-%.2f", m.RatioLo, m.RatioHi), others, m.Discarded, m.GFLOPS, share)
	}
	fmt.Fprintln(w, "\ntargets (the issue's): the ratio pipe/torch")
	for _, m := range r.Models {
		base := filepath.Base(m.File)
		if t, ok := targets[base]; ok {
			fmt.Fprintf(w, "  %-12s pipe/torch %.2f, target ≤ %.2f: %s\n", m.Name, m.Ratio, t, verdict(m.Ratio <= t))
		}
	}
	if slices.ContainsFunc(r.Models, func(m Model) bool { return m.Engine.Median > 0 }) {
		fmt.Fprintf(w, "\npipe's torch engine against a plain PyTorch loop on the same network in the same worker process\n(the engine's overhead per step: the batch copied into shared memory and one command each way; target at most 1.05)\n\n")
		fmt.Fprintf(w, "%-12s %5s %12s %9s %12s %14s %14s\n", "model", "batch", "engine ms", "plain ms", "engine/plain", "rounds' ratios", "overhead ms")
		for _, m := range r.Models {
			fmt.Fprintf(w, "%-12s %5d %12.2f %9.2f %12.3f %14s %14.3f\n", m.Name, m.Batch, m.Engine.Median, m.Plain.Median, m.EngineRatio,
				fmt.Sprintf("%.3f-%.3f", m.EngineRatioLo, m.EngineRatioHi), m.Engine.Median-m.Plain.Median)
		}
	}
	if noisy {
		fmt.Fprintf(w, "\nwarning: other processes kept more than %.0f%% of the CPUs busy in some rounds; PyTorch's OpenMP threads\n"+
			"above all slow down then, so these ratios flatter pipe. Run again on a quiet machine.\n", 100*limit)
	}
	fmt.Fprintln(w, "\nchecks (torch with pipe's parameters on pipe's batch; relative differences):")
	for _, m := range r.Models {
		c := m.Check
		line := fmt.Sprintf("  %-12s params %d on both sides, outputs %.1e, evaluation loss %.1e", m.Name, m.Params,
			c["out_rel_diff"], c["eval_loss_rel_diff"])
		if v, ok := c["train_loss_rel_diff"]; ok {
			line += fmt.Sprintf(", training loss %.1e", v)
		} else {
			line += ", training loss not compared (dropout)"
		}
		fmt.Fprintln(w, line)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

func count(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// busyClock measures the CPU time the rest of the machine takes: all
// CPUs' busy time from /proc/stat less this process's and its Python
// children's.
type busyClock struct {
	child       []int
	wall        time.Time
	all, ours   int64
	unavailable bool
}

func startBusy(child []int) busyClock {
	c := busyClock{child: child, wall: time.Now()}
	var err error
	if c.all, c.ours, err = busyTicks(child); err != nil {
		c.unavailable = true
	}
	return c
}

// others is the share of all CPUs' time since startBusy that other
// processes kept busy, or -1 when /proc cannot tell.
func (c busyClock) others() float64 {
	all, ours, err := busyTicks(c.child)
	if c.unavailable || err != nil {
		return -1
	}
	const hz = 100 // USER_HZ, the unit of /proc's times on Linux
	total := time.Since(c.wall).Seconds() * hz * float64(runtime.NumCPU())
	if total <= 0 {
		return -1
	}
	return min(max(float64((all-c.all)-(ours-c.ours))/total, 0), 1)
}

// busyTicks reads the busy ticks of all CPUs and the ticks of this process
// and of pids.
func busyTicks(pids []int) (all, ours int64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		all += n
	}
	paths := []string{"/proc/self/stat"}
	for _, pid := range pids {
		paths = append(paths, fmt.Sprintf("/proc/%d/stat", pid))
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, 0, err
		}
		// The fields after the command's closing parenthesis: state is
		// the 3rd field of the line, utime and stime the 14th and 15th.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			return 0, 0, fmt.Errorf("%s: no command name", p)
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			return 0, 0, fmt.Errorf("%s: too few fields", p)
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, 0, err
			}
			ours += n
		}
	}
	return all, ours, nil
}

// waitQuiet waits, at most max, for a second in which other processes
// keep at most the share quiet of the CPUs busy.
func waitQuiet(child []int, quiet float64, max time.Duration) {
	for deadline := time.Now().Add(max); time.Now().Before(deadline); {
		c := startBusy(child)
		time.Sleep(time.Second)
		if f := c.others(); f >= 0 && f <= quiet {
			return
		}
	}
}

func othersRange(v []float64) (lo, hi float64, ok bool) {
	lo = math.Inf(1)
	for _, f := range v {
		if f < 0 {
			return 0, 0, false
		}
		lo, hi = min(lo, f), max(hi, f)
	}
	return lo, hi, len(v) > 0
}

// torch is torch_step.py in --serve mode.
type torch struct {
	cmd *osexec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startTorch(o options, moduleDir string, log io.Writer) (*torch, error) {
	probe := osexec.Command(o.python, "-c", "import torch")
	if out, err := probe.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s cannot import torch (install Debian's python3-torch, or give -python): %v\n%s", o.python, err, out)
	}
	cmd := osexec.Command(o.python, o.script, "--serve", "--threads", fmt.Sprint(o.threads), "--module-dir", moduleDir)
	cmd.Stderr = log
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &torch{cmd: cmd, in: in, out: sc}, nil
}

// call sends one command and decodes the answer into v.
func (t *torch) call(cmd map[string]any, v any) error {
	js, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	if _, err := t.in.Write(append(js, '\n')); err != nil {
		return fmt.Errorf("torch_step.py: %w", err)
	}
	if !t.out.Scan() {
		if err := t.out.Err(); err != nil {
			return fmt.Errorf("torch_step.py: %w", err)
		}
		return errors.New("torch_step.py exited")
	}
	var head struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	line := t.out.Bytes()
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("torch_step.py: %w in %q", err, line)
	}
	if !head.OK {
		return fmt.Errorf("torch_step.py: %s", head.Error)
	}
	return json.Unmarshal(line, v)
}

func (t *torch) close() {
	if _, err := t.in.Write([]byte(`{"cmd": "quit"}` + "\n")); err == nil {
		t.in.Close()
	}
	_ = t.cmd.Wait()
}
