package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"

	"pipe/engine"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/workflow"
	"pipe/workflow/jobfile"
)

// clusterFlags are pipe launch's flags for the cluster's nodes and its
// scheduler: what a node has (the plan sizes the loader and the job's
// requests from it, not from the machine that runs launch), and what
// the scheduler is told besides.
type clusterFlags struct {
	cpus, gpus, backoff        *int
	mem                        *string
	account, qos, constraint   *string
	sbatch, selector, tolerate setList
	fs                         *flag.FlagSet
}

func newClusterFlags(fs *flag.FlagSet) *clusterFlags {
	c := &clusterFlags{fs: fs,
		cpus:       fs.Int("cpus-per-node", 0, "the CPU cores of each of the cluster's nodes, which the loader's workers and the job's CPUs are planned for (default: this machine's)"),
		gpus:       fs.Int("gpus-per-node", 0, "the GPUs of each node: --nproc-per-node's default, and its most"),
		mem:        fs.String("mem-per-node", "", "the memory the job may take on each node (512GiB, 500GB): the plan's host memory, sbatch --mem and the pods' memory"),
		account:    fs.String("account", "", "SLURM: the account to charge (sbatch --account)"),
		qos:        fs.String("qos", "", "SLURM: the quality of service (sbatch --qos)"),
		constraint: fs.String("constraint", "", "SLURM: the nodes' features (sbatch --constraint)"),
		backoff:    fs.Int("backoff-limit", 0, "Kubernetes: how often the pods are restarted before the job fails (runPolicy.backoffLimit; default the operator's)"),
	}
	fs.Var(&c.sbatch, "sbatch", "SLURM: a further directive for the script, such as --mail-type=END (repeatable)")
	fs.Var(&c.selector, "node-selector", "Kubernetes: KEY=VALUE, a label the pods' nodes must have (repeatable)")
	fs.Var(&c.tolerate, "toleration", "Kubernetes: KEY[=VALUE][:EFFECT], a taint the pods tolerate, such as nvidia.com/gpu:NoSchedule (repeatable)")
	return c
}

// node reads the node's facts, and holds --nproc-per-node to
// --gpus-per-node (its default).
func (c *clusterFlags) node(nproc *int) (workflow.Node, error) {
	n := workflow.Node{CPUs: *c.cpus}
	switch {
	case *c.cpus < 0 || *c.gpus < 0 || *c.backoff < 0:
		return n, fmt.Errorf("--cpus-per-node, --gpus-per-node and --backoff-limit must not be negative")
	case *c.gpus > 0 && *nproc == 0:
		*nproc = *c.gpus
	case *c.gpus > 0 && *nproc > *c.gpus:
		return n, fmt.Errorf("--nproc-per-node %d is more than the node's %d GPUs (--gpus-per-node)", *nproc, *c.gpus)
	}
	if *c.mem != "" {
		b, err := humanize.ParseBytes(*c.mem)
		if err != nil || b == 0 {
			return n, fmt.Errorf("--mem-per-node %q: give the memory with its unit, such as 512GiB or 500GB", *c.mem)
		}
		n.Memory = int64(b)
	}
	for _, x := range c.sbatch {
		if err := jobfile.CheckExtra(x); err != nil {
			return n, fmt.Errorf("--sbatch %w", err)
		}
	}
	return n, nil
}

// k8s adds the pods' placement, memory and restarts to o.
func (c *clusterFlags) k8s(o *jobfile.K8s, node workflow.Node) error {
	for _, s := range c.selector {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return fmt.Errorf("--node-selector %q: give KEY=VALUE, such as nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3", s)
		}
		if o.NodeSelector == nil {
			o.NodeSelector = map[string]string{}
		}
		o.NodeSelector[k] = v
	}
	for _, s := range c.tolerate {
		t, err := jobfile.ParseToleration(s)
		if err != nil {
			return fmt.Errorf("--toleration %w", err)
		}
		o.Tolerations = append(o.Tolerations, t)
	}
	if isSet(c.fs, "backoff-limit") {
		o.BackoffLimit = c.backoff
	}
	o.MemPerNode = node.Memory
	return nil
}

// slurm adds the scheduler's options to o, and its output file: in the
// run folders' folder (or the --checkpoint-dir given), made now, since
// SLURM does not make it and fails a job whose output it cannot open.
func (c *clusterFlags) slurm(o *jobfile.Slurm, p *plan.Plan, node workflow.Node) error {
	o.Account, o.QOS, o.Constraint, o.Extra, o.MemPerNode = *c.account, *c.qos, *c.constraint, c.sbatch, node.Memory
	dir := filepath.Join(run.PipelineFolder("", p.Pipeline), folder.RunsFolder)
	for i, a := range o.RunArgs {
		if v, ok := strings.CutPrefix(a, "--checkpoint-dir="); ok {
			dir = v
		} else if a == "--checkpoint-dir" && i+1 < len(o.RunArgs) {
			dir = o.RunArgs[i+1]
		}
	}
	if strings.Contains(dir, "://") {
		return nil // object storage: SLURM's output stays where sbatch puts it
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	o.Output = filepath.Join(dir, "slurm-%j.out")
	return nil
}

// nodeNote says, for a plan for GPUs this machine does not have, that
// the loader and the job's requests are sized from this machine unless
// the nodes' cores and memory are given; "" when they are.
func (c *clusterFlags) nodeNote(p *plan.Plan) string {
	if p.Device.Kind != plan.BackendGPU || p.Device.Origin == "local" || (*c.cpus > 0 && *c.mem != "") {
		return ""
	}
	return fmt.Sprintf("pipe launch: note: the loader (%d workers a rank) and the job's CPUs and memory are planned for this machine's %d cores and %s; give --cpus-per-node and --mem-per-node for the cluster's nodes",
		p.Loader.Workers, p.Device.Cores, humanize.IBytes(uint64(max(p.Device.HostMemory, 0))))
}

// shm is one rank's /dev/shm, for the pods: what the plan's engine's
// workers take there, 0 for an engine without workers.
func shm(p *plan.Plan) int64 {
	if r, ok := engine.Lookup(p.EngineName()); ok && r.SharedMemory != nil {
		return r.SharedMemory(p)
	}
	return 0
}
