package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"pipe/cmd/pipe/internal/views"
	"pipe/engine"
	"pipe/export/onnx"
	"pipe/export/torchscript"
	"pipe/lang/render"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/run/folder"
	"pipe/stdlib"
	"pipe/workflow"
)

func init() {
	register(&command{name: "export", usage: exportUsage,
		summary: "write the trained model as an ONNX file (batchnorm folded, dynamic batch) or as TorchScript", run: runExport})
}

const exportUsage = "pipe export FILE [--checkpoint PATH] [--onnx OUT.onnx [--opset N]] [--torchscript OUT.pt [--python PY]]"

func runExport(a *app, args []string) int {
	fs := a.newFlags("export")
	ckpt := fs.String("checkpoint", "", "the checkpoint file or folder to export (a folder: its best.ckpt, else last.ckpt; default: the latest run's folder)")
	ckptDir := fs.String("checkpoint-dir", "", "the run's folder (default: train's checkpoint_dir, else the latest run's, out/PIPELINE/latest)")
	out := fs.String("onnx", "", "write the ONNX model here")
	opset := fs.Int("opset", onnx.Opset, fmt.Sprintf("the ONNX opset to write (%d to %d)", onnx.MinOpset, onnx.MaxOpset))
	ts := fs.String("torchscript", "", "write the model as TorchScript here, traced through the torch engine")
	python := fs.String("python", "", "the torch engine's Python, for --torchscript (default: $PIPE_PYTHON, else python3)")
	files, err := a.parseFlags(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if msg := oneFile("export", files); msg != "" || *out == "" && *ts == "" {
		if msg == "" {
			msg = "pipe export: give --onnx OUT.onnx or --torchscript OUT.pt, the file to write"
		}
		fmt.Fprintln(a.env.Stderr, msg)
		fmt.Fprintln(a.env.Stderr, "usage: "+exportUsage)
		return exitErrors
	}
	if *opset < onnx.MinOpset || *opset > onnx.MaxOpset {
		fmt.Fprintf(a.env.Stderr, "pipe export: --opset %d: pipe writes opsets %d to %d\n", *opset, onnx.MinOpset, onnx.MaxOpset)
		return exitErrors
	}
	prog, _, src, display, ds, err := a.load(files[0])
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		return exitErrors
	}
	sources := render.Sources{display: src}
	if ds.HasErrors() {
		a.printDiags(ds, sources)
		return exitErrors
	}
	wf := a.workflow("")
	pl, pds := wf.Plan(context.Background(), prog, workflow.Request{Purpose: workflow.ForExport, Source: src})
	if pl.Plan == nil || workflow.HasOtherErrors(pds) {
		a.printDiags(append(ds, pds...), sources)
		return exitErrors
	}
	choice := workflow.ChooseCheckpoint(prog, *ckpt, *ckptDir)
	views.CheckpointChoice(a.env.Stderr, "pipe export: ", choice)
	path := choice.Path
	if *out != "" {
		engine, _ := wf.Engine(pl) // the native engine, which starts nothing
		t, err := run.LoadTrained(pl.Plan, pl.Program, path, engine, 1, 1)
		if err != nil {
			fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
			return exitErrors
		}
		code := a.writeONNX(t, *out, *opset, path)
		t.Close()
		if code != exitOK {
			return code
		}
	}
	if *ts != "" {
		return a.writeTorchScript(pl.Plan, pl.Program, path, *ts, engine.PythonFor(*python, a.env.Getenv))
	}
	return exitOK
}

// writeTorchScript loads the checkpoint at path into the torch engine's
// model of p, writes it as TorchScript at out and says what it wrote.
func (a *app) writeTorchScript(p *plan.Plan, prog *stdlib.Program, path, out, python string) int {
	t, err := run.LoadTrained(p, prog, path, torchscript.Backend(python, a.log), 1, 0)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		return exitErrors
	}
	defer t.Close()
	sum, err := torchscript.Export(t, out, pipeVersion())
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		if errors.Is(err, torchscript.ErrUnsupported) {
			fmt.Fprintln(a.env.Stderr, "pipe export: nothing was written; TorchScript needs every op traced, or the model scripted")
		}
		return exitErrors
	}
	views.ExportTorchScript(a.env.Stdout, out, t, sum, path)
	return exitOK
}

// writeONNX writes t as an ONNX file at out and says what it wrote.
func (a *app) writeONNX(t *run.Trained, out string, opset int, path string) int {
	var sum onnx.Summary
	err := folder.WriteFileAtomic(out, func(w io.Writer) error {
		var err error
		sum, err = onnx.Export(w, t, onnx.WithOpset(opset), onnx.WithProducer(pipeVersion()))
		return err
	})
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		if errors.Is(err, onnx.ErrUnsupported) {
			fmt.Fprintln(a.env.Stderr, "pipe export: nothing was written; the other layers export, this one has no ONNX form in pipe yet")
		}
		return exitErrors
	}
	views.Export(a.env.Stdout, out, t, sum, path)
	return exitOK
}
