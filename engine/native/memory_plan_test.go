package native

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	"pipe/engine"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/stdlib"
)

// These tests hold the planner's CPU memory model (this engine's cost
// model, cost.go, as planner/memory_cpu.go adds it up) to what this
// backend allocates: every example is planned for the fixed host of the
// planner's golden plans, built at its plan, trained one step and
// evaluated once, and Memory() is compared with the plan's estimate.

// planHost is the planner's golden-test machine: 24 GiB and 2 cores.
var planHost = planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}

// memTolerance is how far the measured memory may be from the plan's.
const memTolerance = 0.10

func loadProgram(t *testing.T, path string) *lang.Program {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, ds := lang.Parse(filepath.Base(path), src)
	p, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatalf("%s does not check:\n%v", path, ds)
	}
	return p
}

func planCPU(t *testing.T, prog *lang.Program, host planner.HostInfo, opts ...planner.Option) *plan.Plan {
	t.Helper()
	p, ds := planner.Plan(progtest.Decoded(t, prog), append([]planner.Option{planner.WithCosts(Cost{}), planner.WithHost(host), planner.WithDevice("cpu")}, opts...)...)
	if p == nil || ds.HasErrors() {
		t.Fatalf("%s does not plan:\n%v", prog.Name, ds)
	}
	return p
}

// testBatch keeps a step near 100 GFLOPs: the plan's batch when it is at
// most 64 and cheap enough, else fewer, but at least 4; a power of two,
// so it divides an effective_batch.
func testBatch(p *plan.Plan) int64 {
	b := min(p.BatchSize, 64)
	if f := 3 * p.FLOPsPerSample; f > 0 && b*f > 100e9 {
		b = max(4, 100e9/f)
	}
	pow := int64(1)
	for pow*2 <= b {
		pow *= 2
	}
	return pow
}

// buildAt builds the plan's model at the plan's batch, segments and
// fusion, with one worker per core of the planned device, and trains one
// step and evaluates once on a synthetic batch of the right shapes, so
// Memory() holds the training arena and the evaluation arena as a run
// does.
func buildAt(t *testing.T, prog *lang.Program, p *plan.Plan, cfg engine.Config) engine.MemStats {
	t.Helper()
	g, ds := stdlib.BuildGraph(prog.Model(p.Model))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	cfg.Threads = p.Device.Cores
	m := mustBuild(t, g, cfg)
	b := randomBatch(m, cfg.Batch, 1)
	if _, err := m.TrainStep(b, 1); err != nil {
		t.Fatal(err)
	}
	if err := m.Step(1e-4); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Eval(b, nil); err != nil {
		t.Fatal(err)
	}
	return m.Memory()
}

func mib(n int64) string { return fmt.Sprintf("%.2f", float64(n)/(1<<20)) }

// TestMemoryMatchesPlan: for every example, the memory a run reports
// (the model's Memory().Total plus the loader's buffers, which this test
// takes from the plan as it runs no loader) is within memTolerance of the
// plan's Memory.Total, and the parts the plan computes exactly (parameters,
// gradients, optimizer state, scratch) are exact.
func TestMemoryMatchesPlan(t *testing.T) {
	paths, _ := filepath.Glob("../../examples/*.pipe")
	if len(paths) < 7 {
		t.Fatalf("found %d examples", len(paths))
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "example\tbatch\tsegments\testimated MiB\tmeasured MiB\tratio\tplanned peak MiB\tpeak live MiB\tarena MiB\teval plan MiB\teval arena MiB\t")
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pipe")
		t.Run(name, func(t *testing.T) {
			prog := loadProgram(t, path)
			b := testBatch(planCPU(t, prog, planHost))
			p := planCPU(t, prog, planHost, planner.WithBatch(b))
			if !p.Fits {
				t.Fatalf("batch %d does not fit the plan's host", b)
			}
			ms := buildAt(t, prog, p, run.ConfigFromPlan(p, progtest.Decoded(t, prog)))
			pm := p.Memory
			// The executor's share of the plan: the process's runtime,
			// data, checkpoint copy and collector headroom are the OS's to
			// confirm (cmd/pipe's TestPlanTotalIsTheProcessPeak), and the
			// folded weights live outside the arenas.
			pm.Total -= pm.Runtime + pm.Data + pm.Checkpoint + pm.Headroom + pm.Folds
			pm.Eval -= pm.Folds
			if p.GAN != nil {
				// The discriminator is built beside the generator by a
				// gan run (run.ganModel), not here: this checks the
				// generator's part.
				pm.Total -= p.GAN.Memory.Total
			}
			measured := ms.Total + pm.Loader
			ratio := float64(measured) / float64(pm.Total)
			peak := pm.Activations + pm.ActivationGradients + pm.Input
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t\n", name, b, len(p.Checkpoint.Segments),
				mib(pm.Total), mib(measured), ratio, mib(peak), mib(ms.PeakLive), mib(ms.Arena), mib(pm.Eval), mib(ms.EvalArena))
			if math.Abs(ratio-1) > memTolerance {
				t.Errorf("measured %s MiB against %s MiB planned (%.1f%%)", mib(measured), mib(pm.Total), 100*(ratio-1))
			}
			for _, c := range []struct {
				what           string
				plan, measured int64
			}{
				{"parameters", pm.Parameters, ms.Parameters},
				{"gradients", pm.Gradients, ms.Gradients},
				{"optimizer state", pm.Optimizer, ms.Optimizer},
				{"scratch", pm.Workspace, ms.Scratch},
			} {
				if c.plan != c.measured {
					t.Errorf("%s: planned %d bytes, measured %d", c.what, c.plan, c.measured)
				}
			}
			// The arena's peak of live tensors is what the planner lays
			// out; it differs only by the per-channel buffers it counts
			// for every batchnorm at once.
			if d := math.Abs(float64(peak-ms.PeakLive)) / float64(ms.PeakLive); d > 0.01 {
				t.Errorf("peak of live tensors: planned %d bytes, measured %d (%.2f%%)", peak, ms.PeakLive, 100*d)
			}
		})
	}
	tw.Flush()
	t.Log("\n" + table.String())
}

// TestCheckpointLowersMemory plans cells.pipe on a host too small for its
// activations at batch 4, so the planner recomputes segments, and builds
// the model with the plan's segments and without them: the measured peak
// of live tensors, and the arena holding them, come down by the reduction
// the plan's checkpoint.peak_before and peak_after give, within 15%.
func TestCheckpointLowersMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a U-Net on 256×256 images twice")
	}
	prog := loadProgram(t, "../../examples/cells.pipe")
	const batch = 4
	free := planCPU(t, prog, planHost, planner.WithBatch(batch))
	if len(free.Checkpoint.Segments) > 0 {
		t.Fatalf("segments on a 24 GiB host: %+v", free.Checkpoint.Segments)
	}
	// A host whose budget leaves the activations 70%, 80% or 90% of their
	// peak: the first that the planner fits with segments.
	var p *plan.Plan
	for _, keep := range []float64{0.7, 0.8, 0.9} {
		budget := free.Memory.Total - int64((1-keep)*float64(free.Checkpoint.PeakBefore))
		capacity := int64(float64(budget+free.Memory.Reserve)/(1-free.Memory.MarginPercent/100)) + 1
		host := planner.HostInfo{MemTotal: capacity, MemAvailable: capacity, Cores: planHost.Cores}
		q, ds := planner.Plan(progtest.Decoded(t, prog), planner.WithCosts(Cost{}), planner.WithHost(host), planner.WithDevice("cpu"), planner.WithBatch(batch))
		if q != nil && q.Fits && !ds.HasErrors() && len(q.Checkpoint.Segments) > 0 {
			p = q
			break
		}
	}
	if p == nil {
		t.Fatal("no small host made the planner recompute segments at batch 4")
	}
	ck := p.Checkpoint
	cfg := run.ConfigFromPlan(p, progtest.Decoded(t, prog))
	with := buildAt(t, prog, p, cfg)
	cfg.Checkpoint = nil
	without := buildAt(t, prog, p, cfg)

	planned := ck.PeakBefore - ck.PeakAfter
	live := without.PeakLive - with.PeakLive
	arena := without.Arena - with.Arena
	t.Logf("cells at batch %d, budget %s MiB, %d segments (+%.1f%% FLOPs): planned peak %s → %s MiB (−%s); measured peak of live tensors %s → %s MiB (−%s), arena %s → %s MiB (−%s); total with segments %s MiB planned, %s measured",
		batch, mib(p.Memory.Budget), len(ck.Segments), ck.ExtraPercent, mib(ck.PeakBefore), mib(ck.PeakAfter), mib(planned),
		mib(without.PeakLive), mib(with.PeakLive), mib(live), mib(without.Arena), mib(with.Arena), mib(arena),
		mib(p.Memory.Total), mib(with.Total+p.Memory.Loader))
	if planned <= 0 {
		t.Fatalf("the plan's segments lower nothing: peak %d → %d", ck.PeakBefore, ck.PeakAfter)
	}
	for _, c := range []struct {
		what     string
		measured int64
	}{{"peak of live tensors", live}, {"arena", arena}} {
		if d := math.Abs(float64(c.measured-planned)) / float64(planned); d > 0.15 {
			t.Errorf("%s: checkpointing lowered it by %s MiB, the plan says %s MiB (%.1f%% off)", c.what, mib(c.measured), mib(planned), 100*d)
		}
	}
	if with.Total+p.Memory.Loader > p.Memory.Budget {
		t.Errorf("with the plan's segments the run needs %s MiB, over the budget of %s MiB", mib(with.Total+p.Memory.Loader), mib(p.Memory.Budget))
	}
}
