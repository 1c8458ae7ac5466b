package forecast_test

import (
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/costs"
	"pipe/engine/enginetest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run/forecast"
	"pipe/stdlib"
)

const src = `pipeline tiny
seed 3
source blobs synthetic { samples 1000  shape [2, 8, 8]  classes 3  seed 5 }
model small {
  input [2, 8, 8]
  flatten -> dense 3
}
train { epochs 4  batch 32  optimizer adam lr 0.01  loss cross_entropy }
`

// planned checks, plans (with the accumulation given) and decodes src.
func planned(t *testing.T, src string, opts ...planner.Option) (*plan.Plan, *stdlib.Program, *stdlib.Graph) {
	t.Helper()
	f, ds := lang.Parse("t.pipe", []byte(src))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	opts = append([]planner.Option{planner.WithCosts(costs.Engines()...), planner.WithSource([]byte(src)), planner.WithDevice("cpu"),
		planner.WithHost(planner.HostInfo{MemTotal: 8 << 30, MemAvailable: 8 << 30, Cores: 2}), planner.WithTrainSamples(900, true)}, opts...)
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		t.Fatal(dds)
	}
	p, pds := planner.Plan(dec, opts...)
	if pds.HasErrors() {
		t.Fatal(pds)
	}
	g, _ := dec.Graph(p.Model)
	return p, dec, g
}

// keeper is a fake backend that keeps the models it builds.
type keeper struct {
	enginetest.Backend
	built []*enginetest.Model
}

func (k *keeper) Build(g *stdlib.Graph, cfg engine.Config) (engine.Model, error) {
	m, err := k.Backend.Build(g, cfg)
	if err == nil {
		k.built = append(k.built, m.(*enginetest.Model))
	}
	return m, err
}

// TestForecastTimesThePlansSteps: the first forecast builds the plan's
// model and trains whole steps of it (accumulation included) on batches
// of the plan's size; the epoch is the run's count of steps and
// validation batches at the times measured; the second forecast of the
// same plan comes from the cache without building anything, and another
// batch is another key.
func TestForecastTimesThePlansSteps(t *testing.T) {
	p, prog, g := planned(t, src, planner.WithBatch(8))
	p.AccumulationSteps = 3
	cache := filepath.Join(t.TempDir(), "forecasts.json")
	o := forecast.Options{Cache: cache, ValidationSamples: 100, Facts: "test"}
	b := &keeper{}
	f := forecast.For(b, g, p, prog, o)
	if f.StepSeconds <= 0 || f.Missing != "" || len(b.built) != 1 {
		t.Fatalf("forecast %+v after %d builds", f, len(b.built))
	}
	// One warm-up step, then 1 to 5 timed: each of 3 micro-batches.
	if n := b.built[0].TrainSteps; n%3 != 0 || n < 6 || n > 18 {
		t.Errorf("%d micro-batches trained: not whole steps of 3", n)
	}
	// 900 samples in batches of 8: 113 batches, 38 steps of 3; 100
	// validation samples: 13 batches.
	if f.StepsPerEpoch != 38 || f.ValidationBatches != 13 || f.Epochs != 4 {
		t.Errorf("epoch: %d steps, %d validation batches, %d epochs", f.StepsPerEpoch, f.ValidationBatches, f.Epochs)
	}
	want := 38*f.StepSeconds + 13*f.EvalBatchSeconds
	if d := f.EpochSeconds/want - 1; d > 1e-3 || d < -1e-3 {
		t.Errorf("epoch %g s, steps and validation %g s", f.EpochSeconds, want)
	}
	again := forecast.For(b, g, p, prog, o)
	if len(b.built) != 1 || again.StepSeconds != f.StepSeconds {
		t.Errorf("the cached forecast %+v built %d models", again, len(b.built))
	}
	other := *p
	other.BatchSize = 16
	if forecast.Key(&other, o) == forecast.Key(p, o) {
		t.Error("another batch has the same key")
	}
	o2 := o
	o2.Facts = "other kernels"
	if forecast.Key(p, o2) == forecast.Key(p, o) {
		t.Error("other kernels have the same key")
	}
}

// TestForecastFromARun: an engine not timed before a run (no backend
// given) has no forecast until a run of 20 steps or more records its
// step time, which then stands in.
func TestForecastFromARun(t *testing.T) {
	p, prog, g := planned(t, src)
	o := forecast.Options{Cache: filepath.Join(t.TempDir(), "f.json")}
	if f := forecast.For(nil, g, p, prog, o); f.StepSeconds != 0 || f.Missing == "" {
		t.Fatalf("before any run: %+v", f)
	}
	forecast.Record(p, o, 0.25, 19)
	if f := forecast.For(nil, g, p, prog, o); f.StepSeconds != 0 {
		t.Errorf("a run of 19 steps was kept: %+v", f)
	}
	forecast.Record(p, o, 0.25, 40)
	f := forecast.For(nil, g, p, prog, o)
	if f.StepSeconds != 0.25 || f.EpochSeconds != 0.25*29 || f.TotalSeconds != 4*f.EpochSeconds {
		t.Errorf("after a run of 40 steps at 0.25 s: %+v", f)
	}
}

// TestForecastSaysWhyNot: plans the forecast does not time say why.
func TestForecastSaysWhyNot(t *testing.T) {
	p, prog, g := planned(t, src)
	gpu := *p
	gpu.Backend, gpu.Device.Name = plan.BackendGPU, "a100-80gb"
	if f := forecast.For(&keeper{}, g, &gpu, prog, forecast.Options{}); f.Missing == "" || f.StepSeconds != 0 {
		t.Errorf("a GPU plan: %+v", f)
	}
}

// TestUntimedPlansTakeTheirLastRun: a plan whose step is not timed
// before a run (a GPU's here) says why until a run records its step,
// whose time then stands in, as the torch engine's does.
func TestUntimedPlansTakeTheirLastRun(t *testing.T) {
	p, prog, g := planned(t, src)
	gpu := *p
	gpu.Backend, gpu.Device.Name = plan.BackendGPU, "a100-80gb"
	o := forecast.Options{Cache: filepath.Join(t.TempDir(), "f.json")}
	f := forecast.For(&keeper{}, g, &gpu, prog, o)
	if f.StepSeconds != 0 || !strings.Contains(f.Missing, "only the CPU's steps") || !strings.Contains(f.Missing, "first run") {
		t.Fatalf("before a run: %+v", f)
	}
	forecast.Record(&gpu, o, 0.02, 50)
	f = forecast.For(&keeper{}, g, &gpu, prog, o)
	if f.StepSeconds != 0.02 || !strings.Contains(f.Source, "last run") {
		t.Errorf("after a run of 50 steps at 20 ms: %+v", f)
	}
}
