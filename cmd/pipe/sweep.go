package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"pipe/diag"
	"pipe/lang"
	"pipe/lang/format"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/run"
	"pipe/run/folder"
	"pipe/spec"
	"pipe/stdlib"
	"pipe/sweep"
	"pipe/workflow"
)

func init() {
	register(&command{name: "sweep", usage: "pipe sweep [flags] FILE",
		summary: "search the sweep block's parameters: trials planned, run P at a time, stopped early; a table, best.pipe and a plot", run: runSweep})
}

// Hooks that tests replace: the executable a trial runs (this one), and
// the context a sweep is interrupted through (SIGINT, SIGTERM).
var (
	sweepExecutable = os.Executable
	sweepContext    = func(a *app) (context.Context, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		sig := make(chan os.Signal, 2)
		done := make(chan struct{})
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case <-sig:
				fmt.Fprintln(a.env.Stderr, "\npipe sweep: interrupted; the running trials write a checkpoint and stop (Ctrl-C again to quit at once)")
				cancel()
			case <-done:
				return
			}
			select {
			case <-sig:
				os.Exit(exitInterrupted)
			case <-done:
			}
		}()
		return ctx, func() { signal.Stop(sig); close(done); cancel() }
	}
)

type sweepFlags struct {
	dir, device *string
	threads     *int
	parallel    *int
	fresh       *bool
	asJSON      *bool
	sets        setList
}

func newSweepFlags(fs *flag.FlagSet) *sweepFlags {
	f := &sweepFlags{}
	f.dir = fs.String("dir", "", "the sweep's folder (default: the newest unfinished sweep of the file under out/PIPELINE/sweeps, else a new out/PIPELINE/sweeps/STAMP)")
	f.device = fs.String("device", "", "plan and run the trials for this device instead of the file's")
	f.threads = fs.Int("threads", 0, "compute threads of the whole sweep, shared evenly by the parallel trials (0: all cores)")
	f.parallel = fs.Int("parallel", 0, "trials at once, whatever the sweep block says")
	f.fresh = fs.Bool("new", false, "start a new sweep even when an unfinished one of the file could continue")
	f.asJSON = fs.Bool("json", false, "write the sweep's state (sweep.json) on standard output instead of the table")
	fs.Var(&f.sets, "set", "override a value of the file for every trial: PATH=VALUE (repeatable); a swept path cannot be set")
	return f
}

func runSweep(a *app, args []string) int {
	fs := a.newFlags("sweep")
	f := newSweepFlags(fs)
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if msg := oneFile("sweep", files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg+"\nusage: pipe sweep [--dir DIR] [--new] [--parallel P] [--threads T] [--device NAME] [--set PATH=VALUE]... [--json] FILE")
		return exitErrors
	}
	if files[0] == "-" {
		fmt.Fprintln(a.env.Stderr, "pipe sweep: give a file, not standard input: every trial reads it again")
		return exitErrors
	}
	if *f.threads < 0 || *f.parallel < 0 {
		fmt.Fprintln(a.env.Stderr, "pipe sweep: --threads and --parallel must not be negative")
		return exitErrors
	}
	a.sets, a.sweepPath = f.sets, files[0]
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe sweep: %v\n", err)
		return exitErrors
	}
	sources := render.Sources{display: src}
	if ds.HasErrors() {
		a.printDiags(ds, sources)
		return exitErrors
	}
	dec, dds := stdlib.Decode(prog)
	if ds = append(ds, dds...); ds.HasErrors() || dec.Spec.Sweep == nil {
		a.printDiags(ds, sources)
		if !ds.HasErrors() {
			fmt.Fprintf(a.env.Stderr, "pipe sweep: %s has no sweep block; add one: sweep { trials 12  loguniform \"train.lr\" 1e-4 1e-2 }\n", display)
		}
		return exitErrors
	}
	a.printDiags(ds, sources) // warnings
	params, _ := lang.SweepParams(prog, src, a.schema)
	if len(params) == 0 {
		fmt.Fprintf(a.env.Stderr, "pipe sweep: the sweep block of %s sweeps nothing; add a parameter: loguniform \"train.lr\" 1e-4 1e-2\n", display)
		return exitErrors
	}
	for _, s := range a.parsedSets {
		for _, p := range params {
			if s.Path == p.Path {
				fmt.Fprintf(a.env.Stderr, "pipe sweep: --set %s: the sweep varies %s; leave it to the sweep, or take it out of the sweep block\n", s, p.Path)
				return exitErrors
			}
		}
	}
	st, dir, lock, code := a.sweepState(f, prog, dec.Spec, params, src, display)
	if st == nil {
		return code
	}
	defer lock.Release()
	fmt.Fprintf(a.env.Stderr, "pipe sweep: %s in %s: %d trials (%d finished), %d at a time, %d thread(s) each; %s sampler, early stop %s, %s %s\n",
		display, dir, st.Trials, countFinished(st), st.Parallel, st.Threads, st.Sampler, st.EarlyStop, st.Goal, st.Metric)
	l := &trialLauncher{a: a, f: f, base: a.sets, threads: st.Threads, wf: a.workflow("")}
	c := &sweep.Controller{State: st, Params: params, Launcher: l, Log: a.env.Stderr,
		Save:     func(s *sweep.State) error { return sweepSave(filepath.Join(dir, "sweep.json"), s) },
		TrialDir: func(id int) string { return filepath.Join(dir, fmt.Sprintf("trial-%03d", id)) }}
	c.Sampler, c.Stopper = sweepPolicy(dec.Spec.Sweep)
	ctx, stop := sweepContext(a)
	err = c.Run(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe sweep: %v\n", err)
		return exitErrors
	}
	return a.sweepOutputs(f, st, dir, src, display, interrupted)
}

// sweepPolicy is the sampler and the early stopping the block asks for.
func sweepPolicy(sw *spec.Sweep) (sweep.Sampler, sweep.Stopper) {
	var sampler sweep.Sampler = sweep.Random{}
	if sw.Sampler == "tpe" {
		startup := int(sw.Startup)
		if startup == 0 {
			startup = max(3, int(sw.Trials)/4)
		}
		sampler = sweep.TPE{Startup: startup, Gamma: sw.Gamma}
	}
	var stopper sweep.Stopper = sweep.NoStop{}
	switch sw.EarlyStop {
	case "asha":
		stopper = sweep.ASHA{Rung: int(sw.Rung), Eta: int(sw.Eta)}
	case "median":
		stopper = sweep.Median{Rung: int(sw.Rung)}
	}
	return sampler, stopper
}

func countFinished(s *sweep.State) int {
	n := 0
	for _, t := range s.Runs {
		if t.Finished() {
			n++
		}
	}
	return n
}

// sweepOutputs shows the table (or the state as JSON), writes the best
// completed trial's file and the plot, and says which of them the
// folder holds and why not the others. A sweep that ran every trial and
// completed none exits 1 (3 when none fitted).
func (a *app) sweepOutputs(f *sweepFlags, st *sweep.State, dir string, src []byte, display string, interrupted bool) int {
	if *f.asJSON {
		b, _ := json.MarshalIndent(st, "", "  ")
		fmt.Fprintln(a.env.Stdout, string(b))
	} else {
		_ = sweep.Table(a.env.Stdout, st)
	}
	code := exitOK
	holds, notes := []string{"sweep.json"}, []string(nil)
	bestPath := filepath.Join(dir, "best.pipe")
	if best := st.BestTrial(); best != nil {
		out, err := bestPipe(src, display, st, best, a.schema)
		if err == nil {
			err = writeFileAtomic(bestPath, out)
		}
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe sweep: best.pipe: %v\n", err)
			code = exitErrors
		} else {
			holds = append(holds, fmt.Sprintf("best.pipe (trial %d)", best.ID))
		}
	} else {
		// Only a completed trial is named; an older best.pipe (of a
		// stopped trial) would say otherwise.
		if err := os.Remove(bestPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(a.env.Stderr, "pipe sweep: %v\n", err)
		}
		notes = append(notes, fmt.Sprintf("no best.pipe: no trial has completed with %s measured", st.Metric))
	}
	wrote, err := sweep.Plot(st, filepath.Join(dir, "sweep.png"))
	switch {
	case err != nil:
		fmt.Fprintf(a.env.Stderr, "pipe sweep: %v\n", err)
		code = exitErrors
	case wrote:
		holds = append(holds, "sweep.png")
	default:
		notes = append(notes, fmt.Sprintf("no sweep.png: no trial has %s measured yet", st.Metric))
	}
	what := "done"
	if !st.Done {
		what = "not finished: run pipe sweep again to continue"
	}
	fmt.Fprintf(a.env.Stderr, "pipe sweep: %s; %s holds %s", what, dir, strings.Join(holds, ", "))
	if len(notes) > 0 {
		fmt.Fprintf(a.env.Stderr, "; %s", strings.Join(notes, "; "))
	}
	fmt.Fprintln(a.env.Stderr)
	switch {
	case interrupted:
		return exitInterrupted
	case st.Done && st.BestTrial() == nil:
		return a.noTrialCompleted(st)
	}
	return code
}

// noTrialCompleted says why a finished sweep has no result: exit 3 when
// no trial fitted, else 1.
func (a *app) noTrialCompleted(st *sweep.State) int {
	skipped := 0
	for _, t := range st.Runs {
		if t.Status == sweep.Skipped {
			skipped++
		}
	}
	if skipped == len(st.Runs) {
		fmt.Fprintln(a.env.Stderr, "pipe sweep: no trial fits: every one was skipped (the NOTE column says why); narrow the ranges or plan for a larger device")
		return exitNoFit
	}
	fmt.Fprintln(a.env.Stderr, "pipe sweep: no trial completed: the NOTE column and each trial's trial.log say why")
	return exitErrors
}

// bestPipe is the swept file with the best trial's values written in,
// the sweep block left out, formatted, under a comment saying whence.
func bestPipe(src []byte, display string, st *sweep.State, best *sweep.Trial, schema lang.Schema) ([]byte, error) {
	sets, ds := lang.ParseSets(st.Overrides(best))
	if ds.HasErrors() {
		return nil, errors.New(ds.Error())
	}
	out, ds := lang.Override(display, src, sets, schema)
	if ds.HasErrors() {
		return nil, errors.New(ds.Error())
	}
	f, _ := lang.Parse(display, out)
	if p, _ := lang.Check(f, schema); p != nil {
		if b := p.Block("sweep"); b != nil {
			from, to := b.Range.Start.Byte, b.Range.End.Byte
			for to < len(out) && (out[to] == '\n' || out[to] == '\r') {
				to++
			}
			out = append(append([]byte(nil), out[:from]...), out[to:]...)
		}
	}
	v, _ := best.Last()
	head := fmt.Sprintf("// The best trial of pipe sweep %s: trial %d, %s %.4g after %d epoch(s), with --set %s\n",
		display, best.ID, st.Metric, v, len(best.Metrics), strings.Join(st.Overrides(best), " --set "))
	return format.Source(append([]byte(head), out...), format.WithLayers(stdlib.IsLayer))
}

// sweepSave writes the state; tests wrap it to stop a sweep at a
// chosen event.
var sweepSave = sweep.Save

// sweepState is the sweep to run, with its folder's lock held: the one
// in --dir, else the newest unfinished one of the file that no other
// pipe sweep runs, else a new one; nil and the exit code when it cannot
// go on. --dir naming a sweep another pipe sweep runs is refused with
// that one's pid and host; without --dir such a sweep is passed over
// and a new one started beside it (docs/design/sweeps.md).
func (a *app) sweepState(f *sweepFlags, prog *lang.Program, sp *spec.Program, params []lang.SweepParam, src []byte, display string) (*sweep.State, string, *sweep.Lock, int) {
	sum := sha256.Sum256(src)
	hash := hex.EncodeToString(sum[:])
	root := filepath.Join(run.PipelineFolder("", prog.Name), "sweeps")
	fail := func(format string, args ...any) (*sweep.State, string, *sweep.Lock, int) {
		fmt.Fprintf(a.env.Stderr, "pipe sweep: "+format+"\n", args...)
		return nil, "", nil, exitErrors
	}
	dir := *f.dir
	var lock *sweep.Lock
	if dir == "" && !*f.fresh {
		d, l, busy, err := a.unfinishedSweep(root, hash, display)
		if err != nil {
			return fail("%v", err)
		}
		dir, lock = d, l
		if dir == "" && len(busy) > 0 {
			fmt.Fprintf(a.env.Stderr, "pipe sweep: another pipe sweep runs %s; starting a new sweep beside it\n", strings.Join(busy, " and "))
		}
	} else if dir != "" {
		l, err := sweep.TryLock(dir, display)
		if errors.Is(err, sweep.ErrLocked) {
			return fail("--dir %s: another pipe sweep runs it (%s); wait for it to end, or give another --dir", dir, sweep.Holder(dir))
		} else if err != nil {
			return fail("%v", err)
		}
		lock = l
	}
	if dir != "" {
		s, err := sweep.Load(filepath.Join(dir, "sweep.json"))
		switch {
		case err == nil && s.SourceSHA256 != hash:
			lock.Release()
			return fail("%s swept another version of %s (the file or its --set changed); give another --dir, or --new", dir, display)
		case err == nil:
			if *f.parallel > 0 {
				s.Parallel = *f.parallel
				s.Threads = threadsEach(*f.threads, s.Parallel)
			}
			return s, dir, lock, exitOK
		case !errors.Is(err, fs.ErrNotExist):
			lock.Release()
			return fail("%v", err)
		}
	} else {
		d, err := folder.NewStampFolder(root, time.Now(), "sweeps")
		if err != nil {
			return fail("%v", err)
		}
		if lock, err = sweep.TryLock(d, display); err != nil {
			return fail("%v", err)
		}
		dir = d
	}
	st := newSweepState(f, prog, sp, params, hash, display)
	if err := sweepSave(filepath.Join(dir, "sweep.json"), st); err != nil {
		lock.Release()
		return fail("%v", err)
	}
	return st, dir, lock, exitOK
}

// unfinishedSweep is the newest unfinished sweep of the text under root
// whose lock it takes, with the lock; busy names those passed over as
// another pipe sweep's. An unfinished sweep of another text is an error:
// it is continued with the file as it was, or --new starts afresh.
func (a *app) unfinishedSweep(root, hash, display string) (dir string, lock *sweep.Lock, busy []string, err error) {
	names, _ := filepath.Glob(filepath.Join(root, "*", "sweep.json"))
	sort.Strings(names)
	for i := len(names) - 1; i >= 0; i-- {
		d := filepath.Dir(names[i])
		if s, err := sweep.Load(names[i]); err != nil || s.Done {
			continue
		}
		l, err := sweep.TryLock(d, display)
		if errors.Is(err, sweep.ErrLocked) {
			busy = append(busy, fmt.Sprintf("%s (%s)", d, sweep.Holder(d)))
			continue
		} else if err != nil {
			return "", nil, busy, err
		}
		// Read again under the lock: the sweep that held it may have
		// finished it meanwhile.
		s, err := sweep.Load(names[i])
		if err != nil || s.Done {
			l.Release()
			continue
		}
		if s.SourceSHA256 != hash {
			l.Release()
			return "", nil, busy, fmt.Errorf("%s is an unfinished sweep of another version of %s (the file or its --set changed); continue it with the file as it was, or start a new sweep with --new", d, display)
		}
		return d, l, busy, nil
	}
	return "", nil, busy, nil
}

// newSweepState is a new sweep of the file's block.
func newSweepState(f *sweepFlags, prog *lang.Program, sp *spec.Program, params []lang.SweepParam, hash, display string) *sweep.State {
	sw := sp.Sweep
	seed := int64(0)
	if sp.Seed != nil {
		seed = *sp.Seed
	}
	if sw.Seed != nil {
		seed = *sw.Seed
	}
	parallel := int(sw.Parallel)
	if *f.parallel > 0 {
		parallel = *f.parallel
	}
	epochs := 1
	if sp.Train != nil {
		epochs = int(sp.Train.Epochs)
	}
	return &sweep.State{Version: 1, File: display, Pipeline: prog.Name, SourceSHA256: hash, Sets: f.sets,
		Metric: sw.Metric, Goal: sw.Goal, Sampler: sw.Sampler, EarlyStop: sw.EarlyStop, Trials: int(sw.Trials),
		Parallel: parallel, Threads: threadsEach(*f.threads, parallel), Epochs: epochs, Seed: uint64(seed),
		Params: sweep.ParamsOf(params), Started: time.Now().Format(time.RFC3339), Runs: []*sweep.Trial{}}
}

// threadsEach shares total threads (0: every core) among parallel trials.
func threadsEach(total, parallel int) int {
	if total <= 0 {
		total = runtime.NumCPU()
	}
	return max(1, total/max(parallel, 1))
}

// trialLauncher plans a trial in this process and runs it as pipe run
// --plan in a process of its own.
type trialLauncher struct {
	a       *app
	f       *sweepFlags
	base    []string
	threads int
	wf      *workflow.Workflow
}

// Plan implements sweep.Launcher: the file with the sweep's --set and
// the trial's, planned for a run; a plan that does not fit is the
// trial's reason to be skipped. The plan goes to the trial's folder,
// which pipe run --plan then follows.
func (l *trialLauncher) Plan(t *sweep.Trial, overrides []string) (int64, string, error) {
	a := l.a
	a.sets = append(append([]string(nil), l.base...), overrides...)
	prog, _, src, display, ds, err := a.load(a.sweepFile())
	if err != nil {
		return 0, "", err
	}
	if ds.HasErrors() {
		return 0, firstError(ds), nil
	}
	req := workflow.Request{Purpose: workflow.ForRun, Source: src, Device: *l.f.device, Overrides: a.overrides()}
	pl, pds := l.wf.Plan(context.Background(), prog, req)
	if pl.Plan == nil || pds.HasErrors() || !pl.Plan.Fits {
		why := firstError(pds)
		if why == "" {
			why = "the plan does not fit"
		}
		return 0, why, nil
	}
	if err := os.MkdirAll(t.Dir, 0o755); err != nil {
		return 0, "", err
	}
	pl.Plan.File = display
	b, err := pl.Plan.MarshalIndent()
	if err == nil {
		err = writeFileAtomic(filepath.Join(t.Dir, "plan.json"), b)
	}
	return pl.Plan.BatchSize, "", err
}

// sweepFile is the file pipe sweep was given (a.load's last).
func (a *app) sweepFile() string { return a.sweepPath }

// firstError is the first error's summary and the first sentence of its
// detail.
func firstError(ds diag.Diagnostics) string {
	for _, d := range ds.Errs() {
		s := d.Summary
		if d.Code == planner.CodeNoFit || d.Code == "sweep" {
			if first, _, _ := strings.Cut(d.Detail, ". "); first != "" {
				s += ": " + strings.TrimSuffix(first, ".")
			}
		}
		return s
	}
	return ""
}

// Start implements sweep.Launcher: pipe run --plan in the trial's
// folder, --resume when it holds a checkpoint, with its share of the
// threads and --sweep-gate, in a process group of its own so that a
// Ctrl-C reaches the sweep alone, which passes it on once.
func (l *trialLauncher) Start(t *sweep.Trial, _ []string) (sweep.Proc, error) {
	exe, err := sweepExecutable()
	if err != nil {
		return nil, err
	}
	args := []string{"--no-color", "run", "--plan", filepath.Join(t.Dir, "plan.json"), "--checkpoint-dir", t.Dir,
		"--threads", strconv.Itoa(l.threads), "--sweep-gate"}
	if _, err := os.Stat(filepath.Join(t.Dir, "last.ckpt")); err == nil {
		args = append(args, "--resume")
	}
	logf, err := os.OpenFile(filepath.Join(t.Dir, "trial.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "$ pipe %s\n", strings.Join(args, " "))
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	return &trialProc{cmd: cmd, in: stdin, out: bufio.NewScanner(stdout), log: logf, path: filepath.Join(t.Dir, "trial.log")}, nil
}

// trialProc is a trial's pipe run process.
type trialProc struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	log  *os.File
	path string
	mu   sync.Mutex
}

func (p *trialProc) Next() (sweep.Epoch, bool) {
	for p.out.Scan() {
		line := p.out.Text()
		rest, ok := strings.CutPrefix(line, sweepEpochPrefix)
		if !ok {
			p.mu.Lock()
			fmt.Fprintln(p.log, line)
			p.mu.Unlock()
			continue
		}
		var e sweep.Epoch
		if json.Unmarshal([]byte(rest), &e) == nil {
			return e, true
		}
	}
	return sweep.Epoch{}, false
}

func (p *trialProc) Answer(stop bool) error {
	word := "go\n"
	if stop {
		word = "stop\n"
	}
	_, err := io.WriteString(p.in, word)
	return err
}

func (p *trialProc) Interrupt() { _ = p.cmd.Process.Signal(os.Interrupt) }

func (p *trialProc) Wait() (int, string) {
	err := p.cmd.Wait()
	p.in.Close()
	p.log.Close()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if code < 0 {
			code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
	} else if err != nil {
		code = -1
	}
	tail := ""
	if code != 0 {
		tail = logTail(p.path, 3)
	}
	return code, tail
}

// logTail is why a trial failed, from its log: from the last line that
// reports an error on (a diagnostic without its source line and caret),
// else the last n non-empty lines, joined.
func logTail(path string, n int) string {
	b, _ := os.ReadFile(path)
	var lines []string
	from := -1
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "|") || sourceLine.MatchString(l) {
			continue
		}
		if strings.Contains(l, "error:") || strings.Contains(l, "[ERROR]") {
			from = len(lines)
		}
		lines = append(lines, strings.TrimPrefix(l, "= "))
	}
	if from < 0 {
		from = max(0, len(lines)-n)
	}
	return strings.Join(lines[from:min(len(lines), from+2*n)], " ")
}

// sourceLine is a rendered diagnostic's source line: "12 | text".
var sourceLine = regexp.MustCompile(`^\d+ \|`)
