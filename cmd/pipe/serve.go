package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"pipe/cmd/pipe/internal/views"
	"pipe/diag"
	"pipe/lang"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/serve"
	"pipe/workflow"
)

func init() {
	register(&command{name: "serve", usage: "pipe serve [flags] FILE",
		summary: "answer predictions over HTTP with dynamic batching (--checkpoint, --addr, --no-batching)", run: runServe})
}

// serveContext is the context pipe serve drains on: SIGINT or SIGTERM
// ends it. Tests replace it.
var serveContext = func() (context.Context, func()) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// serveListening is told the address pipe serve listens on, once it
// does; tests replace it to learn a :0 port.
var serveListening = func(addr net.Addr) {}

func runServe(a *app, args []string) int {
	fs := a.newFlags("serve")
	ckpt := fs.String("checkpoint", "", "the checkpoint file or folder to serve (a folder: its best.ckpt, else last.ckpt; default: the latest run's folder, out/PIPELINE/latest)")
	addr := fs.String("addr", ":8080", "the address to listen on")
	device := fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)")
	noBatching := fs.Bool("no-batching", false, "run each request alone (dynamic batching off), for comparison")
	python := fs.String("python", "", "the torch engine's Python (default: $PIPE_PYTHON, else python3)")
	maxConns := fs.Int("max-conns", serve.DefaultMaxConns, "the most connections held open at once; past it new ones wait to be accepted")
	grace := fs.Duration("drain-grace", serve.DefaultGrace, "on SIGTERM, how long to go on answering with /readyz at 503 before the listener closes")
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if msg := oneFile("serve", files); msg != "" {
		fmt.Fprintln(a.env.Stderr, msg)
		fmt.Fprintln(a.env.Stderr, "usage: pipe serve [--checkpoint PATH] [--addr :8080] [--device NAME] [--no-batching] [--max-conns N] [--drain-grace 5s] FILE")
		return exitErrors
	}
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	sources := render.Sources{display: src}
	if ds.HasErrors() {
		a.printDiags(ds, sources)
		return exitErrors
	}
	wf := a.workflow(*python)
	pl, code := a.servePlan(wf, prog, src, *device, display, ds, sources)
	if pl == nil {
		return code
	}
	choice := workflow.ChooseCheckpoint(prog, *ckpt, "")
	views.CheckpointChoice(a.env.Stderr, "pipe serve: ", choice)
	path := choice.Path
	workers, rep, err := wf.ServeWorkers(pl, path)
	if rep != nil {
		views.Int8(a.env.Stderr, rep)
	}
	switch {
	case errors.Is(err, run.ErrCheckpointMismatch):
		fmt.Fprintf(a.env.Stderr, "pipe serve: refusing to serve %s: %v\n", path, err)
		return exitErrors
	case err != nil:
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	if len(workers) > 0 {
		views.Loaded(a.env.Stderr, "pipe serve: loaded ", workers[0])
	}
	// A worker whose process dies is rebuilt with the weights it had.
	rebuild := func(old *run.Trained) (*run.Trained, error) { return wf.RebuildServeWorker(pl, old) }
	return a.serveWorkers(workers, pl.Plan, serveFlags{noBatching: *noBatching, maxConns: *maxConns, grace: *grace}, rebuild, *addr, display, path)
}

// servePlan plans serving; nil and the exit code when it cannot serve.
func (a *app) servePlan(wf *workflow.Workflow, prog *lang.Program, src []byte, device, display string,
	ds diag.Diagnostics, sources render.Sources) (*workflow.Planned, int) {
	pl, pds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForServe, Source: src, Device: device})
	switch pl.Servability(pds) {
	case workflow.Unservable:
		a.printDiags(append(ds, pds...), sources)
		return nil, exitErrors
	case workflow.TwoModels:
		a.printDiags(append(ds, pds...), sources)
		fmt.Fprintf(a.env.Stderr, "pipe serve: %s cannot be served: serving is planned for one model, and this file trains two against each other (gan mode)\n", display)
		return nil, exitErrors
	case workflow.ServeNoFit:
		a.printDiags(append(ds, pds...), sources)
		return nil, exitNoFit
	}
	for _, d := range pds {
		if d.Code != planner.CodeNoFit {
			a.printDiags(append(ds, d), sources)
		}
	}
	return pl, exitOK
}

// serveFlags are pipe serve's flags that size the server beyond the plan.
type serveFlags struct {
	noBatching bool
	maxConns   int
	grace      time.Duration
}

// serveWorkers answers requests with the workers until a signal drains
// the server.
func (a *app) serveWorkers(workers []*run.Trained, p *plan.Plan, f serveFlags, rebuild func(*run.Trained) (*run.Trained, error), addr, display, path string) int {
	sp := p.Serve
	cfg := serve.FromPlan(sp)
	cfg.Batching = !f.noBatching && sp.MaxBatch > 1
	cfg.MaxConns = f.maxConns
	cfg.Grace = f.grace
	srv, err := serve.New(workers, cfg, serve.WithRebuild(rebuild), serve.WithLog(a.env.Stderr))
	if err != nil {
		for _, w := range workers {
			w.Close()
		}
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		srv.Drain()
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	views.Listening(a.env.Stderr, display, p, path, ln.Addr(), cfg)
	serveListening(ln.Addr())
	ctx, stop := serveContext()
	defer stop()
	// Once draining, say so; a second signal ends the process at once.
	served, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			fmt.Fprintf(a.env.Stderr, "pipe serve: draining: /readyz answers 503; answering for %v more, then every admitted request\n", cfg.Grace)
			stop()
		case <-served:
		}
	}()
	err = srv.Serve(ctx, ln)
	close(served)
	<-watched
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	fmt.Fprintln(a.env.Stderr, "pipe serve: drained; every admitted request was answered")
	return exitOK
}
