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
	line("#SBATCH --job-name=%s", name)
	line("#SBATCH --nodes=%d", max(d.NNodes, 1))
	line("#SBATCH --ntasks-per-node=%d", max(d.NProcPerNode, 1))
	if p.Backend == plan.BackendGPU {
		line("#SBATCH --gpus-per-task=1")
	}
	line("#SBATCH --cpus-per-task=%d", p.Loader.Workers+1)
	if o.Time != "" {
		line("#SBATCH --time=%s", o.Time)
	}
	if o.Partition != "" {
		line("#SBATCH --partition=%s", o.Partition)
	}
	if o.Dir != "" {
		line("#SBATCH --chdir=%s", o.Dir)
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
