// Command protocol measures the torch engine's own overhead per training
// step: pipe driving its worker against a plain PyTorch loop on the same
// network, optimizer and batch in the same worker process.
//
//	go run ./bench/cmd/protocol [-model bench/models/mlp.pipe] [-threads 1] [-rounds 5]
//	                            [-steps 1000] [-k 32] [-json bench/protocol.json]
//
// (make bench runs it.) Each round times four sides in turns: the engine
// as pipe run drives it one step a command (each step queued before the
// one before it has replied), the same with -k steps a command
// (QueueSteps, plan.StepsPerCommand), the engine waited for step by step
// (a round trip a step), and the plain loop; the figures are each round's mean per step, and their
// medians over the rounds. The overhead is the engine's mean less the
// plain loop's. Nothing here asserts a time.
//
// -threads 1 gives the worker one compute thread and leaves the host's
// other cores to pipe's side, as a GPU machine's host does; -threads 0
// gives it every core, where on a small host pipe's own work then takes
// time from the worker's threads. Each side's CPU time a step, the
// worker's and pipe's (the kernel's schedstat), is kept beside the
// clock: other processes' load moves it far less. Method:
// docs/design/torch-protocol.md.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"pipe/bench/torchspec"
	"pipe/dataset"
	"pipe/engine"
	enginetorch "pipe/engine/torch"
	"pipe/internal/memrun"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Result is what -json writes.
type Result struct {
	Date    string `json:"date"`
	Host    Host   `json:"host"`
	Torch   string `json:"torch"`
	Model   string `json:"model"`
	Batch   int    `json:"batch"`
	Params  int64  `json:"params"`
	Threads int    `json:"worker_threads"`
	Rounds  int    `json:"rounds"`
	Steps   int    `json:"steps_per_round"`
	// Each side's mean ms per step, per round, and their median.
	Ahead  Side `json:"engine_queued_ahead"`
	Unit   Side `json:"engine_steps_per_command"`
	Waited Side `json:"engine_waited_each_step"`
	Plain  Side `json:"plain_loop_in_worker"`
	// K is Unit's steps a command.
	K int `json:"steps_per_command"`
	// LossReadback is the engine's: sync, or lagged as on a GPU.
	LossReadback string `json:"loss_readback"`
	// OverheadMS is Ahead's median less Plain's (as pipe run drives the
	// engine one step a command); UnitOverheadMS Unit's, WaitedOverheadMS
	// Waited's.
	OverheadMS       float64 `json:"overhead_ms"`
	UnitOverheadMS   float64 `json:"steps_per_command_overhead_ms"`
	WaitedOverheadMS float64 `json:"waited_overhead_ms"`
	// WorkerCPUOverheadMS is Ahead's worker CPU time a step less
	// Plain's, UnitWorkerCPUOverheadMS Unit's: what the worker does for
	// a step beyond the network's own loop (whose zero_grad frees the
	// gradients and allocates them again each step, so this may fall
	// below 0). FloorStepMS and FloorCommandMS split pipe's own CPU time
	// a step (Ahead's PipeCPU = step + command, Unit's = step +
	// command/K) into what a step costs at any K and what a command
	// costs, shared by its K steps: the torch engine's host floor on the
	// CPU (engine/torch's host_floor.json), where the worker has every
	// core and pipe's work takes time from its compute.
	WorkerCPUOverheadMS     float64 `json:"worker_cpu_overhead_ms"`
	UnitWorkerCPUOverheadMS float64 `json:"steps_per_command_worker_cpu_overhead_ms"`
	FloorStepMS             float64 `json:"floor_step_ms"`
	FloorCommandMS          float64 `json:"floor_command_ms"`
	LoadBefore              string  `json:"load_before"`
	LoadAfter               string  `json:"load_after"`
}

// Host is the machine the figures were measured on.
type Host struct {
	CPU  string `json:"cpu"`
	CPUs int    `json:"cpus"`
	Go   string `json:"go"`
}

// Side is one side's mean ms per step in each round, and their median;
// WorkerCPU and PipeCPU the same of the CPU time the worker's threads
// and pipe's process spent a step (the kernel's schedstat), which other
// processes' load moves far less than the clock.
type Side struct {
	Rounds    []float64 `json:"round_means_ms"`
	Median    float64   `json:"median_ms"`
	WorkerCPU []float64 `json:"worker_cpu_ms,omitempty"`
	PipeCPU   []float64 `json:"pipe_cpu_ms,omitempty"`
	// WorkerCPUMedian and PipeCPUMedian are their medians.
	WorkerCPUMedian float64 `json:"worker_cpu_median_ms,omitempty"`
	PipeCPUMedian   float64 `json:"pipe_cpu_median_ms,omitempty"`
}

func (s *Side) add(ms, worker, pipe float64) {
	s.Rounds = append(s.Rounds, ms)
	s.Median = memrun.Median(s.Rounds)
	if worker >= 0 && pipe >= 0 {
		s.WorkerCPU, s.PipeCPU = append(s.WorkerCPU, worker), append(s.PipeCPU, pipe)
		s.WorkerCPUMedian, s.PipeCPUMedian = memrun.Median(s.WorkerCPU), memrun.Median(s.PipeCPU)
	}
}

type options struct {
	model, python, jsonOut string
	threads, rounds, steps int
	warmup, k              int
	lagged                 bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("protocol", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.model, "model", "bench/models/mlp.pipe", "the model, a tiny one: the overhead is per step")
	fs.StringVar(&o.python, "python", torchspec.DefaultPython(), "the Python that imports torch")
	fs.StringVar(&o.jsonOut, "json", "bench/protocol.json", "write the result here (empty: do not)")
	fs.IntVar(&o.threads, "threads", 1, "the worker's compute threads (0: every core)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds, each side once a round, in turns")
	fs.IntVar(&o.steps, "steps", 1000, "timed steps per side and round")
	fs.IntVar(&o.warmup, "warmup", 50, "untimed steps of each side before its first round")
	fs.IntVar(&o.k, "k", 32, "steps a command on the side that sends several (QueueSteps)")
	fs.BoolVar(&o.lagged, "lagged", false, "the engine reads losses back lagged, as a GPU plan does (no loss read and no gradient check a step)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.threads == 0 {
		o.threads = runtime.NumCPU()
	}
	if o.rounds < 1 || o.steps < 1 || o.warmup < 1 || o.threads < 0 || o.k < 1 {
		fmt.Fprintln(stderr, "protocol: -rounds, -steps, -warmup and -k must be at least 1")
		return 2
	}
	res, err := measure(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "protocol:", err)
		return 1
	}
	res.print(stdout)
	if o.jsonOut != "" {
		if err := memrun.WriteJSON(o.jsonOut, res); err != nil {
			fmt.Fprintln(stderr, "protocol:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.jsonOut)
	}
	return 0
}

func measure(o options, log io.Writer) (*Result, error) {
	m, err := torchspec.Load(o.model, o.threads)
	if err != nil {
		return nil, err
	}
	if o.lagged {
		m.Config.Engine.LossReadback = "lagged"
	} else if m.Config.Engine.LossReadback == "" {
		m.Config.Engine.LossReadback = "sync" // the engine's default
	}
	eng, err := (enginetorch.Backend{Python: o.python}).Build(m.Graph, m.Config)
	if err != nil {
		return nil, fmt.Errorf("the torch engine: %w", err)
	}
	defer eng.Close()
	q := eng.Capabilities().Queue
	b := torchspec.RandomBatch(m.Graph, m.Config.Loss.Kind, m.Config.Batch, 1)
	res := &Result{Date: time.Now().UTC().Format(time.RFC3339), Host: Host{CPU: memrun.CPUName(), CPUs: runtime.NumCPU(), Go: runtime.Version()},
		Torch: enginetorch.TorchVersion(eng), Model: m.Name(), Batch: m.Config.Batch, Params: m.Graph.Params(),
		Threads: o.threads, Rounds: o.rounds, Steps: o.steps, K: o.k, LossReadback: m.Config.Engine.LossReadback, LoadBefore: memrun.LoadAvg()}

	ahead := func(n int) (float64, error) { return steps(q, b, m.LR, n, 1, false) }
	unit := func(n int) (float64, error) { return steps(q, b, m.LR, n, o.k, false) }
	waited := func(n int) (float64, error) { return steps(q, b, m.LR, n, 1, true) }
	plain := func(n int) (float64, error) {
		ms, err := enginetorch.TimePlain(eng, b, m.LR, 1, n)
		if err != nil {
			return 0, err
		}
		var sum float64
		for _, v := range ms {
			sum += v
		}
		return sum / float64(len(ms)), nil
	}
	sides := []struct {
		name string
		time func(int) (float64, error)
		into *Side
	}{{"queued ahead", ahead, &res.Ahead}, {fmt.Sprintf("%d a command", o.k), unit, &res.Unit}, {"waited", waited, &res.Waited}, {"plain loop", plain, &res.Plain}}
	for _, s := range sides {
		if _, err := s.time(o.warmup); err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	workers := enginetorch.PIDs(eng)
	for r := range o.rounds {
		order := slices.Clone(sides)
		k := r % len(order) // each side takes each place in turn
		order = append(order[k:], order[:k]...)
		for _, s := range order {
			w0, p0 := cpuNS(workers...), cpuNS(os.Getpid())
			ms, err := s.time(o.steps)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", s.name, err)
			}
			w1, p1 := cpuNS(workers...), cpuNS(os.Getpid())
			per := func(a, b int64) float64 {
				if a < 0 || b < 0 {
					return -1
				}
				return float64(b-a) / 1e6 / float64(o.steps)
			}
			s.into.add(ms, per(w0, w1), per(p0, p1))
		}
		fmt.Fprintf(log, "protocol: round %d/%d: queued ahead %.3f ms, %d a command %.3f ms, waited %.3f ms, plain loop %.3f ms a step\n",
			r+1, o.rounds, res.Ahead.Rounds[r], o.k, res.Unit.Rounds[r], res.Waited.Rounds[r], res.Plain.Rounds[r])
	}
	res.OverheadMS = res.Ahead.Median - res.Plain.Median
	res.UnitOverheadMS = res.Unit.Median - res.Plain.Median
	res.WaitedOverheadMS = res.Waited.Median - res.Plain.Median
	res.WorkerCPUOverheadMS = res.Ahead.WorkerCPUMedian - res.Plain.WorkerCPUMedian
	res.UnitWorkerCPUOverheadMS = res.Unit.WorkerCPUMedian - res.Plain.WorkerCPUMedian
	if o.k > 1 {
		res.FloorCommandMS = (res.Ahead.PipeCPUMedian - res.Unit.PipeCPUMedian) * float64(o.k) / float64(o.k-1)
		res.FloorStepMS = res.Ahead.PipeCPUMedian - res.FloorCommandMS
	}
	res.LoadAfter = memrun.LoadAvg()
	return res, nil
}

// steps trains n steps of b as pipe run drives the engine (wait false:
// Results(false) after each command, which leaves the command just queued
// in flight) or waiting for each, k steps a command (the last command
// holds what is left), and returns the mean ms a step by the clock, the
// last command's wait included.
func steps(q engine.Queuer, b *dataset.Batch, lr float64, n, k int, wait bool) (float64, error) {
	bs, lrs := make([]*dataset.Batch, k), make([]float64, k)
	for i := range k {
		bs[i], lrs[i] = b, lr
	}
	t0 := time.Now()
	for done := 0; done < n; done += k {
		if k == 1 {
			if err := q.QueueTrain(b, 1, true, true); err != nil {
				return 0, err
			}
			if err := q.QueueStep(0, lr); err != nil {
				return 0, err
			}
		} else if err := q.QueueSteps(bs[:min(k, n-done)], lrs[:min(k, n-done)], 0); err != nil {
			return 0, err
		}
		if _, err := q.Results(wait); err != nil {
			return 0, err
		}
	}
	if _, err := q.Results(true); err != nil {
		return 0, err
	}
	return float64(time.Since(t0)) / float64(time.Millisecond) / float64(n), nil
}

func (r *Result) print(w io.Writer) {
	fmt.Fprintf(w, "\nthe torch engine's overhead per training step on %s, torch %s, %s batch %d, %d worker thread(s), %s readback\n",
		r.Host.CPU, r.Torch, r.Model, r.Batch, r.Threads, r.LossReadback)
	fmt.Fprintf(w, "(%d rounds of %d steps a side; load average %s before, %s after; medians of the rounds' means)\n\n",
		r.Rounds, r.Steps, r.LoadBefore, r.LoadAfter)
	fmt.Fprintf(w, "%-34s %10s %12s\n", "side", "ms a step", "overhead ms")
	fmt.Fprintf(w, "%-34s %10.3f %12s\n", "plain PyTorch loop in the worker", r.Plain.Median, "-")
	fmt.Fprintf(w, "%-34s %10.3f %12.3f\n", "engine, queued ahead (pipe run)", r.Ahead.Median, r.OverheadMS)
	fmt.Fprintf(w, "%-34s %10.3f %12.4f\n", fmt.Sprintf("engine, %d steps a command", r.K), r.Unit.Median, r.UnitOverheadMS)
	fmt.Fprintf(w, "%-34s %10.3f %12.3f\n", "engine, waited for each step", r.Waited.Median, r.WaitedOverheadMS)
	fmt.Fprintf(w, "\nCPU time a step, ms (worker, pipe): plain %.3f, queued ahead %.3f %.3f, %d a command %.3f %.3f, waited %.3f %.3f\n",
		r.Plain.WorkerCPUMedian, r.Ahead.WorkerCPUMedian, r.Ahead.PipeCPUMedian, r.K, r.Unit.WorkerCPUMedian, r.Unit.PipeCPUMedian,
		r.Waited.WorkerCPUMedian, r.Waited.PipeCPUMedian)
	if r.K > 1 {
		fmt.Fprintf(w, "host floor: %.4f ms a step and %.4f ms a command (pipe's CPU time at 1 and %d steps a command)\n", r.FloorStepMS, r.FloorCommandMS, r.K)
	}
}

// cpuNS is the CPU time the threads of pids have run, in nanoseconds:
// the first field of each thread's schedstat; -1 where it cannot be
// read.
func cpuNS(pids ...int) int64 {
	var sum int64
	for _, pid := range pids {
		tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		if err != nil || len(tasks) == 0 {
			return -1
		}
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // a thread that ended meanwhile
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				return -1
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return -1
			}
			sum += n
		}
	}
	return sum
}
