package run_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"pipe/diag"
	"pipe/engine"
	"pipe/engine/enginetest"
	"pipe/run"
	"pipe/run/folder"
)

// TestResumeAtAnotherSplitOfTheStep: a run of 8 a micro-batch × 3
// accumulation steps (24 samples a step), interrupted at step 12 (72
// samples into its second epoch), continues as 24 × 1 and as 4 × 6 (an
// elastic job's other world splits the step so) at the same sample, with
// a note: the same steps an epoch, the same learning rate each step, and
// the losses of the uninterrupted run. A checkpoint written before
// positions were kept in samples continues so too. A step of another
// size is refused.
func TestResumeAtAnotherSplitOfTheStep(t *testing.T) {
	var wantLR []float64
	lrs := func(into *[]float64) run.Hooks {
		return run.Hooks{Step: func(s run.StepInfo) { *into = append(*into, s.LR) }}
	}
	want, ds := newJob(t, accumulating).run(t, context.Background(), nil, lrs(&wantLR))
	if ds.HasErrors() || len(want.StepLosses) != 18 {
		t.Fatalf("uninterrupted: %d losses\n%v", len(want.StepLosses), ds)
	}
	interrupted := func(t *testing.T) *job {
		j := newJob(t, accumulating)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hooks := run.Hooks{Step: func(s run.StepInfo) {
			if s.Step == 12 {
				cancel()
			}
		}}
		first, ds := j.run(t, ctx, nil, hooks)
		if ds.HasErrors() || first.Status != run.StatusInterrupted || first.Position.Step != 12 {
			t.Fatalf("interrupted run: %s at %+v\n%v", first.Status, first.Position, ds)
		}
		return j
	}
	for _, c := range []struct {
		name       string
		batch, acc int64
		old        bool
	}{{"24x1", 24, 1, false}, {"4x6", 4, 6, false}, {"24x1 from an old checkpoint", 24, 1, true}} {
		t.Run(c.name, func(t *testing.T) {
			j := interrupted(t)
			if c.old {
				if err := run.AsOldCheckpoint(filepath.Join(j.dir, "ckpt", folder.LastCheckpoint)); err != nil {
					t.Fatal(err)
				}
			}
			j.plan.BatchSize, j.plan.AccumulationSteps = c.batch, c.acc
			var gotLR []float64
			got, ds := j.run(t, context.Background(), nil, lrs(&gotLR), run.WithResume(""))
			if ds.HasErrors() {
				t.Fatalf("resume: %v", ds)
			}
			// Epoch 1 was 200 samples; 3 steps of 24 into epoch 2.
			from := got.ResumedFrom
			if from == nil || from.Epoch != 1 || from.Step != 12 || from.Samples != 272 || from.EpochSamples != 72 || from.Batch != int(72/c.batch) {
				t.Fatalf("resumed from %+v", from)
			}
			if !hasNote(ds, "the checkpoint's step is split differently", "continues at sample 72 of epoch 2, step 12") {
				t.Errorf("no note of the other split:\n%v", ds)
			}
			if got.StepsPerEpoch != 9 || len(got.StepLosses) != 18 || got.Position.Samples != 400 {
				t.Fatalf("%d steps an epoch, %d losses, %d samples", got.StepsPerEpoch, len(got.StepLosses), got.Position.Samples)
			}
			for i, lr := range gotLR {
				if lr != wantLR[12+i] {
					t.Errorf("step %d: learning rate %v, %v uninterrupted", 13+i, lr, wantLR[12+i])
				}
			}
			for i := 12; i < 18; i++ {
				if d := math.Abs(got.StepLosses[i]-want.StepLosses[i]) / want.StepLosses[i]; d > 1e-5 {
					t.Errorf("step %d: loss %.7g resumed as %d × %d, %.7g uninterrupted", i+1, got.StepLosses[i], c.batch, c.acc, want.StepLosses[i])
				}
			}
		})
	}
	t.Run("another step", func(t *testing.T) {
		j := interrupted(t)
		j.plan.BatchSize, j.plan.AccumulationSteps = 8, 1
		_, ds := j.run(t, context.Background(), nil, run.Hooks{}, run.WithResume(""))
		if !ds.HasErrors() || !strings.Contains(ds.Error(), "the checkpoint was trained with another step") ||
			!strings.Contains(ds.Error(), "--batch 24 with 1 accumulation steps on 1 devices") {
			t.Errorf("a step of 8 samples resumed one of 24:\n%v", ds)
		}
	})
}

func hasNote(ds diag.Diagnostics, summary, detail string) bool {
	for _, d := range ds {
		if d.Severity == diag.Note && d.Summary == summary && strings.Contains(d.Detail, detail) {
			return true
		}
	}
	return false
}

// TestLostRankUnderARestartingLauncher: a run that loses a rank after
// its first checkpoint advises --resume; one whose launcher starts it
// again (run.WithRestart) says that instead, and no --resume.
func TestLostRankUnderARestartingLauncher(t *testing.T) {
	be := &enginetest.Backend{FailAt: 30, Fail: fmt.Errorf("%w: rank 1 went away", engine.ErrWorkerLost)}
	for _, how := range []string{"", "torchrun starts the ranks again (restart 1 of 3), and they continue from it by themselves"} {
		j := newJob(t, accumulating)
		var opts []run.Option
		if how != "" {
			opts = append(opts, run.WithRestart(how))
		}
		_, ds := j.run(t, context.Background(), be, run.Hooks{}, opts...)
		msg := ds.Error()
		switch {
		case !ds.HasErrors() || !strings.Contains(msg, "rank 1 went away") || !strings.Contains(msg, "last.ckpt, is kept"):
			t.Errorf("the lost rank:\n%v", ds)
		case how == "" && !strings.Contains(msg, "resume from it with --resume as it is"):
			t.Errorf("no launcher, no --resume:\n%v", ds)
		case how != "" && (strings.Contains(msg, "--resume") || !strings.Contains(msg, how)):
			t.Errorf("under a restarting launcher:\n%v", ds)
		}
	}
}

// TestLostRankSaysWhereTheRunGoesOn: a run of a job (a SLURM job) that
// loses a rank is continued by its id, not by --resume, which a job
// submitted again (a new id, a new folder) would not find; a rank above
// 0, which writes no checkpoint, says the one rank 0 wrote at the same
// step rather than that none was written.
func TestLostRankSaysWhereTheRunGoesOn(t *testing.T) {
	be := &enginetest.Backend{FailAt: 30, Fail: fmt.Errorf("%w: rank 1 went away", engine.ErrWorkerLost)}
	j := newJob(t, accumulating)
	job := folder.Job{ID: "slurm-7", From: "SLURM_JOB_ID=7"}
	_, ds := j.run(t, context.Background(), be, run.Hooks{}, run.WithPlace(run.Place{Dir: filepath.Join(j.dir, "ckpt"), Job: job}))
	if msg := ds.Error(); !strings.Contains(msg, "--run-id slurm-7") || strings.Contains(msg, "--resume") || !strings.Contains(msg, "last.ckpt, is kept") {
		t.Errorf("a job's run:\n%v", ds)
	}
	j = newJob(t, accumulating)
	_, ds = j.run(t, context.Background(), be, run.Hooks{}, run.WithNodeRank(1))
	if msg := ds.Error(); !strings.Contains(msg, "Rank 0 keeps the run's checkpoints: it wrote last.ckpt at step") || strings.Contains(msg, "No checkpoint was written") {
		t.Errorf("rank 1:\n%v", ds)
	}
}
