package jobfile

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"pipe/planner/plan"
)

// job is a plan of nodes × nproc devices as pipe plan makes one, without
// the planner: the job files read only these fields.
func job(backend string, nodes, nproc int) *Job {
	p := &plan.Plan{Version: plan.Version, SourceSHA256: SHA256([]byte("pipeline tiny\n")), File: "tiny.pipe", Pipeline: "Tiny_Net",
		Model: "net", Backend: backend, Device: plan.Device{Name: "a100-80gb", Kind: backend},
		Engine:      plan.Engine{Name: plan.EngineTorch},
		Distributed: plan.Distributed{NProcPerNode: nproc, NNodes: nodes, WorldSize: nodes * nproc, Backend: "nccl", AllReduceBytes: 3 << 20},
		BatchSize:   32, AccumulationSteps: 1, EffectiveBatch: int64(32 * nodes * nproc), Fits: true,
		Memory: plan.Memory{Total: 1 << 30, Budget: 70 << 30}, Loader: plan.Loader{Workers: 7},
		StepTime: plan.StepTime{Bound: "compute", StepSeconds: 0.12, AllReduceSeconds: 0.01, Network: "network", NetworkBandwidth: 12.5e9}}
	b, _ := p.MarshalIndent()
	return &Job{Plan: p, PlanJSON: b, Source: []byte("pipeline tiny\n"), SourceName: "pipes/tiny.pipe"}
}

func TestScript(t *testing.T) {
	s := string(Script(job(plan.BackendGPU, 4, 8), Slurm{PlanFile: "job.plan.json", Source: "pipes/tiny.pipe", Dir: "/home/me/run dir", RunArgs: []string{"--max-steps", "100"}}))
	for _, want := range []string{
		"#!/bin/bash\n", "#SBATCH --nodes=4\n", "#SBATCH --ntasks-per-node=8\n", "#SBATCH --gpus-per-task=1\n", "#SBATCH --cpus-per-task=8\n",
		"#SBATCH --requeue\n", "#SBATCH --signal=USR1@120\n", "#SBATCH --job-name=tiny-net\n", "#SBATCH --chdir='/home/me/run dir'\n",
		`MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"`, "MASTER_PORT=$((29500 + SLURM_JOB_ID % 1000))",
		"srun --kill-on-bad-exit=1 pipe run --plan job.plan.json --max-steps 100 pipes/tiny.pipe || status=$?\n",
		"if [ \"$status\" -eq 130 ]; then\n", `scontrol requeue "$SLURM_JOB_ID"`,
		"# source pipes/tiny.pipe, sha256 " + job("", 1, 1).Plan.SourceSHA256, "# plan sha256 " + SHA256(job(plan.BackendGPU, 4, 8).PlanJSON),
		"all-reduce 0.01 s of it over network at 100 Gb/s",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	cpu := string(Script(job(plan.BackendCPU, 1, 2), Slurm{PlanFile: "a b.json", Source: "x.pipe", MasterPort: 29411}))
	if strings.Contains(cpu, "--gpus-per-task") || !strings.Contains(cpu, "MASTER_PORT=29411\n") || !strings.Contains(cpu, "--plan 'a b.json' x.pipe") {
		t.Errorf("a CPU plan:\n%s", cpu)
	}
}

// TestScriptDirectivesAreWords: every #SBATCH line's value is one word
// as sbatch reads it (quotes and backslashes as the shell's; bash reads
// each here), so a folder with a space, a quote or a '#' in its name,
// and the cluster's account, qos, constraint, memory, output and extra
// directives, reach sbatch whole; the script is valid bash.
func TestScriptDirectivesAreWords(t *testing.T) {
	o := Slurm{PlanFile: "job.plan.json", Source: "tiny.pipe", Dir: "/home/me/it's #1 run", Account: "proj-42", QOS: "high prio",
		Constraint: "h100&ib", MemPerNode: 500 << 30, Output: "/home/me/it's #1 run/out/Tiny_Net/runs/slurm-%j.out",
		Extra: []string{"--mail-type=END", "--exclusive"}}
	script := Script(job(plan.BackendGPU, 2, 8), o)
	if out, err := exec.Command("bash", "-n", "-c", string(script)).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v %s", err, out)
	}
	want := map[string]string{"--chdir": o.Dir, "--account": "proj-42", "--qos": "high prio", "--constraint": "h100&ib",
		"--mem": "512000M", "--output": o.Output, "--mail-type": "END", "--exclusive": "", "--nodes": "2", "--job-name": "tiny-net"}
	seen := map[string]bool{}
	for _, l := range strings.Split(string(script), "\n") {
		rest, ok := strings.CutPrefix(l, "#SBATCH ")
		if !ok {
			continue
		}
		out, err := exec.Command("bash", "-c", `eval "set -- $1"; printf '%s\0' "$@"`, "x", rest).Output()
		words := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
		if err != nil || len(words) != 1 {
			t.Errorf("%q: %d words (%v)", l, len(words), err)
			continue
		}
		name, value, _ := strings.Cut(words[0], "=")
		seen[name] = true
		if w, ok := want[name]; ok && w != value {
			t.Errorf("%s is %q, want %q", name, value, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("no #SBATCH %s in\n%s", name, script)
		}
	}
	for _, bad := range []string{"mail", "--nodes=3", "--cpus-per-task 4", "--a\n--b"} {
		if CheckExtra(bad) == nil {
			t.Errorf("extra directive %q taken", bad)
		}
	}
	if err := CheckExtra("--gres=gpu:8"); err != nil {
		t.Error(err)
	}
}

// docs splits a manifest into its documents.
func docs(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(d, &m); err != nil {
			t.Fatalf("%v in\n%s", err, d)
		}
		out = append(out, m)
	}
	return out
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func TestManifest(t *testing.T) {
	j := job(plan.BackendGPU, 3, 4)
	b, err := Manifest(j, K8s{Image: "img", DataClaim: "data", CheckpointClaim: "ckpt", CheckpointPath: "/ckpt", RunArgs: []string{"--max-steps", "9"}})
	if err != nil {
		t.Fatal(err)
	}
	ds := docs(t, b)
	if len(ds) != 2 || ds[0]["kind"] != "ConfigMap" || ds[1]["kind"] != "PyTorchJob" {
		t.Fatalf("documents: %v", ds)
	}
	if dig(ds[0], "data", "tiny.pipe") != string(j.Source) || dig(ds[0], "data", "plan.json") != string(j.PlanJSON) {
		t.Errorf("the ConfigMap does not hold the file and the plan: %v", ds[0]["data"])
	}
	spec := ds[1]["spec"]
	if dig(spec, "nprocPerNode") != "4" || dig(spec, "pytorchReplicaSpecs", "Master", "replicas") != 1.0 ||
		dig(spec, "pytorchReplicaSpecs", "Worker", "replicas") != 2.0 || dig(spec, "elasticPolicy") != nil {
		t.Errorf("spec: %v", spec)
	}
	if dig(ds[1], "metadata", "annotations", AnnotationPlan) != SHA256(j.PlanJSON) || dig(ds[1], "metadata", "name") != "tiny-net" {
		t.Errorf("metadata: %v", ds[1]["metadata"])
	}
	c := dig(spec, "pytorchReplicaSpecs", "Worker", "template", "spec", "containers").([]any)[0]
	cmd := strings.Join(anyStrings(dig(c, "command").([]any)), " ")
	if dig(c, "name") != "pytorch" || cmd != "torchrun --no_python pipe run --plan /etc/pipe/plan.json --max-steps 9 /etc/pipe/tiny.pipe" ||
		dig(c, "resources", "limits", "nvidia.com/gpu") != 4.0 {
		t.Errorf("container: %v", c)
	}
	// The job's name and namespace reach the container, which names its
	// run by them (a restarted container continues it).
	env := map[string]any{}
	for _, e := range dig(c, "env").([]any) {
		env[dig(e, "name").(string)] = dig(e, "valueFrom", "fieldRef", "fieldPath")
	}
	if env["PIPE_JOB_NAME"] != "metadata.labels['training.kubeflow.org/job-name']" || env["PIPE_JOB_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("env: %v", env)
	}
	mounts := map[string]any{}
	for _, m := range dig(c, "volumeMounts").([]any) {
		mounts[dig(m, "mountPath").(string)] = dig(m, "readOnly")
	}
	if mounts["/workspace/data"] != true || mounts["/ckpt"] != false || mounts[ConfigDir] != true {
		t.Errorf("mounts: %v", mounts)
	}

	e, err := Manifest(job(plan.BackendCPU, 2, 1), K8s{Image: "img", Elastic: true, MinNodes: 1, MaxNodes: 4, MaxRestarts: 3})
	if err != nil {
		t.Fatal(err)
	}
	es := docs(t, e)[1]["spec"]
	if dig(es, "elasticPolicy", "rdzvBackend") != "c10d" || dig(es, "elasticPolicy", "maxReplicas") != 4.0 ||
		dig(es, "pytorchReplicaSpecs", "Master") != nil || dig(es, "pytorchReplicaSpecs", "Worker", "replicas") != 2.0 {
		t.Errorf("elastic: %v", es)
	}
	k := K8s{Image: "img", Elastic: true, MinNodes: 3, MaxNodes: 4}
	if err := k.Check(job(plan.BackendGPU, 2, 1).Plan); err == nil {
		t.Error("--elastic 3:4 took a plan of 2 nodes")
	}
}

func anyStrings(v []any) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = x.(string)
	}
	return out
}

func TestParse(t *testing.T) {
	if c, at, err := ParseClaim("data:/mnt/d"); c != "data" || at != "/mnt/d" || err != nil {
		t.Errorf("data:/mnt/d: %q %q %v", c, at, err)
	}
	for _, s := range []string{"", "Data", "d:rel"} {
		if _, _, err := ParseClaim(s); err == nil {
			t.Errorf("claim %q was read", s)
		}
	}
	if lo, hi, err := ParseElastic("2:4"); lo != 2 || hi != 4 || err != nil {
		t.Errorf("2:4: %d %d %v", lo, hi, err)
	}
	for _, s := range []string{"4:2", "0:1", "2", "a:b"} {
		if _, _, err := ParseElastic(s); err == nil {
			t.Errorf("elastic %q was read", s)
		}
	}
	if n := Name("My Pipeline_2"); n != "my-pipeline-2" {
		t.Errorf("Name: %q", n)
	}
}
