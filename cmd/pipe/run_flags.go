package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"pipe/engine"
	"pipe/run"
	"pipe/run/folder"
	"pipe/spec"
	"pipe/stdlib"
)

// runFlags are pipe run's flags.
type runFlags struct {
	planPath, device, precision, ckptDir, reportPath *string
	runID                                            *string
	batch, maxSteps, logEvery                        *int64
	resume                                           resumeFlag
	skipTrain, sweepGate                             *bool
	threads, nodeRank, masterPort                    *int
	python, masterAddr                               *string
	engine                                           *engineFlagSet
	profile                                          *profileFlag
	over                                             *overrideFlags
	// launcher is the launcher that started this rank, nil for none (no
	// flag: launcherEnv's).
	launcher *launched
	// worldDecides: the run continues its folder's last checkpoint if the
	// launcher restarted any rank of its world (continueRun).
	worldDecides bool
	// settings are what the run records in its folder for a resume
	// (run_settings.go).
	settings folder.Settings
	// againFlags, ownFlags and everyNode are for the command to
	// continue an interrupted run (again).
	againFlags, ownFlags []string
	everyNode            bool
}

func newRunFlags(fs *flag.FlagSet) *runFlags {
	f := &runFlags{}
	f.planPath = fs.String("plan", "", "run this plan (from pipe plan --out) instead of planning again; refused when the source changed")
	f.device = fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)")
	f.batch = fs.Int64("batch", 0, "plan with this batch, whatever the file says")
	f.maxSteps = fs.Int64("max-steps", 0, "stop after this many optimizer steps in all (a short run; resumed steps count)")
	fs.Var(&f.resume, "resume", "continue the latest run (out/PIPELINE/latest) in its folder, or the run in --checkpoint-dir; --resume=PATH (or --resume PATH.ckpt FILE) start a new run from a chosen checkpoint file or folder")
	f.skipTrain = fs.Bool("skip-train", false, "with --resume: evaluate and predict with the checkpoint's model, without training")
	f.precision = fs.String("precision", "", "evaluate and predict in this precision: int8 (the native engine; calibrated on training batches) or fp32")
	f.ckptDir = fs.String("checkpoint-dir", "", "the run's folder, for its checkpoints and report (default: train's checkpoint_dir, else a new out/PIPELINE/runs/STAMP, which out/PIPELINE/latest names once it holds a checkpoint)")
	f.runID = fs.String("run-id", "", "the job this run belongs to (default: $PIPE_RUN_ID, the PyTorchJob's, SLURM's job, torchrun's --rdzv-id): its folder is out/PIPELINE/runs/ID, and every start of the job continues that run's last checkpoint")
	f.reportPath = fs.String("report", "", "write the run report (JSON) here, and the loss curve beside it (default report.json in the run's folder)")
	f.threads = fs.Int("threads", 0, "compute threads (0: the machine's cores; a torch worker's, shared by the ranks on the machine); a resumed run reproduces losses only with the same number")
	f.logEvery = fs.Int64("log-every", 0, "without a terminal, log a line every this many steps (default: about ten an epoch)")
	f.engine = engineFlags(fs)
	f.python = fs.String("python", "", "the torch engine's Python (default: $PIPE_PYTHON, else python3)")
	f.nodeRank = fs.Int("node-rank", 0, "data parallelism over machines: this machine's rank, 0 to --nnodes-1 (rank 0 writes checkpoints and reports)")
	f.masterAddr = fs.String("master-addr", "127.0.0.1", "data parallelism: the address of the machine of rank 0")
	f.masterPort = fs.Int("master-port", 0, "data parallelism: the port rank 0 listens on (default: a free port on one machine, 29500 across machines)")
	f.profile = profileFlags(fs)
	f.over = newOverrideFlags(fs)
	f.sweepGate = fs.Bool("sweep-gate", false, "for pipe sweep: after each epoch but the last, write its validation results on standard output (pipe-sweep-epoch JSON) and wait for go or stop on standard input")
	return f
}

// files takes the checkpoint of --resume PATH FILE out of the files: a
// bool flag takes no separate value, so it comes as the first of two.
func (f *runFlags) files(files []string) []string {
	if f.resume.set && f.resume.path == "" && len(files) == 2 && !strings.HasSuffix(files[0], ".pipe") {
		f.resume.path, files = files[0], files[1:]
	}
	return files
}

const runUsage = "usage: pipe run [--plan PLAN.json] [--device NAME] [--max-steps N] [--resume[=CHECKPOINT]] [--skip-train] [--precision int8] [--report FILE] [--profile [--profile-out TRACE.json]] FILE"

// check says what is wrong with the flags and files, "" when nothing.
func (f *runFlags) check(fs *flag.FlagSet, files []string) string {
	nnodes := max(*f.engine.nnodes, 1)
	switch {
	case len(files) > 1, len(files) == 0 && *f.planPath == "":
		return oneFile("run", files) + "\n" + runUsage
	case *f.planPath != "" && (*f.device != "" || *f.batch != 0):
		return "pipe run: --device and --batch plan again; they cannot change a --plan file (run pipe plan with them instead)"
	case *f.planPath != "" && len(f.over.sets) > 0:
		return "pipe run: --set plans again; it cannot change a --plan file (run pipe plan --set ... --out PLAN instead)"
	case stdlib.CheckpointDirProblem(*f.ckptDir) != "":
		return "pipe run: --checkpoint-dir " + stdlib.CheckpointDirProblem(*f.ckptDir)
	case spec.URLScheme(*f.reportPath) != "" || spec.URLScheme(f.resume.path) != "":
		return "pipe run: --report and --resume PATH take local paths; a run's folder in an object store is --checkpoint-dir s3://... (or gs://), which holds its report and which --resume continues"
	case *f.skipTrain && !f.resume.set:
		return "pipe run: --skip-train needs --resume: a model that was not trained has nothing to predict with"
	case *f.precision != "" && *f.precision != "int8" && *f.precision != "fp32":
		return fmt.Sprintf("pipe run: --precision %s: give int8 or fp32", *f.precision)
	case *f.maxSteps < 0 || *f.batch < 0 || *f.threads < 0:
		return "pipe run: --max-steps, --batch and --threads must not be negative"
	case *f.batch == 0 && isSet(fs, "batch"):
		return "pipe run: --batch 0: a batch is at least 1"
	case *f.maxSteps == 0 && isSet(fs, "max-steps"):
		return "pipe run: --max-steps 0: give at least 1 (leave it out to train every epoch; --resume --skip-train evaluates without training)"
	case f.engine.check() != "":
		return "pipe run: " + f.engine.check()
	case f.profile.check(fs) != "":
		return "pipe run: " + f.profile.check(fs)
	case *f.planPath != "" && (isSet(fs, "engine") || isSet(fs, "nproc-per-node") || isSet(fs, "nnodes")):
		return "pipe run: --engine, --nproc-per-node and --nnodes plan again; they cannot change a --plan file (run pipe plan with them instead)"
	case *f.nodeRank < 0 || (*f.nodeRank > 0 && *f.nodeRank >= nnodes):
		return fmt.Sprintf("pipe run: --node-rank %d: give 0 to --nnodes-1 (--nnodes is %d)", *f.nodeRank, nnodes)
	}
	return ""
}

// execOptions are the executor's options for the flags; place is where
// workflow.PlaceRun put the run.
func (f *runFlags) execOptions(log hclog.Logger, engines []engine.Backend, place run.Place) []run.Option {
	opts := []run.Option{run.WithLogger(log), run.WithThreads(*f.threads), run.WithNodeRank(*f.nodeRank)}
	for _, b := range engines {
		opts = append(opts, run.WithBackend(b))
	}
	if *f.maxSteps > 0 {
		opts = append(opts, run.WithMaxSteps(*f.maxSteps))
	}
	opts = append(opts, run.WithPlace(place), run.WithSettings(f.settings))
	if how := f.launcher.restartAdvice(); how != "" {
		opts = append(opts, run.WithRestart(how))
	}
	if f.launcher != nil {
		opts = append(opts, run.WithLauncherRestarts(f.launcher.restarts))
	}
	if f.worldDecides {
		opts = append(opts, run.WithContinueIfRestarted())
	}
	if f.resume.set {
		opts = append(opts, run.WithResume(f.resume.path))
	}
	if *f.skipTrain {
		opts = append(opts, run.WithSkipTrain())
	}
	if *f.precision != "" {
		opts = append(opts, run.WithEvalPrecision(*f.precision))
	}
	if *f.profile.on {
		opts = append(opts, run.WithProfile(run.ProfileOptions{Warmup: *f.profile.warmup}))
	}
	return opts
}
