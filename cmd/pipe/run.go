package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"pipe/cmd/pipe/internal/views"
	"pipe/diag"
	"pipe/engine"
	"pipe/lang"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/run/report"
	"pipe/run/tensorboard"
	"pipe/spec"
	"pipe/workflow"
)

// exitInterrupted is pipe run's exit code when Ctrl-C stopped it (128 +
// SIGINT, as shells report it).
const exitInterrupted = 130

func init() {
	register(&command{name: "run", usage: "pipe run [flags] FILE",
		summary: "train, evaluate and predict as the file says (--plan, --resume, --max-steps, --report)", run: runRun})
}

// runContext is the context a run is cancelled through: the first SIGINT
// or SIGTERM cancels it (the run finishes its step and writes a
// checkpoint); a second one ends the process at once. After the run
// (stop) the signals stay caught, and go unheeded, while the report is
// written: when a rank of an interrupted srun step exits first, srun
// --kill-on-bad-exit sends SIGTERM to rank 0, which then died writing
// its report and exited 143, and the job was not requeued. Tests replace
// it.
var runContext = func(a *app) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	done := make(chan struct{})
	// SIGUSR1 is what SLURM sends ahead of a preemption (--signal=USR1@T).
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM, syscall.SIGUSR1)
	go watchInterrupts(sig, done, cancel, a.env.Stderr, os.Exit)
	return ctx, func() {
		close(done)
		cancel()
	}
}

// watchInterrupts cancels the run at the first signal and exits at the
// second. It keeps listening rather than restoring the default action
// for the second: a pipe started by a parent that ignores SIGINT (nohup,
// a script's trap) would otherwise get the ignoring back, and the second
// Ctrl-C would do nothing.
func watchInterrupts(sig <-chan os.Signal, done <-chan struct{}, cancel func(), stderr io.Writer, exit func(int)) {
	select {
	case <-sig:
		fmt.Fprintln(stderr, "\npipe run: interrupted; finishing the current step and writing a checkpoint (Ctrl-C again to quit at once)")
		cancel()
	case <-done:
		return
	}
	select {
	case <-sig:
		fmt.Fprintln(stderr, "pipe run: interrupted again; quitting without a checkpoint")
		exit(130)
	case <-done:
	}
}

func runRun(a *app, args []string) int {
	fs := a.newFlags("run")
	f := newRunFlags(fs)
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	files = f.files(files)
	if msg := f.check(fs, files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg)
		return exitErrors
	}
	l, err := launcherEnv(a.env.Getenv)
	if err == nil && l != nil {
		err = l.apply(fs, f)
	}
	var job folder.Job
	if err == nil {
		job, err = workflow.JobOf(a.env.Getenv, *f.runID)
	}
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
		return exitErrors
	}
	wf := a.workflow(*f.python)
	in, code := a.loadRun(f, files)
	where := run.Where{Dir: *f.ckptDir, Resume: f.resume.set, ResumeAt: f.resume.path, Job: job, Rank: *f.nodeRank}
	if in != nil {
		in, code = a.recall(fs, f, files, in, where, l)
	}
	if in == nil {
		return code
	}
	f.settings = a.settings(fs)
	f.againFlags, f.ownFlags, f.everyNode = f.again(fs, l)
	pl, code := a.planRun(wf, f, in)
	if pl == nil {
		return code
	}
	if l != nil && in.planFile != nil {
		l.adopt(pl.Plan, a.env.Stderr)
	}
	f.launcher = l
	if *f.threads == 0 && !pl.Traits().InProcess {
		var why string
		*f.threads, why = l.workerThreads(runtime.NumCPU(), pl.Plan.Distributed.NProcPerNode)
		a.log.Info(pl.Plan.EngineName()+" workers' compute threads", "threads", *f.threads, "from", why)
	}
	place, err := workflow.PlaceRun(pl.Program, where)
	if err != nil {
		views.PlaceError(a.env.Stderr, err)
		return exitErrors
	}
	a.continueRun(f, place, l)
	at := engine.Place{NodeRank: *f.nodeRank, MasterAddr: *f.masterAddr, MasterPort: *f.masterPort}
	if l != nil {
		at.LocalRank, at.AgentStore = l.localRank, l.agentStore
	}
	engines, err := wf.RunEngines(pl, at)
	if err != nil {
		place.Discard()
		fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
		return exitErrors
	}
	return a.execute(f, in, pl, engines, place)
}

// runInput is what pipe run runs: the checked program, and the plan file
// when --plan gave one.
type runInput struct {
	prog     *lang.Program
	src      []byte
	display  string
	sources  render.Sources
	ds       diag.Diagnostics
	planFile *plan.Plan
}

// loadRun loads --plan's file, then the program (the plan's own source
// when no file is given); nil and the exit code when either fails.
func (a *app) loadRun(f *runFlags, files []string) (*runInput, int) {
	in := &runInput{}
	if *f.planPath != "" {
		p, err := planner.Load(*f.planPath)
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
			return nil, exitErrors
		}
		if len(files) == 0 {
			if p.File == "" || p.File == "<stdin>" {
				fmt.Fprintf(a.env.Stderr, "pipe run: %s does not name its source file; give it: pipe run --plan %s FILE\n", *f.planPath, *f.planPath)
				return nil, exitErrors
			}
			files = []string{p.File}
		}
		in.planFile = p
		// The plan was made from the file with its overrides.
		a.sets = p.Overrides
	} else {
		f.over.use(a)
	}
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
		return nil, exitErrors
	}
	in.prog, in.src, in.display, in.sources, in.ds = prog, src, display, render.Sources{display: src}, ds
	if ds.HasErrors() {
		a.printDiags(ds, in.sources)
		return nil, exitErrors
	}
	if *f.over.printConfig {
		return nil, a.printConfig(src, display)
	}
	return in, exitOK
}

// planRun is the plan the run follows: --plan's file, held against its
// source and planned again, or one made now; nil and the exit code when
// there is none to run. It shows the warnings.
func (a *app) planRun(wf *workflow.Workflow, f *runFlags, in *runInput) (*workflow.Planned, int) {
	if p := in.planFile; p != nil {
		r := wf.Recheck(context.Background(), in.prog, in.src, p)
		switch r.Verdict {
		case workflow.SourceChanged, workflow.NoFit:
			a.printDiags(in.ds, in.sources)
		case workflow.Unplannable:
			a.printDiags(append(in.ds, r.Diags...), in.sources)
		}
		views.RefusePlanFile(a.env.Stderr, *f.planPath, p, r)
		switch r.Verdict {
		case workflow.SourceChanged, workflow.Unplannable:
			return nil, exitErrors
		case workflow.Moved, workflow.NoFit:
			return nil, exitNoFit
		}
		a.printDiags(in.ds, in.sources) // warnings
		return r.Planned, exitOK
	}
	req := workflow.Request{Purpose: workflow.ForRun, Source: in.src, Device: *f.device, Batch: *f.batch, Overrides: a.overrides(),
		Forecast: true, Threads: *f.threads}
	f.engine.request(&req)
	pl, pds := wf.Plan(context.Background(), in.prog, req)
	if pl.FellBack != nil {
		views.FellBack(a.env.Stderr, pl.FellBack)
	}
	ds := append(in.ds, pds...)
	a.printDiags(ds, in.sources) // the errors, or the warnings
	switch {
	case pl.Plan == nil || workflow.HasOtherErrors(pds):
		return nil, exitErrors
	case !pl.Plan.Fits || pds.HasErrors():
		return nil, exitNoFit
	}
	return pl, exitOK
}

// execute runs the plan and shows how it went; it returns the exit code.
func (a *app) execute(f *runFlags, in *runInput, pl *workflow.Planned, engines []engine.Backend, place run.Place) int {
	p := pl.Plan
	terminal := isTerminal(a.env.Stderr)
	info := a.progressLogger()
	runLog := a.log
	if !terminal {
		runLog = info
	}
	progress := report.NewProgress(a.env.Stderr, info, terminal)
	progress.Every = *f.logEvery
	out, err := workflow.PrepareOutputs(p, place, *f.reportPath, *f.profile.on, *f.profile.out, *f.nodeRank)
	var oerr *workflow.OutputError
	if errors.As(err, &oerr) {
		place.Discard()
		views.OutputError(a.env.Stderr, oerr)
		return exitErrors
	}
	hooks := progress.Hooks()
	tb := tensorBoard(*f.nodeRank, place.Dir, pl, info)
	if tb != nil {
		hooks = hooks.Join(tb.Hooks())
	}
	ctx, stop := runContext(a)
	if *f.sweepGate {
		gctx, cancel := context.WithCancel(ctx)
		defer cancel()
		ctx = gctx
		epochs := 1
		if t := pl.Program.Spec.Train; t != nil {
			epochs = int(t.Epochs)
		}
		hooks.Epoch = sweepGate(hooks.Epoch, a.env.Stdout, a.env.Stdin, epochs, cancel)
	}
	res, rds := run.Run(ctx, p, pl.Program, hooks, f.execOptions(runLog, engines, place)...)
	stop()
	progress.Close()
	if tb != nil {
		tb.Finish(res)
	}
	a.printDiags(rds, in.sources)

	if res.ResumedFrom == nil && *f.nodeRank == 0 {
		pl.RecordStep(res.StepSeconds(), res.Position.Step)
	}
	wr := workflow.Finish(res, p, out, *f.nodeRank)
	views.RunEnd(a.env.Stdout, a.env.Stderr, res, wr)
	if n := p.Distributed.NNodes; n > 1 {
		views.NodeShare(a.env.Stderr, f.launcher.share(*f.nodeRank, n), res)
	}
	reportFailed := wr.Failed()
	if !f.profile.write(a, res, out.Trace) {
		reportFailed = true
	}
	if wr.Report != "" && !publishOutputs(a, place) {
		reportFailed = true
	}
	switch {
	case res.Status == run.StatusInterrupted:
		views.Interrupted(a.env.Stderr, res, views.Again{CheckpointDir: *f.ckptDir, Plan: *f.planPath, File: in.display, Rank: *f.nodeRank,
			Flags: f.againFlags, Own: f.ownFlags, EveryNode: f.everyNode})
		return exitInterrupted
	case rds.HasErrors():
		for _, d := range rds.Errs() {
			if d.Code == run.CodeNoFit {
				return exitNoFit
			}
		}
		return exitErrors
	case reportFailed:
		return exitErrors // the run is done, but a file asked for is missing or stale
	}
	return exitOK
}

// publishOutputs uploads the report and what else the run wrote in its
// folder to the folder's URL, for a run placed in an object store; it
// says why when that fails.
func publishOutputs(a *app, place run.Place) bool {
	if err := run.PublishOutputs(place); err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: uploading the report to %s: %v (it is in %s)\n", place.Remote, err, place.Dir)
		return false
	}
	return true
}

// tensorBoard is the logger of a run's TensorBoard events into dir; nil on
// a node of rank above 0, as rank 0 alone writes the report.
func tensorBoard(nodeRank int, dir string, pl *workflow.Planned, log hclog.Logger) *tensorboard.Logger {
	if nodeRank != 0 {
		return nil
	}
	epoch, final := runMetrics(pl.Program.Spec)
	return tensorboard.New(tensorboard.Config{Dir: dir, Plan: pl.Plan, Metrics: epoch, FinalMetrics: final, Log: log})
}

// runMetrics are the metrics a run of prog evaluates after each epoch
// (train's) and at its end (evaluate's, else train's).
func runMetrics(prog *spec.Program) (epoch, final []string) {
	if prog.Train != nil {
		epoch = prog.Train.Metrics
	}
	final = epoch
	if ev := prog.Evaluate; ev != nil && ev.At.Has("metrics") {
		final = ev.Metrics
	}
	return epoch, final
}

// progressLogger logs a run's progress at info level, unless the user asked
// for less (--log-level error or off) or more (debug, trace).
func (a *app) progressLogger() hclog.Logger {
	lvl := a.log.GetLevel()
	if lvl == hclog.Warn {
		lvl = hclog.Info
	}
	return hclog.New(&hclog.LoggerOptions{Name: "pipe", Level: lvl, Output: a.env.Stderr, Color: colorOption(a.color), DisableTime: true})
}

// resumeFlag is --resume: alone, the latest run's last checkpoint, continued in its folder; --resume=PATH,
// a checkpoint file or a folder holding last.ckpt.
type resumeFlag struct {
	set  bool
	path string
}

func (f *resumeFlag) String() string { return f.path }

func (f *resumeFlag) Set(s string) error {
	switch s {
	case "true":
		f.set = true
	case "false":
		f.set, f.path = false, ""
	default:
		f.set, f.path = true, s
	}
	return nil
}

// IsBoolFlag lets --resume stand alone.
func (f *resumeFlag) IsBoolFlag() bool { return true }
