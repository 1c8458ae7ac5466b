package run

// Profiling. With WithProfile, Run times every layer of every training
// step and every evaluation batch by the clock and holds each against the
// plan's roofline estimate for it (plan.LayerRoofline). The model times
// its own kernels (Profiler; a fused kernel is one row, never split among
// its nodes), and Run times the step, the loader's wait and the update.
// The first Warmup steps and batches are not counted; the trace (Trace
// Event Format, through encoding/json) keeps the first TraceSteps.
//
// Details: docs/design/profiling.md.

import (
	"encoding/json"
	"fmt"
	"io"
	"pipe/engine"
	"strings"
	"time"

	"pipe/dataset"
	"pipe/planner/plan"
)

// ProfileOptions are WithProfile's settings.
type ProfileOptions struct {
	// Warmup is the training steps, and the evaluation batches, run
	// before any is counted.
	Warmup int
	// TraceSteps is how many counted training steps, and evaluation
	// batches, the trace keeps (0: DefaultTraceSteps); the table counts
	// them all.
	TraceSteps int
}

// DefaultTraceSteps is the steps a trace keeps unless told otherwise.
const DefaultTraceSteps = 100

// WithProfile times every layer (Profiler) and fills Result.Profile.
func WithProfile(o ProfileOptions) Option {
	return func(c *runConfig) {
		if o.TraceSteps <= 0 {
			o.TraceSteps = DefaultTraceSteps
		}
		c.profile = &o
	}
}

// Profile is a run's time per layer, measured by the clock, beside the
// plan's roofline estimate (Result.Profile).
type Profile struct {
	// Engine is the engine that was timed; Device the plan's device and
	// Batch its micro-batch, which the estimates are for.
	Engine string `json:"engine"`
	Device string `json:"device"`
	Batch  int64  `json:"batch"`
	// Warmup is the training steps and evaluation batches left out.
	Warmup int `json:"warmup"`
	// Train is the counted training steps; nil when none was counted.
	Train *PhaseProfile `json:"train,omitempty"`
	// Eval is the counted evaluation and prediction batches; nil when
	// none was counted.
	Eval *PhaseProfile `json:"eval,omitempty"`
	// Trace holds the Chrome trace's events (WriteTrace).
	Trace []TraceEvent `json:"-"`
}

// PhaseProfile is the time of the training steps, or of the evaluation
// batches, that were counted. Seconds are totals over them.
type PhaseProfile struct {
	// Steps is the optimizer steps (or evaluation batches) counted,
	// MicroBatches and Samples what they computed.
	Steps        int   `json:"steps"`
	MicroBatches int   `json:"micro_batches"`
	Samples      int64 `json:"samples"`
	// Seconds is the clock around the whole steps (around Eval for
	// evaluation batches): the time the layers' shares are of.
	Seconds float64 `json:"seconds"`
	// LoaderSeconds is the wait for the loader's batches, LossSeconds the
	// loss and OptimizerSeconds the update (clipping included); 0 for
	// evaluation, except the loss.
	LoaderSeconds    float64 `json:"loader_seconds"`
	LossSeconds      float64 `json:"loss_seconds"`
	OptimizerSeconds float64 `json:"optimizer_seconds"`
	// EstimatedSeconds is the plan's roofline for the same samples: its
	// layers' forward and backward (forward only for evaluation), and
	// the optimizer's update per step.
	EstimatedSeconds float64 `json:"estimated_seconds"`
	// Layers are the kernels in the order they first ran.
	Layers []LayerProfile `json:"layers"`
}

// LayerSeconds is the layers' time: the sum of their forward, backward
// and recompute seconds.
func (p *PhaseProfile) LayerSeconds() float64 {
	var s float64
	for _, l := range p.Layers {
		s += l.Seconds()
	}
	return s
}

// LayerProfile is one kernel's time: a graph node's, or a fusion group's.
type LayerProfile struct {
	// Name is its nodes' names joined by "+"; Nodes and Ops its nodes
	// and their ops.
	Name  string   `json:"name"`
	Nodes []string `json:"nodes"`
	Ops   []string `json:"ops"`
	// ForwardSeconds, BackwardSeconds and RecomputeSeconds are measured,
	// totals over the counted steps.
	ForwardSeconds   float64 `json:"forward_seconds"`
	BackwardSeconds  float64 `json:"backward_seconds"`
	RecomputeSeconds float64 `json:"recompute_seconds,omitempty"`
	// EstimatedForwardSeconds and EstimatedBackwardSeconds are the
	// plan's roofline for the same samples: the sum of its nodes'
	// LayerRoofline, scaled from the plan's batch to the samples
	// computed. The backward estimate includes the recomputation.
	EstimatedForwardSeconds  float64 `json:"estimated_forward_seconds"`
	EstimatedBackwardSeconds float64 `json:"estimated_backward_seconds"`
	// FLOPs is the plan's FLOPs of the passes measured (forward,
	// backward as twice the forward, recomputation), and GFLOPS that
	// over the measured seconds.
	FLOPs  float64 `json:"flops"`
	GFLOPS float64 `json:"gflops"`
	// Bound is the plan's side of the roofline for it ("compute",
	// "memory", "mixed" for a fused group with both); "" without an
	// estimate.
	Bound string `json:"bound,omitempty"`
}

// Seconds is its measured time: forward, backward and recomputation.
func (l LayerProfile) Seconds() float64 {
	return l.ForwardSeconds + l.BackwardSeconds + l.RecomputeSeconds
}

// EstimatedSeconds is its estimated time, forward and backward.
func (l LayerProfile) EstimatedSeconds() float64 {
	return l.EstimatedForwardSeconds + l.EstimatedBackwardSeconds
}

// Ratio is measured over estimated, 0 without an estimate.
func (l LayerProfile) Ratio() float64 {
	if e := l.EstimatedSeconds(); e > 0 {
		return l.Seconds() / e
	}
	return 0
}

// TraceEvent is one event of the Trace Event Format that Perfetto and
// chrome://tracing open: "X" a complete event, "M" metadata. Times are
// microseconds from the run's start.
type TraceEvent struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  float64        `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// The trace's threads: training steps and evaluation batches.
const (
	traceTrain = 1
	traceEval  = 2
)

// WriteTrace writes the profile's trace as a Trace Event Format JSON
// object: training steps as "step N" events on one track with their
// loader waits, layers' passes, loss and update nested inside, and
// evaluation batches likewise on a second.
func (p *Profile) WriteTrace(w io.Writer) error {
	evs := []TraceEvent{
		{Name: "process_name", Ph: "M", PID: 1, Args: map[string]any{"name": "pipe " + p.Engine}},
		{Name: "thread_name", Ph: "M", PID: 1, TID: traceTrain, Args: map[string]any{"name": "train steps"}},
		{Name: "thread_name", Ph: "M", PID: 1, TID: traceEval, Args: map[string]any{"name": "evaluation batches"}},
	}
	evs = append(evs, p.Trace...)
	b, err := json.Marshal(struct {
		TraceEvents     []TraceEvent `json:"traceEvents"`
		DisplayTimeUnit string       `json:"displayTimeUnit"`
	}{evs, "ms"})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// profiler gathers a run's spans into its Profile.
type profiler struct {
	m     engine.Profiler
	opts  ProfileOptions
	start time.Time
	prof  *Profile
	// est are the plan's layers by name.
	est   map[string]*plan.Layer
	batch float64
	// optEst is the plan's estimate of one optimizer update.
	optEst float64
	// rows index the phase profiles' layers by name.
	rows map[*PhaseProfile]map[string]int
	// seen counts the training steps and evaluation batches run.
	seenTrain, seenEval int
	// step gathers the step in progress.
	step    []TraceEvent
	stepAcc PhaseProfile
	spans   []engine.Span
	samples int64
	micros  int
}

func newProfiler(m engine.Profiler, p *plan.Plan, engineName string, opts ProfileOptions, start time.Time) *profiler {
	pr := &profiler{m: m, opts: opts, start: start, batch: float64(max(p.BatchSize, 1)), optEst: p.StepTime.OptimizerSeconds,
		est: map[string]*plan.Layer{}, rows: map[*PhaseProfile]map[string]int{},
		prof: &Profile{Engine: engineName, Device: p.Device.Name, Batch: p.BatchSize, Warmup: opts.Warmup}}
	for i := range p.Layers {
		pr.est[p.Layers[i].Name] = &p.Layers[i]
	}
	m.EnableProfile(true)
	return pr
}

func (pr *profiler) us(t time.Time) float64 { return float64(t.Sub(pr.start).Nanoseconds()) / 1e3 }

func (pr *profiler) event(name, cat string, tid int, start time.Time, d time.Duration, args map[string]any) TraceEvent {
	return TraceEvent{Name: name, Cat: cat, Ph: "X", TS: pr.us(start), Dur: float64(d.Nanoseconds()) / 1e3, PID: 1, TID: tid, Args: args}
}

// loader records a wait for the loader in the step in progress.
func (pr *profiler) loader(start time.Time, d time.Duration) {
	pr.stepAcc.LoaderSeconds += d.Seconds()
	pr.step = append(pr.step, pr.event("loader wait", "loader", traceTrain, start, d, nil))
}

// optimizer records the update of the step in progress.
func (pr *profiler) optimizer(start time.Time, d time.Duration) {
	pr.stepAcc.OptimizerSeconds += d.Seconds()
	pr.step = append(pr.step, pr.event("optimizer", "optimizer", traceTrain, start, d, nil))
}

// micro takes the model's spans of a micro-batch of n samples.
func (pr *profiler) micro(n int) {
	pr.spans = append(pr.spans, pr.m.Profile()...)
	pr.samples += int64(n)
	pr.micros++
}

// endStep closes a training step that began at start and took d: it is
// counted unless it is a warm-up step.
func (pr *profiler) endStep(number int64, start time.Time, d time.Duration) {
	pr.seenTrain++
	if pr.seenTrain > pr.opts.Warmup {
		if pr.prof.Train == nil {
			pr.prof.Train = &PhaseProfile{}
		}
		pp := pr.prof.Train
		pp.LoaderSeconds += pr.stepAcc.LoaderSeconds
		pp.OptimizerSeconds += pr.stepAcc.OptimizerSeconds
		pp.EstimatedSeconds += pr.optEst
		pr.count(pp, traceTrain, fmt.Sprintf("step %d", number), start, d, true)
	}
	pr.reset()
}

// evalBatch takes the model's spans of an Eval of n samples that began
// at start and took d.
func (pr *profiler) evalBatch(n int, start time.Time, d time.Duration) {
	pr.spans = append(pr.spans, pr.m.Profile()...)
	pr.samples, pr.micros = int64(n), 1
	pr.seenEval++
	if pr.seenEval > pr.opts.Warmup {
		if pr.prof.Eval == nil {
			pr.prof.Eval = &PhaseProfile{}
		}
		pr.count(pr.prof.Eval, traceEval, fmt.Sprintf("eval batch %d", pr.seenEval), start, d, false)
	}
	pr.reset()
}

func (pr *profiler) reset() {
	pr.step, pr.spans, pr.stepAcc, pr.samples, pr.micros = pr.step[:0], pr.spans[:0], PhaseProfile{}, 0, 0
}

// count adds the gathered spans to pp, and to the trace while it has
// room.
func (pr *profiler) count(pp *PhaseProfile, tid int, name string, start time.Time, d time.Duration, train bool) {
	pp.Steps++
	pp.MicroBatches += pr.micros
	pp.Samples += pr.samples
	pp.Seconds += d.Seconds()
	scale := float64(pr.samples) / pr.batch
	traced := pp.Steps <= pr.opts.TraceSteps
	if traced {
		pr.prof.Trace = append(pr.prof.Trace, pr.event(name, "step", tid, start, d, map[string]any{"samples": pr.samples}))
		for i := range pr.step {
			pr.step[i].TID = tid
		}
		pr.prof.Trace = append(pr.prof.Trace, pr.step...)
	}
	rows := pr.rows[pp]
	if rows == nil {
		rows = map[string]int{}
		pr.rows[pp] = rows
	}
	ran := make([]bool, len(pp.Layers), len(pp.Layers)+len(pr.spans))
	for _, s := range pr.spans {
		if s.Phase == engine.PhaseLoss {
			pp.LossSeconds += s.Dur.Seconds()
			if traced {
				pr.prof.Trace = append(pr.prof.Trace, pr.event("loss", "loss", tid, s.Start, s.Dur, nil))
			}
			continue
		}
		key := strings.Join(s.Nodes, "+")
		i, ok := rows[key]
		if !ok {
			i = len(pp.Layers)
			rows[key] = i
			pp.Layers = append(pp.Layers, pr.newRow(key, s.Nodes))
			ran = append(ran, false)
		}
		l := &pp.Layers[i]
		switch s.Phase {
		case engine.PhaseForward:
			l.ForwardSeconds += s.Dur.Seconds()
			ran[i] = true
		case engine.PhaseBackward:
			l.BackwardSeconds += s.Dur.Seconds()
		case engine.PhaseRecompute:
			l.RecomputeSeconds += s.Dur.Seconds()
		}
		if traced {
			pr.prof.Trace = append(pr.prof.Trace, pr.event(key, string(s.Phase), tid, s.Start, s.Dur, nil))
		}
	}
	// The estimates, for the samples computed: each layer that ran, its
	// forward and, in training, its backward with any recomputation.
	pp.EstimatedSeconds = 0
	if train {
		pp.EstimatedSeconds = pr.optEst * float64(pp.Steps)
	}
	for i := range pp.Layers {
		l := &pp.Layers[i]
		if ran[i] {
			e := pr.estimate(l.Nodes)
			l.EstimatedForwardSeconds += e.fwd * scale
			l.FLOPs += e.flops * scale
			if train {
				l.EstimatedBackwardSeconds += e.bwd * scale
				l.FLOPs += e.bwdFLOPs * scale
			}
			l.Bound = e.bound
		}
		if s := l.Seconds(); s > 0 {
			l.GFLOPS = l.FLOPs / s / 1e9
		}
		pp.EstimatedSeconds += l.EstimatedSeconds()
	}
}

// rowEstimate is the plan's roofline of one kernel, per micro-batch.
type rowEstimate struct {
	fwd, bwd        float64
	flops, bwdFLOPs float64
	bound           string
}

// estimate sums the roofline of nodes: its seconds and FLOPs (the
// backward's are the forward's times its passes, as the planner counts
// them), and the bound, "mixed" when the nodes differ.
func (pr *profiler) estimate(nodes []string) rowEstimate {
	var e rowEstimate
	for _, n := range nodes {
		pl := pr.est[n]
		if pl == nil || pl.Roofline == nil {
			continue
		}
		r := pl.Roofline
		e.fwd += r.ForwardSeconds
		e.bwd += r.BackwardSeconds
		e.flops += r.ForwardFLOPs
		passes := 2.0
		if pl.Recomputed {
			passes = 3
		}
		e.bwdFLOPs += r.ForwardFLOPs * passes
		switch {
		case e.bound == "":
			e.bound = r.Bound
		case e.bound != r.Bound:
			e.bound = "mixed"
		}
	}
	return e
}

func (pr *profiler) newRow(key string, nodes []string) LayerProfile {
	l := LayerProfile{Name: key, Nodes: append([]string(nil), nodes...)}
	for _, n := range nodes {
		op := ""
		if pl := pr.est[n]; pl != nil {
			op = pl.Op
		}
		l.Ops = append(l.Ops, op)
	}
	return l
}

// finish turns profiling off and returns the profile.
func (pr *profiler) finish() *Profile {
	pr.m.EnableProfile(false)
	return pr.prof
}

// eval is r.model.Eval, timed under WithProfile.
func (r *runner) eval(b *dataset.Batch, out []float32) (float64, error) {
	if r.prof == nil {
		return r.model.Eval(b, out)
	}
	t0 := time.Now()
	loss, err := r.model.Eval(b, out)
	r.prof.evalBatch(b.N, t0, time.Since(t0))
	return loss, err
}
