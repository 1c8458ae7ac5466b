package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/engine/torch"
	"pipe/internal/progtest"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
	"pipe/workflow"
)

const tinyPipe = `pipeline tiny
seed 4
source blobs synthetic { samples 240  shape [1, 4, 4]  classes 3  seed 9 }
model net {
  input [1, 4, 4]
  flatten -> dense 3
}
train { source blobs  epochs 2  batch 16  optimizer adam lr 0.05  loss cross_entropy }
`

func program(t *testing.T, src string) *lang.Program {
	t.Helper()
	f, ds := lang.Parse("tiny.pipe", []byte(src))
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		t.Fatal(ds)
	}
	return prog
}

// cpuHost is a machine of 24 GiB and 2 cores; gpus adds A100s.
func cpuHost(gpus int) func() planner.HostInfo {
	return func() planner.HostInfo {
		h := planner.HostInfo{MemTotal: 24 << 30, MemAvailable: 24 << 30, Cores: 2}
		for range gpus {
			h.GPUs = append(h.GPUs, planner.GPUInfo{Name: "NVIDIA A100-SXM4-80GB", MemTotal: 80 << 30, MemFree: 80 << 30})
		}
		return h
	}
}

// probe is a torch probe that counts its calls and answers err, or a
// torch that sees gpus CUDA devices.
func probe(calls *int, gpus int, err error) workflow.Option {
	return workflow.WithProbe(func(python string) (engine.Runtime, error) {
		*calls++
		return engine.Runtime{Executable: python, Version: "2.11.0", GPU: gpus > 0, GPUs: gpus}, err
	})
}

// TestCommandsPlanWithTheSameFacts: pipe plan, run, serve and the editor
// give the planner the training set's size; export skips the data, as its
// purpose says.
func TestCommandsPlanWithTheSameFacts(t *testing.T) {
	prog := program(t, tinyPipe)
	var calls int
	wf := workflow.New(workflow.WithHost(cpuHost(0)), probe(&calls, 0, nil))
	for _, c := range []struct {
		purpose workflow.Purpose
		samples int64
	}{{workflow.ForPlan, 240}, {workflow.ForRun, 240}, {workflow.ForServe, 240}, {workflow.ForExport, 0}, {workflow.ForEditor, 240}} {
		pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: c.purpose})
		if pl.Plan == nil || ds.HasErrors() {
			t.Fatalf("purpose %d: %v", c.purpose, ds)
		}
		if got := pl.Plan.TrainSamples; got != c.samples {
			t.Errorf("purpose %d: planned with %d training samples, want %d", c.purpose, got, c.samples)
		}
		if got := pl.Plan.Device.Name; got != "cpu" {
			t.Errorf("purpose %d: device %s, want cpu", c.purpose, got)
		}
		if (pl.Plan.Serve != nil) != (c.purpose == workflow.ForServe) {
			t.Errorf("purpose %d: serving planned: %v", c.purpose, pl.Plan.Serve != nil)
		}
	}
	if calls != 0 {
		t.Errorf("the torch engine was probed %d times for a CPU plan", calls)
	}
}

// TestEditorCountsAfreshWhenTheDataChange: the language server's data
// facts are cached, and counted again once the file they read changes.
func TestEditorCountsAfreshWhenTheDataChange(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "rows.csv")
	rows := func(n int) {
		var b strings.Builder
		b.WriteString("a,b,y\n")
		for i := range n {
			fmt.Fprintf(&b, "%d,%d,%d\n", i, i*2, i%2)
		}
		if err := os.WriteFile(csv, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src := strings.ReplaceAll(`pipeline rows
source train csv { path "CSV"  label "y" }
model net {
  input [2]
  dense 2
}
train { epochs 1  batch 4  optimizer sgd lr 0.1  loss cross_entropy }
`, "CSV", csv)
	prog := program(t, src)
	wf := workflow.New(workflow.WithHost(cpuHost(0)))
	for _, n := range []int64{40, 40, 64} {
		rows(int(n))
		var pl *workflow.Planned
		for range 200 { // the count runs in the background
			pl, _ = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForEditor})
			if pl.Plan != nil && pl.Plan.TrainSamples != 0 {
				break
			}
		}
		if pl.Plan == nil || pl.Plan.TrainSamples != n {
			t.Fatalf("%d rows: the editor planned with %v training samples", n, pl.Plan)
		}
	}
}

// TestRunGivesUpAGPUTorchCannotUse: device auto finds a GPU; a run keeps
// it only when the torch engine starts, and pipe plan never asks.
func TestRunGivesUpAGPUTorchCannotUse(t *testing.T) {
	prog := program(t, tinyPipe)
	var calls int
	noTorch := &torch.StartError{Python: "python3", Reason: "cannot import torch", NoTorch: true}
	wf := workflow.New(workflow.WithHost(cpuHost(1)), probe(&calls, 0, noTorch))
	pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForPlan})
	if pl.Plan == nil || pl.Plan.Device.Name != "cuda:0" || calls != 0 || ds.HasErrors() {
		t.Fatalf("pipe plan: %+v after %d probes\n%v", pl.Plan.Device, calls, ds)
	}
	pl, ds = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun})
	if pl.Plan == nil || ds.HasErrors() {
		t.Fatal(ds)
	}
	if pl.FellBack == nil || pl.FellBack.Device != "cuda:0" || !errors.Is(pl.FellBack.Err, noTorch) {
		t.Errorf("fell back: %+v", pl.FellBack)
	}
	if pl.Plan.Device.Name != "cpu" || pl.Plan.EngineName() != plan.EngineNative {
		t.Errorf("planned %s with %s, want the CPU with the native engine", pl.Plan.Device.Name, pl.Plan.EngineName())
	}

	calls = 0
	wf = workflow.New(workflow.WithHost(cpuHost(1)), probe(&calls, 1, nil))
	pl, _ = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun})
	if pl.FellBack != nil || pl.Runtime == nil || pl.Plan.Device.Name != "cuda:0" || pl.Plan.EngineName() != plan.EngineTorch {
		t.Fatalf("with torch: fell back %+v, device %s, engine %s", pl.FellBack, pl.Plan.Device.Name, pl.Plan.EngineName())
	}
	// The engines' set-up asks no second time.
	engines, err := wf.RunEngines(pl, engine.Place{})
	if err != nil || len(engines) != 1 || engines[0].Name() != plan.EngineTorch || calls != 1 {
		t.Errorf("engines %v, err %v, %d probes", engines, err, calls)
	}
}

// TestRunTakesEveryGPU: on a machine with two GPUs a run plans data
// parallelism over both unless told; pipe plan plans one device.
func TestRunTakesEveryGPU(t *testing.T) {
	prog := program(t, tinyPipe)
	var calls int
	wf := workflow.New(workflow.WithHost(cpuHost(2)), probe(&calls, 2, nil))
	for purpose, want := range map[workflow.Purpose]int{workflow.ForRun: 2, workflow.ForPlan: 1} {
		pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: purpose, Device: "a100-80gb"})
		if pl.Plan == nil || ds.HasErrors() {
			t.Fatal(ds)
		}
		if got := pl.Plan.Distributed.NProcPerNode; got != want {
			t.Errorf("purpose %d: %d processes a node, want %d", purpose, got, want)
		}
	}
	pl, _ := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun, Device: "a100-80gb", NProcPerNode: 1})
	if got := pl.Plan.Distributed.NProcPerNode; got != 1 {
		t.Errorf("--nproc-per-node 1 planned %d", got)
	}
}

// TestRunEnginesRefuseAGPUTorchDoesNotSee: a GPU plan whose torch sees
// no CUDA device is refused before any data is read.
func TestRunEnginesRefuseAGPUTorchDoesNotSee(t *testing.T) {
	prog := program(t, tinyPipe)
	var calls int
	engines := workflow.WithEngines(func(engine.Setup) []engine.Backend {
		return []engine.Backend{&enginetest.Backend{}, &enginetest.Backend{BackendName: "torch"}}
	})
	// nvidia-smi lists a GPU, and the torch engine's torch sees none.
	wf := workflow.New(workflow.WithHost(cpuHost(1)), probe(&calls, 0, nil), engines)
	pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun, Device: "a100-80gb"})
	if pl.Plan == nil || ds.HasErrors() {
		t.Fatal(ds)
	}
	if _, err := wf.RunEngines(pl, engine.Place{}); err == nil || !strings.Contains(err.Error(), "sees no CUDA device") {
		t.Errorf("err %v", err)
	}
	// A machine without any GPU is told so: the file's GPU profile is not
	// here, rather than only "cannot import torch" (issue 20).
	calls = 0
	wf = workflow.New(workflow.WithHost(cpuHost(0)), probe(&calls, 0, errors.New("no module named torch")), engines)
	pl, _ = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun, Device: "a100-80gb"})
	if _, err := wf.RunEngines(pl, engine.Place{}); err == nil || !strings.Contains(err.Error(), "has no GPU") || !strings.Contains(err.Error(), "--device cpu") {
		t.Errorf("a GPU profile on a machine without one: %v", err)
	}
	wf = workflow.New(workflow.WithHost(cpuHost(0)), probe(&calls, 0, nil), engines)
	pl, _ = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun})
	got, err := wf.RunEngines(pl, engine.Place{})
	if err != nil || len(got) != 1 || got[0].Name() != plan.EngineNative {
		t.Errorf("a CPU plan got engines %v, err %v", got, err)
	}
}

// TestRecheckRefusesAChangedSource: a plan file whose source changed is
// not run, and one edited to fit no more is told apart.
func TestRecheckRefusesAChangedSource(t *testing.T) {
	prog := program(t, tinyPipe)
	wf := workflow.New(workflow.WithHost(cpuHost(0)))
	pl, _ := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForPlan, Source: []byte(tinyPipe)})
	if r := wf.Recheck(context.Background(), prog, []byte(tinyPipe), pl.Plan); r.Verdict != workflow.Runnable || r.Planned == nil || r.Planned.Plan != pl.Plan {
		t.Errorf("the plan as made: verdict %d, %v", r.Verdict, r.Diags)
	}
	if r := wf.Recheck(context.Background(), prog, []byte(tinyPipe+"\n"), pl.Plan); r.Verdict != workflow.SourceChanged || r.Changed == nil {
		t.Errorf("a changed source: verdict %d", r.Verdict)
	}
	edited := *pl.Plan
	edited.AccumulationSteps += 3
	if r := wf.Recheck(context.Background(), prog, []byte(tinyPipe), &edited); r.Verdict != workflow.Moved {
		t.Errorf("an edited plan: verdict %d", r.Verdict)
	}
}

func TestDefaultCheckpointPrefersBest(t *testing.T) {
	dir := t.TempDir()
	prog := program(t, tinyPipe)
	if got := workflow.DefaultCheckpoint(prog, dir); got != filepath.Join(dir, folder.LastCheckpoint) {
		t.Errorf("without best.ckpt: %s", got)
	}
	if err := os.WriteFile(filepath.Join(dir, folder.BestCheckpoint), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := workflow.DefaultCheckpoint(prog, dir); got != filepath.Join(dir, folder.BestCheckpoint) {
		t.Errorf("with best.ckpt: %s", got)
	}
	t.Chdir(t.TempDir())
	if got := workflow.DefaultCheckpoint(prog, ""); got != filepath.Join("out", "tiny", folder.LatestName, folder.LastCheckpoint) {
		t.Errorf("no run yet: %s", got)
	}
}

// TestDefaultCheckpointIsTheLatestRuns: given no folder, serve and export
// load the latest run's best.ckpt, else its last.ckpt, never an earlier
// run's; before run folders existed, out/PIPELINE/checkpoints is read
// while there is no latest.
func TestDefaultCheckpointIsTheLatestRuns(t *testing.T) {
	prog := program(t, tinyPipe)
	t.Chdir(t.TempDir())
	root := filepath.Join("out", "tiny")
	old := filepath.Join(root, "checkpoints")
	touch := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	touch(filepath.Join(old, folder.LastCheckpoint))
	if got := workflow.DefaultCheckpoint(prog, ""); got != filepath.Join(old, folder.LastCheckpoint) {
		t.Errorf("the old layout: %s", got)
	}
	first, err := workflow.PlaceRun(progtest.Decoded(t, prog), run.Where{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := workflow.PlaceRun(progtest.Decoded(t, prog), run.Where{})
	if err != nil || second.Dir == first.Dir {
		t.Fatalf("two runs placed in %s and %s (%v)", first.Dir, second.Dir, err)
	}
	touch(filepath.Join(first.Dir, folder.BestCheckpoint))
	touch(filepath.Join(second.Dir, folder.LastCheckpoint))
	if err := os.Symlink(filepath.Join("runs", filepath.Base(second.Dir)), filepath.Join(root, folder.LatestName)); err != nil {
		t.Fatal(err)
	}
	if got := workflow.DefaultCheckpoint(prog, ""); got != filepath.Join(second.Dir, folder.LastCheckpoint) {
		t.Errorf("the latest run has last.ckpt alone, an earlier run best.ckpt: %s", got)
	}
	touch(filepath.Join(second.Dir, folder.BestCheckpoint))
	if got := workflow.DefaultCheckpoint(prog, ""); got != filepath.Join(second.Dir, folder.BestCheckpoint) {
		t.Errorf("the latest run's best.ckpt: %s", got)
	}
}

// TestReportGoesIntoTheRunsFolder: runs in two folders write two reports;
// --report still chooses the file.
func TestReportGoesIntoTheRunsFolder(t *testing.T) {
	prog := program(t, tinyPipe)
	wf := workflow.New(workflow.WithHost(cpuHost(0)))
	pl, _ := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForRun})
	a, b := t.TempDir(), t.TempDir()
	oa, err := workflow.PrepareOutputs(pl.Plan, run.Place{Dir: a}, "", true, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ob, err := workflow.PrepareOutputs(pl.Plan, run.Place{Dir: b}, "", false, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if oa.Report != filepath.Join(a, "report.json") || ob.Report != filepath.Join(b, "report.json") || oa.Trace != filepath.Join(a, "trace.json") {
		t.Errorf("reports %s and %s, trace %s", oa.Report, ob.Report, oa.Trace)
	}
	mine := filepath.Join(t.TempDir(), "mine.json")
	if o, err := workflow.PrepareOutputs(pl.Plan, run.Place{Dir: a}, mine, false, "", 0); err != nil || o.Report != mine {
		t.Errorf("--report: %s (%v)", o.Report, err)
	}
}

// TestImports: nothing below workflow imports it, and the language
// server, which takes its planner as a function, links no engine.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "pipe/lang/...", "pipe/stdlib/...", "pipe/planner/...", "pipe/engine/...", "pipe/run/...", "pipe/dataset/...", "pipe/export/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "pipe/workflow" || strings.HasPrefix(dep, "pipe/cmd") || dep == "pipe/lsp" {
			t.Errorf("a package below workflow depends on %s", dep)
		}
	}
	out, err = exec.Command("go", "list", "-deps", "pipe/lsp").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, heavy := range []string{"pipe/workflow", "pipe/engine", "pipe/run", "pipe/dataset", "pipe/export", "gorgonia", "godal", "netlib"} {
			if strings.HasPrefix(dep, heavy) {
				t.Errorf("lsp depends on %s", dep)
			}
		}
	}
}

// TestServability: a serving plan that fits serves; a plan without
// serving (what a gan-mode file gives) does not.
func TestServability(t *testing.T) {
	prog := program(t, tinyPipe)
	wf := workflow.New(workflow.WithHost(cpuHost(0)))
	pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForServe})
	if got := pl.Servability(ds); got != workflow.Servable {
		t.Errorf("serving planned: %d\n%v", got, ds)
	}
	pl, ds = wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForPlan})
	if got := pl.Servability(ds); got != workflow.TwoModels {
		t.Errorf("no serving planned: %d", got)
	}
}

// TestRunPricesAttentionByItsTorch: attention's kernels, and so its
// memory, depend on the worker's torch. pipe plan starts no Python and
// takes a GPU's torch as 2.x; pipe run asks its worker's and plans with
// it: torch 1.13 runs the math path, which keeps heads × tokens² (64
// tokens here, where it keeps more than flash's per-row statistics).
func TestRunPricesAttentionByItsTorch(t *testing.T) {
	prog := program(t, `pipeline attn
source blobs synthetic { samples 64  shape [1, 32, 32]  classes 3  seed 9 }
model net {
  input [1, 32, 32]
  x0 = patches 4 dim 32
  layernorm -> attention heads 2 -> add x0 -> select_token -> dense 3
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }
`)
	attention := func(p *plan.Plan) string {
		for _, d := range p.Decisions {
			if d.What == "attention" {
				return d.Value
			}
		}
		return ""
	}
	var kept []int64
	for _, c := range []struct {
		purpose workflow.Purpose
		torch   string
		want    string
	}{{workflow.ForPlan, "1.13.1", "flash"}, {workflow.ForRun, "1.13.1", "math"}, {workflow.ForRun, "2.11.0+cu130", "flash"}} {
		wf := workflow.New(workflow.WithHost(cpuHost(1)), workflow.WithProbe(func(python string) (engine.Runtime, error) {
			return engine.Runtime{Executable: python, Version: c.torch, GPU: true, GPUs: 1}, nil
		}))
		pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: c.purpose, Device: "a100-80gb"})
		if pl.Plan == nil || ds.HasErrors() {
			t.Fatal(ds)
		}
		if got := attention(pl.Plan); got != c.want {
			t.Errorf("purpose %d, torch %s: attention %q, want %q", c.purpose, c.torch, got, c.want)
		}
		for _, l := range pl.Plan.Layers {
			if l.Op == "attention" {
				kept = append(kept, l.ActivationBytes/pl.Plan.BatchSize)
			}
		}
	}
	if len(kept) != 3 || kept[1] <= kept[2] {
		t.Errorf("attention keeps %v bytes a sample (plan, 1.13, 2.11): the math path keeps more", kept)
	}
}

// TestGPUPlanNamesItsTorch: on a GPU, torch.compile and the fused
// optimizers depend on the torch too. pipe plan assumes one and says so,
// or prices the one --torch-version gives (Request.Torch); pipe run
// prices its worker's, attention or not.
func TestGPUPlanNamesItsTorch(t *testing.T) {
	prog := program(t, tinyPipe)
	for _, c := range []struct {
		purpose      workflow.Purpose
		given        string
		want         string
		assumed      bool
		inductorZero bool
	}{{workflow.ForPlan, "", torch.AssumedGPUTorch, true, false}, {workflow.ForPlan, "1.13", "1.13", false, true},
		{workflow.ForRun, "", "1.13.1", false, true}} {
		wf := workflow.New(workflow.WithHost(cpuHost(1)), workflow.WithProbe(func(python string) (engine.Runtime, error) {
			return engine.Runtime{Executable: python, Version: "1.13.1", GPU: true, GPUs: 1}, nil
		}))
		pl, ds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: c.purpose, Device: "a100-80gb", Versions: map[string]string{"torch": c.given}})
		if pl.Plan == nil || ds.HasErrors() {
			t.Fatal(ds)
		}
		if e := pl.Plan.Engine; e.Torch != c.want || e.VersionAssumed != c.assumed {
			t.Errorf("purpose %d, --torch-version %q: the plan names torch %q (assumed %v), want %q (assumed %v)", c.purpose, c.given, e.Torch, e.VersionAssumed, c.want, c.assumed)
		}
		for _, tm := range pl.Plan.Memory.Terms {
			if tm.Name == "Inductor autotuning buffer" && (tm.Bytes == 0) != c.inductorZero {
				t.Errorf("purpose %d, --torch-version %q: Inductor's buffer %d bytes", c.purpose, c.given, tm.Bytes)
			}
		}
	}
}
