package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"pipe/exec"
	"pipe/exec/costs"
	"pipe/exec/cpu"
	"pipe/exec/report"
	"pipe/exec/torch"
	"pipe/lang"
	"pipe/lang/diag"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/planner/plan"
)

// exitInterrupted is pipe run's exit code when Ctrl-C stopped it (128 +
// SIGINT, as shells report it).
const exitInterrupted = 130

func init() {
	register(&command{name: "run", usage: "pipe run [flags] FILE",
		summary: "train, evaluate and predict as the file says (--plan, --resume, --max-steps, --report)", run: runRun})
}

// backends are the engines pipe run offers the executor, the torch engine
// set up as the flags say; tests replace them with a fake.
var backends = func(t torch.Backend) []exec.Backend { return []exec.Backend{cpu.Backend{}, t} }

// probeTorch starts the torch engine's Python once, before any data is
// read, to say at once what is missing; tests replace it.
var probeTorch = torch.Probe

// runContext is the context a run is cancelled through: the first SIGINT
// or SIGTERM cancels it (the run finishes its step and writes a
// checkpoint); a second one kills the process as usual. Tests replace it.
var runContext = func(a *app) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sig:
			signal.Stop(sig) // a second Ctrl-C ends the process at once
			fmt.Fprintln(a.env.Stderr, "\npipe run: interrupted; finishing the current step and writing a checkpoint (Ctrl-C again to quit at once)")
			cancel()
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sig)
		close(done)
		cancel()
	}
}

func runRun(a *app, args []string) int {
	fs := a.newFlags("run")
	planPath := fs.String("plan", "", "run this plan (from pipe plan --out) instead of planning again; refused when the source changed")
	device := fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)")
	batch := fs.Int64("batch", 0, "plan with this batch, whatever the file says")
	maxSteps := fs.Int64("max-steps", 0, "stop after this many optimizer steps in all (a short run; resumed steps count)")
	var rf resumeFlag
	fs.Var(&rf, "resume", "continue from the last checkpoint in the checkpoint folder; --resume=PATH (or --resume PATH.ckpt FILE) from a chosen checkpoint file or folder")
	resume := &rf.set
	skipTrain := fs.Bool("skip-train", false, "with --resume: evaluate and predict with the checkpoint's model, without training")
	precision := fs.String("precision", "", "evaluate and predict in this precision: int8 (the native engine; calibrated on training batches) or fp32")
	ckptDir := fs.String("checkpoint-dir", "", "the checkpoint folder (default: train's checkpoint_dir, else out/PIPELINE/checkpoints)")
	reportPath := fs.String("report", "", "write the run report (JSON) here, and the loss curve beside it (default out/PIPELINE/report.json)")
	threads := fs.Int("threads", 0, "compute threads (0: all cores); a resumed run reproduces losses only with the same number")
	logEvery := fs.Int64("log-every", 0, "without a terminal, log a line every this many steps (default: about ten an epoch)")
	ef := engineFlags(fs)
	python := fs.String("python", "", "the torch engine's Python (default: $PIPE_PYTHON, else python3)")
	nodeRank := fs.Int("node-rank", 0, "data parallelism over machines: this machine's rank, 0 to --nnodes-1 (rank 0 writes checkpoints and reports)")
	masterAddr := fs.String("master-addr", "127.0.0.1", "data parallelism: the address of the machine of rank 0")
	masterPort := fs.Int("master-port", 29500, "data parallelism: the port rank 0 listens on")
	pf := profileFlags(fs)
	files, err := parseFlags(fs, args)
	if err != nil {
		return exitErrors
	}
	// --resume PATH FILE: a bool flag takes no separate value, so the
	// checkpoint comes as the first of two arguments.
	if rf.set && rf.path == "" && len(files) == 2 && !strings.HasSuffix(files[0], ".pipe") {
		rf.path, files = files[0], files[1:]
	}
	usage := "usage: pipe run [--plan PLAN.json] [--device NAME] [--max-steps N] [--resume[=CHECKPOINT]] [--skip-train] [--precision int8] [--report FILE] [--profile [--profile-out TRACE.json]] FILE"
	switch {
	case len(files) > 1, len(files) == 0 && *planPath == "":
		fmt.Fprintln(a.env.Stderr, usage)
		return exitErrors
	case *planPath != "" && (*device != "" || *batch != 0):
		fmt.Fprintln(a.env.Stderr, "pipe run: --device and --batch plan again; they cannot change a --plan file (run pipe plan with them instead)")
		return exitErrors
	case *skipTrain && !*resume:
		fmt.Fprintln(a.env.Stderr, "pipe run: --skip-train needs --resume: a model that was not trained has nothing to predict with")
		return exitErrors
	case *precision != "" && *precision != "int8" && *precision != "fp32":
		fmt.Fprintf(a.env.Stderr, "pipe run: --precision %s: give int8 or fp32\n", *precision)
		return exitErrors
	case *maxSteps < 0 || *batch < 0 || *threads < 0:
		fmt.Fprintln(a.env.Stderr, "pipe run: --max-steps, --batch and --threads must not be negative")
		return exitErrors
	case *batch == 0 && isSet(fs, "batch"):
		fmt.Fprintln(a.env.Stderr, "pipe run: --batch 0: a batch is at least 1")
		return exitErrors
	case *maxSteps == 0 && isSet(fs, "max-steps"):
		fmt.Fprintln(a.env.Stderr, "pipe run: --max-steps 0: give at least 1 (leave it out to train every epoch; --resume --skip-train evaluates without training)")
		return exitErrors
	case ef.check() != "":
		fmt.Fprintln(a.env.Stderr, "pipe run: "+ef.check())
		return exitErrors
	case pf.check(fs) != "":
		fmt.Fprintln(a.env.Stderr, "pipe run: "+pf.check(fs))
		return exitErrors
	case *planPath != "" && (isSet(fs, "engine") || isSet(fs, "nproc-per-node") || isSet(fs, "nnodes")):
		fmt.Fprintln(a.env.Stderr, "pipe run: --engine, --nproc-per-node and --nnodes plan again; they cannot change a --plan file (run pipe plan with them instead)")
		return exitErrors
	case *nodeRank < 0 || (*nodeRank > 0 && *nodeRank >= max(*ef.nnodes, 1)):
		fmt.Fprintf(a.env.Stderr, "pipe run: --node-rank %d: give 0 to --nnodes-1 (--nnodes is %d)\n", *nodeRank, max(*ef.nnodes, 1))
		return exitErrors
	}

	// probed is what the torch engine's Python said, once asked.
	var probed *torch.Info
	// The plan: loaded and verified against the source, or made now.
	var p *plan.Plan
	if *planPath != "" {
		if p, err = planner.Load(*planPath); err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
			return exitErrors
		}
		if len(files) == 0 {
			if p.File == "" || p.File == "<stdin>" {
				fmt.Fprintf(a.env.Stderr, "pipe run: %s does not name its source file; give it: pipe run --plan %s FILE\n", *planPath, *planPath)
				return exitErrors
			}
			files = []string{p.File}
		}
	}
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
		return exitErrors
	}
	sources := render.Sources{display: src}
	if ds.HasErrors() {
		a.printDiags(ds, sources)
		return exitErrors
	}
	if p != nil {
		if err := p.Verify(src); err != nil {
			a.printDiags(ds, sources)
			fmt.Fprintf(a.env.Stderr, "pipe run: refusing to run %s: %v\n", *planPath, err)
			return exitErrors
		}
		// The plan's figures are planned again for its device and batch:
		// a plan edited by hand (or made on another machine) that no
		// longer fits is refused before anything is allocated.
		samples := samplesOption(prog) // first: see runPlan
		again, ads := planner.Plan(prog, append([]planner.Option{planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(hostInfo()),
			planner.WithDevice(p.Device.Name), planner.WithBatch(p.BatchSize), planner.WithEngine(p.EngineName()),
			planner.WithDevices(p.Distributed.NProcPerNode, p.Distributed.NNodes)}, samples...)...)
		if again == nil || hasOtherErrors(ads) {
			a.printDiags(append(ds, ads...), sources)
			fmt.Fprintf(a.env.Stderr, "pipe run: refusing to run %s: planned again for %s at batch %d, it has the errors above; run pipe plan again\n",
				*planPath, p.Device.Name, p.BatchSize)
			return exitErrors
		}
		if !again.Fits || again.AccumulationSteps != p.AccumulationSteps {
			fmt.Fprintf(a.env.Stderr, "pipe run: refusing to run %s: planned again for %s at batch %d, it needs %s of a %s budget (the file says %s, %d accumulation steps where it says %d); it was edited or made on another machine: run pipe plan again\n",
				*planPath, p.Device.Name, p.BatchSize, planner.FormatBytes(again.Memory.Total), planner.FormatBytes(again.Memory.Budget),
				planner.FormatBytes(p.Memory.Total), again.AccumulationSteps, p.AccumulationSteps)
			return exitNoFit
		}
		if !p.Fits {
			a.printDiags(ds, sources)
			fmt.Fprintf(a.env.Stderr, "pipe run: %s does not fit %s: it needs %s of a %s budget (pipe plan shows where it goes)\n",
				*planPath, p.Device.Name, planner.FormatBytes(p.Memory.Total), planner.FormatBytes(p.Memory.Budget))
			return exitNoFit
		}
	} else {
		samples := samplesOption(prog) // first: see runPlan
		host := hostInfo()
		mk := func(dev string, gpus *int) (*plan.Plan, diag.Diagnostics) {
			opts := append([]planner.Option{planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(host)}, samples...)
			if dev != "" {
				opts = append(opts, planner.WithDevice(dev))
			}
			if *batch > 0 {
				opts = append(opts, planner.WithBatch(*batch))
			}
			opts = append(opts, ef.options(gpus)...)
			return planner.Plan(prog, opts...)
		}
		var pds diag.Diagnostics
		p, pds = mk(*device, nil)
		// On GPUs, --nproc-per-node defaults to every GPU present, unless
		// the plan names one (cuda:N).
		if p != nil && p.Backend == plan.BackendGPU && p.EngineName() == plan.EngineTorch && *ef.nproc == 0 &&
			!strings.HasPrefix(p.Device.Name, "cuda:") && len(host.GPUs) > 1 {
			n := len(host.GPUs)
			p, pds = mk(*device, &n)
		}
		// device auto found a GPU and engine auto took torch: without a
		// usable torch, the CPU trains instead, with a warning.
		if p != nil && p.Backend == plan.BackendGPU && p.Device.Origin == "local" && p.Engine.Requested == "auto" &&
			*device == "" && deviceAuto(prog) {
			info, perr := probeTorch(torch.PythonFor(*python, a.env.Getenv))
			if perr != nil {
				fmt.Fprintf(a.env.Stderr, "pipe run: warning: device auto found %s, but the torch engine cannot start (%v); training on the CPU with the native engine instead\n", p.Device.Name, firstLine(perr))
				p, pds = mk("cpu", nil)
			} else {
				probed = &info
			}
		}
		ds = append(ds, pds...)
		if p == nil || hasOtherErrors(pds) {
			a.printDiags(ds, sources)
			return exitErrors
		}
		if !p.Fits || pds.HasErrors() {
			a.printDiags(ds, sources)
			return exitNoFit
		}
	}
	a.printDiags(ds, sources) // warnings
	tb := torch.Backend{Python: torch.PythonFor(*python, a.env.Getenv), NProcPerNode: p.Distributed.NProcPerNode,
		NNodes: p.Distributed.NNodes, NodeRank: *nodeRank, MasterAddr: *masterAddr, MasterPort: *masterPort, Log: a.log}
	if p.EngineName() == plan.EngineTorch {
		// The engine's Python is checked before any data is read (once:
		// device auto may have asked already).
		if probed == nil {
			info, err := probeTorch(tb.Python)
			if err != nil {
				fmt.Fprintf(a.env.Stderr, "pipe run: %v\n", err)
				return exitErrors
			}
			probed = &info
		}
		info := *probed
		if p.Backend == plan.BackendGPU && !info.CUDA {
			fmt.Fprintf(a.env.Stderr, "pipe run: the plan is for a GPU (%s), but the torch of %s (%s) sees no CUDA device; run where there is one, or plan for the CPU with --device cpu\n",
				p.Device.Name, info.Executable, info.Torch)
			return exitErrors
		}
		if p.Backend == plan.BackendGPU && p.Distributed.NProcPerNode > info.CUDADevices {
			fmt.Fprintf(a.env.Stderr, "pipe run: --nproc-per-node %d asks for %d GPUs, and torch sees %d on this machine\n",
				p.Distributed.NProcPerNode, p.Distributed.NProcPerNode, info.CUDADevices)
			return exitErrors
		}
		a.log.Info("torch engine", "python", info.Executable, "torch", info.Torch, "cuda", info.CUDA, "gpus", info.CUDADevices)
	}

	// The run.
	terminal := isTerminal(a.env.Stderr)
	info := a.progressLogger()
	runLog := a.log
	if !terminal {
		runLog = info
	}
	progress := report.NewProgress(a.env.Stderr, info, terminal)
	progress.Every = *logEvery
	opts := []exec.Option{exec.WithLogger(runLog), exec.WithThreads(*threads), exec.WithNodeRank(*nodeRank)}
	for _, b := range backends(tb) {
		opts = append(opts, exec.WithBackend(b))
	}
	if *maxSteps > 0 {
		opts = append(opts, exec.WithMaxSteps(*maxSteps))
	}
	if *ckptDir != "" {
		opts = append(opts, exec.WithCheckpointDir(*ckptDir))
	}
	if *resume {
		opts = append(opts, exec.WithResume(rf.path))
	}
	if *skipTrain {
		opts = append(opts, exec.WithSkipTrain())
	}
	if *precision != "" {
		opts = append(opts, exec.WithEvalPrecision(*precision))
	}
	// The report is checked before any compute, as the checkpoints are.
	rp, curve := *reportPath, ""
	if rp == "" {
		rp = filepath.Join("out", p.Pipeline, "report.json")
	}
	if err := exec.CheckWritable(rp); err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe run: cannot write the report: %v; nothing was trained (give --report a path that can be written)\n", err)
		return exitErrors
	}

	opts, ok := pf.options(a, p, opts)
	if !ok {
		return exitErrors
	}

	ctx, stop := runContext(a)
	res, rds := exec.Run(ctx, p, prog, progress.Hooks(), opts...)
	stop()
	progress.Close()
	a.printDiags(rds, sources)

	// What it did.
	reportFailed := false
	switch {
	case res.Precision == "": // the model was never built: nothing to report
		rp = ""
	case *nodeRank > 0: // node 0 writes the report
		rp = ""
		report.Summary(a.env.Stdout, res, rp, curve)
	case res.Status == exec.StatusFailed && res.ResumedFrom == nil && res.Position.Step == 0 && fileExists(rp):
		// A run that failed before its first step (a --resume that could
		// not load its checkpoint) leaves the last report as it was.
		fmt.Fprintf(a.env.Stderr, "pipe run: nothing was trained; %s is left as the last run wrote it\n", rp)
		rp = ""
	default:
		if len(res.StepLosses) > 0 {
			curve = strings.TrimSuffix(rp, filepath.Ext(rp)) + "-loss.png"
			if err := report.LossCurve(res, curve); err != nil {
				fmt.Fprintf(a.env.Stderr, "pipe run: writing the loss curve: %v\n", err)
				curve = ""
				reportFailed = true
			}
		}
		rep := report.New(res, p)
		if curve != "" {
			rep.LossCurve = curve
		}
		if err := rep.Write(rp); err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe run: writing the report: %v\n", err)
			rp = ""
			reportFailed = true
		}
		report.Summary(a.env.Stdout, res, rp, curve)
	}
	if !pf.write(a, res) {
		reportFailed = true
	}
	switch {
	case res.Status == exec.StatusInterrupted:
		again := "pipe run --resume "
		if *ckptDir != "" {
			again += "--checkpoint-dir " + *ckptDir + " "
		}
		again += display
		var where string
		switch {
		case res.SamplesTrained == 0 && res.ResumedFrom == nil:
			where, again = "nothing was trained, so no checkpoint was written", "pipe run "+display
		case res.SamplesTrained == 0:
			where = "nothing was trained since " + res.Checkpoint + ", which is unchanged"
		case res.Checkpoint == "":
			where = "no checkpoint was written (save none)"
		default:
			where = "checkpoint written to " + res.Checkpoint
		}
		fmt.Fprintf(a.env.Stderr, "pipe run: interrupted at epoch %d, step %d; %s; continue with: %s\n",
			res.Position.Epoch+1, res.Position.Step, where, again)
		return exitInterrupted
	case rds.HasErrors():
		for _, d := range rds.Errs() {
			if d.Code == exec.CodeNoFit {
				return exitNoFit
			}
		}
		return exitErrors
	case reportFailed:
		return exitErrors // the run is done, but a file asked for is missing or stale
	}
	return exitOK
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

// deviceAuto says the file leaves the device to pipe (no device field, or
// device auto).
func deviceAuto(prog *lang.Program) bool {
	v := prog.Top.Field("device").First()
	return v == nil || v.Auto
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// resumeFlag is --resume: alone, the run's last checkpoint; --resume=PATH,
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

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
