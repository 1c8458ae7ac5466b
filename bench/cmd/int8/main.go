// Command int8 measures int8 inference against fp32 on the native engine,
// in one run: the accuracy of each on a test set, and the forward speed.
//
//	go run ./bench/cmd/int8 [-rounds 10] [-round-time 1s] [-threads 0] [-out bench/int8.json]
//
// (make bench runs it.) It trains examples/fashion.pipe and
// examples/pills.pipe briefly, quantises each checkpoint with every
// activation-calibration method, and scores accuracy and agreement with
// fp32; speed is forward only, fp32 and int8 taking turns within each
// round. Nothing here asserts a time.
//
// Method: docs/design/bench-int8.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"

	"pipe/engine/costs"
	"pipe/internal/fixtures"
	"pipe/internal/memrun"
	"pipe/lang"
	"pipe/planner"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

// calibration is one activation-range method.
type calibration struct {
	Name       string  `json:"name"`
	Percentile float64 `json:"percentile"`
}

var calibrations = []calibration{{"minmax", 0}, {"p99.9", 99.9}, {"p99.99", 99.99}, {"p99.999", 99.999}}

type accuracy struct {
	Calibration string  `json:"calibration"`
	Accuracy    float64 `json:"accuracy"`
	// Agreement is the fraction of samples whose int8 argmax is fp32's.
	Agreement float64 `json:"agreement"`
}

type result struct {
	Model        string     `json:"model"`
	Trained      string     `json:"trained"`
	EvalSet      string     `json:"eval_set"`
	EvalSamples  int        `json:"eval_samples"`
	FP32Accuracy float64    `json:"fp32_accuracy"`
	Int8         []accuracy `json:"int8"`
	Int8Layers   []string   `json:"int8_layers"`
	FP32Layers   []string   `json:"fp32_layers"`
	WeightsFP32  int64      `json:"weights_fp32_bytes"`
	WeightsInt8  int64      `json:"weights_int8_bytes"`
	Kernel       string     `json:"kernel"`
	Batch        int        `json:"batch"`
	Threads      int        `json:"threads"`
	Rounds       int        `json:"rounds"`
	FP32PerSec   float64    `json:"fp32_samples_per_second"`
	Int8PerSec   float64    `json:"int8_samples_per_second"`
	SpeedUp      float64    `json:"speed_up"`
	RatioMin     float64    `json:"round_ratio_min"`
	RatioMax     float64    `json:"round_ratio_max"`
}

type table struct {
	Note    string   `json:"note"`
	Date    string   `json:"date"`
	Go      string   `json:"go"`
	CPU     string   `json:"cpu"`
	Default string   `json:"default_calibration"`
	Results []result `json:"results"`
}

func main() {
	rounds := flag.Int("rounds", 10, "interleaved timing rounds")
	roundTime := flag.Duration("round-time", time.Second, "about how long one side's round takes")
	threads := flag.Int("threads", 0, "compute threads for both (0: GOMAXPROCS)")
	calib := flag.Int("calibrate", 8, "training batches the activation scales are calibrated on")
	out := flag.String("out", "bench/int8.json", "where to write the table (empty: nowhere)")
	only := flag.String("only", "", "run only this model (fashion or pills)")
	flag.Parse()
	if *threads == 0 {
		*threads = runtime.GOMAXPROCS(0)
	}
	b := &bench{rounds: *rounds, roundTime: *roundTime, threads: *threads, calib: *calib}
	if err := b.run(*out, *only); err != nil {
		fmt.Fprintln(os.Stderr, "int8:", err)
		os.Exit(1)
	}
}

type bench struct {
	rounds    int
	roundTime time.Duration
	threads   int
	calib     int
}

// model is one model of the benchmark: its derived file, where its data
// paths resolve, and its evaluation source.
type model struct {
	name, file, base string
	edits            [][2]string
	trained          string
	evalSource       string
	evalVal          bool // evaluate on the source's validation part (no test source)
}

func (b *bench) run(out, only string) error {
	tmp, err := os.MkdirTemp("", "pipe-int8-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fixtures.Write(filepath.Join(tmp, "data")); err != nil {
		return err
	}
	if err := fixtures.WritePillShelf(filepath.Join(tmp, "data", "pill_shelf"), shelfPerClass, 96); err != nil {
		return err
	}
	models := []model{
		{name: "fashion", file: "examples/fashion.pipe", base: ".", edits: [][2]string{{"epochs 5", "epochs 1"}},
			trained: "1 epoch (the file says 5)", evalSource: "test"},
		{name: "pills", file: "examples/pills.pipe", base: tmp, edits: [][2]string{
			{"device    a100-80gb", "device    cpu"},
			{`path    "data/pills"`, `path    "data/pill_shelf"`},
			{"split   0.9 seed 1", "split   0.7 seed 1"},
			{"resnet18 classes 20", "resnet18 classes 10"},
			{"epochs          30", "epochs          8"},
			{"batch           auto(max 256)", "batch           8"},
			{"effective_batch 256\n", ""},
			{"optimizer       sgd lr 0.1 momentum 0.9 nesterov weight_decay 1e-4", "optimizer       adam lr 1e-3"},
			{"schedule        step every 10 gamma 0.1\n", ""},
		}, trained: fmt.Sprintf("8 epochs on 70%% of the pill shelf (10 kinds × %d photographs, 96×96 resized to 224×224), batch 8, adam 1e-3 (the file says 30 epochs, batch 256, sgd)", shelfPerClass),
			evalSource: "shelf", evalVal: true},
	}
	t := table{
		Note: "int8 against fp32 on the native engine, measured in one run by bench/cmd/int8: accuracy on the eval set, " +
			"forward samples/s by the wall clock over interleaved rounds (same batch, same threads)",
		Date: time.Now().UTC().Format(time.RFC3339), Go: runtime.Version(), CPU: memrun.CPUName(), Default: fmt.Sprintf("p%g", engine.DefaultPercentile),
	}
	for _, m := range models {
		if only != "" && m.name != only {
			continue
		}
		r, err := b.model(m, filepath.Join(tmp, m.name))
		if err != nil {
			return fmt.Errorf("%s: %w", m.name, err)
		}
		t.Results = append(t.Results, *r)
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

// shelfPerClass is the photographs of each pill kind the benchmark writes.
const shelfPerClass = 40

func (b *bench) model(m model, dir string) (*result, error) {
	raw, err := os.ReadFile(m.file)
	if err != nil {
		return nil, err
	}
	src := string(raw)
	for _, e := range m.edits {
		if !strings.Contains(src, e[0]) {
			return nil, fmt.Errorf("%s no longer says %q: update the benchmark's edits", m.file, e[0])
		}
		src = strings.Replace(src, e[0], e[1], 1)
	}
	f, ds := lang.Parse(m.name+".pipe", []byte(src))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		return nil, ds
	}
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		return nil, dds
	}
	p, pds := planner.Plan(dec, planner.WithCosts(costs.Engines()...), planner.WithSource([]byte(src)), planner.WithDevice("cpu"), planner.WithEngine("native"))
	if pds.HasErrors() {
		return nil, pds
	}
	ckdir := filepath.Join(dir, "ckpt")
	fmt.Fprintf(os.Stderr, "int8: training %s (%s)\n", m.name, m.trained)
	t0 := time.Now()
	res, rds := run.Run(context.Background(), p, dec, run.Hooks{}, run.WithBackend(native.Backend{}), run.WithBase(m.base),
		run.WithCheckpointDir(ckdir), run.WithThreads(b.threads))
	if rds.HasErrors() {
		return nil, rds
	}
	fmt.Fprintf(os.Stderr, "int8: trained %s in %s, %d steps\n", m.name, time.Since(t0).Round(time.Second), res.Position.Step)
	batch := int(p.BatchSize)
	ckpt := filepath.Join(ckdir, folder.LastCheckpoint)
	fp, err := run.LoadTrained(p, dec, ckpt, native.Backend{}, batch, b.threads)
	if err != nil {
		return nil, err
	}
	defer fp.Close()

	// The evaluation set and the calibration batches, read as training
	// read them (the checkpoint's normalisation).
	opts := []dataset.Option{dataset.WithBase(m.base)}
	if nm := fp.Info.InputNorm; len(nm.Mean) > 0 {
		opts = append(opts, dataset.WithNorm(nm))
	}
	evalSrc := dec.Spec.Source(m.evalSource)
	if evalSrc == nil {
		return nil, fmt.Errorf("the file declares no source %q", m.evalSource)
	}
	evalSet, err := dataset.OpenSplit(evalSrc, opts...)
	if err != nil {
		return nil, err
	}
	defer evalSet.Close()
	evalDS := evalSet.All
	if m.evalVal {
		if evalDS = evalSet.Val; evalDS == nil {
			return nil, fmt.Errorf("source %s has no validation part", m.evalSource)
		}
	}
	trainSrc := dec.Spec.Source(p.Loader.Source)
	if trainSrc == nil {
		return nil, fmt.Errorf("the plan trains on source %q, which the file does not declare", p.Loader.Source)
	}
	trainSet, err := dataset.OpenSplit(trainSrc, opts...)
	if err != nil {
		return nil, err
	}
	defer trainSet.Close()
	evalBatches, err := readBatches(evalDS, batch, 0)
	if err != nil {
		return nil, err
	}
	calib, err := readBatches(trainSet.Train, batch, b.calib)
	if err != nil {
		return nil, err
	}
	for _, c := range calib {
		c.Y = nil
	}
	r := &result{Model: m.name, Trained: m.trained, EvalSet: m.evalSource, Batch: batch, Threads: b.threads, Rounds: b.rounds}
	if m.evalVal {
		r.EvalSet += " (its validation part, not trained on)"
	} else {
		r.EvalSet += " (all samples of the test source)"
	}
	want, n, acc, err := predictAll(fp, evalBatches)
	if err != nil {
		return nil, err
	}
	r.EvalSamples, r.FP32Accuracy = n, acc

	var int8Default *run.Trained
	for _, c := range calibrations {
		q, err := run.LoadTrained(p, dec, ckpt, native.Backend{}, batch, b.threads)
		if err != nil {
			return nil, err
		}
		rep, err := q.QuantizeInt8(calib, engine.WithPercentile(c.Percentile))
		if err != nil {
			q.Close()
			return nil, err
		}
		got, _, acc, err := predictAll(q, evalBatches)
		if err != nil {
			q.Close()
			return nil, err
		}
		r.Int8 = append(r.Int8, accuracy{Calibration: c.Name, Accuracy: acc, Agreement: agreement(want, got, len(want)/n)})
		if c.Percentile == engine.DefaultPercentile {
			int8Default = q
			r.WeightsFP32, r.WeightsInt8, r.Kernel = rep.WeightBytesFP32, rep.WeightBytesInt8, rep.Kernel
			for _, l := range rep.Layers {
				if l.Int8 {
					r.Int8Layers = append(r.Int8Layers, l.Name)
				} else if !strings.Contains(l.Why, "no weights") {
					r.FP32Layers = append(r.FP32Layers, l.Name+": "+l.Why)
				}
			}
			defer q.Close()
		} else {
			q.Close()
		}
	}
	if int8Default == nil {
		return nil, errors.New("no calibration is the default")
	}
	if err := b.speed(r, fp, int8Default, evalBatches[0]); err != nil {
		return nil, err
	}
	return r, nil
}

// readBatches copies up to limit (0: every) batches of ds, in order.
func readBatches(ds dataset.Dataset, batch, limit int) ([]*dataset.Batch, error) {
	it := dataset.NewLoader(ds, dataset.LoaderOptions{BatchSize: batch, Workers: 1}).Epoch(0)
	defer it.Close()
	var out []*dataset.Batch
	for limit == 0 || len(out) < limit {
		bt, err := it.Next(context.Background())
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &dataset.Batch{N: bt.N, X: slices.Clone(bt.X), Y: slices.Clone(bt.Y)})
		it.Release(bt)
	}
	return out, nil
}

// predictAll runs every batch and returns the outputs, the samples and
// the accuracy of the argmax against the labels.
func predictAll(t *run.Trained, bs []*dataset.Batch) ([]float32, int, float64, error) {
	o := 1
	for _, d := range t.Info.OutputShape {
		o *= int(d)
	}
	var out []float32
	n, right := 0, 0
	for _, b := range bs {
		y := make([]float32, b.N*o)
		if err := t.Predict(b.X, b.N, y); err != nil {
			return nil, 0, 0, err
		}
		for i := 0; i < b.N; i++ {
			if argmax(y[i*o:(i+1)*o]) == int(b.Y[i]) {
				right++
			}
		}
		n += b.N
		out = append(out, y...)
	}
	return out, n, float64(right) / float64(max(n, 1)), nil
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

func agreement(a, b []float32, o int) float64 {
	n, same := len(a)/o, 0
	for i := 0; i < n; i++ {
		if argmax(a[i*o:(i+1)*o]) == argmax(b[i*o:(i+1)*o]) {
			same++
		}
	}
	return float64(same) / float64(max(n, 1))
}

// speed times fp32 and int8 on the same batch in interleaved rounds.
func (b *bench) speed(r *result, fp, q *run.Trained, bt *dataset.Batch) error {
	o := 1
	for _, d := range fp.Info.OutputShape {
		o *= int(d)
	}
	y := make([]float32, bt.N*o)
	side := func(t *run.Trained, k int) (time.Duration, error) {
		t0 := time.Now()
		for i := 0; i < k; i++ {
			if err := t.Predict(bt.X, bt.N, y); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	// Warm-up: a few of each, and N from fp32's pace.
	for i := 0; i < 3; i++ {
		if _, err := side(q, 1); err != nil {
			return err
		}
	}
	d, err := side(fp, 3)
	if err != nil {
		return err
	}
	k := max(1, int(b.roundTime/(d/3)))
	var tf, tq time.Duration
	r.RatioMin, r.RatioMax = 1e9, 0
	for round := 0; round < b.rounds; round++ {
		var df, dq time.Duration
		if round%2 == 0 {
			if df, err = side(fp, k); err == nil {
				dq, err = side(q, k)
			}
		} else {
			if dq, err = side(q, k); err == nil {
				df, err = side(fp, k)
			}
		}
		if err != nil {
			return err
		}
		tf, tq = tf+df, tq+dq
		ratio := float64(df) / float64(dq)
		r.RatioMin, r.RatioMax = min(r.RatioMin, ratio), max(r.RatioMax, ratio)
	}
	samples := float64(b.rounds * k * bt.N)
	r.FP32PerSec = samples / tf.Seconds()
	r.Int8PerSec = samples / tq.Seconds()
	r.SpeedUp = float64(tf) / float64(tq)
	return nil
}

func print(t table) {
	fmt.Printf("int8 against fp32, native engine (%s, %s); int8 calibrated by %s unless named\n\n", t.CPU, t.Go, t.Default)
	fmt.Printf("%-8s %-7s %-9s %-22s %-28s %-10s %-10s %-8s %s\n", "model", "samples", "fp32 acc", "int8 acc (agreement)", "samples/s fp32 → int8", "speed-up", "(rounds)", "weights", "batch/threads")
	for _, r := range t.Results {
		var def accuracy
		for _, a := range r.Int8 {
			if a.Calibration == t.Default {
				def = a
			}
		}
		fmt.Printf("%-8s %-7d %-9.4f %-22s %-28s %-10s %-10s %-8s %d/%d\n", r.Model, r.EvalSamples, r.FP32Accuracy,
			fmt.Sprintf("%.4f (%.4f)", def.Accuracy, def.Agreement),
			fmt.Sprintf("%.0f → %.0f", r.FP32PerSec, r.Int8PerSec), fmt.Sprintf("%.2f×", r.SpeedUp),
			fmt.Sprintf("%.2f–%.2f", r.RatioMin, r.RatioMax), fmt.Sprintf("%.1f×", float64(r.WeightsFP32)/float64(max(r.WeightsInt8, 1))), r.Batch, r.Threads)
	}
	fmt.Println("\ncalibration (int8 accuracy, agreement with fp32's argmax):")
	for _, r := range t.Results {
		fmt.Printf("  %-8s", r.Model)
		for _, a := range r.Int8 {
			fmt.Printf("  %s %.4f (%.4f)", a.Calibration, a.Accuracy, a.Agreement)
		}
		fmt.Println()
	}
	for _, r := range t.Results {
		fp := strings.Join(r.FP32Layers, "; ")
		if fp == "" {
			fp = "none with weights (batchnorms fold into their convs)"
		}
		fmt.Printf("\n%s: trained %s; evaluated on %s\n  int8: %s\n  fp32: %s\n", r.Model, r.Trained, r.EvalSet, strings.Join(r.Int8Layers, ", "), fp)
	}
}
