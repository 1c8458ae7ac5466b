package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
)

// launched is what a launcher told this process through its environment:
// torchrun (and a Kubeflow PyTorchJob's pods, which set the same names)
// or SLURM's srun. Under one, every pipe process is one rank: it starts
// one worker and meets the others at the rendezvous the launcher gives.
type launched struct {
	by                     string // "torchrun" or "SLURM"
	rank, world, localRank int
	addr                   string
	port                   int
	// restarts is how often the launcher started this rank again after a
	// failure (TORCHELASTIC_RESTART_COUNT) or requeued the job
	// (SLURM_RESTART_COUNT). A run of a job continues its checkpoint
	// without it (continueRun); one of no job, in a folder given, when
	// the largest count of its world's ranks is above 0.
	restarts int
	// maxRestarts is how often torchrun starts the ranks again after a
	// failure (TORCHELASTIC_MAX_RESTARTS); SLURM requeues only a run
	// stopped at a checkpoint (the job script's exit 130).
	maxRestarts int
	// node and nodes are the machine this rank runs on and the job's
	// machines (torchrun's GROUP_RANK and GROUP_WORLD_SIZE, SLURM_NODEID
	// and SLURM_NNODES); nodes is 0 when the launcher did not say.
	node, nodes int
	// localRanks is the ranks the launcher starts on this machine
	// (torchrun's LOCAL_WORLD_SIZE, SLURM's tasks of this node); 0 when
	// it did not say. cpusPerTask is SLURM_CPUS_PER_TASK, 0 when unset.
	localRanks, cpusPerTask int
	// agentStore says torchrun's agent already holds the rendezvous store
	// at the master's port (TORCHELASTIC_USE_AGENT_STORE, torch 2.x), so
	// rank 0 joins it instead of opening its own.
	agentStore bool
}

// launcherEnv reads the launcher's environment; nil when none launched
// this process. A launcher's variables that cannot be read are an error.
func launcherEnv(getenv func(string) string) (*launched, error) {
	num := func(name string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(getenv(name)))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q is not a rank or a count", name, getenv(name))
		}
		return n, nil
	}
	var l launched
	var err error
	switch {
	case getenv("RANK") != "" && getenv("WORLD_SIZE") != "":
		l.by = "torchrun"
		if l.rank, err = num("RANK"); err != nil {
			return nil, err
		}
		if l.world, err = num("WORLD_SIZE"); err != nil {
			return nil, err
		}
		if getenv("LOCAL_RANK") != "" {
			if l.localRank, err = num("LOCAL_RANK"); err != nil {
				return nil, err
			}
		}
		l.agentStore = strings.EqualFold(getenv("TORCHELASTIC_USE_AGENT_STORE"), "true")
		l.restarts, _ = strconv.Atoi(getenv("TORCHELASTIC_RESTART_COUNT"))
		l.maxRestarts, _ = strconv.Atoi(getenv("TORCHELASTIC_MAX_RESTARTS"))
		l.node, _ = strconv.Atoi(getenv("GROUP_RANK"))
		l.nodes, _ = strconv.Atoi(getenv("GROUP_WORLD_SIZE"))
		l.localRanks, _ = strconv.Atoi(getenv("LOCAL_WORLD_SIZE"))
	case srunStep(getenv):
		l.by = "SLURM"
		if l.rank, err = num("SLURM_PROCID"); err != nil {
			return nil, err
		}
		if l.world, err = num("SLURM_NTASKS"); err != nil {
			return nil, err
		}
		if getenv("SLURM_LOCALID") != "" {
			if l.localRank, err = num("SLURM_LOCALID"); err != nil {
				return nil, err
			}
		}
		l.restarts, _ = strconv.Atoi(getenv("SLURM_RESTART_COUNT"))
		l.node, _ = strconv.Atoi(getenv("SLURM_NODEID"))
		l.nodes, _ = strconv.Atoi(getenv("SLURM_NNODES"))
		l.localRanks = slurmTasksOn(l.node, getenv)
		l.cpusPerTask, _ = strconv.Atoi(getenv("SLURM_CPUS_PER_TASK"))
		if getenv("MASTER_ADDR") == "" {
			return nil, fmt.Errorf("under SLURM, set MASTER_ADDR to rank 0's host in the job script, as in export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_NODELIST\" | head -n 1)")
		}
	default:
		return nil, nil
	}
	if cvd := getenv("CUDA_VISIBLE_DEVICES"); cvd != "" && l.localRank >= len(strings.Split(cvd, ",")) {
		// The launcher gave this rank GPUs of its own (sbatch
		// --gpus-per-task binds each task to its GPU): they start at cuda:0.
		l.localRank = 0
	}
	if l.world < 1 || l.rank >= l.world {
		return nil, fmt.Errorf("%s says rank %d of %d", l.by, l.rank, l.world)
	}
	l.addr, l.port = getenv("MASTER_ADDR"), 29500
	if l.addr == "" {
		l.addr = "127.0.0.1"
	}
	if getenv("MASTER_PORT") != "" {
		if l.port, err = num("MASTER_PORT"); err != nil {
			return nil, err
		}
	}
	return &l, nil
}

// apply makes f the launcher's rank: one worker, world ranks as nodes of
// one device. A flag given by hand that disagrees is an error naming both.
func (l *launched) apply(fs *flag.FlagSet, f *runFlags) error {
	clash := func(flagName string, got, want any, env string) error {
		return fmt.Errorf("--%s %v and %s's %s=%v disagree: under a launcher, leave the flag out", flagName, got, l.by, env, want)
	}
	rankEnv, worldEnv := "RANK", "WORLD_SIZE"
	if l.by == "SLURM" {
		rankEnv, worldEnv = "SLURM_PROCID", "SLURM_NTASKS"
	}
	if isSet(fs, "nproc-per-node") && *f.engine.nproc != 1 {
		return fmt.Errorf("--nproc-per-node %d: under %s every pipe process is one rank; start more processes with %s instead", *f.engine.nproc, l.by, l.by)
	}
	if isSet(fs, "nnodes") && *f.engine.nnodes != l.world {
		return clash("nnodes", *f.engine.nnodes, l.world, worldEnv)
	}
	if isSet(fs, "node-rank") && *f.nodeRank != l.rank {
		return clash("node-rank", *f.nodeRank, l.rank, rankEnv)
	}
	if isSet(fs, "master-addr") && *f.masterAddr != l.addr {
		return clash("master-addr", *f.masterAddr, l.addr, "MASTER_ADDR")
	}
	if isSet(fs, "master-port") && *f.masterPort != l.port {
		return clash("master-port", *f.masterPort, l.port, "MASTER_PORT")
	}
	*f.engine.nproc, *f.engine.nnodes, *f.nodeRank = 1, l.world, l.rank
	*f.masterAddr, *f.masterPort = l.addr, l.port
	return nil
}

// srunStep says this process is one task of an srun step of several
// tasks, the ranks of one run. A job's batch script (sbatch runs it with
// SLURM_PROCID 0 and SLURM_NTASKS the allocation's, but no step id) and a
// step of one task are no launcher's ranks: pipe starts its own workers
// there, --nproc-per-node of them.
func srunStep(getenv func(string) string) bool {
	if getenv("SLURM_PROCID") == "" || getenv("SLURM_NTASKS") == "" {
		return false
	}
	if getenv("SLURM_STEP_ID") == "" && getenv("SLURM_STEPID") == "" {
		return false
	}
	n, err := strconv.Atoi(strings.TrimSpace(getenv("SLURM_NTASKS")))
	return err != nil || n != 1 // an unreadable count is launcherEnv's error
}

// continueRun makes a run continue its own run's last checkpoint, as
// --resume would: a run of a job whose folder holds one, at any start
// of the job, whether or not a restart count says it is one (a
// container restarted in its pod has none); and, in a folder given, a
// run whose launcher restarts ranks, once its world has met and knows
// whether any rank was restarted (run.WithContinueIfRestarted): torchrun
// counts only the ranks it restarted for a failure, and a rank of a
// healthy node started again beside them says 0. The latest run is
// never a restart's: it may be another job's.
func (a *app) continueRun(f *runFlags, place run.Place, l *launched) {
	restarted := l != nil && l.restarts > 0
	restarts := l != nil && (l.restarts > 0 || l.maxRestarts > 0)
	if f.resume.set || (place.Job.ID == "" && !restarts) {
		return
	}
	last := filepath.Join(place.Dir, folder.LastCheckpoint)
	_, err := os.Stat(last)
	if place.Remote != "" {
		last = place.Remote + "/" + folder.LastCheckpoint // downloaded into place.Dir
	}
	switch {
	case place.Job.ID == "" && place.Root != "":
		if restarted {
			fmt.Fprintf(a.env.Stderr, "pipe run: %s restarted this rank (%d), but the run has no id to find its folder by: starting afresh in %s (give pipe run --run-id ID, or torchrun --rdzv-id, and a restart continues its run)\n",
				l.by, l.restarts, place.Dir)
		}
	case err == nil && place.Job.ID == "":
		f.worldDecides = true
	case err == nil:
		f.resume.set = true
		fmt.Fprintf(a.env.Stderr, "pipe run: continuing from the run's last checkpoint, %s%s\n", last, jobSaid(place.Job))
	case restarted:
		fmt.Fprintf(a.env.Stderr, "pipe run: %s restarted this rank (%d), and there is no checkpoint to continue: starting afresh%s\n", l.by, l.restarts, jobSaid(place.Job))
	}
}

// restartAdvice is how a run that failed for a lost rank goes on when
// the launcher starts the ranks again by itself: they continue from the
// checkpoint without --resume. "" when it will not.
func (l *launched) restartAdvice() string {
	if l == nil || l.restarts >= l.maxRestarts {
		return ""
	}
	return fmt.Sprintf("%s starts the ranks again (restart %d of %d), and they continue from it by themselves", l.by, l.restarts+1, l.maxRestarts)
}

// share says which part of the job this process is, for its count of
// the samples it read: "rank R of W" (on node N of M where the launcher
// says) under a launcher, whose every rank is a node of one device in
// the plan; else pipe's own "node N of M".
func (l *launched) share(nodeRank, nnodes int) string {
	if l == nil {
		return fmt.Sprintf("node %d of %d", nodeRank, nnodes)
	}
	s := fmt.Sprintf("rank %d of %d", l.rank, l.world)
	if l.nodes > 0 {
		s += fmt.Sprintf(" (on node %d of %d)", l.node, l.nodes)
	}
	return s
}

// jobSaid is ", of job ID (FROM)" for a run of a job, else "".
func jobSaid(j folder.Job) string {
	if j.ID == "" {
		return ""
	}
	return fmt.Sprintf(", of job %s (%s)", j.ID, j.From)
}

// adopt runs a plan file (pipe run --plan) as the launcher's ranks: one
// device a process, l.world of them. The plan's devices are one layout of
// them (pipe launch plans G a node on N nodes); a launcher that started
// another number (an elastic job) has the step planned again for them
// (rebatch), and that is said.
func (l *launched) adopt(p *plan.Plan, stderr io.Writer) {
	if w := p.WorldSize(); w != l.world {
		l.rebatch(p, w, stderr)
	}
	d := &p.Distributed
	d.NProcPerNode, d.NNodes, d.WorldSize = 1, l.world, l.world
	if l.world > 1 && d.Backend == "" {
		d.Backend = "gloo"
		if p.Backend == plan.BackendGPU {
			d.Backend = "nccl"
		}
	}
}

// rebatch plans the batch a device and the accumulation again for the
// launcher's l.world ranks in place of the plan's w devices, so that an
// optimizer step trains the plan's samples (EffectiveBatch, which its
// learning rate was scaled for), each device's batch at most the plan's,
// which is what fits. Where the ranks cannot share that step exactly, it
// takes the nearest below, and the learning rate follows it as the plan
// scales it (linearly).
func (l *launched) rebatch(p *plan.Plan, w int, stderr io.Writer) {
	global, n := p.EffectiveBatch, int64(l.world)
	b0, k0 := p.BatchSize, max(p.AccumulationSteps, 1)
	b, k, exact := splitStep(global, n, b0)
	p.BatchSize, p.AccumulationSteps = b, k
	if exact {
		fmt.Fprintf(stderr, "pipe run: the plan is for %d devices and %s started %d ranks: each trains %d a micro-batch × %d accumulation (the plan's %d × %d), so a step still trains the plan's %d samples\n",
			w, l.by, l.world, b, k, b0, k0, global)
		return
	}
	got := b * k * n
	lr := p.Optimizer.LR
	if p.Optimizer.ReferenceBatch > 0 {
		// The plan scaled the written rate linearly to its step's samples.
		p.Optimizer.LR *= float64(got) / float64(global)
		p.Optimizer.LRScale *= float64(got) / float64(global)
	}
	p.EffectiveBatch = got
	fmt.Fprintf(stderr, "pipe run: the plan is for %d devices and %s started %d ranks, which cannot share its step of %d samples evenly: each trains %d a micro-batch × %d accumulation (the plan's %d × %d), %d samples a step; the learning rate is %.6g (the plan's %.6g)\n",
		w, l.by, l.world, global, b, k, b0, k0, got, p.Optimizer.LR, lr)
}

// splitStep is the batch a device b, at most most, and the accumulation
// steps k that make global samples a step over n ranks: the fewest
// accumulation steps from those the memory needs, up to twice as many,
// that share it exactly; else, with exact false, those the memory needs
// and the largest batch that keeps the step within global.
func splitStep(global, n, most int64) (b, k int64, exact bool) {
	need := max((global+n*most-1)/(n*most), 1)
	for k = need; k <= 2*need && n*k <= global; k++ {
		if global%(n*k) == 0 {
			return global / (n * k), k, true
		}
	}
	return max(global/(n*need), 1), need, false
}

// slurmTasksOn is the tasks of the step on node (SLURM_NODEID's index),
// from SLURM_STEP_TASKS_PER_NODE, else SLURM_TASKS_PER_NODE, which read
// as "2(x3),1": three nodes of 2, then one of 1; 0 when unreadable.
func slurmTasksOn(node int, getenv func(string) string) int {
	list := getenv("SLURM_STEP_TASKS_PER_NODE")
	if list == "" {
		list = getenv("SLURM_TASKS_PER_NODE")
	}
	for _, part := range strings.Split(list, ",") {
		n, reps := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			n, reps = part[:i], part[i+2:len(part)-1]
		}
		tasks, err1 := strconv.Atoi(n)
		times, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil {
			return 0
		}
		if node < times {
			return tasks
		}
		node -= times
	}
	return 0
}

// workerThreads is the compute threads of each torch worker when
// --threads is not given, the same whoever started the ranks: the CPUs
// of this machine (cores, as the planner counts them) shared by the
// ranks on it (pipe's own --nproc-per-node, torchrun's LOCAL_WORLD_SIZE,
// SLURM's tasks on this node), or SLURM_CPUS_PER_TASK where the job
// gives each task its CPUs. Left to the launcher, torchrun gave each
// rank 1 (its OMP_NUM_THREADS) and srun all the cores, and the same plan
// trained to other losses. why says how it was counted.
func (l *launched) workerThreads(cores, nprocPerNode int) (n int, why string) {
	ranks, by := max(nprocPerNode, 1), "--nproc-per-node"
	switch {
	case l != nil && l.cpusPerTask > 0:
		return l.cpusPerTask, "SLURM_CPUS_PER_TASK"
	case l != nil && l.localRanks > 0:
		ranks, by = l.localRanks, l.by+"'s ranks on this machine"
	case l != nil:
		ranks, by = 1, l.by+" said no ranks a machine, so 1"
	}
	return max(cores/ranks, 1), fmt.Sprintf("%d cores / %d (%s)", cores, ranks, by)
}
