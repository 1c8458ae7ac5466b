package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestLauncherEnv: torchrun's and SLURM's variables make this process one
// rank; none is no launcher; what cannot be read, or flags that disagree
// with the launcher, are errors naming both.
func TestLauncherEnv(t *testing.T) {
	l, err := launcherEnv(envOf(map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1",
		"MASTER_PORT": "29400", "TORCHELASTIC_USE_AGENT_STORE": "True"}))
	if err != nil || l == nil || l.by != "torchrun" || l.rank != 3 || l.world != 4 || l.localRank != 1 || l.addr != "10.0.0.1" || l.port != 29400 || !l.agentStore {
		t.Fatalf("torchrun: %+v, %v", l, err)
	}
	if l, err := launcherEnv(envOf(nil)); l != nil || err != nil {
		t.Errorf("no launcher: %+v, %v", l, err)
	}
	if _, err := launcherEnv(envOf(map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"})); err == nil || !strings.Contains(err.Error(), "MASTER_ADDR") {
		t.Errorf("SLURM without MASTER_ADDR: %v", err)
	}
	s, err := launcherEnv(envOf(map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "1", "MASTER_ADDR": "node1"}))
	if err != nil || s.by != "SLURM" || s.rank != 1 || s.world != 2 || s.port != 29500 {
		t.Errorf("SLURM: %+v, %v", s, err)
	}
	if _, err := launcherEnv(envOf(map[string]string{"RANK": "2", "WORLD_SIZE": "2"})); err == nil {
		t.Error("rank 2 of 2 was taken")
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f := newRunFlags(fs)
	if err := fs.Parse([]string{"--nnodes", "2"}); err != nil {
		t.Fatal(err)
	}
	if err := l.apply(fs, f); err == nil || !strings.Contains(err.Error(), "--nnodes 2") || !strings.Contains(err.Error(), "WORLD_SIZE=4") {
		t.Errorf("a disagreeing flag: %v", err)
	}
	fs = flag.NewFlagSet("run", flag.ContinueOnError)
	f = newRunFlags(fs)
	if err := l.apply(fs, f); err != nil || *f.nodeRank != 3 || *f.engine.nnodes != 4 || *f.engine.nproc != 1 || *f.masterPort != 29400 {
		t.Errorf("applied: rank %d, nodes %d, nproc %d, port %d (%v)", *f.nodeRank, *f.engine.nnodes, *f.engine.nproc, *f.masterPort, err)
	}
}

// TestLauncherSaysRanksAndRestarts: two torchrun ranks of one machine
// are ranks 0 and 1 on node 0 of 1 (they were "node 1 of 2"), SLURM's
// tasks say their node too, and a failure's advice is torchrun's restart
// only while it has restarts left (SLURM restarts none).
func TestLauncherSaysRanksAndRestarts(t *testing.T) {
	tr := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
		"TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "1"}
	l, err := launcherEnv(envOf(tr))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.share(1, 2); got != "rank 1 of 2 (on node 0 of 1)" {
		t.Errorf("torchrun: %q", got)
	}
	if got := l.restartAdvice(); got != "torchrun starts the ranks again (restart 1 of 1), and they continue from it by themselves" {
		t.Errorf("torchrun's advice with a restart left: %q", got)
	}
	tr["TORCHELASTIC_RESTART_COUNT"] = "1"
	if l, _ := launcherEnv(envOf(tr)); l.restartAdvice() != "" {
		t.Errorf("torchrun's advice with no restart left: %q", l.restartAdvice())
	}
	s, err := launcherEnv(envOf(map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_NODEID": "1",
		"SLURM_NNODES": "2", "MASTER_ADDR": "node1"}))
	if err != nil || s.share(3, 4) != "rank 3 of 4 (on node 1 of 2)" || s.restartAdvice() != "" {
		t.Errorf("SLURM: %q, %q (%v)", s.share(3, 4), s.restartAdvice(), err)
	}
	var none *launched
	if none.share(1, 2) != "node 1 of 2" || none.restartAdvice() != "" {
		t.Errorf("no launcher: %q, %q", none.share(1, 2), none.restartAdvice())
	}
}

// ranksPipe is the small pipeline the launcher tests train over two
// ranks (%s: its name): 640 samples, 10 steps of 16 in a few seconds.
const ranksPipe = `pipeline %s
seed 3
source blobs synthetic { samples 640  shape [12]  classes 4  seed 5 }
model net {
  input [12]
  dense 32 -> relu -> dense 4
}
train { epochs 1  batch 8  optimizer adam lr 0.01  loss cross_entropy }
evaluate { source blobs }
`

// TestTorchrunStartsOneRankAPipe: two torchrun agents on this machine
// (two "nodes" of one process, c10d rendezvous, gloo) each start this
// test binary as pipe, which reads its rank from torchrun's environment
// and starts one worker; rank 0's model after 10 steps evaluates as one
// process's with the two ranks' batches together does.
func TestTorchrunStartsOneRankAPipe(t *testing.T) {
	py := torchPython(t)
	torchrun := torchrunPath(t)
	src := fmt.Sprintf(ranksPipe, "tr")
	dir, file := tiny(t, src)
	endpoint := "127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for n := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Debian's torchrun 1.13 needs --redirects and --tee set.
			cmd := exec.CommandContext(ctx, torchrun, "--nnodes", "2", "--nproc_per_node", "1", "--rdzv_backend", "c10d",
				"--rdzv_endpoint", endpoint, "--redirects", "1", "--tee", "1", "--no_python", os.Args[0],
				"run", "--engine", "torch", "--python", py, "--max-steps", "10",
				"--checkpoint-dir", filepath.Join(dir, "ckpt", string(rune('0'+n))), "--report", filepath.Join(dir, "node"+string(rune('0'+n))+".json"), file)
			cmd.Env = append(os.Environ(), "PIPE_TEST_MAIN=1")
			outs[n], errs[n] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for n := range 2 {
		if errs[n] != nil {
			t.Fatalf("torchrun %d: %v\n%s", n, errs[n], outs[n])
		}
	}
	// One report, rank 0's; it names the process group.
	var rank0 map[string]any
	for n := range 2 {
		if b, err := os.ReadFile(filepath.Join(dir, "node"+string(rune('0'+n))+".json")); err == nil {
			rank0 = readJSON(t, b)
		}
	}
	if rank0 == nil {
		t.Fatalf("no report\n%s\n%s", outs[0], outs[1])
	}
	if !strings.Contains(strings.Join([]string{string(outs[0]), string(outs[1])}, ""), "rank 1 of 2") {
		t.Errorf("no rank 1 of 2 in the output:\n%s\n%s", outs[0], outs[1])
	}
	// Each node read its share of the samples: 10 steps of a global batch
	// of 16, 8 a node.
	both := string(outs[0]) + string(outs[1])
	for node := range 2 {
		if want := fmt.Sprintf("rank %d of 2 (on node %d of 2) read 80 training samples; the job trained 160", node, node); !strings.Contains(both, want) {
			t.Errorf("no %q in the output:\n%s\n%s", want, outs[0], outs[1])
		}
	}
	code, stdout, stderr := runPipe(t, "", runArgs(dir, "--engine", "torch", "--python", py, "--batch", "16", "--max-steps", "10", file)...)
	if code != exitOK {
		t.Fatalf("one process: exit %d\n%s\n%s", code, stdout, stderr)
	}
	one := readReport(t, dir)
	// Rank 0 reports the job's losses, both ranks' samples, step by step.
	lr, lo := rank0["step_losses"].([]any), one["step_losses"].([]any)
	if len(lr) != 10 || len(lo) != 10 {
		t.Fatalf("%d and %d step losses", len(lr), len(lo))
	}
	for i := range lo {
		if d := math.Abs(lr[i].(float64)-lo[i].(float64)) / lo[i].(float64); d > 1e-5 {
			t.Errorf("step %d: %.7g reported by rank 0, %.7g in one process", i+1, lr[i], lo[i])
		}
	}
	a, b := rank0["final_loss"].(float64), one["final_loss"].(float64)
	if d := math.Abs(a-b) / b; d > 1e-5 {
		t.Errorf("evaluation loss after 10 steps: %.7g over two torchrun ranks, %.7g in one process", a, b)
	}
}

func readJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRestartContinuesTheRun: a rank that torchrun starts again after a
// failure (TORCHELASTIC_RESTART_COUNT) continues from the run's last
// checkpoint without --resume; before any checkpoint it starts afresh.
func TestRestartContinuesTheRun(t *testing.T) {
	fixedHost(t)
	dir, file := tiny(t, tinyPipe)
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "TORCHELASTIC_RESTART_COUNT": "1"}
	runEnv := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := Main(args, &Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: envOf(env)})
		return code, out.String() + errb.String()
	}
	code, out := runEnv(runArgs(dir, "--max-steps", "3", file)...)
	if code != exitOK || !strings.Contains(out, "no checkpoint to continue: starting afresh") {
		t.Fatalf("a restart before any checkpoint: exit %d\n%s", code, out)
	}
	code, out = runEnv(runArgs(dir, "--max-steps", "5", file)...)
	if code != exitOK || !strings.Contains(out, "continuing from the run's last checkpoint") {
		t.Fatalf("a restart after one: exit %d\n%s", code, out)
	}
	rep := readReport(t, dir)
	from, _ := rep["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) != 3 || rep["steps"].(float64) != 5 {
		t.Errorf("resumed from %v, %v steps", rep["resumed_from"], rep["steps"])
	}
}

// TestWorkerThreadsAreTheSameUnderEveryLauncher: the torch workers'
// threads are the machine's cores shared by its ranks, however the ranks
// were started: pipe's own --nproc-per-node 2, torchrun's 2 local ranks
// (which set OMP_NUM_THREADS=1) and srun's 2 tasks on the node all give
// 8 of 16 cores; SLURM_CPUS_PER_TASK, where the job gives it, wins.
func TestWorkerThreadsAreTheSameUnderEveryLauncher(t *testing.T) {
	torchrun := map[string]string{"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}
	srun := map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
		"SLURM_STEP_TASKS_PER_NODE": "2(x2)", "MASTER_ADDR": "n0"}
	var own *launched
	if n, why := own.workerThreads(16, 2); n != 8 {
		t.Errorf("pipe's own 2 workers: %d (%s)", n, why)
	}
	for name, env := range map[string]map[string]string{"torchrun": torchrun, "srun": srun} {
		l, err := launcherEnv(envOf(env))
		if err != nil || l == nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, why := l.workerThreads(16, 1); n != 8 {
			t.Errorf("%s: %d threads (%s)", name, n, why)
		}
	}
	srun["SLURM_CPUS_PER_TASK"] = "3"
	if l, _ := launcherEnv(envOf(srun)); l == nil {
		t.Fatal("srun")
	} else if n, _ := l.workerThreads(16, 1); n != 3 {
		t.Errorf("--cpus-per-task 3: %d threads", n)
	}
	for list, want := range map[string][]int{"2(x3),1": {2, 2, 2, 1, 0}, "4": {4, 0}, "x": {0}} {
		for node, w := range want {
			if got := slurmTasksOn(node, envOf(map[string]string{"SLURM_TASKS_PER_NODE": list})); got != w {
				t.Errorf("%q node %d: %d tasks, want %d", list, node, got, w)
			}
		}
	}
}

// TestTorchThreadsIgnoreTheLaunchersOMP: a torch run with the
// OMP_NUM_THREADS=1 torchrun gives its ranks and one without it train on
// as many threads (this machine's cores, one worker), which the report
// says, to the same losses.
func TestTorchThreadsIgnoreTheLaunchersOMP(t *testing.T) {
	py := torchPython(t)
	fixedHost(t)
	var threads []any
	var losses []string
	for _, omp := range []string{"1", ""} {
		t.Setenv("OMP_NUM_THREADS", omp)
		if omp == "" {
			os.Unsetenv("OMP_NUM_THREADS")
		}
		dir, file := tiny(t, tinyPipe)
		code, _, stderr := runPipe(t, "", runArgs(dir, "--engine", "torch", "--python", py, "--max-steps", "6", file)...)
		if code != exitOK {
			t.Fatalf("OMP_NUM_THREADS=%q: exit %d\n%s", omp, code, stderr)
		}
		rep := readReport(t, dir)
		applied, _ := rep["engine_applied"].(map[string]any)
		threads = append(threads, applied["threads"])
		b, _ := json.Marshal(rep["step_losses"])
		losses = append(losses, string(b))
	}
	if want := fmt.Sprint(runtime.NumCPU()); threads[0] != want || threads[1] != want {
		t.Errorf("threads with OMP_NUM_THREADS=1 and unset: %v; want %s both", threads, want)
	}
	if losses[0] != losses[1] {
		t.Errorf("losses differ:\n%s\n%s", losses[0], losses[1])
	}
}
