package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pipe/run/folder"
)

// TestSlurmBatchStepIsNoLauncherRank: a job's batch script (SLURM_PROCID
// and SLURM_NTASKS, no step id) and an srun step of one task are no
// launcher's ranks, so pipe starts its own workers there; an srun step
// of two tasks is.
func TestSlurmBatchStepIsNoLauncherRank(t *testing.T) {
	for _, env := range []map[string]string{
		{"SLURM_JOB_ID": "12", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"},
		{"SLURM_JOB_ID": "12", "SLURM_PROCID": "0", "SLURM_NTASKS": "2"},
		{"SLURM_JOB_ID": "12", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_STEP_ID": "0"},
	} {
		if l, err := launcherEnv(envOf(env)); l != nil || err != nil {
			t.Errorf("%v: a launcher's rank (%+v, %v)", env, l, err)
		}
	}
	l, err := launcherEnv(envOf(map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "MASTER_ADDR": "n1"}))
	if err != nil || l == nil || l.rank != 1 || l.world != 2 {
		t.Errorf("an srun step of two tasks: %+v, %v", l, err)
	}
}

// TestJobContinuesItsOwnRun: a run of a SLURM job (SLURM_JOB_ID, no
// restart count) writes into out/PIPELINE/runs/slurm-ID, records the job
// there, and a second start of the job continues that run's checkpoint
// even though another job's run is the latest since; another job given
// the first one's folder is refused with both ids, before it trains.
func TestJobContinuesItsOwnRun(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, servePipe)
	t.Chdir(dir)
	start := func(env map[string]string, args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(append([]string{"run", "--threads", "1"}, append(args, file)...), &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: envOf(env)})
		return code, out.String() + errb.String()
	}
	first := map[string]string{"SLURM_JOB_ID": "101"}
	if code, out := start(first, "--max-steps", "2"); code != exitOK {
		t.Fatalf("job 101: exit %d\n%s", code, out)
	}
	own := filepath.Join("out", "tiny", "runs", "slurm-101")
	if got, err := folder.ReadJob(own); got != "slurm-101" || err != nil {
		t.Fatalf("%s records job %q (%v)", own, got, err)
	}
	// Another job runs meanwhile, and is the latest.
	if code, out := start(map[string]string{"SLURM_JOB_ID": "202"}, "--max-steps", "1"); code != exitOK {
		t.Fatalf("job 202: exit %d\n%s", code, out)
	}
	code, out := start(first, "--max-steps", "3")
	if code != exitOK || !strings.Contains(out, "continuing from the run's last checkpoint") {
		t.Fatalf("job 101 again: exit %d\n%s", code, out)
	}
	rep := readJSON(t, mustRead(t, filepath.Join(own, "report.json")))
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) != 2 || rep["steps"].(float64) != 3 || rep["run_id"] != "slurm-101" {
		t.Errorf("job 101 again: resumed from %v, %v steps, run_id %v", rep["resumed_from"], rep["steps"], rep["run_id"])
	}
	other := filepath.Join("out", "tiny", "runs", "slurm-202")
	if rep := readJSON(t, mustRead(t, filepath.Join(other, "report.json"))); rep["steps"].(float64) != 1 {
		t.Errorf("job 202's run went on to step %v", rep["steps"])
	}

	before, _ := os.Stat(filepath.Join(own, folder.LastCheckpoint))
	code, out = start(map[string]string{"SLURM_JOB_ID": "303"}, "--checkpoint-dir", own, "--max-steps", "4")
	if code != exitErrors || !strings.Contains(out, "slurm-101") || !strings.Contains(out, "slurm-303") {
		t.Errorf("job 303 in job 101's folder: exit %d\n%s", code, out)
	}
	if after, _ := os.Stat(filepath.Join(own, folder.LastCheckpoint)); !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("job 303 wrote into job 101's folder")
	}
	// A run by hand still gets a folder of its own.
	if code, out := start(nil, "--max-steps", "1"); code != exitOK {
		t.Fatalf("by hand: exit %d\n%s", code, out)
	}
	runs, _ := filepath.Glob(filepath.Join("out", "tiny", "runs", "*"))
	if len(runs) != 3 {
		t.Errorf("run folders %v, want the two jobs' and one stamped", runs)
	}
}

// TestPyTorchJobContainerRestartContinues: a PyTorchJob's container as
// the operator starts it (MASTER_ADDR JOB-master-0, RANK, WORLD_SIZE,
// MASTER_PORT) with what pipe launch --k8s adds (the job's name and
// namespace), stopped mid-run (SIGTERM, as a pod's eviction sends), and
// started again by restartPolicy OnFailure: the same command, no restart
// count. The second start continues the run at the step the first
// stopped at, in the job's folder, and completes it.
func TestPyTorchJobContainerRestartContinues(t *testing.T) {
	p := newPod(t, "podrestart")
	dir := p.dir
	step := p.stopAtEpoch3()
	out, err := p.start("")
	if err != nil || !strings.Contains(out, "continuing from the run's last checkpoint") {
		t.Fatalf("the second start: %v\n%s", err, out)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "out", "podrestart", "runs", "*"))
	if len(runs) != 1 || filepath.Base(runs[0]) != "pytorchjob-team-train" {
		t.Fatalf("run folders %v, want the job's alone", runs)
	}
	rep := readJSON(t, mustRead(t, filepath.Join(runs[0], "report.json")))
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || int(from["step"].(float64)) != step || rep["steps"].(float64) != 320 || rep["status"] != "completed" {
		t.Errorf("resumed from %v (stopped at step %d); %v steps, %v", rep["resumed_from"], step, rep["steps"], rep["status"])
	}
	t.Logf("stopped at step %d; the restarted container continued there to step %v", step, rep["steps"])
}

// pod is a PyTorchJob's container as the operator starts it (MASTER_ADDR
// JOB-master-0, RANK, WORLD_SIZE, MASTER_PORT) with what pipe launch
// --k8s adds (the job's name and namespace): pipe run --engine torch of
// ranksPipe, 40 epochs of 64 samples (320 steps), as pipeline name.
// flags go before the file; env may be added to before a start.
type pod struct {
	t             *testing.T
	ctx           context.Context
	dir, file, py string
	flags, env    []string
}

func newPod(t *testing.T, name string) *pod {
	t.Helper()
	py := torchPython(t)
	src := strings.Replace(ranksPipe, "epochs 1", "epochs 40", 1) // the stop at epoch 3 lands long before the end
	src = strings.Replace(src, "samples 640", "samples 64", 1)
	dir, file := tiny(t, strings.Replace(src, "%s", name, 1))
	env := append(os.Environ(), "PIPE_TEST_MAIN=1", "MASTER_ADDR=train-master-0", "MASTER_PORT="+freePort(t), "RANK=0", "WORLD_SIZE=1",
		"PIPE_JOB_NAME=train", "PIPE_JOB_NAMESPACE=team", "TORCHELASTIC_RESTART_COUNT=", "SLURM_JOB_ID=", "PIPE_RUN_ID=")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return &pod{t: t, ctx: ctx, dir: dir, file: file, py: py, env: env}
}

// start runs the container to its end, sending it SIGTERM (as a pod's
// eviction does) at the first line of its output holding stopAt ("":
// never); it returns the output and how the process ended.
func (p *pod) start(stopAt string) (string, error) {
	t := p.t
	t.Helper()
	args := append(append([]string{"run", "--engine", "torch", "--python", p.py}, p.flags...), p.file)
	cmd := exec.CommandContext(p.ctx, os.Args[0], args...)
	cmd.Dir, cmd.Env = p.dir, p.env
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if stopAt != "" && strings.Contains(sc.Text(), stopAt) {
			cmd.Process.Signal(syscall.SIGTERM)
			stopAt = ""
		}
	}
	return out.String(), cmd.Wait()
}

// stopAtEpoch3 starts the container and stops it after epoch 3; it
// returns the step its checkpoint was written at, failing the test
// unless it exited as interrupted, having written one.
func (p *pod) stopAtEpoch3() int {
	t := p.t
	t.Helper()
	out, err := p.start("epoch done: epoch=3/")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitInterrupted {
		t.Fatalf("the first start: %v, want exit %d\n%s", err, exitInterrupted, out)
	}
	m := regexp.MustCompile(`interrupted at epoch \d+, step (\d+); checkpoint written`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no checkpoint written at the stop\n%s", out)
	}
	step, _ := strconv.Atoi(m[1])
	return step
}
