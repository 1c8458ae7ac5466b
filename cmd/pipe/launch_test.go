package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pipe/planner/plan"
)

// fakeSlurm writes srun and scontrol as SLURM inside an allocation of
// SLURM_NTASKS tasks on one node would run them, and pipe as this test
// binary, into a folder for the PATH. srun starts every task with SLURM's
// variables, waits for all and exits with the worst status; with
// FAKE_SRUN_EXIT it starts none and exits with that. scontrol names the
// node and notes a requeue in requeued.
func fakeSlurm(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	scripts := map[string]string{
		"pipe": "#!/bin/sh\nPIPE_TEST_MAIN=1 exec " + os.Args[0] + ` "$@"` + "\n",
		"srun": `#!/bin/bash
[ -n "${FAKE_SRUN_EXIT:-}" ] && exit "$FAKE_SRUN_EXIT"
while [ "${1#--}" != "$1" ]; do shift; done
pids=()
for ((i = 0; i < SLURM_NTASKS; i++)); do
  SLURM_STEP_ID=0 SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 "$@" > "task$i.log" 2>&1 &
  pids+=($!)
done
worst=0
for p in "${pids[@]}"; do
  wait "$p"; s=$?
  [ "$s" -gt "$worst" ] && worst=$s
done
exit "$worst"
`,
		"scontrol": `#!/bin/sh
case "$1 $2" in
"show hostnames") echo "$3" | tr ',' '\n' ;;
"requeue "*) echo "$2" >> requeued ;;
*) echo "fake scontrol: $*" >&2; exit 1 ;;
esac
`,
	}
	for name, s := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return bin
}

// TestSlurmScriptRuns: the sbatch script pipe launch writes runs, under
// srun and scontrol as SLURM gives them, two ranks of pipe run --plan on
// the CPU (torch engine, gloo) to the end of a short training; a run that
// stops at a checkpoint (exit 130) has its job requeued.
func TestSlurmScriptRuns(t *testing.T) {
	py := torchPython(t)
	dir, _ := tiny(t, fmt.Sprintf(ranksPipe, "sl"))
	t.Chdir(dir)
	code, stdout, stderr := runPipe(t, "", "launch", "--slurm", "job.sbatch", "--engine", "torch", "--nproc-per-node", "2", "--master-port", freePort(t),
		"tiny.pipe", "--", "--max-steps", "6", "--checkpoint-dir", "ckpt", "--report", "run.json")
	if code != exitOK {
		t.Fatalf("pipe launch: exit %d\n%s%s", code, stdout, stderr)
	}
	script, err := os.ReadFile("job.sbatch")
	if err != nil || !strings.Contains(string(script), "#SBATCH --ntasks-per-node=2\n") || !strings.Contains(stdout, "job.plan.json") {
		t.Fatalf("the script (%v):\n%s\n%s", err, script, stdout)
	}
	bin := fakeSlurm(t, dir)
	run := func(extra ...string) (string, error) {
		cmd := exec.Command("bash", "job.sbatch")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "PIPE_PYTHON="+py, "SLURM_JOB_ID=41",
			"SLURM_JOB_NODELIST=localhost", "SLURM_NTASKS=2", "SLURM_NNODES=1")
		cmd.Env = append(cmd.Env, extra...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	start := time.Now()
	out, err := run()
	logs := out
	for i := range 2 {
		b, _ := os.ReadFile(filepath.Join(dir, "task"+string(rune('0'+i))+".log"))
		logs += "\n--- task " + string(rune('0'+i)) + "\n" + string(b)
	}
	if err != nil {
		t.Fatalf("the job: %v\n%s", err, logs)
	}
	t.Logf("the job ran in %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(logs, "rank 1 of 2") {
		t.Errorf("no rank 1 of 2:\n%s", logs)
	}
	rep := readJSON(t, must(os.ReadFile(filepath.Join(dir, "run.json"))))
	if rep["steps"] != 6.0 || rep["status"] != "max-steps" {
		t.Errorf("report: %v steps, status %v\n%s", rep["steps"], rep["status"], logs)
	}
	if _, err := os.Stat("requeued"); err == nil {
		t.Error("a finished job was requeued")
	}
	if out, err := run("FAKE_SRUN_EXIT=130"); err != nil || !strings.Contains(out, "requeueing job 41") {
		t.Errorf("a run stopped at a checkpoint: %v\n%s", err, out)
	}
	if b, err := os.ReadFile("requeued"); err != nil || string(b) != "41\n" {
		t.Errorf("requeued: %q, %v", b, err)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestLauncherAdoptsThePlan: a plan file's devices run as the launcher's
// ranks, one a process; a task SLURM gave a GPU of its own
// (--gpus-per-task) uses cuda:0 whatever its local rank.
func TestLauncherAdoptsThePlan(t *testing.T) {
	l, err := launcherEnv(envOf(map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "1", "MASTER_ADDR": "n1", "CUDA_VISIBLE_DEVICES": "5"}))
	if err != nil || l.localRank != 0 {
		t.Fatalf("a task with one GPU of its own: local rank %d, %v", l.localRank, err)
	}
	l, _ = launcherEnv(envOf(map[string]string{"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "1", "MASTER_ADDR": "n1", "CUDA_VISIBLE_DEVICES": "0,1"}))
	if l.localRank != 1 {
		t.Errorf("a task seeing the node's GPUs: local rank %d", l.localRank)
	}
	p := &plan.Plan{BatchSize: 8, AccumulationSteps: 1, EffectiveBatch: 32, Backend: plan.BackendGPU,
		Distributed: plan.Distributed{NProcPerNode: 2, NNodes: 2, WorldSize: 4, Backend: "nccl"}}
	var msg strings.Builder
	l.adopt(p, &msg)
	if d := p.Distributed; d.NProcPerNode != 1 || d.NNodes != 4 || d.WorldSize != 4 || msg.Len() != 0 {
		t.Errorf("adopted: %+v, %q", d, msg.String())
	}
	// An elastic job's other world keeps the plan's 32 samples a step,
	// each device's batch at most the plan's 8.
	for _, c := range []struct {
		world        int
		batch, accum int64
		effective    int64
		lr           float64
		say          string
	}{
		{2, 8, 2, 32, 0.01, "each trains 8 a micro-batch × 2 accumulation (the plan's 8 × 1), so a step still trains the plan's 32 samples"},
		{8, 4, 1, 32, 0.01, "each trains 4 a micro-batch × 1 accumulation"},
		{3, 5, 2, 30, 0.01 * 30 / 32, "cannot share its step of 32 samples evenly: each trains 5 a micro-batch × 2 accumulation (the plan's 8 × 1), 30 samples a step; the learning rate is 0.009375"},
	} {
		p := &plan.Plan{BatchSize: 8, AccumulationSteps: 1, EffectiveBatch: 32, Optimizer: plan.Optimizer{LR: 0.01, LRScale: 1, ReferenceBatch: 32},
			Distributed: plan.Distributed{NProcPerNode: 4, NNodes: 1, WorldSize: 4, Backend: "gloo"}}
		msg.Reset()
		l.world = c.world
		l.adopt(p, &msg)
		if p.BatchSize != c.batch || p.AccumulationSteps != c.accum || p.EffectiveBatch != c.effective || math.Abs(p.Optimizer.LR-c.lr) > 1e-12 || p.WorldSize() != c.world {
			t.Errorf("%d ranks: batch %d × %d accumulation, %d a step, lr %g, world %d", c.world, p.BatchSize, p.AccumulationSteps, p.EffectiveBatch, p.Optimizer.LR, p.WorldSize())
		}
		if !strings.Contains(msg.String(), fmt.Sprintf("the plan is for 4 devices and SLURM started %d ranks", c.world)) || !strings.Contains(msg.String(), c.say) {
			t.Errorf("%d ranks: %q", c.world, msg.String())
		}
	}
}

// TestLaunchRefuses: a plan that does not fit writes no job file (exit
// 3, the diagnostic shown); --k8s without an image, or an elastic range
// without the plan's nodes, is a mistake.
func TestLaunchRefuses(t *testing.T) {
	fixedHost(t)
	out := filepath.Join(t.TempDir(), "job.sbatch")
	inRoot(t)
	code, _, stderr := runPipe(t, "", "launch", "--slurm", out, "--batch", "50000", "examples/fashion.pipe")
	if code != exitNoFit || !strings.Contains(stderr, "does not fit on cpu") || !strings.Contains(stderr, "no job file written") {
		t.Errorf("a plan that does not fit: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the script was written")
	}
	if code, _, stderr := runPipe(t, "", "launch", "--k8s", out, "examples/fashion.pipe"); code != exitErrors || !strings.Contains(stderr, "--image") {
		t.Errorf("no image: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runPipe(t, "", "launch", "--k8s", out, "--image", "i", "--elastic", "2:3", "--engine", "torch", "examples/fashion.pipe")
	if code != exitErrors || !strings.Contains(stderr, "does not hold the plan's 1 nodes") {
		t.Errorf("an elastic range without the plan's nodes: exit %d\n%s", code, stderr)
	}
}

// TestElasticWorldKeepsTheStep: a plan for 2 devices that a launcher
// runs as 1 rank (an elastic job that lost one) trains 8 a micro-batch
// × 2 accumulation, the plan's 16 samples a step, and its losses are
// those of the 2 devices, step for step (the same global batches). A
// checkpoint the 2 devices wrote at step 5 continues at 1 rank at the
// same sample, with the losses of the uninterrupted 2-device run.
func TestElasticWorldKeepsTheStep(t *testing.T) {
	py := torchPython(t)
	dir, file := tiny(t, fmt.Sprintf(ranksPipe, "el"))
	planFile := filepath.Join(dir, "plan.json")
	if code, _, stderr := runPipe(t, "", "plan", "--engine", "torch", "--nproc-per-node", "2", "--out", planFile, file); code != exitOK {
		t.Fatalf("pipe plan: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := runPipe(t, "", runArgs(dir, "--engine", "torch", "--python", py, "--nproc-per-node", "2", "--max-steps", "10", file)...)
	if code != exitOK {
		t.Fatalf("2 devices: exit %d\n%s%s", code, stdout, stderr)
	}
	two := readReport(t, dir)
	var out, errb bytes.Buffer
	env := map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": freePort(t)}
	code = Main(runArgs(dir, "--plan", planFile, "--python", py, "--max-steps", "10", file),
		&Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: envOf(env)})
	if code != exitOK || !strings.Contains(errb.String(), "each trains 8 a micro-batch × 2 accumulation (the plan's 8 × 1), so a step still trains the plan's 16 samples") {
		t.Fatalf("1 rank: exit %d\n%s%s", code, out.String(), errb.String())
	}
	one := readReport(t, dir)
	a, b := two["step_losses"].([]any), one["step_losses"].([]any)
	if len(a) != 10 || len(b) != 10 {
		t.Fatalf("%d and %d step losses", len(a), len(b))
	}
	for i := range a {
		if d := math.Abs(a[i].(float64)-b[i].(float64)) / a[i].(float64); d > 1e-5 {
			t.Errorf("step %d: %.7g on 2 devices, %.7g on 1 rank of the 2-device plan", i+1, a[i], b[i])
		}
	}

	// 5 steps on 2 devices, then a launcher of 1 rank continues them.
	code, stdout, stderr = runPipe(t, "", runArgs(dir, "--engine", "torch", "--python", py, "--nproc-per-node", "2", "--max-steps", "5", file)...)
	if code != exitOK {
		t.Fatalf("2 devices, 5 steps: exit %d\n%s%s", code, stdout, stderr)
	}
	out.Reset()
	errb.Reset()
	code = Main(runArgs(dir, "--plan", planFile, "--python", py, "--max-steps", "10", "--resume", file),
		&Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb, Getenv: envOf(env)})
	if code != exitOK || !strings.Contains(errb.String(), "the checkpoint's step is split differently") {
		t.Fatalf("1 rank resuming 2: exit %d\n%s%s", code, out.String(), errb.String())
	}
	resumed := readReport(t, dir)
	from, _ := resumed["resumed_from"].(map[string]any)
	if from == nil || from["step"].(float64) != 5 || from["samples"].(float64) != 80 || from["batch"].(float64) != 10 {
		t.Fatalf("resumed from %v", resumed["resumed_from"])
	}
	c := resumed["step_losses"].([]any)
	if len(c) != 10 {
		t.Fatalf("%d step losses resumed", len(c))
	}
	for i := 5; i < 10; i++ {
		if d := math.Abs(a[i].(float64)-c[i].(float64)) / a[i].(float64); d > 1e-5 {
			t.Errorf("step %d: %.7g on 2 devices, %.7g resumed at 1 rank from step 5", i+1, a[i], c[i])
		}
	}
}

// TestLaunchForClusterNodes: an 8-GPU job launched from a 2-core machine
// with the nodes' cores and memory given plans its loader for them (8
// workers a rank, 9 CPUs a task, not 0 and 1) and asks for the node's
// memory; without them launch says what it sized from this machine. The
// script's folder with a space in its name is one word to sbatch, SLURM's
// output goes to the run folders' folder (made now), and the pods carry
// the cluster's placement. --nproc-per-node beyond --gpus-per-node and a
// directive the plan decides are refused.
func TestLaunchForClusterNodes(t *testing.T) {
	fixedHost(t)
	pills, err := filepath.Abs("../../examples/pills.pipe")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my runs")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	base := []string{"launch", "--slurm", "job.sbatch", "--k8s", "job.yaml", "--image", "img", "--device", "h100-80gb", "--gpus-per-node", "8"}
	code, _, stderr := runPipe(t, "", append(base, pills)...)
	script := string(mustRead(t, "job.sbatch"))
	if code != exitOK || !strings.Contains(script, "#SBATCH --cpus-per-task=1\n") || !strings.Contains(stderr, "give --cpus-per-node and --mem-per-node") {
		t.Errorf("without the nodes' facts: exit %d\n%s\n%s", code, script, stderr)
	}
	code, stdout, stderr := runPipe(t, "", append(base, "--cpus-per-node", "96", "--mem-per-node", "1TiB", "--account", "ml", "--sbatch", "--exclusive",
		"--node-selector", "gpu=h100", "--toleration", "nvidia.com/gpu:NoSchedule", "--backoff-limit", "4", pills)...)
	if code != exitOK || strings.Contains(stderr, "give --cpus-per-node") {
		t.Fatalf("exit %d\n%s%s", code, stdout, stderr)
	}
	script = string(mustRead(t, "job.sbatch"))
	for _, want := range []string{"#SBATCH --ntasks-per-node=8\n", "#SBATCH --cpus-per-task=9\n", "#SBATCH --mem=1048576M\n", "#SBATCH --account=ml\n",
		"#SBATCH --exclusive\n", "#SBATCH --chdir='" + dir + "'\n", "#SBATCH --output='out/pills/runs/slurm-%j.out'\n"} {
		if !strings.Contains(script, want) {
			t.Errorf("no %q in\n%s", want, script)
		}
	}
	if st, err := os.Stat(filepath.Join("out", "pills", "runs")); err != nil || !st.IsDir() {
		t.Errorf("the output's folder: %v", err)
	}
	var p plan.Plan
	if err := json.Unmarshal(mustRead(t, "job.plan.json"), &p); err != nil || p.Loader.Workers != 8 {
		t.Errorf("the plan's loader: %d workers a rank (%v)", p.Loader.Workers, err)
	}
	manifest := string(mustRead(t, "job.yaml"))
	for _, want := range []string{"backoffLimit: 4", "gpu: h100", "effect: NoSchedule", "memory: 1048576Mi", "sizeLimit: "} {
		if !strings.Contains(manifest, want) {
			t.Errorf("no %q in the manifest", want)
		}
	}
	for args, want := range map[string]string{
		"--nproc-per-node 16":  "more than the node's 8 GPUs",
		"--sbatch --nodes=3":   "writes --nodes from the plan",
		"--mem-per-node lots":  "--mem-per-node \"lots\"",
		"--toleration k:Never": "the effect is",
	} {
		code, _, stderr := runPipe(t, "", append(append(base, strings.Fields(args)...), pills)...)
		if code != exitErrors || !strings.Contains(stderr, want) {
			t.Errorf("%s: exit %d\n%s", args, code, stderr)
		}
	}
}

// TestLaunchDataOnTheCluster: a job's data is read where the job runs (a
// cluster's shared file system, a pod's volume), so a source this machine
// cannot read is a warning, the plan leaves its facts out, and the job
// file is written; pipe plan, run here, refuses the same file (exit 1).
// A model input the data does not have stays an error of the launch.
func TestLaunchDataOnTheCluster(t *testing.T) {
	fixedHost(t)
	inRoot(t)
	dir := t.TempDir()
	src, err := os.ReadFile("examples/fashion.pipe")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, old, new string) string {
		if !strings.Contains(string(src), old) {
			t.Fatalf("examples/fashion.pipe has no %q", old)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.Replace(string(src), old, new, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	elsewhere := write("elsewhere.pipe", "data/fashion-mnist/train-images", "/cluster/only/train-images")
	out := filepath.Join(dir, "job.sbatch")
	code, _, stderr := runPipe(t, "", "launch", "--slurm", out, elsewhere)
	if code != exitOK || !strings.Contains(stderr, "warning: cannot read source train") || !strings.Contains(stderr, "where it runs") {
		t.Fatalf("launch with the data elsewhere: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no job file: %v", err)
	}
	if code, _, stderr := runPipe(t, "", "plan", elsewhere); code != exitErrors || !strings.Contains(stderr, "error: cannot read source train") {
		t.Errorf("plan here: exit %d, want %d\n%s", code, exitErrors, stderr)
	}
	shape := write("shape.pipe", "input [1, 28, 28]", "input [3, 28, 28]")
	if code, _, stderr := runPipe(t, "", "launch", "--slurm", filepath.Join(dir, "shape.sbatch"), shape); code == exitOK || !strings.Contains(stderr, "does not match the data") {
		t.Errorf("launch with the wrong input shape: exit %d\n%s", code, stderr)
	}
}
