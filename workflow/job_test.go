package workflow_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pipe/internal/progtest"
	"pipe/run"
	"pipe/run/folder"
	"pipe/workflow"
)

// TestJobOf: each launcher's environment names its job, the same at
// every restart; --run-id and PIPE_RUN_ID name it outright; torchrun's
// default rendezvous id and no launcher name none.
func TestJobOf(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		flag string
		want string
	}{
		{map[string]string{"SLURM_JOB_ID": "12345", "SLURM_PROCID": "1", "SLURM_RESTART_COUNT": "2"}, "", "slurm-12345"},
		{map[string]string{"SLURM_JOB_ID": "12350", "SLURM_ARRAY_JOB_ID": "12345", "SLURM_ARRAY_TASK_ID": "5"}, "", "slurm-12345_5"},
		{map[string]string{"PIPE_JOB_NAME": "train", "PIPE_JOB_NAMESPACE": "team", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "train-master-0"}, "", "pytorchjob-team-train"},
		{map[string]string{"TORCHELASTIC_RUN_ID": "exp/7", "RANK": "0"}, "", "torchrun-exp-7"},
		{map[string]string{"TORCHELASTIC_RUN_ID": "none", "RANK": "0"}, "", ""},
		{map[string]string{"SLURM_JOB_ID": "9", "TORCHELASTIC_RUN_ID": "9"}, "", "slurm-9"},
		{map[string]string{"PIPE_RUN_ID": "mine", "SLURM_JOB_ID": "9"}, "", "mine"},
		{map[string]string{"PIPE_RUN_ID": "mine", "SLURM_JOB_ID": "9"}, "exp-1", "exp-1"},
		{nil, "", ""},
	} {
		j, err := workflow.JobOf(func(k string) string { return c.env[k] }, c.flag)
		if err != nil || j.ID != c.want {
			t.Errorf("%v %q: job %q (%s), %v; want %q", c.env, c.flag, j.ID, j.From, err, c.want)
		}
	}
	if _, err := workflow.JobOf(func(string) string { return "" }, "../x"); err == nil {
		t.Error("--run-id ../x was taken")
	}
}

// TestPlaceJobRun: a job's run is placed in out/PIPELINE/runs/ID, the
// same at every start; rank 0 alone makes it; a folder given that records
// another job is refused with both ids; a --resume of a job that has no
// run says so rather than taking the latest.
func TestPlaceJobRun(t *testing.T) {
	t.Chdir(t.TempDir())
	prog := progtest.Decoded(t, program(t, strings.Replace(tinyPipe, "pipeline tiny", "pipeline jobs", 1)))
	job := folder.Job{ID: "slurm-7", From: "SLURM_JOB_ID=7"}
	p1, err := workflow.PlaceRun(prog, run.Where{Job: job, Rank: 1})
	want := filepath.Join("out", "jobs", "runs", "slurm-7")
	if err != nil || p1.Dir != want || p1.Fresh {
		t.Fatalf("rank 1: %+v, %v", p1, err)
	}
	if _, err := os.Stat(want); err == nil {
		t.Errorf("rank 1 made %s", want)
	}
	if _, err := workflow.PlaceRun(prog, run.Where{Job: job, Resume: true}); !errors.Is(err, folder.ErrNoRun) {
		t.Errorf("--resume of a job with no run: %v", err)
	}
	p0, err := workflow.PlaceRun(prog, run.Where{Job: job})
	if err != nil || p0.Dir != want || !p0.Fresh {
		t.Fatalf("rank 0: %+v, %v", p0, err)
	}
	again, err := workflow.PlaceRun(prog, run.Where{Job: job})
	if err != nil || again.Dir != want || again.Fresh {
		t.Fatalf("the job again: %+v, %v", again, err)
	}
	if p, err := workflow.PlaceRun(prog, run.Where{Rank: 1}); err != nil || p.Fresh {
		t.Errorf("rank 1 of no job: %+v, %v", p, err)
	}
	if runs, _ := filepath.Glob(filepath.Join("out", "jobs", "runs", "*")); len(runs) != 1 {
		t.Errorf("run folders %v, want the job's alone", runs)
	}
	if err := os.WriteFile(filepath.Join(want, folder.JobFile), []byte("slurm-7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := folder.Job{ID: "pytorchjob-team-b", From: "PyTorchJob b in namespace team"}
	_, err = workflow.PlaceRun(prog, run.Where{Dir: want, Job: other})
	if !errors.Is(err, folder.ErrOtherJob) || !strings.Contains(err.Error(), "slurm-7") || !strings.Contains(err.Error(), "pytorchjob-team-b") {
		t.Errorf("another job's folder: %v", err)
	}
	if _, err := workflow.PlaceRun(prog, run.Where{Dir: want}); err != nil {
		t.Errorf("a run by hand given the folder: %v", err)
	}
}
