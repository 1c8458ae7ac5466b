// Command infer sets pipe's CPU inference beside onnxruntime's on the same
// model, in one run: examples/fashion.pipe trained briefly, exported to
// ONNX (pipe export's exporter), and timed forward only at batch 1 and 64
// on the same number of threads: pipe in fp32 and in int8 (the kernel
// this CPU picks), onnxruntime-node (bench/onnx/time.js) in fp32.
//
//	go run ./bench/cmd/infer [-rounds 6] [-round-time 300ms] [-threads 0] [-out bench/infer.json]
//
// (make bench runs it.) Each round times every side for about round-time
// in turn, the order rotating from round to round; samples/s are by the
// wall clock over all rounds. onnxruntime's own int8 is not measured: its
// quantisation tooling is Python's (onnxruntime.quantization), which the
// node package does not ship. Nothing here asserts a time.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"pipe/engine"
	"pipe/engine/costs"
	"pipe/engine/native"
	"pipe/export/onnx"
	"pipe/internal/memrun"
	"pipe/lang"
	"pipe/planner"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

// row is one side at one batch size.
type row struct {
	Engine    string  `json:"engine"`
	Precision string  `json:"precision"`
	Kernel    string  `json:"kernel,omitempty"`
	Batch     int     `json:"batch"`
	PerSec    float64 `json:"samples_per_second"`
	// VsORT is this row's samples/s over onnxruntime fp32's at the same
	// batch.
	VsORT float64 `json:"vs_onnxruntime_fp32"`
}

type table struct {
	Note string `json:"note"`
	Date string `json:"date"`
	Go   string `json:"go"`
	CPU  string `json:"cpu"`
	// Load is /proc/loadavg's 1, 5 and 15-minute figures as the timing
	// began (memrun.LoadAvg).
	Load    string `json:"load_average,omitempty"`
	Model   string `json:"model"`
	Trained string `json:"trained"`
	ORT     string `json:"onnxruntime"`
	ORTInt8 string `json:"onnxruntime_int8"`
	// BLAS is the kernels pipe's fp32 products ran on; onnxruntime picks
	// its own from the CPU.
	BLAS      string `json:"pipe_blas"`
	Threads   int    `json:"threads"`
	Rounds    int    `json:"rounds"`
	RoundTime string `json:"round_time"`
	Rows      []row  `json:"rows"`
}

const trainSteps = 150

func main() {
	rounds := flag.Int("rounds", 6, "interleaved timing rounds")
	roundTime := flag.Duration("round-time", 300*time.Millisecond, "about how long one side's turn at one batch size takes")
	threads := flag.Int("threads", 0, "compute threads on both sides (0: GOMAXPROCS)")
	out := flag.String("out", "bench/infer.json", "where to write the table (empty: nowhere)")
	flag.Parse()
	if *threads == 0 {
		*threads = runtime.GOMAXPROCS(0)
	}
	if err := bench(*rounds, *roundTime, *threads, *out); err != nil {
		fmt.Fprintln(os.Stderr, "infer:", err)
		os.Exit(1)
	}
}

// side is one thing timed: run performs batch-size inference for about d
// and returns the runs and the time they took.
type side struct {
	engine, precision, kernel string
	run                       func(batch int, d time.Duration) (int, time.Duration, error)
	runs                      map[int]int
	took                      map[int]time.Duration
}

func bench(rounds int, roundTime time.Duration, threads int, out string) error {
	const file = "examples/fashion.pipe"
	raw, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	f, ds := lang.Parse("fashion.pipe", raw)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		return ds
	}
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		return dds
	}
	p, pds := planner.Plan(dec, planner.WithCosts(costs.Engines()...), planner.WithSource(raw), planner.WithDevice("cpu"), planner.WithEngine("native"))
	if pds.HasErrors() {
		return pds
	}
	tmp, err := os.MkdirTemp("", "pipe-infer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ckdir := filepath.Join(tmp, "ckpt")
	fmt.Fprintf(os.Stderr, "infer: training fashion for %d steps\n", trainSteps)
	if _, rds := run.Run(context.Background(), p, dec, run.Hooks{}, run.WithBackend(native.Backend{}), run.WithBase("."),
		run.WithCheckpointDir(ckdir), run.WithThreads(threads), run.WithMaxSteps(trainSteps)); rds.HasErrors() {
		return rds
	}
	ckpt := filepath.Join(ckdir, folder.LastCheckpoint)
	const batch = 64
	fp, err := run.LoadTrained(p, dec, ckpt, native.Backend{}, batch, threads)
	if err != nil {
		return err
	}
	defer fp.Close()
	q, err := run.LoadTrained(p, dec, ckpt, native.Backend{}, batch, threads)
	if err != nil {
		return err
	}
	defer q.Close()
	calib, err := fp.CalibrationBatches(context.Background(), ".", 8)
	if err != nil {
		return err
	}
	x := append([]float32(nil), calib[0].X...) // one batch of normalised inputs
	for _, c := range calib {
		c.Y = nil
	}
	rep, err := q.QuantizeInt8(calib, engine.WithPercentile(engine.DefaultPercentile))
	if err != nil {
		return err
	}
	model := filepath.Join(tmp, "fashion.onnx")
	if err := export(model, fp); err != nil {
		return err
	}
	in := filepath.Join(tmp, "x.f32")
	if err := writeF32(in, x); err != nil {
		return err
	}
	dims := []string{fmt.Sprint(batch)}
	for _, d := range fp.Info.InputShape {
		dims = append(dims, fmt.Sprint(d))
	}
	ort, ortVersion, stop, err := startORT(model, threads, in, strings.Join(dims, ","))
	if err != nil {
		return err
	}
	defer stop()

	o := 1
	for _, d := range fp.Info.OutputShape {
		o *= int(d)
	}
	y := make([]float32, batch*o)
	pipeSide := func(t *run.Trained) func(int, time.Duration) (int, time.Duration, error) {
		per := len(x) / batch
		return func(b int, d time.Duration) (int, time.Duration, error) {
			n := 0
			t0 := time.Now()
			for n == 0 || time.Since(t0) < d {
				if err := t.Predict(x[:b*per], b, y[:b*o]); err != nil {
					return 0, 0, err
				}
				n++
			}
			return n, time.Since(t0), nil
		}
	}
	sides := []*side{
		{engine: "pipe", precision: "fp32", run: pipeSide(fp)},
		{engine: "pipe", precision: "int8", kernel: rep.Kernel, run: pipeSide(q)},
		{engine: "onnxruntime", precision: "fp32", run: ort},
	}
	batches := []int{1, batch}
	load := memrun.LoadAvg()
	for _, s := range sides { // warm-up
		s.runs, s.took = map[int]int{}, map[int]time.Duration{}
		for _, b := range batches {
			if _, _, err := s.run(b, roundTime/10); err != nil {
				return fmt.Errorf("%s %s: %w", s.engine, s.precision, err)
			}
		}
	}
	for r := 0; r < rounds; r++ {
		for _, b := range batches {
			for i := range sides {
				s := sides[(i+r)%len(sides)]
				n, d, err := s.run(b, roundTime)
				if err != nil {
					return fmt.Errorf("%s %s: %w", s.engine, s.precision, err)
				}
				s.runs[b] += n
				s.took[b] += d
			}
		}
	}
	t := table{
		Note: "pipe's CPU inference (native engine) beside onnxruntime-node's on the same exported model, measured by bench/cmd/infer: " +
			"forward samples/s by the wall clock over interleaved rounds, the same input batch and threads on every side",
		Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), CPU: memrun.CPUName(),
		Model:   "examples/fashion.pipe",
		Trained: fmt.Sprintf("%d steps at batch %d (speed does not depend on it)", trainSteps, batch),
		ORT:     "onnxruntime-node " + ortVersion + ", CPU execution provider, graph optimisation all, sequential",
		ORTInt8: "not measured: onnxruntime's quantisation tooling is Python's (onnxruntime.quantization), not in the node package",
		BLAS:    native.BLASKernels(),
		Threads: threads, Rounds: rounds, RoundTime: roundTime.String(), Load: load,
	}
	for _, b := range batches {
		ortRate := rate(sides[2], b)
		for _, s := range sides {
			t.Rows = append(t.Rows, row{Engine: s.engine, Precision: s.precision, Kernel: s.kernel, Batch: b,
				PerSec: math.Round(rate(s, b)), VsORT: math.Round(rate(s, b)/ortRate*100) / 100})
		}
	}
	print(t)
	if out == "" {
		return nil
	}
	j, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(out, append(j, '\n'), 0o644)
}

func rate(s *side, b int) float64 {
	return float64(s.runs[b]*b) / s.took[b].Seconds()
}

func export(path string, t *run.Trained) error {
	w, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := onnx.Export(w, t); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

func writeF32(path string, x []float32) error {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return os.WriteFile(path, b, 0o644)
}

// startORT starts bench/onnx/time.js on the model and returns a side's
// run function over its line protocol, onnxruntime-node's version and a
// function that stops it.
func startORT(model string, threads int, in, dims string) (func(int, time.Duration) (int, time.Duration, error), string, func(), error) {
	const dir = "bench/onnx"
	var pkg struct{ Version string }
	if b, err := os.ReadFile(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json")); err != nil {
		return nil, "", nil, fmt.Errorf("onnxruntime-node is not installed in %s (make bench installs it): %w", dir, err)
	} else if err := json.Unmarshal(b, &pkg); err != nil {
		return nil, "", nil, err
	}
	cmd := exec.Command("node", filepath.Join(dir, "time.js"), model, fmt.Sprint(threads), in, dims)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", nil, fmt.Errorf("node: %w", err)
	}
	stop := func() {
		stdin.Close()
		cmd.Wait()
	}
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() {
		stop()
		return nil, "", nil, errors.New("onnxruntime-node did not start (bench/onnx/time.js)")
	}
	runFn := func(b int, d time.Duration) (int, time.Duration, error) {
		if _, err := fmt.Fprintf(stdin, "%d %g\n", b, d.Seconds()); err != nil {
			return 0, 0, err
		}
		if !sc.Scan() {
			return 0, 0, errors.New("onnxruntime-node stopped")
		}
		var rep struct {
			Runs int   `json:"runs"`
			NS   int64 `json:"ns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
			return 0, 0, fmt.Errorf("time.js: %w", err)
		}
		return rep.Runs, time.Duration(rep.NS), nil
	}
	return runFn, pkg.Version, stop, nil
}

func print(t table) {
	fmt.Printf("CPU inference, %s (%s, %s, %d threads on every side, %d rounds, load %s)\n\n", t.Model, t.CPU, t.Go, t.Threads, t.Rounds, t.Load)
	fmt.Printf("%-12s %-9s %-14s %6s %12s %10s\n", "engine", "precision", "kernel", "batch", "samples/s", "vs ort")
	for _, r := range t.Rows {
		fmt.Printf("%-12s %-9s %-14s %6d %12.0f %9.2f×\n", r.Engine, r.Precision, r.Kernel, r.Batch, r.PerSec, r.VsORT)
	}
	fmt.Printf("\npipe's BLAS: %s\nonnxruntime int8: %s\n\n", t.BLAS, t.ORTInt8)
}
