package run_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/run"
	"pipe/run/folder"
)

// heldOut is blobs validated every epoch on a source of its own.
var heldOut = strings.Replace(strings.Replace(blobs,
	"evaluate { source blobs }", "source held synthetic { samples 90  shape [8]  classes 3  seed 6 }\nevaluate { source held }", 1),
	"train { epochs 3", "train { source blobs  epochs 3", 1)

// An interrupt during the last epoch's validation keeps the epoch: its
// checkpoint says the epoch is trained and not evaluated, and the resumed
// run evaluates it, records it (losses per epoch, the Epoch hook a sweep
// reads) and writes best.ckpt, ending completed as the uninterrupted run
// does. Before, the resume said "nothing left to train", ended at the
// step limit with no limit set, and the epoch was never evaluated.
func TestInterruptedLastValidationIsResumed(t *testing.T) {
	src := strings.Replace(heldOut, "epochs 3", "epochs 1", 1)
	want := mustRun(t, newJob(t, src), nil)
	if want.Status != run.StatusCompleted || len(want.EpochResults) != 1 || want.EpochResults[0].Val == nil {
		t.Fatalf("straight run: %s, epochs %+v", want.Status, want.EpochResults)
	}

	j := newJob(t, src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, ds := j.run(t, ctx, nil, run.Hooks{Evaluating: func(string, int) { cancel() }})
	if ds.HasErrors() || first.Status != run.StatusInterrupted || first.Epochs != 0 || first.Position.Step != want.Position.Step {
		t.Fatalf("interrupted run: %s after %d epochs at %+v\n%v", first.Status, first.Epochs, first.Position, ds)
	}
	best := filepath.Join(j.dir, "ckpt", folder.BestCheckpoint)
	if _, err := os.Stat(best); err == nil {
		t.Fatalf("best.ckpt written before the epoch was evaluated")
	}

	var epochs []run.EpochResult
	got, ds := j.run(t, context.Background(), nil, run.Hooks{Epoch: func(e run.EpochResult) { epochs = append(epochs, e) }}, run.WithResume(""))
	if ds.HasErrors() || got.Status != run.StatusCompleted {
		t.Errorf("resumed run: %s, want %s\n%v", got.Status, run.StatusCompleted, ds)
	}
	if len(got.EpochResults) != 1 || got.EpochResults[0].Val == nil || len(epochs) != 1 {
		t.Fatalf("resumed run's epochs: %+v; the Epoch hook saw %d", got.EpochResults, len(epochs))
	}
	g, w := got.EpochResults[0], want.EpochResults[0]
	if g.TrainLoss != w.TrainLoss || g.Val.Loss != w.Val.Loss || g.Step != w.Step {
		t.Errorf("epoch 1 after resuming: train %v, validation %v at step %d; straight: %v, %v at step %d",
			g.TrainLoss, g.Val.Loss, g.Step, w.TrainLoss, w.Val.Loss, w.Step)
	}
	if _, err := os.Stat(best); err != nil {
		t.Errorf("no best.ckpt after the epoch was evaluated: %v", err)
	}
	// Resumed once more, the run has nothing left, and says it completed.
	again := mustRun(t, j, nil, run.WithResume(""))
	if again.Status != run.StatusCompleted || again.Epochs != 1 {
		t.Errorf("resumed after the end: %s after %d epochs", again.Status, again.Epochs)
	}
}

// A checkpoint says whether --max-steps cut its run short of the file's
// steps, for serve and export to tell a smoke run from a trained one: a
// limit at or past the file's steps, and the file's own max_steps, cut
// nothing.
func TestCheckpointRecordsAStepLimit(t *testing.T) {
	for _, c := range []struct {
		name string
		src  string
		opts []run.Option
		want int64
	}{
		{"--max-steps 5", blobs, []run.Option{run.WithMaxSteps(5)}, 5},
		{"no limit", blobs, nil, 0},
		{"--max-steps past the end", blobs, []run.Option{run.WithMaxSteps(1000)}, 0},
		{"the file's max_steps", strings.Replace(blobs, "epochs 3", "epochs 3  max_steps 5", 1), nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := newJob(t, c.src)
			mustRun(t, j, nil, c.opts...)
			info, err := run.ReadCheckpointInfo(filepath.Join(j.dir, "ckpt", folder.LastCheckpoint))
			if err != nil {
				t.Fatal(err)
			}
			if info.StepLimit != c.want || info.Pipeline != "tiny" || info.Epochs != 3 {
				t.Errorf("step limit %d, want %d; pipeline %s, %d epochs", info.StepLimit, c.want, info.Pipeline, info.Epochs)
			}
		})
	}
}
