package run_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"pipe/diag"
	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/planner/cost"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
)

const blobs = `pipeline tiny
seed 3
source blobs synthetic { samples 300  shape [8]  classes 3  seed 5 }
model lin {
  input [8]
  dense 3
}
train { epochs 3  batch 16  optimizer adam lr 0.05  loss cross_entropy  metrics [accuracy, f1] }
evaluate { source blobs }
`

func TestRunTrainsEvaluatesAndCheckpoints(t *testing.T) {
	j := newJob(t, blobs)
	var steps, epochs int
	var start run.StartInfo
	hooks := run.Hooks{
		Start: func(s run.StartInfo) { start = s },
		Step:  func(run.StepInfo) { steps++ },
		Epoch: func(run.EpochResult) { epochs++ },
	}
	res, ds := j.run(t, context.Background(), nil, hooks)
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	// 300 samples in batches of 16: 19 steps an epoch.
	if res.Status != run.StatusCompleted || res.Epochs != 3 || res.StepsPerEpoch != 19 || len(res.StepLosses) != 57 {
		t.Fatalf("status %s, %d epochs, %d steps an epoch, %d losses", res.Status, res.Epochs, res.StepsPerEpoch, len(res.StepLosses))
	}
	if steps != 57 || epochs != 3 || start.TotalSteps != 57 || start.TrainSamples != 300 {
		t.Errorf("hooks saw %d steps, %d epochs, start %+v", steps, epochs, start)
	}
	first, last := res.EpochResults[0].TrainLoss, res.EpochResults[2].TrainLoss
	if !(last < first) {
		t.Errorf("the training loss did not fall: %v then %v", first, last)
	}
	acc, ok := res.Final.Metric("accuracy")
	if !ok || acc < 0.9 {
		t.Errorf("final accuracy %v (computed %v), want at least 0.9 on well separated blobs", acc, ok)
	}
	if res.Final.Samples != 300 || res.Final.Part != "all" {
		t.Errorf("final evaluation on %d samples (%s)", res.Final.Samples, res.Final.Part)
	}
	// evaluate reads the training source, which has no split: a warning.
	findDiag(t, ds, run.CodeEvalOnTrain)
	for _, name := range []string{folder.LastCheckpoint, folder.BestCheckpoint} {
		if _, err := os.Stat(filepath.Join(j.dir, "ckpt", name)); err != nil {
			t.Errorf("no %s: %v", name, err)
		}
	}
	if res.Memory.Estimated != j.plan.Memory.Total || res.Memory.Model.Total == 0 || res.Memory.Loader == 0 ||
		res.Memory.Accounted != res.Memory.Model.Total+res.Memory.Loader ||
		res.Memory.Measured != res.Memory.ProcessMaxRSS || res.Memory.Measured < res.Memory.Accounted {
		t.Errorf("memory %+v", res.Memory)
	}
	if res.SamplesTrained != 900 || res.SamplesPerSecond <= 0 {
		t.Errorf("%d samples trained at %v/s", res.SamplesTrained, res.SamplesPerSecond)
	}
}

// accumulating trains micro-batches of 8 accumulated 3 at a time, with
// noise standing in for dropout, so that a resume must restore the
// micro-step counter as well as the weights.
const accumulating = `pipeline acc
seed 1
source blobs synthetic { samples 200  shape [6]  classes 4  seed 2 }
model lin { input [6]  dense 4 }
train {
  epochs 2
  batch 8
  effective_batch 24
  optimizer adamw lr 0.02
  schedule cosine warmup 1
  grad_clip 1.0
  loss cross_entropy
}
`

func TestResumeReproducesLossesBitForBit(t *testing.T) {
	be := &enginetest.Backend{Noise: 0.3}
	straight := newJob(t, accumulating)
	if straight.plan.AccumulationSteps != 3 || straight.plan.BatchSize != 8 {
		t.Fatalf("plan: batch %d × %d", straight.plan.BatchSize, straight.plan.AccumulationSteps)
	}
	want := mustRun(t, straight, be)
	// 200 samples: 25 micro-batches an epoch, 9 steps (the last of 1).
	if want.StepsPerEpoch != 9 || len(want.StepLosses) != 18 || want.Position.MicroStep != 50 {
		t.Fatalf("%d steps an epoch, %d losses, %d micro-steps", want.StepsPerEpoch, len(want.StepLosses), want.Position.MicroStep)
	}

	check := func(t *testing.T, got *run.Result) {
		t.Helper()
		if len(got.StepLosses) != len(want.StepLosses) {
			t.Fatalf("%d losses after resuming, want %d", len(got.StepLosses), len(want.StepLosses))
		}
		for i := range want.StepLosses {
			if math.Float64bits(got.StepLosses[i]) != math.Float64bits(want.StepLosses[i]) {
				t.Fatalf("step %d: loss %v after resuming, %v straight", i+1, got.StepLosses[i], want.StepLosses[i])
			}
		}
		for i := range want.EpochResults {
			if got.EpochResults[i].TrainLoss != want.EpochResults[i].TrainLoss {
				t.Errorf("epoch %d: training loss %v after resuming, %v straight", i+1, got.EpochResults[i].TrainLoss, want.EpochResults[i].TrainLoss)
			}
		}
	}

	t.Run("after one epoch", func(t *testing.T) {
		j := newJob(t, accumulating)
		first := mustRun(t, j, be, run.WithMaxSteps(9))
		if first.Status != run.StatusMaxSteps || first.Epochs != 1 {
			t.Fatalf("first run: %s after %d epochs", first.Status, first.Epochs)
		}
		got := mustRun(t, j, be, run.WithResume(""))
		if got.ResumedFrom == nil || got.ResumedFrom.Epoch != 1 || got.ResumedFrom.Batch != 0 {
			t.Fatalf("resumed from %+v", got.ResumedFrom)
		}
		check(t, got)
	})

	t.Run("interrupted mid-epoch", func(t *testing.T) {
		j := newJob(t, accumulating)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hooks := run.Hooks{Step: func(s run.StepInfo) {
			if s.Step == 12 {
				cancel() // the run stops after this step
			}
		}}
		first, ds := j.run(t, ctx, be, hooks)
		if ds.HasErrors() || first.Status != run.StatusInterrupted || first.Position.Step != 12 || first.Position.Batch != 9 {
			t.Fatalf("interrupted run: %s at %+v\n%v", first.Status, first.Position, ds)
		}
		got := mustRun(t, j, be, run.WithResume(filepath.Join(j.dir, "ckpt")))
		if got.ResumedFrom.Epoch != 1 || got.ResumedFrom.Batch != 9 {
			t.Fatalf("resumed from %+v", got.ResumedFrom)
		}
		check(t, got)
	})
}

func TestMaxStepsCountsOptimizerSteps(t *testing.T) {
	j := newJob(t, accumulating)
	res := mustRun(t, j, nil, run.WithMaxSteps(4))
	if res.Status != run.StatusMaxSteps || res.Position.Step != 4 || res.Position.MicroStep != 12 || res.Epochs != 0 {
		t.Errorf("status %s at %+v after %d epochs", res.Status, res.Position, res.Epochs)
	}
	if _, err := os.Stat(filepath.Join(j.dir, "ckpt", folder.LastCheckpoint)); err != nil {
		t.Errorf("a run stopped by the step limit leaves no checkpoint: %v", err)
	}
}

// enospc fails every write after the first n bytes, as a full disk does.
type enospc struct {
	w io.Writer
	n int
}

func (e *enospc) Write(p []byte) (int, error) {
	if len(p) > e.n {
		k, _ := e.w.Write(p[:e.n])
		e.n = 0
		return k, &os.PathError{Op: "write", Path: "checkpoint", Err: syscall.ENOSPC}
	}
	e.n -= len(p)
	return e.w.Write(p)
}

func TestFullDiskKeepsThePreviousCheckpoint(t *testing.T) {
	j := newJob(t, blobs)
	if res := mustRun(t, j, nil, run.WithMaxSteps(19)); res.Epochs != 1 {
		t.Fatalf("first run: %d epochs", res.Epochs)
	}
	dir := filepath.Join(j.dir, "ckpt")
	last := filepath.Join(dir, folder.LastCheckpoint)
	before, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	full := run.WithCheckpointWriter(func(w io.Writer) io.Writer { return &enospc{w: w, n: 100} })
	res, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), full)
	d := findDiag(t, ds, run.CodeCheckpoint)
	if !strings.Contains(d.Detail, "disk is full") || !strings.Contains(d.Detail, "intact") {
		t.Errorf("the diagnostic does not say the disk is full and the old checkpoint intact: %s", d.Detail)
	}
	if res.Status != run.StatusFailed {
		t.Errorf("status %s", res.Status)
	}
	after, err := os.ReadFile(last)
	if err != nil || !bytes.Equal(before, after) {
		t.Fatalf("last.ckpt changed (%v)", err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
	// The kept checkpoint still resumes.
	if got := mustRun(t, j, nil, run.WithResume("")); got.ResumedFrom.Epoch != 1 || got.Epochs != 3 {
		t.Errorf("resumed from %+v to %d epochs", got.ResumedFrom, got.Epochs)
	}
}

func TestDamagedCheckpointIsRefused(t *testing.T) {
	j := newJob(t, blobs)
	mustRun(t, j, nil, run.WithMaxSteps(3))
	last := filepath.Join(j.dir, "ckpt", folder.LastCheckpoint)
	good, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	// Which files are refused, and how each is named: folder's
	// TestATornCheckpointIsNeverRead. Here, that the run says so.
	if err := os.WriteFile(last, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	res, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""))
	if d := findDiag(t, ds, run.CodeResume); !strings.Contains(d.Detail, "truncated") || res.SamplesTrained != 0 {
		t.Errorf("a truncated checkpoint: trained %d samples: %s", res.SamplesTrained, d.Detail)
	}
	_, ds = j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(filepath.Join(j.dir, "nowhere")))
	if d := findDiag(t, ds, run.CodeResume); !strings.Contains(d.Summary, "no checkpoint") {
		t.Errorf("missing checkpoint: %s", d.Summary)
	}
}

func TestNonFiniteLossNamesTheLayerAndKeepsTheCheckpoint(t *testing.T) {
	j := newJob(t, blobs)
	// The 25th micro-batch is in epoch 2: epoch 1's checkpoint is kept.
	res, ds := j.run(t, context.Background(), &enginetest.Backend{NaNAt: 25}, run.Hooks{})
	d := findDiag(t, ds, run.CodeNonFinite)
	if res.Status != run.StatusNonFinite {
		t.Errorf("status %s", res.Status)
	}
	if d.Subject == nil || d.Subject.Start.Line != lineOf(blobs, "dense 3") {
		t.Errorf("the diagnostic is at %v, want the dense layer's line %d", d.Subject, lineOf(blobs, "dense 3"))
	}
	if !strings.Contains(d.Summary, "dense1") || !strings.Contains(d.Summary, "step 25") || !strings.Contains(d.Detail, "last.ckpt") {
		t.Errorf("diagnostic: %s: %s", d.Summary, d.Detail)
	}
	if len(res.StepLosses) != 24 || res.Epochs != 1 {
		t.Errorf("%d losses, %d epochs before the NaN", len(res.StepLosses), res.Epochs)
	}
	got := mustRun(t, j, nil, run.WithResume(""), run.WithMaxSteps(20))
	if got.ResumedFrom.Epoch != 1 {
		t.Errorf("the kept checkpoint is at %+v, want the end of epoch 1", got.ResumedFrom)
	}
}

func TestDataMustFitTheModel(t *testing.T) {
	t.Run("input", func(t *testing.T) {
		src := strings.Replace(blobs, "input [8]", "input [9]", 1)
		_, ds := newJob(t, src).run(t, context.Background(), nil, run.Hooks{})
		d := findDiag(t, ds, run.CodeShape)
		if d.Subject == nil || d.Subject.Start.Line != lineOf(src, "input [9]") || !strings.Contains(d.Detail, "[8]") {
			t.Errorf("at %v: %s", d.Subject, d.Detail)
		}
	})
	t.Run("classes", func(t *testing.T) {
		src := strings.Replace(blobs, "dense 3", "dense 2", 1)
		_, ds := newJob(t, src).run(t, context.Background(), nil, run.Hooks{})
		d := findDiag(t, ds, run.CodeShape)
		if d.Subject == nil || d.Subject.Start.Line != lineOf(src, "source blobs") || !strings.Contains(d.Detail, "3 classes") {
			t.Errorf("at %v: %s", d.Subject, d.Detail)
		}
	})
	t.Run("regression with cross_entropy", func(t *testing.T) {
		src := strings.Replace(strings.Replace(blobs, " classes 3 ", " ", 1), "dense 3", "dense 1", 1)
		_, ds := newJob(t, src).run(t, context.Background(), nil, run.Hooks{})
		if d := findDiag(t, ds, run.CodeShape); !strings.Contains(d.Detail, "mse") {
			t.Errorf("%s", d.Detail)
		}
	})
	t.Run("metric", func(t *testing.T) {
		src := strings.Replace(blobs, "metrics [accuracy, f1]", "metrics [rmse]", 1)
		_, ds := newJob(t, src).run(t, context.Background(), nil, run.Hooks{})
		if d := findDiag(t, ds, run.CodeMetric); d.Subject == nil || d.Subject.Start.Line != lineOf(src, "metrics [rmse]") {
			t.Errorf("at %v", d.Subject)
		}
	})
}

// cpuOnly is an engine that registered only its descriptor: the CPU,
// in pipe's process.
type cpuOnly struct{}

func (cpuOnly) Name() string                                 { return "cpuonly" }
func (cpuOnly) Traits() cost.Traits                          { return cost.Traits{Devices: []string{"cpu"}, InProcess: true} }
func (cpuOnly) Memory(*stdlib.Graph, cost.Setup) cost.Memory { return cost.Memory{} }

func init() { cost.Register(cpuOnly{}) }

// TestPlanNeedsItsEngine: a plan runs on the engine it names, and only
// there: a GPU plan for the native engine is refused with the way out,
// and a torch plan without the torch engine is refused by name.
func TestPlanNeedsItsEngine(t *testing.T) {
	j := newJob(t, blobs)
	j.plan.Backend = "gpu"
	j.plan.Device.Name = "a100-80gb"
	_, ds := j.run(t, context.Background(), nil, run.Hooks{})
	if d := findDiag(t, ds, run.CodeNoBackend); d.Summary != "the native engine runs on the CPU only" ||
		d.Detail != "This plan is for a GPU (a100-80gb) with the native engine, which computes on the CPU. Re-plan with --engine torch, or with --device cpu." {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	// An engine the run loop has never heard of is refused by its traits.
	j = newJob(t, blobs)
	j.plan.Backend, j.plan.Engine.Name = "gpu", "cpuonly"
	_, ds = j.run(t, context.Background(), &enginetest.Backend{BackendName: "cpuonly"}, run.Hooks{})
	if d := findDiag(t, ds, run.CodeNoBackend); d.Summary != "the cpuonly engine runs on the CPU only" || !strings.Contains(d.Detail, "--engine torch") {
		t.Errorf("%s: %s", d.Summary, d.Detail)
	}
	j = newJob(t, blobs)
	j.plan.Engine.Name = "torch"
	_, ds = j.run(t, context.Background(), nil, run.Hooks{})
	if d := findDiag(t, ds, run.CodeNoBackend); !strings.Contains(d.Detail, "torch engine") {
		t.Errorf("%s", d.Detail)
	}
	// The engine named by the plan is the one used.
	j = newJob(t, blobs)
	j.plan.Engine.Name = "torch"
	res := mustRun(t, j, &enginetest.Backend{BackendName: "torch"}, run.WithMaxSteps(2))
	if res.Engine != "torch" || res.Position.Step != 2 {
		t.Errorf("engine %q, %d steps", res.Engine, res.Position.Step)
	}
}

func TestSkipTrainNeedsResume(t *testing.T) {
	j := newJob(t, blobs)
	_, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithSkipTrain())
	findDiag(t, ds, run.CodeResume)
	mustRun(t, j, nil, run.WithMaxSteps(19))
	res := mustRun(t, j, nil, run.WithResume(""), run.WithSkipTrain())
	if res.Status != run.StatusSkipped || res.Final == nil || len(res.StepLosses) != 19 {
		t.Errorf("status %s, final %v, %d losses", res.Status, res.Final, len(res.StepLosses))
	}
}

func TestValidationSplitAndPredictCSV(t *testing.T) {
	var csv strings.Builder
	csv.WriteString("a,b,kind\n")
	for i := range 120 {
		a, b := float64(i%10), float64((i*7)%11)
		kind := "low"
		if a+b > 9 {
			kind = "high"
		}
		csv.WriteString(strings.Join([]string{ftoa(a), ftoa(b), kind}, ",") + "\n")
	}
	src := `pipeline tab
source rows csv { path "rows.csv"  label kind  split 0.75 seed 4 }
model m { input [2]  dense 2 }
train { epochs 4  batch 10  optimizer adam lr 0.1  loss cross_entropy  metrics [accuracy] }
predict { source rows  write "out/pred.csv" }
`
	j := newJob(t, src)
	writeFile(t, filepath.Join(j.dir, "rows.csv"), csv.String())
	res := mustRun(t, j, nil)
	if v := res.EpochResults[3].Val; v == nil || v.Samples != 30 || v.Part != "validation split" {
		t.Fatalf("validation %+v", v)
	}
	if res.Final != res.EpochResults[3].Val {
		t.Errorf("without evaluate, the final result is not the last validation")
	}
	if len(res.Predictions) != 1 || res.Predictions[0].Samples != 120 {
		t.Fatalf("predictions %+v", res.Predictions)
	}
	b, err := os.ReadFile(filepath.Join(j.dir, "out", "pred.csv"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 121 || lines[0] != "index,class,name,probability,target" {
		t.Errorf("%d lines, header %q", len(lines), lines[0])
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// TestSaveIsNotGradientCheckpointing: "checkpoint none" turns off gradient
// checkpointing only; checkpoint files follow "save".
func TestSaveIsNotGradientCheckpointing(t *testing.T) {
	last := func(j *job) bool {
		_, err := os.Stat(filepath.Join(j.dir, "ckpt", folder.LastCheckpoint))
		return err == nil
	}
	grad := newJob(t, strings.Replace(accumulating, "  loss cross_entropy\n", "  loss cross_entropy\n  checkpoint none\n", 1))
	mustRun(t, grad, nil)
	if !last(grad) {
		t.Error("checkpoint none stopped the run from writing its checkpoint file")
	}
	all := newJob(t, strings.Replace(accumulating, "  loss cross_entropy\n", "  loss cross_entropy\n  save all\n", 1))
	mustRun(t, all, nil)
	if _, err := os.Stat(filepath.Join(all.dir, "ckpt", "epoch-001.ckpt")); err != nil {
		t.Errorf("save all wrote no per-epoch file: %v", err)
	}
	none := newJob(t, strings.Replace(accumulating, "  loss cross_entropy\n", "  loss cross_entropy\n  save none\n", 1))
	mustRun(t, none, nil)
	if last(none) {
		t.Error("save none still wrote a checkpoint file")
	}
}

// TestOutOfMemoryStopsCleanly: a device out of memory stops the run with
// an error at the layer that was running, the plan's estimate beside what
// the device measured, and the last checkpoint kept.
func TestOutOfMemoryStopsCleanly(t *testing.T) {
	j := newJob(t, blobs)
	res, ds := j.run(t, context.Background(), &enginetest.Backend{OOMAt: 25}, run.Hooks{})
	if res.Status != run.StatusFailed {
		t.Fatalf("status %s", res.Status)
	}
	d := findDiag(t, ds, run.CodeOOM)
	for _, want := range []string{"out of memory at step", "at dense1", "The plan estimated", "75.00 GiB reserved", "79.00 GiB of its 80.00 GiB", "last.ckpt", "is kept"} {
		if !strings.Contains(d.Summary+" "+d.Detail, want) {
			t.Errorf("the diagnostic lacks %q:\n%s\n%s", want, d.Summary, d.Detail)
		}
	}
	if d.Subject == nil || d.Subject.Start.Line != lineOf(blobs, "dense 3") {
		t.Errorf("at %v, want the dense layer's line", d.Subject)
	}
	if _, err := os.Stat(filepath.Join(j.dir, "ckpt", folder.LastCheckpoint)); err != nil {
		t.Errorf("the first epoch's checkpoint: %v", err)
	}
}

// TestSecondRunIsRefused: while a run trains, a second run of the same
// pipeline into the same checkpoint folder is refused with the first
// one's PID, and trains nothing; once the first ends, the folder is free.
func TestSecondRunIsRefused(t *testing.T) {
	j := newJob(t, blobs)
	inside := make(chan struct{})
	proceed := make(chan struct{})
	done := make(chan *run.Result)
	go func() {
		once := false
		hooks := run.Hooks{Step: func(run.StepInfo) {
			if !once {
				once = true
				close(inside)
				<-proceed
			}
		}}
		res, _ := j.run(t, context.Background(), nil, hooks, run.WithMaxSteps(3))
		done <- res
	}()
	<-inside
	res, ds := j.run(t, context.Background(), nil, run.Hooks{})
	close(proceed)
	first := <-done
	d := findDiag(t, ds, run.CodeLocked)
	if !strings.Contains(d.Detail, fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(d.Detail, "--checkpoint-dir") {
		t.Errorf("%s\n%s", d.Summary, d.Detail)
	}
	if res.SamplesTrained != 0 || first.Status != run.StatusMaxSteps {
		t.Errorf("the second run trained %d samples; the first ended %s", res.SamplesTrained, first.Status)
	}
	again := mustRun(t, j, nil, run.WithMaxSteps(1), run.WithResume(""))
	if again.Position.Step != 3 {
		t.Errorf("after the first run, a resume reads its step %d", again.Position.Step)
	}
}

// TestResumeRefusesAnotherPipeline: a checkpoint written by another
// pipeline (or from another file) is refused, and the message names both.
func TestResumeRefusesAnotherPipeline(t *testing.T) {
	a := newJob(t, blobs)
	ckpt := run.WithCheckpointDir(filepath.Join(a.dir, "shared"))
	mustRun(t, a, nil, run.WithMaxSteps(3), ckpt)
	b := newJob(t, strings.Replace(blobs, "pipeline tiny", "pipeline other", 1))
	_, ds := b.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), ckpt)
	d := findDiag(t, ds, run.CodeResume)
	for _, want := range []string{"pipeline tiny", "pipeline other", "test.pipe"} {
		if !strings.Contains(d.Detail, want) {
			t.Errorf("the message lacks %q: %s", want, d.Detail)
		}
	}
}

// TestResumeAfterTheProjectMoved: a pipeline is its content, not its
// path: the same file resumes from another folder (or machine); the same
// name with other layers, or another optimizer, is refused, saying so.
func TestResumeAfterTheProjectMoved(t *testing.T) {
	a := newJob(t, blobs)
	ckpt := run.WithCheckpointDir(filepath.Join(a.dir, "shared"))
	mustRun(t, a, nil, run.WithMaxSteps(3), ckpt)
	moved := newJob(t, blobs)
	moved.plan.File = filepath.Join(t.TempDir(), "renamed", "test.pipe")
	res := mustRun(t, moved, nil, run.WithMaxSteps(5), run.WithResume(""), ckpt)
	if res.ResumedFrom == nil || res.ResumedFrom.Step != 3 {
		t.Fatalf("the moved file did not resume: %+v", res.ResumedFrom)
	}
	wider := newJob(t, strings.Replace(blobs, "dense 3", "dense 8 -> relu -> dense 3", 1))
	if wider.plan.Pipeline != a.plan.Pipeline {
		t.Fatalf("the variant is pipeline %s", wider.plan.Pipeline)
	}
	_, ds := wider.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), ckpt)
	// The fake engine takes any state, so the run goes on, saying so (an
	// engine whose tensors do not fit refuses: TestResumeIntoAnotherModel...).
	if d := findDiag(t, ds, run.CodeResume); !strings.Contains(d.Summary, "layers changed") {
		t.Errorf("another structure under the same name: %s: %s", d.Summary, d.Detail)
	}
	sgd := newJob(t, strings.Replace(blobs, "optimizer adam", "optimizer sgd", 1))
	_, ds = sgd.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""), ckpt)
	if d := findDiag(t, ds, run.CodeResume); !strings.Contains(d.Summary, "another optimizer") {
		t.Errorf("another optimizer: %s: %s", d.Summary, d.Detail)
	}
}

// TestFullDiskAfterLastSaysLastIsIntact: when last.ckpt was written and
// the epoch's own checkpoint then fails, the message says last.ckpt is
// intact, not that the steps trained are lost.
func TestFullDiskAfterLastSaysLastIsIntact(t *testing.T) {
	j := newJob(t, strings.Replace(blobs, "loss cross_entropy", "loss cross_entropy  checkpoint all", 1))
	files := 0
	full := run.WithCheckpointWriter(func(w io.Writer) io.Writer {
		files++
		if files == 1 {
			return w // last.ckpt
		}
		return &enospc{w: w, n: 100}
	})
	_, ds := j.run(t, context.Background(), nil, run.Hooks{}, full)
	d := findDiag(t, ds, run.CodeCheckpoint)
	if !strings.Contains(d.Detail, folder.LastCheckpoint+" is intact") || strings.Contains(d.Detail, "lost") {
		t.Errorf("epoch checkpoint on a full disk: %s", d.Detail)
	}
}

// TestAdviceFollowsTheCause: after a failure, what to do with the
// checkpoint kept follows the cause: a lost worker resumes as it is, a
// non-finite loss with a lower learning rate, an out-of-memory with its
// own batch once the device has room.
func TestAdviceFollowsTheCause(t *testing.T) {
	for _, c := range []struct {
		name    string
		be      *enginetest.Backend
		want    string
		mustNot string
	}{
		{"worker lost", &enginetest.Backend{FailAt: 25, Fail: fmt.Errorf("the worker of rank 1 died: %w", engine.ErrWorkerLost)}, "as it is", "learning rate"},
		{"non-finite", &enginetest.Backend{NaNAt: 25}, "lower learning rate", "as it is"},
		{"out of memory", &enginetest.Backend{OOMAt: 25}, "its own batch", "learning rate"},
		{"other", &enginetest.Backend{FailAt: 25, Fail: errors.New("something else")}, "once the cause above is fixed", "learning rate"},
	} {
		j := newJob(t, blobs)
		_, ds := j.run(t, context.Background(), c.be, run.Hooks{})
		if !ds.HasErrors() {
			t.Fatalf("%s: no error", c.name)
		}
		msg := ds.Error()
		if !strings.Contains(msg, "last.ckpt") || !strings.Contains(msg, c.want) || strings.Contains(msg, c.mustNot) {
			t.Errorf("%s: want %q and not %q:\n%s", c.name, c.want, c.mustNot, msg)
		}
	}
}

// TestStepScheduleWithoutEvery: schedule step without every divides the
// learning rate every third of the epochs, as the plan says, not every
// epoch.
func TestStepScheduleWithoutEvery(t *testing.T) {
	src := strings.Replace(blobs, "epochs 3  batch 16  optimizer adam lr 0.05", "epochs 6  batch 100  optimizer adam lr 0.05  schedule step", 1)
	j := newJob(t, src)
	if j.plan.Schedule.Every != 2 {
		t.Fatalf("plan: %+v", j.plan.Schedule)
	}
	res := mustRun(t, j, nil)
	var lrs []float64
	for _, e := range res.EpochResults {
		lrs = append(lrs, e.LR)
	}
	want := []float64{0.05, 0.05, 0.005, 0.005, 0.0005, 0.0005}
	for i := range want {
		if i >= len(lrs) || math.Abs(lrs[i]-want[i]) > 1e-12 {
			t.Fatalf("learning rates by epoch %v, want %v", lrs, want)
		}
	}
}

// TestDivergenceWarns: a loss that grows a thousandfold without ever
// being NaN ends with a warning at the optimizer's line, not silently.
func TestDivergenceWarns(t *testing.T) {
	src := strings.Replace(blobs, "optimizer adam lr 0.05  loss cross_entropy", "optimizer sgd lr 1000  loss mse", 1)
	src = strings.Replace(src, " classes 3 ", " ", 1)
	src = strings.Replace(src, "dense 3", "dense 1", 1)
	src = strings.Replace(src, "metrics [accuracy, f1]", "metrics [mae]", 1)
	j := newJob(t, src)
	res, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithMaxSteps(12))
	d := findDiag(t, ds, run.CodeDiverging)
	if d.Severity != diag.Warning || d.Subject == nil || d.Subject.Start.Line != lineOf(src, "optimizer sgd") {
		t.Errorf("%v at %v", d.Severity, d.Subject)
	}
	if !strings.Contains(d.Detail, "at step 1") || res.StepLosses[len(res.StepLosses)-1] < 1000*res.StepLosses[0] {
		t.Errorf("%s; losses %v", d.Detail, res.StepLosses)
	}
}

// TestTestSetChoosingTheModelWarns: an evaluate source that also serves
// as the per-epoch validation (the training source has no split) picks
// best.ckpt; the run says so.
func TestTestSetChoosingTheModelWarns(t *testing.T) {
	src := strings.Replace(blobs, "evaluate { source blobs }", "source held synthetic { samples 90  shape [8]  classes 3  seed 6 }\nevaluate { source held }", 1)
	src = strings.Replace(src, "train { epochs 3", "train { source blobs  epochs 3", 1)
	j := newJob(t, src)
	res, ds := j.run(t, context.Background(), nil, run.Hooks{})
	d := findDiag(t, ds, run.CodeEvalLeak)
	if d.Severity != diag.Warning || !strings.Contains(d.Detail, "best.ckpt") || !strings.Contains(d.Detail, "split") {
		t.Errorf("%v %s", d.Severity, d.Detail)
	}
	if res.EpochResults[0].Val == nil || res.EpochResults[0].Val.Source != "held" {
		t.Errorf("validation %+v", res.EpochResults[0].Val)
	}
}

// idxFile is an IDX file of unsigned bytes with the dimensions given.
func idxFile(dims []int, data []byte) []byte {
	b := []byte{0, 0, 0x08, byte(len(dims))}
	for _, d := range dims {
		b = append(b, byte(d>>24), byte(d>>16), byte(d>>8), byte(d))
	}
	return append(b, data...)
}

// TestLabelsOutOfRange: labels the model cannot score are named as such,
// with their counts, rather than asking for a model as wide as the
// largest label.
func TestLabelsOutOfRange(t *testing.T) {
	src := `pipeline digits
source train idx { images "x.idx"  labels "y.idx" }
model m {
  input [1, 2, 2]
  flatten -> dense 10
}
train { epochs 1  batch 4  loss cross_entropy }
`
	j := newJob(t, src)
	labels := []byte{0, 1, 2, 3, 15, 4, 200, 15, 5, 6}
	writeFile(t, filepath.Join(j.dir, "x.idx"), string(idxFile([]int{len(labels), 2, 2}, make([]byte, 4*len(labels)))))
	writeFile(t, filepath.Join(j.dir, "y.idx"), string(idxFile([]int{len(labels)}, labels)))
	_, ds := j.run(t, context.Background(), nil, run.Hooks{})
	d := findDiag(t, ds, run.CodeShape)
	for _, want := range []string{"labels the model cannot score", "classes 0 to 9", "15 (2 samples)", "200 (1 sample)", "Fix those labels"} {
		if !strings.Contains(d.Detail, want) {
			t.Errorf("the message lacks %q: %s", want, d.Detail)
		}
	}
}

// TestDivergedRunStops: a loss that stays over 1000 times its first for
// 20 steps stops training there, as an error at the optimizer with the
// steps it spanned; before, the run warned and trained on to its end,
// exiting as a success with a model that learned nothing.
func TestDivergedRunStops(t *testing.T) {
	src := strings.Replace(blobs, "optimizer adam lr 0.05  loss cross_entropy", "optimizer sgd lr 2.5  loss mse", 1)
	src = strings.Replace(src, " classes 3 ", " ", 1)
	src = strings.Replace(src, "dense 3", "dense 1", 1)
	src = strings.Replace(src, "metrics [accuracy, f1]", "metrics [mae]", 1)
	j := newJob(t, src)
	res, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithMaxSteps(200))
	if res.Status != run.StatusFailed {
		t.Fatalf("status %s, want failed; losses %v", res.Status, res.StepLosses)
	}
	var stopped *diag.Diagnostic
	for _, d := range ds {
		if d.Code == run.CodeDiverging && d.Severity == diag.Error {
			stopped = d
		}
	}
	if stopped == nil || !strings.Contains(stopped.Detail, "Training stopped") || !strings.Contains(stopped.Detail, "stayed over 1000 times its first") {
		t.Fatalf("no error saying training stopped: %v", ds)
	}
	if n := len(res.StepLosses); n >= 200 || n < 20 {
		t.Errorf("%d steps trained, want the 20 after it diverged at most", n)
	}
}
