// Package forecast says how long a plan's steps and epochs take on this
// machine: it times the plan's own training and evaluation steps on its
// engine with synthetic batches, or takes a previous run's measured step
// time, and caches either under the user's cache folder, so that pipe
// plan answers "how long will this take?" from this machine's own rates
// and the run's report holds the answer against what it measured. The
// planner's roofline (plan.StepTime) stays beside it.
// Its neighbours: workflow asks it after planning; run's report reads
// plan.Forecast. docs/design/forecast.md says why it measures the whole
// step rather than summing per-kernel rates.
package forecast

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"pipe/dataset"
	"pipe/engine"
	"pipe/internal/hostcpu"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

// Options are what a forecast needs beyond the plan.
type Options struct {
	// Threads is the engine's threads as the run will set them (0: its
	// default); Facts names what else decides the speed and is not in
	// the plan (the BLAS kernels, the torch version). Both are in the
	// cache's key, with the CPU's model.
	Threads int
	Facts   string
	// Cache is the cache file; "" keeps nothing.
	Cache string
	// Budget bounds the timed steps (at least one runs); 0: DefaultBudget.
	Budget time.Duration
	// ValidationSamples is the samples evaluated after each epoch.
	ValidationSamples int64
}

// DefaultBudget is how long the timed training steps may take: three
// steps of most models, one of the largest.
const DefaultBudget = 1500 * time.Millisecond

// CacheFile is where forecasts are kept: the user's cache folder, ""
// where there is none.
func CacheFile() string {
	d, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(d, "pipe", "forecasts.json")
}

// entry is one plan's cached measurements: the engine's timed steps, and
// the last run's step time.
type entry struct {
	Step, Eval float64 `json:",omitempty"`
	Steps      int     `json:",omitempty"`
	Measured   string  `json:",omitempty"`
	RunStep    float64 `json:",omitempty"`
	RunSteps   int64   `json:",omitempty"`
	RunAt      string  `json:",omitempty"`
}

// For is the plan's forecast. A cached measurement is used as it is;
// otherwise, where b is given (an engine that computes in this process)
// and the plan's step can be timed here before a run (one model, one
// process, the CPU), the plan's steps are timed now; otherwise the last
// run's step time on this machine stands in (a GAN's, a data-parallel
// run's, a GPU's too), or Missing says why there is none.
func For(b engine.Backend, g *stdlib.Graph, p *plan.Plan, prog *stdlib.Program, o Options) plan.Forecast {
	f := plan.Forecast{}
	if p == nil || g == nil {
		f.Missing = "the plan has no model to time"
		return f
	}
	why := untimed(p)
	if b == nil && why == "" {
		why = "the " + p.EngineName() + " engine's steps are not timed before a run"
	}
	key := Key(p, o)
	e, _ := read(o.Cache, key)
	switch {
	case why == "" && e.Step > 0:
		f.StepSeconds, f.EvalBatchSeconds = e.Step, e.Eval
		f.Source = fmt.Sprintf("this plan's steps timed on the %s engine with synthetic batches here, %s (cached)", p.EngineName(), e.Measured)
	case why == "":
		step, eval, n, err := Measure(b, g, p, prog, o)
		if err != nil {
			f.Missing = "timing the plan's steps failed: " + err.Error()
			return f
		}
		e.Step, e.Eval, e.Steps, e.Measured = step, eval, n, time.Now().UTC().Format("2006-01-02")
		write(o.Cache, key, func(c *entry) { c.Step, c.Eval, c.Steps, c.Measured = e.Step, e.Eval, e.Steps, e.Measured })
		f.StepSeconds, f.EvalBatchSeconds = step, eval
		f.Source = fmt.Sprintf("this plan's steps timed on the %s engine with synthetic batches here: median of %d after a warm-up, by the clock", p.EngineName(), n)
	case e.RunStep > 0:
		f.StepSeconds = e.RunStep
		f.Source = fmt.Sprintf("the step time of this plan's last run here, %d steps, %s (the loader included)", e.RunSteps, e.RunAt)
	default:
		f.Missing = why + "; its first run of 20 steps or more here times them, and later plans take that"
		return f
	}
	epoch(&f, p, prog, o)
	return f
}

// untimed says why the plan's step cannot be timed here before a run
// ("" when it can).
func untimed(p *plan.Plan) string {
	switch {
	case p.GAN != nil:
		return "gan mode trains two models in one step, which is not timed before a run"
	case p.WorldSize() > 1:
		return "a data-parallel step spans processes, which is not timed before a run"
	case p.Backend != plan.BackendCPU:
		return "only the CPU's steps are timed before a run (" + p.Device.Name + "'s roofline is beside it)"
	}
	return ""
}

// epoch fills the epoch's steps, validation batches and time, as the run
// counts them (run_setup.go: batches of BatchSize, steps of
// AccumulationSteps of them, cut to steps_per_epoch).
func epoch(f *plan.Forecast, p *plan.Plan, prog *stdlib.Program, o Options) {
	b := max(p.BatchSize, 1)
	f.SamplesPerSecond = round(float64(b*max(p.AccumulationSteps, 1)) / f.StepSeconds)
	if p.TrainSamples <= 0 {
		return
	}
	k := max(p.AccumulationSteps, 1)
	nb := (p.TrainSamples + b - 1) / b
	if t := prog.Spec.Train; t != nil && t.StepsPerEpoch > 0 {
		nb = min(nb, t.StepsPerEpoch*k)
	}
	f.StepsPerEpoch = (nb + k - 1) / k
	if f.EvalBatchSeconds > 0 {
		f.ValidationBatches = (o.ValidationSamples + b - 1) / b
	}
	f.EpochSeconds = round(float64(f.StepsPerEpoch)*f.StepSeconds + float64(f.ValidationBatches)*f.EvalBatchSeconds)
	if t := prog.Spec.Train; t != nil && t.Epochs > 0 {
		f.Epochs = t.Epochs
		f.TotalSeconds = round(float64(t.Epochs) * f.EpochSeconds)
	}
}

// Measure times the plan's training step (AccumulationSteps micro-batches
// and the optimizer's update at a learning rate of 0, so that nothing
// diverges) and an evaluation batch on a model the engine builds from the
// plan, with synthetic batches of the plan's batch size: one warm-up step
// (the first allocates and faults in the step's memory), then steps until
// o.Budget is spent, at least one and at most five, and two evaluation
// batches. It returns the median step and evaluation batch in seconds and
// the steps timed, and hands the model's memory back to the OS after.
func Measure(b engine.Backend, g *stdlib.Graph, p *plan.Plan, prog *stdlib.Program, o Options) (step, eval float64, n int, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %v", engine.ErrInternal, rec)
		}
	}()
	cfg := run.ConfigFromPlan(p, prog)
	cfg.Threads = o.Threads
	m, err := build(b, g, cfg)
	if err != nil {
		return 0, 0, 0, err
	}
	defer func() {
		m.Close()
		m = nil
		runtime.GC()
		debug.FreeOSMemory()
	}()
	batch := dataset.RandomBatch(g.Input, g.OutShape(), p.Loss, int(p.BatchSize), 1)
	accum := int(max(p.AccumulationSteps, 1))
	one := func() error {
		m.ZeroGrad()
		for k := 0; k < accum; k++ {
			if _, err := m.TrainStep(batch, 1/float64(accum)); err != nil {
				return err
			}
		}
		return m.Step(0)
	}
	budget := o.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	if err := one(); err != nil {
		return 0, 0, 0, err
	}
	var steps []float64
	for start := time.Now(); len(steps) < 5 && (len(steps) == 0 || time.Since(start) < budget); {
		t0 := time.Now()
		if err := one(); err != nil {
			return 0, 0, 0, err
		}
		steps = append(steps, time.Since(t0).Seconds())
	}
	out := make([]float32, batch.N*int(numel(m.OutShape())))
	var evals []float64
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		if _, err := m.Eval(batch, out); err != nil {
			return 0, 0, 0, err
		}
		if i > 0 {
			evals = append(evals, time.Since(t0).Seconds())
		}
	}
	return median(steps), median(evals), len(steps), nil
}

// build calls Build and turns a panic into an error, as the run does.
func build(b engine.Backend, g *stdlib.Graph, cfg engine.Config) (m engine.Model, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			err = fmt.Errorf("%w: %v", engine.ErrInternal, rec)
		}
	}()
	m, err = b.Build(g, cfg)
	if err == nil && m == nil {
		err = errors.New("the engine built no model")
	}
	return m, err
}

// Record keeps a run's measured step time (its training seconds over the
// steps it trained) for the plan, for the next forecast of an engine
// that is not timed before a run. Runs of fewer than 20 steps are not
// kept: their first steps weigh too much.
func Record(p *plan.Plan, o Options, stepSeconds float64, steps int64) {
	if p == nil || steps < 20 || stepSeconds <= 0 || math.IsInf(stepSeconds, 0) {
		return
	}
	write(o.Cache, Key(p, o), func(c *entry) {
		c.RunStep, c.RunSteps, c.RunAt = stepSeconds, steps, time.Now().UTC().Format("2006-01-02")
	})
}

// Key names a plan's speed on this machine: what the plan decided that
// changes a step's work (the engine, the model's layers, the batch,
// accumulation, precision, recomputation, fusion, the optimizer and the
// loss), the threads, o.Facts, the CPU's model and this pipe's build (a
// faster pipe must not be forecast by an older one's steps).
func Key(p *plan.Plan, o Options) string {
	type layer struct {
		Name, Op string
		Out      []int64
	}
	ls := make([]layer, len(p.Layers))
	for i, l := range p.Layers {
		ls[i] = layer{l.Name, l.Op, l.Out}
	}
	b, _ := json.Marshal(struct {
		Engine, Model, Loss, Optimizer string
		Layers                         []layer
		Batch, Accum                   int64
		Precision                      plan.Precision
		Checkpoint                     []plan.CheckpointSegment
		Fusion                         []plan.FusionGroup
		Threads                        int
		Facts, CPU, Build              string
	}{p.EngineName(), p.Model, p.Loss, p.Optimizer.Kind, ls, p.BatchSize, p.AccumulationSteps, p.Precision,
		p.Checkpoint.Segments, p.Fusion.Groups, o.Threads, o.Facts, hostcpu.Identity(), buildID()})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:10])
}

// buildID names this program's build: its commit and whether the tree was
// modified (as go build records them), and the executable's size and
// time, which change with every build of a modified tree.
var buildID = sync.OnceValue(func() string {
	var id string
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, st := range bi.Settings {
			if st.Key == "vcs.revision" || st.Key == "vcs.modified" {
				id += st.Value + " "
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		if fi, err := os.Stat(exe); err == nil {
			id += fmt.Sprintf("%d %d", fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return id
})

func read(path, key string) (entry, bool) {
	m := load(path)
	e, ok := m[key]
	return e, ok
}

func load(path string) map[string]entry {
	m := map[string]entry{}
	if path == "" {
		return m
	}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &m)
	}
	return m
}

// write changes key's entry with set and writes the cache atomically (a
// temporary file renamed over it). A cache that cannot be written is
// skipped; a process that raced this one may lose its entry, which only
// costs a measurement again.
func write(path, key string, set func(*entry)) {
	if path == "" {
		return
	}
	m := load(path)
	e := m[key]
	set(&e)
	m[key] = e
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return
	}
	_ = folder.WriteFileAtomic(path, func(w io.Writer) error { _, err := w.Write(b); return err })
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func numel(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n *= d
	}
	return n
}

// round keeps 4 significant digits.
func round(x float64) float64 {
	if x == 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	e := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(x))))
	return math.Round(x*e) / e
}
