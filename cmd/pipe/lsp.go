package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/signal"
	"syscall"

	"pipe/diag"
	"pipe/lang"
	"pipe/lsp"
	"pipe/workflow"
)

func init() {
	register(&command{name: "lsp", usage: "pipe lsp", summary: "run the language server on standard input and output", run: runLSP})
}

// runLSP serves the language server on standard input and output. Logs go
// to standard error only (--log-level); standard output is the protocol.
// It exits 0 after the client's shutdown and exit, 1 when the client exits
// without shutdown or goes away.
func runLSP(a *app, args []string) int {
	fs := a.newFlags("lsp")
	debounce := fs.Duration("debounce", lsp.DefaultDebounce, "how long to wait after a change before analysing")
	fs.Bool("stdio", true, "serve on standard input and output (the only transport; accepted for clients that pass it)")
	if rest, err := a.parseFlags(fs, args); err != nil || len(rest) > 0 {
		if err == nil {
			a.log.Error("pipe lsp takes no arguments", "args", rest)
		}
		return flagExit(err)
	}
	// A client that vanishes must make writes fail, not kill the process
	// with SIGPIPE before it can log why it stops.
	signal.Ignore(syscall.SIGPIPE)
	defer signal.Reset(syscall.SIGPIPE)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := a.log.Named("lsp")
	err := lsp.Serve(ctx, &stdio{in: a.env.Stdin, out: a.env.Stdout},
		lsp.WithLogger(log),
		lsp.WithDebounce(*debounce),
		lsp.WithVersion(pipeVersion()),
		lsp.WithPlanner(a.lspPlanner()),
	)
	if err != nil {
		if errors.Is(err, lsp.ErrNoShutdown) {
			log.Info("stopped", "reason", err)
		} else {
			log.Error("stopped", "error", err)
		}
		return exitErrors
	}
	log.Debug("stopped after shutdown and exit")
	return exitOK
}

// stdio joins the command's input and output into the connection the
// server reads and writes; closing it closes both where they can be.
type stdio struct {
	in  io.Reader
	out io.Writer
}

func (s *stdio) Read(p []byte) (int, error)  { return s.in.Read(p) }
func (s *stdio) Write(p []byte) (int, error) { return s.out.Write(p) }

func (s *stdio) Close() error {
	var errs []error
	if c, ok := s.in.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	if c, ok := s.out.(io.Closer); ok {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// lspPlanner plans for the language server through the workflow every
// command plans through, for the file's device, with pipe plan's facts
// (workflow.ForEditor: the host measured once per session, the data's
// facts counted in the background and cached). A newer change cancels
// ctx, which stops the planner where it is; the server drops what it
// returns.
func (a *app) lspPlanner() lsp.Planner {
	wf := a.workflow("")
	return func(ctx context.Context, prog *lang.Program) (*lsp.Costs, diag.Diagnostics) {
		if len(prog.Models) == 0 {
			// A file mid-write without a model yet: "nothing to plan" is
			// pipe plan's answer, not a mistake to underline.
			return nil, nil
		}
		pl, ds := wf.Plan(ctx, prog, workflow.Request{Purpose: workflow.ForEditor})
		return lsp.CostsFromPlan(prog, pl.Plan), ds
	}
}
