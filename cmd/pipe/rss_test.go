package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/cpu"

	"pipe/engine/torch"
	"pipe/internal/memrun"
)

// TestMain lets a test run this binary as the pipe command: with
// PIPE_TEST_MAIN=1 it is pipe, so that a run's memory is a process's own,
// measured by the OS.
func TestMain(m *testing.M) {
	if os.Getenv("PIPE_TEST_MAIN") == "1" {
		os.Exit(Main(os.Args[1:], &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}))
	}
	// The forecasts and the BLAS choice are cached in a folder of the
	// tests' own, so that no test reads what another run left.
	cache, err := os.MkdirTemp("", "pipe-test-cache-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	os.RemoveAll(cache)
	os.Exit(code)
}

// rssTolerance is how far the plan's total may be from the process's
// peak resident memory.
const rssTolerance = 0.10

// TestPlanTotalIsTheProcessPeak runs every example on the CPU (the native
// engine) for peakSteps optimizer steps, each in a process of its own, and holds
// the plan's total to the peak resident memory the OS kept for that
// process (VmHWM, which the run reads from /proc at its end; memrun checks
// it against wait4's rusage, which bounds it from above). Fashion-MNIST
// and the Landsat scene are the real data (make data); the other examples
// read small fixtures (internal/fixtures). bench/cmd/memory prints the
// same table for make bench.
func TestPlanTotalIsTheProcessPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("trains every example")
	}
	table := examplePeaks(t, "the process", rssTolerance, peakSteps, nil, nil)
	t.Log("plan total against the process's peak resident memory, MiB, on the CPU:\n" + table)
}

// examplePeaks runs every example (only those named in only, where it is
// not nil) for the optimizer steps steps gives it, each in a pipe of its
// own with the extra run flags and the environment env besides the
// test's, holds the plan's total to the measured peak within tol (who
// names the process measured) and returns the table of both.
func examplePeaks(t *testing.T, who string, tol float64, steps stepRule, only, env []string, extra ...string) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := memrun.Prepare(root, dir); err != nil {
		t.Fatal(err)
	}
	paths, _ := filepath.Glob(filepath.Join(root, "examples", "*.pipe"))
	var table strings.Builder
	fmt.Fprintf(&table, "%-17s %10s %10s %8s %6s\n", "example", "planned", "measured", "error", "steps")
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		if only != nil && !slices.Contains(only, name) {
			continue
		}
		t.Run(name, func(t *testing.T) {
			env := append([]string{"PIPE_TEST_MAIN=1"}, env...)
			n, err := memrun.PeakSteps(os.Args[0], env, dir, path, steps.least, steps.most, extra...)
			if err != nil {
				t.Fatal(err)
			}
			r, err := memrun.Run(os.Args[0], env, dir, path, n, extra...)
			if err != nil {
				t.Fatal(err)
			}
			e := r.Error()
			fmt.Fprintf(&table, "%-17s %10.1f %10.1f %+7.1f%% %6d\n", name, float64(r.Planned)/(1<<20), float64(r.Measured)/(1<<20), 100*e, n)
			if math.Abs(e) > tol {
				t.Errorf("the plan says %d bytes; %s peaked at %d (VmHWM): %+.1f%%, past %.0f%%\n%s", r.Planned, who, r.Measured, 100*e, 100*tol, r.Output)
			}
		})
	}
	return table.String()
}

// stepRule is how many optimizer steps an example trains in a memory
// test: least, or most where its first epoch ends before most steps
// (memrun.PeakSteps).
type stepRule struct{ least, most int }

// peakSteps trains 4 steps, where every example has reached its peak
// (on the torch worker, 4 steps' peaks were 12's within 0.3 point of the
// plan's error), and one step past the first epoch's end where it comes
// before 12 (olinda's is eleven steps, deeplab_olinda's five): its
// evaluation and checkpoint join the step's memory (deeplab_olinda's
// worker peaked 16 MiB higher there; at 5 steps its peak was 12's within
// 0.8%, in a third of the CPU time). At 30 steps on the native engine
// (2.5 times the time) the peaks were 12's within 2 points.
var peakSteps = stepRule{4, 12}

// TestTorchPlanTotalIsTheWorkerPeak is TestPlanTotalIsTheProcessPeak for
// the torch engine: every example on the CPU, each in a pipe of its own,
// with the plan's total held to the peak resident memory the OS kept for
// the torch worker (VmHWM, which the worker reads from /proc at the end
// and pipe reports as the run's measured peak), within the native
// engine's bound (the worker's runtime is a calibration of Debian's
// PyTorch 1.13, torch.CPURuntime). It fails where the worker's malloc keeps freed tensors
// that the plan does not price (docs/design/torch-cpu-allocator.md):
// cells, the furthest, is 7% short, by the holes tcmalloc's page heap
// keeps between its large tensors.
func TestTorchPlanTotalIsTheWorkerPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("trains every example on the torch engine")
	}
	py := torchPython(t)
	if !slowBF16Host() {
		table := examplePeaks(t, "the torch worker", rssTolerance, peakSteps, nil, nil, "--engine", "torch", "--python", py)
		t.Log("plan total against the torch worker's peak resident memory, MiB, on the CPU:\n" + table)
		return
	}
	// Without AVX-512, PyTorch 1.13 runs bf16 convs on its slow path, its
	// own GEMM: some 40 s a step of cells on two cores. The bf16 examples
	// take slowConvSteps, which reach their peaks there, and cells, whose
	// price on that path is olinda's mechanism (TestTorchPlanHoldsOnTheSlowConvPath
	// holds it on every machine), is left out.
	var fp32, bf16 []string
	for _, n := range exampleNames(t) {
		switch {
		case n == "cells":
		case bf16Example(t, n):
			bf16 = append(bf16, n)
		default:
			fp32 = append(fp32, n)
		}
	}
	table := examplePeaks(t, "the torch worker", rssTolerance, peakSteps, fp32, nil, "--engine", "torch", "--python", py)
	table += examplePeaks(t, "the torch worker", rssTolerance, stepRule{slowConvSteps, slowConvSteps}, bf16, nil, "--engine", "torch", "--python", py)
	t.Log("plan total against the torch worker's peak resident memory, MiB, on the CPU (no AVX-512: bf16 examples at 3 steps, cells left out):\n" + table)
}

// slowBF16Host says this CPU fails PyTorch 1.13's bf16 oneDNN check
// (avx512bw, avx512vl and avx512dq; engine/torch/cost_onednn.go), so the
// worker's bf16 convs take the slow path.
func slowBF16Host() bool {
	x := cpu.X86
	return !(x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX512DQ)
}

// exampleNames lists the examples by name.
func exampleNames(t *testing.T) []string {
	paths, _ := filepath.Glob("../../examples/*.pipe")
	var out []string
	for _, p := range paths {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".pipe"))
	}
	if len(out) == 0 {
		t.Fatal("no examples")
	}
	return out
}

// bf16Example says the example trains in bf16 (its precision line).
func bf16Example(t *testing.T, name string) bool {
	b, err := os.ReadFile(filepath.Join("../../examples", name+".pipe"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "precision" && f[1] == "bf16" {
			return true
		}
	}
	return false
}

// slowConvExamples run on the slow conv path: a CPU without AVX-512 sends
// only bf16 convs there (fp32 ones keep oneDNN). olinda has 2-D and
// transposed convs; it runs in fp32 (--set precision=fp32), whose slow
// path holds the same columns at 4 bytes and computes them with MKL's
// GEMM, where bf16's runs PyTorch's own (olinda's 3 steps took 63 s in
// bf16 here). Every conv example's slow path, bf16 included, measured
// once within 5%, is in docs/design/torch-cpu-allocator.md.
var slowConvExamples = []string{"olinda"}

// slowConvSteps is how many optimizer steps each runs. bf16's slow path
// runs PyTorch's own GEMM, some 40 s a step on cells' batch of 4 on two
// cores; each example's peak after 3 steps is its peak after 12 (within
// 0.1 point of the plan's error), after 2 olinda's is not yet.
const slowConvSteps = 3

// TestTorchPlanHoldsOnTheSlowConvPath is TestTorchPlanTotalIsTheWorkerPeak
// on the conv path a CPU without AVX-512 takes: its bf16 convs fail
// PyTorch's bf16 check and run the slow path (im2col columns and a GEMM)
// in place of oneDNN. The worker turns oneDNN off (torch.FakeNoOneDNN),
// which sends every conv there, and the planner, told the same, prices
// the columns in place of oneDNN's copies; the plan must hold within the
// same bound, so that a wrong price for that path fails here and not on
// the first CI machine without AVX-512. Only the examples whose convs
// weigh in their plans run (engine/torch/cost_onednn.go).
func TestTorchPlanHoldsOnTheSlowConvPath(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the conv examples on the torch engine")
	}
	py := torchPython(t)
	table := examplePeaks(t, "the torch worker", rssTolerance, stepRule{slowConvSteps, slowConvSteps}, slowConvExamples,
		[]string{torch.FakeNoOneDNN + "=1"}, "--engine", "torch", "--python", py, "--set", "precision=fp32")
	t.Log("plan total against the torch worker's peak resident memory, MiB, on the CPU, oneDNN off:\n" + table)
}

// TestLongRunKeepsTheCollectorQuiet: under the soft memory limit the plan
// sets, a run past its second epoch must not collect without pause (the
// limit once left the runtime too little room, and fashion_mlp's third
// epoch ran 4 times slower with about 1,400 collections, against a few in
// the first two). It counts the collections GODEBUG=gctrace=1 reports in
// each epoch of a 4-epoch run; a count, not a time.
func TestLongRunKeepsTheCollectorQuiet(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four epochs")
	}
	if _, err := os.Stat("../../data/fashion-mnist/train-images-idx3-ubyte.gz"); err != nil {
		t.Skip("no Fashion-MNIST (make data)")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "run", "--device", "cpu", "--max-steps", "1784", "--batch", "128",
		"--checkpoint-dir", filepath.Join(dir, "ckpt"), "--report", filepath.Join(dir, "r.json"), "examples/fashion_mlp.pipe")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1", "GODEBUG=gctrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	// The runtime prints a trace line in pieces, so the log's own line can
	// land inside one ("gc 12 @3.705s [INFO]  pipe: epoch done: ..."): a
	// collection is counted by its "gc N @" wherever it stands.
	var per []int
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		n += len(gcTrace.FindAllStringIndex(l, -1))
		if strings.Contains(l, "epoch done") {
			per = append(per, n)
			n = 0
		}
	}
	if len(per) != 4 {
		t.Fatalf("%d epochs reported\n%s", len(per), out)
	}
	for e, c := range per {
		if c > 200 {
			t.Errorf("epoch %d: %d collections (each epoch: %v)", e+1, c, per)
		}
	}
	t.Logf("collections each epoch: %v", per)
}

// gcTrace is the start of a collection's GODEBUG=gctrace=1 line.
var gcTrace = regexp.MustCompile(`(^|\s)gc \d+ @`)

// TestBF16ExamplesFound guards the split TestTorchPlanTotalIsTheWorkerPeak
// makes on a CPU without AVX-512: the examples that train in bf16.
func TestBF16ExamplesFound(t *testing.T) {
	var got []string
	for _, n := range exampleNames(t) {
		if bf16Example(t, n) {
			got = append(got, n)
		}
	}
	if strings.Join(got, " ") != "cells deeplab_olinda olinda" {
		t.Errorf("bf16 examples %v", got)
	}
}
