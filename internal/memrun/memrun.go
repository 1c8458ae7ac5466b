// Package memrun runs an example as its own process on the CPU and holds
// the plan's memory total to the peak resident memory the OS measured for
// that process. cmd/pipe's tests and bench/cmd/memory share it.
package memrun

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"

	"pipe/internal/fixtures"
	"pipe/internal/hostcpu"
)

// Result is one example's run.
type Result struct {
	Example string
	// Planned is the plan's Memory.Total, from the run's report;
	// Measured the process's peak resident memory as the kernel kept it
	// (VmHWM, which the run reads from /proc/self/status at its end and
	// writes in its report: the OS's figure, not pipe's account); Bound
	// wait4's ru_maxrss, read here, which Linux makes the larger of that
	// peak and the peak of the address space the child was started from
	// (this process's, shared by vfork until exec), an upper bound.
	Planned, Measured, Bound int64
	// PlannedStep is the plan's forecast of a step in seconds (0: none;
	// ForecastSource says where it came from, ForecastMissing why there
	// is none), MeasuredStep the run's training seconds over its steps,
	// RooflineStep the plan's roofline, all from the run's report.
	PlannedStep, MeasuredStep, RooflineStep float64
	ForecastSource, ForecastMissing         string
	Output                                  []byte
}

// Error is (planned − measured) / measured.
func (r Result) Error() float64 {
	if r.Measured <= 0 {
		return 0
	}
	return float64(r.Planned-r.Measured) / float64(r.Measured)
}

// Prepare makes dir a place to run the examples from: dir/data links the
// real data of root/data (Fashion-MNIST and the Landsat scene, which
// make data fetches) and holds the fixtures of the others. Fashion-MNIST's
// test set is its first TestSamples images: the examples' final
// evaluation reads it in batches, so its memory is a batch's whatever the
// set's size, and on the torch engine the whole set took most of a short
// run (performer_fashion: 91 of 103 s, 4 steps).
func Prepare(root, dir string) error {
	for _, need := range []string{"data/fashion-mnist/train-images-idx3-ubyte.gz", "data/L7_ETMs.tif", "data/olinda_dem_utm25s.tif", "data/landsat_volume.zarr/.zgroup"} {
		if _, err := os.Stat(filepath.Join(root, need)); err != nil {
			return fmt.Errorf("%s is missing: make data fetches it", need)
		}
	}
	d := filepath.Join(dir, "data")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	for _, real := range []string{"L7_ETMs.tif", "olinda_dem_utm25s.tif", "landsat_volume.zarr",
		"fashion-mnist/train-images-idx3-ubyte.gz", "fashion-mnist/train-labels-idx1-ubyte.gz"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(d, real)), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join(root, "data", real), filepath.Join(d, real)); err != nil && !os.IsExist(err) {
			return err
		}
	}
	for _, f := range []string{"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"} {
		if err := firstSamples(filepath.Join(root, "data", "fashion-mnist", f), filepath.Join(d, "fashion-mnist", f), TestSamples); err != nil {
			return err
		}
	}
	return fixtures.Write(d)
}

// TestSamples is how many of Fashion-MNIST's test images Prepare keeps.
const TestSamples = 1000

// firstSamples writes the idx file src (gzipped) as dst with its first n
// items: the header's item count set to n, the items after it cut.
func firstSamples(src, dst string, n int) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if len(b) < 8 || b[0] != 0 || b[1] != 0 {
		return fmt.Errorf("%s: not an idx file", src)
	}
	dims := int(b[3])
	if dims < 1 || len(b) < 4+4*dims {
		return fmt.Errorf("%s: not an idx file", src)
	}
	count := int(binary.BigEndian.Uint32(b[4:]))
	item := 1
	for i := 1; i < dims; i++ {
		item *= int(binary.BigEndian.Uint32(b[4+4*i:]))
	}
	head := 4 + 4*dims
	n = min(n, count)
	if len(b) < head+n*item {
		return fmt.Errorf("%s: shorter than its header says", src)
	}
	out := append([]byte(nil), b[:head+n*item]...)
	binary.BigEndian.PutUint32(out[4:], uint32(n))
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(out); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(dst, buf.Bytes(), 0o644)
}

// effective is an effective batch the fixtures can form in a few steps.
var effective = regexp.MustCompile(`effective_batch +[0-9]+`)

// lowered are the examples whose effective batch Run lowers to 4: their
// fixtures hold about one optimizer step of it, and 30 steps of it take
// minutes (256x256 and 224x224 images); accumulation sums into the
// gradients in place, so it moves no memory.
var lowered = map[string]bool{"cells": true, "pills": true}

// Lowered returns the source of example name (cells, fashion, ...) with
// its effective batch lowered to n where its fixtures are too few for the
// file's (cells and pills), and whether it changed.
func Lowered(name string, src []byte, n int) ([]byte, bool) {
	if !lowered[name] || !effective.Match(src) {
		return src, false
	}
	return effective.ReplaceAll(src, []byte(fmt.Sprintf("effective_batch %d", n))), true
}

// PeakSteps is how many optimizer steps Run should train example for
// its peak: least, or, where the first epoch ends before most steps,
// one step past that end (at least least), so that the epoch's
// evaluation and checkpoint join the step's memory and a step runs after
// them. pipe plan (with the same pipe, environment and --engine or --set
// among args) says the epoch's steps.
func PeakSteps(pipe string, env []string, dir, example string, least, most int, args ...string) (int, error) {
	if least >= most {
		return least, nil
	}
	name := strings.TrimSuffix(filepath.Base(example), ".pipe")
	example, err := runnable(dir, example, name)
	if err != nil {
		return 0, err
	}
	flags := []string{"plan", "--device", "cpu", "--json"}
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--engine" || args[i] == "--set" {
			flags = append(flags, args[i], args[i+1])
		}
	}
	cmd := exec.Command(pipe, append(flags, example)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("pipe plan %s: %v", name, err)
	}
	var p struct {
		TrainSamples   int64 `json:"train_samples"`
		EffectiveBatch int64 `json:"effective_batch"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		return 0, fmt.Errorf("pipe plan %s: %w", name, err)
	}
	if p.TrainSamples <= 0 || p.EffectiveBatch <= 0 {
		return least, nil
	}
	return epochPeakSteps(int((p.TrainSamples+p.EffectiveBatch-1)/p.EffectiveBatch), least, most), nil
}

// epochPeakSteps is PeakSteps' rule for an epoch of epoch steps.
func epochPeakSteps(epoch, least, most int) int {
	if epoch >= most {
		return least
	}
	return max(least, epoch+1)
}

// runnable is the example Run runs: its own file, or its Lowered source
// written into dir.
func runnable(dir, example, name string) (string, error) {
	src, err := os.ReadFile(example)
	if err != nil {
		return "", err
	}
	low, ok := Lowered(name, src, 4)
	if !ok {
		return example, nil
	}
	example = filepath.Join(dir, name+".pipe")
	return example, os.WriteFile(example, low, 0o644)
}

// Run runs example (a .pipe path) with pipe (a command and the
// environment it needs) from dir, on the CPU for steps optimizer steps,
// with pipe run's flags args besides (--engine torch).
func Run(pipe string, env []string, dir, example string, steps int, args ...string) (Result, error) {
	name := strings.TrimSuffix(filepath.Base(example), ".pipe")
	res := Result{Example: name}
	example, err := runnable(dir, example, name)
	if err != nil {
		return res, err
	}
	rep := filepath.Join(dir, name+".report.json")
	flags := append([]string{"run", "--device", "cpu", "--max-steps", fmt.Sprint(steps),
		"--report", rep, "--checkpoint-dir", filepath.Join(dir, "ckpt", name)}, args...)
	cmd := exec.Command(pipe, append(flags, example)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "GOMEMLIMIT=")
	res.Output, err = cmd.CombinedOutput()
	if err != nil {
		return res, fmt.Errorf("pipe run %s: %v\n%s", name, err, res.Output)
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || ru.Maxrss <= 0 {
		return res, fmt.Errorf("the OS gives no peak resident memory here")
	}
	res.Bound = ru.Maxrss * 1024
	var r struct {
		Estimated int64   `json:"estimated_peak_bytes"`
		Measured  int64   `json:"measured_peak_bytes"`
		EstStep   float64 `json:"estimated_step_seconds"`
		MeasStep  float64 `json:"measured_step_seconds"`
		RoofStep  float64 `json:"roofline_step_seconds"`
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return res, fmt.Errorf("%s: %w", rep, err)
	}
	res.Planned, res.Measured = r.Estimated, r.Measured
	res.PlannedStep, res.MeasuredStep, res.RooflineStep = r.EstStep, r.MeasStep, r.RoofStep
	var why struct {
		Source  string `json:"step_time_source"`
		Missing string `json:"forecast_missing"`
	}
	_ = json.Unmarshal(b, &why)
	res.ForecastSource, res.ForecastMissing = why.Source, why.Missing
	// The kernel updates the two figures at different moments (ru_maxrss
	// from the address space's high-water mark when it is torn down,
	// VmHWM from it and the pages resident when /proc is read), so they
	// may differ by a few pages.
	if res.Measured <= 0 || res.Measured > res.Bound+1<<20 {
		return res, fmt.Errorf("%s: the run reports a peak of %d bytes, and wait4 bounds it by %d", name, res.Measured, res.Bound)
	}
	return res, nil
}

// Workspace is what a bench command runs examples with: the pipe binary's
// absolute path (pipe, as make build writes it), the repository's root
// (the current directory) and a fresh folder Prepare has filled, with a
// function that removes it.
func Workspace(pipe, prefix string) (bin, root, dir string, cleanup func(), err error) {
	if bin, err = filepath.Abs(pipe); err != nil {
		return "", "", "", nil, err
	}
	if _, err = os.Stat(bin); err != nil {
		return "", "", "", nil, fmt.Errorf("%s: %w (make build makes it)", pipe, err)
	}
	if root, err = os.Getwd(); err != nil {
		return "", "", "", nil, err
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", "", nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	if err = Prepare(root, dir); err != nil {
		cleanup()
		return "", "", "", nil, err
	}
	return bin, root, dir, cleanup, nil
}

// Median is the median of v (the mean of the middle two for an even
// count), NaN for none; v is left as it was.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// LoadAvg is the machine's load averages over 1, 5 and 15 minutes as
// /proc/loadavg gives them ("?" where it cannot be read): benchmarks note
// it beside their figures.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// CPUName is the processor's model name and CPU count (hostcpu.Name).
func CPUName() string { return hostcpu.Name() }

// WriteJSON writes v to path as indented JSON, the benchmarks' result
// files.
func WriteJSON(path string, v any) error {
	js, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(js, '\n'), 0o644)
}
