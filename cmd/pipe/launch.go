package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"pipe/lang/render"
	"pipe/stdlib"
	"pipe/workflow"
	"pipe/workflow/jobfile"
)

func init() {
	register(&command{name: "launch", usage: "pipe launch (--slurm OUT.sbatch | --k8s OUT.yaml) [flags] FILE [-- RUN FLAGS]",
		summary: "plan, then write a SLURM sbatch script or a Kubeflow PyTorchJob that runs the plan (--nnodes, --nproc-per-node)", run: runLaunch})
}

// launchFlags are pipe launch's flags.
type launchFlags struct {
	slurm, k8s, device, name        *string
	batch                           *int64
	engine                          *engineFlagSet
	pipe, time, partition           *string
	masterPort, maxRestarts         *int
	image, workdir, namespace       *string
	dataPVC, checkpointPVC, elastic *string
	cluster                         *clusterFlags
	node                            workflow.Node
}

func newLaunchFlags(fs *flag.FlagSet) *launchFlags {
	return &launchFlags{
		slurm:         fs.String("slurm", "", "write an sbatch script here, and the plan beside it (OUT.plan.json)"),
		k8s:           fs.String("k8s", "", "write a Kubeflow PyTorchJob here, with a ConfigMap holding the file and the plan"),
		device:        fs.String("device", "", "plan for this device instead of the file's (a GPU profile for the cluster's GPUs; pipe devices lists them)"),
		batch:         fs.Int64("batch", 0, "the batch a device, whatever the file says"),
		engine:        engineFlags(fs),
		name:          fs.String("name", "", "the job's name (default: the pipeline's)"),
		pipe:          fs.String("pipe", "pipe", "SLURM: the pipe command the tasks run"),
		time:          fs.String("time", "", "SLURM: the job's time limit (sbatch --time), default the partition's"),
		partition:     fs.String("partition", "", "SLURM: the partition, default the cluster's"),
		masterPort:    fs.Int("master-port", 0, "SLURM: rank 0's port (default 29500 + the job id modulo 1000)"),
		image:         fs.String("image", "", "Kubernetes: the container image, with pipe and the torch engine's Python (torchrun) (required with --k8s)"),
		workdir:       fs.String("workdir", "/workspace", "Kubernetes: the container's working directory, where the file's relative data paths resolve"),
		namespace:     fs.String("namespace", "", "Kubernetes: the namespace (default the context's)"),
		dataPVC:       fs.String("data-pvc", "", "Kubernetes: CLAIM[:PATH], a PersistentVolumeClaim holding the data, mounted read-only at PATH (default WORKDIR/data)"),
		checkpointPVC: fs.String("checkpoint-pvc", "", "Kubernetes: CLAIM[:PATH], a PersistentVolumeClaim for the run folders, mounted at PATH (default WORKDIR/out); a restarted pod resumes from it. ReadWriteMany on several nodes: every node's pod mounts it"),
		elastic:       fs.String("elastic", "", "Kubernetes: MIN:MAX nodes, an elastic job (c10d rendezvous) of Worker replicas"),
		maxRestarts:   fs.Int("max-restarts", 3, "Kubernetes, with --elastic: how often torchrun restarts the ranks"),
		cluster:       newClusterFlags(fs),
	}
}

const launchUsage = "usage: pipe launch (--slurm OUT.sbatch | --k8s OUT.yaml --image IMAGE) [--device NAME] [--nnodes N] [--nproc-per-node G] [--cpus-per-node C --mem-per-node M] [--batch N] [--network 100Gb/s] FILE [-- PIPE RUN FLAGS]"

// check says what is wrong with the flags and files, "" when nothing.
func (f *launchFlags) check(fs *flag.FlagSet, files []string) string {
	switch {
	case len(files) != 1:
		return oneFile("launch", files) + "\n" + launchUsage
	case *f.slurm == "" && *f.k8s == "":
		return "pipe launch: give --slurm OUT.sbatch or --k8s OUT.yaml (or both)\n" + launchUsage
	case f.engine.check() != "":
		return "pipe launch: " + f.engine.check()
	case *f.batch < 1 && isSet(fs, "batch"):
		return fmt.Sprintf("pipe launch: --batch %d: a batch is at least 1", *f.batch)
	case *f.k8s != "" && *f.image == "":
		return "pipe launch: --k8s needs --image: a container image with pipe on its PATH and the torch engine's Python (torchrun)"
	}
	return ""
}

// k8sOptions reads the Kubernetes flags.
func (f *launchFlags) k8sOptions(runArgs []string) (jobfile.K8s, error) {
	o := jobfile.K8s{Name: *f.name, Namespace: *f.namespace, Image: *f.image, WorkDir: *f.workdir, MaxRestarts: *f.maxRestarts, RunArgs: runArgs}
	var err error
	if *f.dataPVC != "" {
		if o.DataClaim, o.DataPath, err = jobfile.ParseClaim(*f.dataPVC); err != nil {
			return o, fmt.Errorf("--data-pvc %w", err)
		}
	}
	if *f.checkpointPVC != "" {
		if o.CheckpointClaim, o.CheckpointPath, err = jobfile.ParseClaim(*f.checkpointPVC); err != nil {
			return o, fmt.Errorf("--checkpoint-pvc %w", err)
		}
	}
	if *f.elastic != "" {
		o.Elastic = true
		if o.MinNodes, o.MaxNodes, err = jobfile.ParseElastic(*f.elastic); err != nil {
			return o, fmt.Errorf("--elastic %w", err)
		}
	}
	return o, nil
}

func runLaunch(a *app, args []string) int {
	var runArgs []string
	for i, s := range args {
		if s == "--" {
			args, runArgs = args[:i], args[i+1:]
			break
		}
	}
	fs := a.newFlags("launch")
	f := newLaunchFlags(fs)
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if msg := f.check(fs, files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg)
		return exitErrors
	}
	k8s, err := f.k8sOptions(runArgs)
	if err == nil {
		err = checkRunArgs(runArgs)
	}
	if err == nil {
		if f.node, err = f.cluster.node(f.engine.nproc); err == nil {
			err = f.cluster.k8s(&k8s, f.node)
		}
	}
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe launch: %v\n", err)
		return exitErrors
	}
	job, code := a.launchPlan(f, files[0])
	if job == nil {
		return code
	}
	if note := f.cluster.nodeNote(job.Plan); note != "" {
		fmt.Fprintln(a.env.Stderr, note)
	}
	if *f.k8s != "" {
		k8s.ShmBytes = shm(job.Plan)
		if err := k8s.Check(job.Plan); err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe launch: %v\n", err)
			return exitErrors
		}
	}
	return a.writeJobs(f, job, k8s, runArgs)
}

// checkRunArgs refuses, before a job file is written, a --checkpoint-dir
// among the run's flags that pipe run would refuse: a URL pipe cannot
// write (the job would fail on the cluster, after the queue).
func checkRunArgs(runArgs []string) error {
	for i, a := range runArgs {
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "checkpoint-dir" || !strings.HasPrefix(a, "-") {
			continue
		}
		if !hasVal && i+1 < len(runArgs) {
			val = runArgs[i+1]
		}
		// The scheme alone: the credentials are the cluster's, not here.
		if why := stdlib.CheckpointDirProblem(val); why != "" {
			return fmt.Errorf("--checkpoint-dir %s", why)
		}
	}
	return nil
}

// launchPlan plans the file as pipe plan does; nil and the exit code
// when there is no plan to launch, or it does not fit.
func (a *app) launchPlan(f *launchFlags, file string) (*jobfile.Job, int) {
	prog, _, src, display, ds, err := a.load(file)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe launch: %v\n", err)
		return nil, exitErrors
	}
	sources := render.Sources{display: src}
	if ds.HasErrors() {
		a.printDiags(ds, sources)
		return nil, exitErrors
	}
	req := workflow.Request{Purpose: workflow.ForPlan, Source: src, Device: *f.device, Batch: *f.batch, Node: f.node, DataElsewhere: true}
	f.engine.request(&req)
	pl, pds := a.workflow("").Plan(context.Background(), prog, req)
	a.printDiags(append(ds, pds...), sources)
	switch {
	case pl.Plan == nil || workflow.HasOtherErrors(pds):
		return nil, exitErrors
	case !pl.Plan.Fits || pds.HasErrors():
		fmt.Fprintln(a.env.Stderr, "pipe launch: the plan does not fit (above); no job file written")
		return nil, exitNoFit
	}
	b, err := pl.Plan.MarshalIndent()
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe launch: %v\n", err)
		return nil, exitErrors
	}
	return &jobfile.Job{Plan: pl.Plan, PlanJSON: b, Source: src, SourceName: file}, exitOK
}

// slurmPlanFile is where the plan goes beside an sbatch script: its name
// less .sbatch or .sh, and .plan.json.
func slurmPlanFile(script string) string {
	base := script
	for _, ext := range []string{".sbatch", ".sh"} {
		base = strings.TrimSuffix(base, ext)
	}
	return base + ".plan.json"
}

// writeJobs writes the job files, each atomically, and says what to run.
func (a *app) writeJobs(f *launchFlags, job *jobfile.Job, k8s jobfile.K8s, runArgs []string) int {
	fail := func(err error) int {
		fmt.Fprintf(a.env.Stderr, "pipe launch: %v\n", err)
		return exitErrors
	}
	if *f.slurm != "" {
		dir, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		planFile := slurmPlanFile(*f.slurm)
		o := jobfile.Slurm{PlanFile: planFile, Source: job.SourceName, Dir: dir, Pipe: *f.pipe, RunArgs: runArgs,
			Name: *f.name, Time: *f.time, Partition: *f.partition, MasterPort: *f.masterPort}
		if err := f.cluster.slurm(&o, job.Plan, f.node); err != nil {
			return fail(err)
		}
		if err := writeFileAtomic(planFile, job.PlanJSON); err != nil {
			return fail(err)
		}
		if err := writeFileAtomic(*f.slurm, jobfile.Script(job, o)); err != nil {
			return fail(err)
		}
		fmt.Fprintf(a.env.Stdout, "wrote %s and %s: submit with sbatch %s (its output goes to %s)\n", *f.slurm, planFile, jobfile.Quote(*f.slurm), o.Output)
	}
	if *f.k8s != "" {
		b, err := jobfile.Manifest(job, k8s)
		if err == nil {
			err = writeFileAtomic(*f.k8s, b)
		}
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(a.env.Stdout, "wrote %s: submit with kubectl apply -f %s (the Kubeflow training operator runs it)\n", *f.k8s, jobfile.Quote(*f.k8s))
	}
	return exitOK
}
