package views

import (
	"strings"
	"testing"

	"pipe/run"
)

// TestInterruptedSaysHowOnce: rank 0 says how to continue, with the
// --plan the run was given (under SLURM rank 1 printed a command without
// it); the other ranks only where they stopped.
func TestInterruptedSaysHowOnce(t *testing.T) {
	res := &run.Result{Position: run.Position{Epoch: 1, Step: 50}, SamplesTrained: 800, Checkpoint: "out/t/runs/slurm-7/last.ckpt", Job: "slurm-7"}
	var b strings.Builder
	Interrupted(&b, res, Again{Plan: "job.plan.json", File: "tiny.pipe", Rank: 0})
	if want := "continue with: the same command in job slurm-7 (pipe run --run-id slurm-7 --plan job.plan.json tiny.pipe elsewhere)"; !strings.Contains(b.String(), want) {
		t.Errorf("rank 0: %s", b.String())
	}
	b.Reset()
	Interrupted(&b, res, Again{Plan: "job.plan.json", File: "tiny.pipe", Rank: 1})
	if s := b.String(); strings.Contains(s, "continue with") || !strings.Contains(s, "interrupted at epoch 2, step 50; rank 0 writes the checkpoint") {
		t.Errorf("rank 1: %s", s)
	}
	b.Reset()
	res.Job = ""
	Interrupted(&b, res, Again{CheckpointDir: "ck", Plan: "p.json", File: "tiny.pipe"})
	if want := "continue with: pipe run --resume --checkpoint-dir ck --plan p.json tiny.pipe"; !strings.Contains(b.String(), want) {
		t.Errorf("no job: %s", b.String())
	}
}

// TestInterruptedWhileAPeerStalled: a run that gave up a step on a stalled
// peer says so, says its last checkpoint is kept rather than written, and
// starts afresh when it has none.
func TestInterruptedWhileAPeerStalled(t *testing.T) {
	res := &run.Result{Position: run.Position{Epoch: 1, Step: 50}, SamplesTrained: 800, Checkpoint: "ck/last.ckpt",
		Stalled: "rank 0 waited 5s for its reply to train+step: a peer rank is stalled"}
	var b strings.Builder
	Interrupted(&b, res, Again{CheckpointDir: "ck", File: "tiny.pipe"})
	if s := b.String(); !strings.Contains(s, "interrupted at epoch 2, step 50, while a peer rank was stalled: rank 0 waited 5s") ||
		!strings.Contains(s, "that checkpoint, ck/last.ckpt, is kept; continue with: pipe run --resume --checkpoint-dir ck tiny.pipe") ||
		strings.Contains(s, "checkpoint written") {
		t.Errorf("rank 0: %s", s)
	}
	b.Reset()
	Interrupted(&b, res, Again{CheckpointDir: "ck", File: "tiny.pipe", Rank: 1})
	if s := b.String(); !strings.Contains(s, "while a peer rank was stalled") || strings.Contains(s, "rank 0 writes the checkpoint") {
		t.Errorf("rank 1: %s", s)
	}
	b.Reset()
	res.Checkpoint = ""
	Interrupted(&b, res, Again{CheckpointDir: "ck", File: "tiny.pipe", Own: []string{"--threads 1"}})
	if s := b.String(); !strings.Contains(s, "no checkpoint was written; continue with: pipe run --checkpoint-dir ck --threads 1 tiny.pipe") {
		t.Errorf("no checkpoint: %s", s)
	}
}
