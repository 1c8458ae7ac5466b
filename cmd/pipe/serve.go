package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"pipe/exec"
	"pipe/exec/costs"
	"pipe/exec/cpu"
	"pipe/exec/torch"
	"pipe/lang/render"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/serve"
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
	ckpt := fs.String("checkpoint", "", "the checkpoint to serve (default: the run's checkpoint folder's best.ckpt, else last.ckpt)")
	addr := fs.String("addr", ":8080", "the address to listen on")
	device := fs.String("device", "", "plan for this device instead of the file's (pipe devices lists them)")
	noBatching := fs.Bool("no-batching", false, "run each request alone (dynamic batching off), for comparison")
	python := fs.String("python", "", "the torch engine's Python (default: $PIPE_PYTHON, else python3)")
	files, err := parseFlags(fs, args)
	if err != nil {
		return exitErrors
	}
	if len(files) != 1 {
		fmt.Fprintln(a.env.Stderr, "usage: pipe serve [--checkpoint PATH] [--addr :8080] [--device NAME] [--no-batching] FILE")
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
	opts := []planner.Option{planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(hostInfo()), planner.WithServe()}
	if *device != "" {
		opts = append(opts, planner.WithDevice(*device))
	}
	p, pds := planner.Plan(prog, opts...)
	// Training's memory does not matter here; serving's does.
	if p == nil || p.Serve == nil || hasOtherErrors(pds) {
		a.printDiags(append(ds, pds...), sources)
		if p != nil && p.Serve == nil && !hasOtherErrors(pds) {
			fmt.Fprintf(a.env.Stderr, "pipe serve: %s cannot be served: serving is planned for one model, and this file trains two against each other (gan mode)\n", display)
		}
		return exitErrors
	}
	sp := p.Serve
	if !sp.Fits {
		a.printDiags(append(ds, pds...), sources)
		return exitNoFit
	}
	for _, d := range pds {
		if d.Code != planner.CodeNoFit {
			a.printDiags(append(ds, d), sources)
		}
	}
	path := *ckpt
	if path == "" {
		path = defaultCheckpoint(prog, "")
	}
	backend, err := serveBackend(p, *python, a)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	workers := make([]*exec.Trained, 0, sp.Workers)
	closeAll := func() {
		for _, w := range workers {
			w.Close()
		}
	}
	for range sp.Workers {
		t, err := exec.LoadTrained(p, prog, path, backend, int(sp.MaxBatch), sp.ThreadsPerWorker)
		if err != nil {
			closeAll()
			if errors.Is(err, exec.ErrCheckpointMismatch) {
				fmt.Fprintf(a.env.Stderr, "pipe serve: refusing to serve %s: %v\n", path, err)
			} else {
				fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
			}
			return exitErrors
		}
		workers = append(workers, t)
	}
	if err := quantizeWorkers(a, workers, sp); err != nil {
		closeAll()
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	cfg := serve.FromPlan(sp)
	cfg.Batching = !*noBatching && sp.MaxBatch > 1
	srv, err := serve.New(workers, cfg)
	if err != nil {
		closeAll()
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		srv.Drain()
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	batching := fmt.Sprintf("max_batch %d, max_wait %s", cfg.MaxBatch, cfg.MaxWait)
	if !cfg.Batching {
		batching = "batching off"
	}
	fmt.Fprintf(a.env.Stderr, "pipe serve: %s (model %s from %s) on http://%s: %s, %s × %s, queue %d; POST /v1/predict, GET /healthz /readyz /metrics\n",
		display, p.Model, path, ln.Addr(), batching, count(sp.Workers, "worker", "workers"), count(sp.ThreadsPerWorker, "thread", "threads"), cfg.Queue)
	serveListening(ln.Addr())
	ctx, stop := serveContext()
	defer stop()
	// Once draining, a second signal ends the process at once.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err = srv.Serve(ctx, ln)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe serve: %v\n", err)
		return exitErrors
	}
	fmt.Fprintln(a.env.Stderr, "pipe serve: drained; every admitted request was answered")
	return exitOK
}

// serveBackend is the engine the plan runs on.
func serveBackend(p *plan.Plan, python string, a *app) (exec.Backend, error) {
	if p.EngineName() == plan.EngineNative {
		return cpu.Backend{}, nil
	}
	tb := torch.Backend{Python: torch.PythonFor(python, a.env.Getenv), Log: a.log}
	if _, err := probeTorch(tb.Python); err != nil {
		return nil, err
	}
	return tb, nil
}

// quantizeWorkers makes the workers' models int8 when the serve block asks
// for it, each calibrated on the same first training batches (read once),
// as a run's predict in int8 is; it says what it quantised.
func quantizeWorkers(a *app, workers []*exec.Trained, sp *plan.Serve) error {
	if sp.Precision != "int8" || len(workers) == 0 {
		return nil
	}
	calib, err := workers[0].CalibrationBatches(context.Background(), "", int(max(sp.CalibrateBatches, 1)))
	if err != nil {
		return fmt.Errorf("int8 calibration: %w", err)
	}
	for i, w := range workers {
		rep, err := w.QuantizeInt8(calib)
		if err != nil {
			return err
		}
		if i == 0 {
			fmt.Fprintf(a.env.Stderr, "pipe serve: int8: %d layers quantised per channel, calibrated on %d batches (%s); weights %s -> %s\n",
				rep.Int8Layers(), rep.CalibBatches, rep.Calibration, planner.FormatBytes(rep.WeightBytesFP32), planner.FormatBytes(rep.WeightBytesInt8))
		}
	}
	return nil
}
