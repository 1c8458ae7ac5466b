package jobfile

import (
	"bytes"
	"fmt"
	"strings"

	"pipe/planner/plan"
)

// Slurm is what an sbatch script needs beyond the plan.
type Slurm struct {
	// PlanFile and Source are the plan's and the source's paths as the
	// job's tasks open them, from Dir.
	PlanFile, Source string
	// Dir is the job's working directory (#SBATCH --chdir), where the
	// file's relative data paths resolve; "" leaves sbatch's (the
	// directory it is called from).
	Dir string
	// Pipe is the pipe command the tasks run (default "pipe").
	Pipe string
	// RunArgs go to pipe run before the file (--max-steps, --checkpoint-dir).
	RunArgs []string
	// Name is the job's name (default: the pipeline's); Time its time
	// limit and Partition its partition, "" for the cluster's defaults.
	Name, Time, Partition string
	// MasterPort is rank 0's port; 0 takes 29500 plus the job id modulo
	// 1000, so that two jobs sharing a node do not meet.
	MasterPort int
	// Account, QOS and Constraint are sbatch's --account, --qos and
	// --constraint, "" for none.
	Account, QOS, Constraint string
	// MemPerNode is the memory the job asks for on each node (--mem), 0
	// for the partition's default.
	MemPerNode int64
	// Output is where SLURM writes the job's output (--output, with %j
	// for the job id), "" for sbatch's default.
	Output string
	// Extra are further directives, each one line after "#SBATCH "
	// ("--mail-type=END"); CheckExtra says which are refused.
	Extra []string
}

// CheckExtra says what is wrong with an extra directive, nil when
// nothing: one option a line, starting with '-', that pipe launch does
// not write itself (the plan decides those).
func CheckExtra(s string) error {
	if !strings.HasPrefix(s, "-") || strings.ContainsAny(s, "\n\r") {
		return fmt.Errorf("%q: give one sbatch option a line, such as --mail-type=END", s)
	}
	name, _, _ := strings.Cut(strings.TrimLeft(s, "-"), "=")
	name, _, _ = strings.Cut(name, " ")
	for _, own := range []string{"nodes", "ntasks-per-node", "gpus-per-task", "cpus-per-task", "chdir", "requeue", "signal", "open-mode"} {
		if name == own {
			return fmt.Errorf("%q: pipe launch writes --%s from the plan; plan for what you want instead", s, own)
		}
	}
	return nil
}

// PreemptSeconds is how long before its time limit (or a preemption)
// SLURM signals the job's tasks with SIGUSR1: pipe run finishes its step,
// writes a checkpoint and exits 130, which the script requeues.
const PreemptSeconds = 120

// Script is the sbatch script that runs j's plan: one task per device,
// nodes and tasks per node as the plan's Distributed, a GPU a task on GPU
// plans, the loader's workers and the task's own thread as its CPUs.
// srun starts pipe run --plan in every task; pipe reads its rank from
// SLURM's variables (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID), rank 0's
// host from MASTER_ADDR. A run interrupted by SIGUSR1 (exit 130) has its
// job requeued, and its ranks resume from the checkpoint by themselves
// (SLURM_RESTART_COUNT).
func Script(j *Job, o Slurm) []byte {
	p := j.Plan
	d := p.Distributed
	var b bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("#!/bin/bash")
	line("# Written by pipe launch; run it again rather than editing this file.")
	for _, s := range j.Summary() {
		line("# %s", s)
	}
	line("# plan file %s", o.PlanFile)
	name := o.Name
	if name == "" {
		name = Name(p.Pipeline)
	}
	// sbatch reads a directive's value as the shell reads a word (quotes
	// and backslashes), so each value is quoted as the shell would need.
	line("#SBATCH --job-name=%s", Quote(name))
	line("#SBATCH --nodes=%d", max(d.NNodes, 1))
	line("#SBATCH --ntasks-per-node=%d", max(d.NProcPerNode, 1))
	if p.Backend == plan.BackendGPU {
		line("#SBATCH --gpus-per-task=1")
	}
	line("#SBATCH --cpus-per-task=%d", p.Loader.Workers+1)
	if o.MemPerNode > 0 {
		line("#SBATCH --mem=%dM", (o.MemPerNode+(1<<20)-1)>>20)
	}
	for _, opt := range []struct{ name, value string }{{"time", o.Time}, {"partition", o.Partition}, {"account", o.Account},
		{"qos", o.QOS}, {"constraint", o.Constraint}, {"chdir", o.Dir}, {"output", o.Output}} {
		if opt.value != "" {
			line("#SBATCH --%s=%s", opt.name, Quote(opt.value))
		}
	}
	for _, x := range o.Extra {
		line("#SBATCH %s", x)
	}
	line("#SBATCH --requeue")
	line("#SBATCH --signal=USR1@%d", PreemptSeconds)
	line("#SBATCH --open-mode=append")
	line("")
	line("set -u")
	line(`MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"`)
	if o.MasterPort > 0 {
		line("MASTER_PORT=%d", o.MasterPort)
	} else {
		line("MASTER_PORT=$((29500 + SLURM_JOB_ID %% 1000))")
	}
	line("export MASTER_ADDR MASTER_PORT")
	pipe := o.Pipe
	if pipe == "" {
		pipe = "pipe"
	}
	args := []string{"srun", "--kill-on-bad-exit=1", pipe, "run", "--plan", o.PlanFile}
	args = append(append(args, o.RunArgs...), o.Source)
	for i := range args {
		args[i] = Quote(args[i])
	}
	line("status=0")
	line("%s || status=$?", strings.Join(args, " "))
	line("if [ \"$status\" -eq 130 ]; then")
	line(`  echo "pipe launch: the run stopped at a checkpoint (SIGUSR1 before the time limit or a preemption); requeueing job $SLURM_JOB_ID" >&2`)
	line(`  scontrol requeue "$SLURM_JOB_ID"`)
	line("  exit 0")
	line("fi")
	line(`exit "$status"`)
	return b.Bytes()
}

// Quote quotes s for the shell when it needs it.
func Quote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
