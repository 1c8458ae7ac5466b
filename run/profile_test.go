package run_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/engine/native"
	"pipe/run"
	"pipe/stdlib"
)

// smallCNN is a conv block the planner fuses, a pool and a dense head, on
// synthetic images.
const smallCNN = `pipeline smallcnn
seed 3
source shapes synthetic { samples 120  shape [1, 12, 12]  classes 3  seed 5 }
source held synthetic { samples 40  shape [1, 12, 12]  classes 3  seed 6 }
model cnn {
  input [1, 12, 12]
  conv 8 k3 pad1 -> batchnorm -> relu -> maxpool 2
  flatten -> dense 3
}
train { source shapes  epochs 1  batch 8  optimizer adam lr 1e-3  loss cross_entropy  metrics [accuracy] }
evaluate { source held }
`

func profiled(t *testing.T, j *job, opts ...run.Option) *run.Result {
	t.Helper()
	all := append([]run.Option{run.WithBackend(native.Backend{}), run.WithThreads(1), run.WithBase(j.dir),
		run.WithCheckpointDir(filepath.Join(j.dir, "ckpt"))}, opts...)
	res, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, all...)
	if ds.HasErrors() {
		t.Fatalf("run failed:\n%v", ds)
	}
	if res.Engine != "native" || res.Profile == nil {
		t.Fatalf("engine %s, profile %v", res.Engine, res.Profile)
	}
	return res
}

func TestProfileTimesEveryLayer(t *testing.T) {
	j := newJob(t, smallCNN)
	if len(j.plan.Fusion.Groups) == 0 {
		t.Fatal("the plan fuses nothing; the test needs a fused group")
	}
	res := profiled(t, j, run.WithMaxSteps(8), run.WithProfile(run.ProfileOptions{Warmup: 2, TraceSteps: 4}))
	pr := res.Profile
	tr := pr.Train
	if tr == nil || tr.Steps != 6 || tr.MicroBatches != 6 || tr.Samples != 48 {
		t.Fatalf("train profile %+v, want the 6 steps of 8 samples after 2 warm-up steps", tr)
	}
	// One row per kernel: every node of the plan in exactly one row, a
	// fused group's nodes together.
	rowOf := map[string]string{}
	for _, l := range tr.Layers {
		if l.Name != strings.Join(l.Nodes, "+") || len(l.Ops) != len(l.Nodes) {
			t.Errorf("row %q: nodes %v, ops %v", l.Name, l.Nodes, l.Ops)
		}
		for _, n := range l.Nodes {
			if rowOf[n] != "" {
				t.Errorf("%s is in rows %s and %s", n, rowOf[n], l.Name)
			}
			rowOf[n] = l.Name
		}
	}
	for _, pl := range j.plan.Layers {
		if rowOf[pl.Name] == "" {
			t.Errorf("plan layer %s has no row", pl.Name)
		}
	}
	for _, g := range j.plan.Fusion.Groups {
		if rowOf[g.Nodes[0]] != strings.Join(g.Nodes, "+") {
			t.Errorf("fusion group %v is timed as %q", g.Nodes, rowOf[g.Nodes[0]])
		}
	}
	params := map[string]int64{}
	for _, pl := range j.plan.Layers {
		params[pl.Name] = pl.Params
	}
	for _, l := range tr.Layers {
		if l.ForwardSeconds <= 0 {
			t.Errorf("%s: forward %v s", l.Name, l.ForwardSeconds)
		}
		trainable := false
		for _, n := range l.Nodes {
			trainable = trainable || params[n] > 0
		}
		if trainable && (l.BackwardSeconds <= 0 || l.EstimatedBackwardSeconds <= 0 || l.GFLOPS <= 0) {
			t.Errorf("%s has parameters: backward %v s, estimated %v s, %v GFLOP/s", l.Name, l.BackwardSeconds, l.EstimatedBackwardSeconds, l.GFLOPS)
		}
		if l.Nodes[0] != "input" && l.EstimatedForwardSeconds <= 0 {
			t.Errorf("%s: no estimate", l.Name)
		}
	}
	// The spans inside the steps account for the steps' clock.
	inside := tr.LayerSeconds() + tr.LossSeconds + tr.LoaderSeconds + tr.OptimizerSeconds
	t.Logf("the spans hold %.1f%% of the steps' %.3f ms", 100*inside/tr.Seconds, 1e3*tr.Seconds)
	// The spans are timed inside the steps, so they can never exceed
	// them; how much they leave untimed (ZeroGrad, the calls between
	// kernels, the scheduler's pauses on a loaded machine) is timing, not
	// held here.
	if inside > tr.Seconds || inside <= 0 {
		t.Errorf("the spans sum to %.6f s of the steps' %.6f s (layers %.6f, loss %.6f, loader %.6f, optimizer %.6f)",
			inside, tr.Seconds, tr.LayerSeconds(), tr.LossSeconds, tr.LoaderSeconds, tr.OptimizerSeconds)
	}
	// The estimate is the plan's, for 48 samples: 6 of its batches.
	var est float64
	for _, pl := range j.plan.Layers {
		if r := pl.Roofline; r != nil {
			est += 6 * (r.ForwardSeconds + r.BackwardSeconds)
		}
	}
	est += 6 * j.plan.StepTime.OptimizerSeconds
	if math.Abs(tr.EstimatedSeconds-est) > 1e-9+1e-6*est {
		t.Errorf("estimated %v s, the plan says %v s", tr.EstimatedSeconds, est)
	}
	// The validation and final evaluations: forward passes only.
	if pr.Eval == nil || pr.Eval.Steps == 0 {
		t.Fatal("no evaluation batch was profiled")
	}
	for _, l := range pr.Eval.Layers {
		if l.ForwardSeconds <= 0 || l.BackwardSeconds != 0 || l.EstimatedBackwardSeconds != 0 {
			t.Errorf("eval %s: forward %v, backward %v, estimated backward %v", l.Name, l.ForwardSeconds, l.BackwardSeconds, l.EstimatedBackwardSeconds)
		}
	}
	checkTrace(t, pr, 4)
}

// checkTrace parses the trace back: every complete event lies inside one
// step (or evaluation batch) of its track, the events inside a step do
// not overlap and sum to no more than it, and each track holds the steps
// the trace keeps.
func checkTrace(t *testing.T, pr *run.Profile, keep int) {
	t.Helper()
	var buf bytes.Buffer
	if err := pr.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Name, Cat, Ph string
			TS, Dur       float64
			PID, TID      int
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("the trace is not JSON: %v", err)
	}
	type ev struct {
		name       string
		start, end float64
	}
	steps := map[int][]ev{}
	kids := map[int][]ev{}
	meta := 0
	for _, e := range doc.TraceEvents {
		switch {
		case e.Ph == "M":
			meta++
			continue
		case e.Ph != "X" || e.PID != 1 || e.TS < 0 || e.Dur < 0 || e.Name == "":
			t.Fatalf("bad event %+v", e)
		case e.Cat == "step":
			steps[e.TID] = append(steps[e.TID], ev{e.Name, e.TS, e.TS + e.Dur})
		default:
			kids[e.TID] = append(kids[e.TID], ev{e.Name, e.TS, e.TS + e.Dur})
		}
	}
	if meta < 3 || len(steps[1]) != keep || len(steps[2]) == 0 || len(steps[2]) > keep {
		t.Fatalf("%d metadata events, %d train steps and %d evaluation batches in the trace (keeping %d)", meta, len(steps[1]), len(steps[2]), keep)
	}
	const slack = 1.0 // µs: ts and dur are rounded apart
	for tid, ss := range steps {
		cs := kids[tid]
		sort.Slice(cs, func(a, b int) bool { return cs[a].start < cs[b].start })
		sum := make([]float64, len(ss))
		for i, c := range cs {
			in := -1
			for k, s := range ss {
				if c.start >= s.start-slack && c.end <= s.end+slack {
					in = k
				}
			}
			if in < 0 {
				t.Fatalf("track %d: %s [%v, %v] is in no step", tid, c.name, c.start, c.end)
			}
			sum[in] += c.end - c.start
			if i > 0 && c.start < cs[i-1].end-slack {
				t.Errorf("track %d: %s starts at %v, before %s ends at %v", tid, c.name, c.start, cs[i-1].name, cs[i-1].end)
			}
		}
		for k, s := range ss {
			if d := s.end - s.start; sum[k] > d+slack || sum[k] <= 0 {
				t.Errorf("track %d: %s lasts %v µs and holds %v µs of events", tid, s.name, d, sum[k])
			}
		}
	}
}

// TestProfileEvaluationOnly profiles a resumed run that only evaluates and
// predicts: no training steps, every layer's forward pass.
func TestProfileEvaluationOnly(t *testing.T) {
	j := newJob(t, smallCNN+"predict { source shapes  write \"pred.csv\" }\n")
	profiled(t, j, run.WithMaxSteps(2), run.WithProfile(run.ProfileOptions{}))
	res := profiled(t, j, run.WithResume(""), run.WithSkipTrain(), run.WithProfile(run.ProfileOptions{Warmup: 1}))
	pr := res.Profile
	if pr.Train != nil || pr.Eval == nil {
		t.Fatalf("train %+v, eval %+v", pr.Train, pr.Eval)
	}
	// 40 held-out samples evaluated and 120 predicted, by 8: 20
	// batches, less one warm-up.
	if pr.Eval.Steps != 19 || pr.Eval.Samples != 152 {
		t.Errorf("%d evaluation batches of %d samples", pr.Eval.Steps, pr.Eval.Samples)
	}
	for _, l := range pr.Eval.Layers {
		if l.ForwardSeconds <= 0 {
			t.Errorf("%s: forward %v", l.Name, l.ForwardSeconds)
		}
	}
	if in := pr.Eval.LayerSeconds() + pr.Eval.LossSeconds; in > pr.Eval.Seconds || in <= 0 {
		t.Errorf("evaluation: the spans sum to %v s of %v s", in, pr.Eval.Seconds)
	}
}

// TestProfileNeedsAnEngineThatTimes checks that an engine without
// Profiler is refused before training, in words.
func TestProfileNeedsAnEngineThatTimes(t *testing.T) {
	j := newJob(t, blobs)
	be := &enginetest.Backend{}
	res, ds := j.run(t, context.Background(), be, run.Hooks{}, run.WithProfile(run.ProfileOptions{}))
	d := findDiag(t, ds, run.CodeProfile)
	if !strings.Contains(d.Summary, "profile: not supported by this engine") || res.Position.Step != 0 || res.Profile != nil {
		t.Errorf("%s: %s; %d steps trained", d.Summary, d.Detail, res.Position.Step)
	}
}

// countingBackend is the native engine with its models' Profiler calls
// counted.
type countingBackend struct {
	native.Backend
	calls *int
}

type countingModel struct {
	engine.Model
	calls *int
}

func (b countingBackend) Build(g *stdlib.Graph, cfg engine.Config) (engine.Model, error) {
	m, err := b.Backend.Build(g, cfg)
	if err != nil {
		return nil, err
	}
	return countingModel{m, b.calls}, nil
}

func (m countingModel) Capabilities() engine.Capabilities {
	c := m.Model.Capabilities()
	c.Profile = m
	return c
}

func (m countingModel) EnableProfile(on bool) {
	*m.calls++
	m.Model.Capabilities().Profile.EnableProfile(on)
}

func (m countingModel) Profile() []engine.Span {
	*m.calls++
	return m.Model.Capabilities().Profile.Profile()
}

// TestProfileOffAsksNothing checks that a run without WithProfile never
// turns the model's profiling on nor asks it for spans, and that one with
// it asks after every step.
func TestProfileOffAsksNothing(t *testing.T) {
	j := newJob(t, smallCNN)
	for _, on := range []bool{false, true} {
		calls := 0
		opts := []run.Option{run.WithBackend(countingBackend{calls: &calls}), run.WithThreads(1), run.WithBase(j.dir),
			run.WithCheckpointDir(filepath.Join(j.dir, "ckpt")), run.WithMaxSteps(3)}
		if on {
			opts = append(opts, run.WithProfile(run.ProfileOptions{}))
		}
		res, ds := run.Run(context.Background(), j.plan, j.prog, run.Hooks{}, opts...)
		if ds.HasErrors() {
			t.Fatal(ds)
		}
		switch {
		case !on && (calls != 0 || res.Profile != nil):
			t.Errorf("profile off: %d calls to the model's Profiler", calls)
		case on && calls < 3:
			t.Errorf("profile on: %d calls for 3 steps", calls)
		}
	}
}
