package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime/debug"
	"strings"

	"pipe/exec"
	"pipe/exec/costs"
	"pipe/exec/cpu"
	"pipe/exec/onnx"
	"pipe/lang"
	"pipe/lang/render"
	"pipe/planner"
)

func init() {
	register(&command{name: "export", usage: "pipe export FILE [--checkpoint PATH] --onnx OUT.onnx [--opset N]",
		summary: "write the trained model as an ONNX file (batchnorm folded, dynamic batch)", run: runExport})
}

func runExport(a *app, args []string) int {
	fs := a.newFlags("export")
	ckpt := fs.String("checkpoint", "", "the checkpoint to export (default: best.ckpt in the run's checkpoint folder, else last.ckpt)")
	ckptDir := fs.String("checkpoint-dir", "", "the run's checkpoint folder (default: train's checkpoint_dir, else out/PIPELINE/checkpoints)")
	out := fs.String("onnx", "", "write the ONNX model here")
	opset := fs.Int("opset", onnx.Opset, fmt.Sprintf("the ONNX opset to write (%d to %d)", onnx.MinOpset, onnx.MaxOpset))
	files, err := parseFlags(fs, args)
	if err != nil {
		return exitErrors
	}
	if len(files) != 1 || *out == "" {
		fmt.Fprintln(a.env.Stderr, "usage: pipe export FILE [--checkpoint PATH] --onnx OUT.onnx [--opset N]")
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
	// The plan says which batchnorms fold into their conv; they are the
	// same on every device, so it is made for the CPU.
	p, pds := planner.Plan(prog, planner.WithCosts(costs.Engines()...), planner.WithSource(src), planner.WithHost(hostInfo()), planner.WithDevice("cpu"))
	if p == nil || hasOtherErrors(pds) {
		a.printDiags(append(ds, pds...), sources)
		return exitErrors
	}
	path := *ckpt
	if path == "" {
		path = defaultCheckpoint(prog, *ckptDir)
	}
	t, err := exec.LoadTrained(p, prog, path, cpu.Backend{}, 1, 1)
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		return exitErrors
	}
	defer t.Close()
	var sum onnx.Summary
	err = exec.WriteFileAtomic(*out, func(w io.Writer) error {
		var err error
		sum, err = onnx.Export(w, t, onnx.WithOpset(*opset), onnx.WithProducer(pipeVersion()))
		return err
	})
	if err != nil {
		fmt.Fprintf(a.env.Stderr, "pipe export: %v\n", err)
		if errors.Is(err, onnx.ErrUnsupported) {
			fmt.Fprintln(a.env.Stderr, "pipe export: nothing was written; the other layers export, this one has no ONNX form in pipe yet")
		}
		return exitErrors
	}
	w := a.env.Stdout
	fmt.Fprintf(w, "Wrote %s: model %s of pipeline %s from %s\n", *out, t.Info.ModelName, t.Info.Pipeline, path)
	fmt.Fprintf(w, "  ONNX opset %d (IR version %d), %d nodes, %d initializers\n", sum.Opset, sum.IRVersion, sum.Nodes, sum.Initializers)
	fmt.Fprintf(w, "  input  %q [batch, %s] float32, normalised as training normalised it\n", sum.Input, dims(sum.InputShape))
	fmt.Fprintf(w, "  output %q [batch, %s] float32", sum.Output, dims(sum.OutputShape))
	if t.Info.Target != nil {
		fmt.Fprint(w, ", restored to the target's units")
	}
	fmt.Fprintln(w)
	if n := len(sum.Folded); n > 0 {
		fmt.Fprintf(w, "  %s folded into the conv before %s\n", count(n, "batchnorm", "batchnorms"), map[bool]string{true: "it", false: "them"}[n == 1])
	}
	if nm := t.Info.InputNorm; len(nm.Mean) > 0 {
		fmt.Fprintf(w, "  feed it (x - mean) / std per channel: mean %s, std %s (also in the file's metadata)\n", floats(nm.Mean), floats(nm.Std))
	}
	return exitOK
}

// defaultCheckpoint is best.ckpt in the run's checkpoint folder when there
// is one, else last.ckpt there.
func defaultCheckpoint(prog *lang.Program, dir string) string {
	if dir == "" {
		dir = filepath.Join("out", prog.Name, "checkpoints")
		if f := prog.Block("train").Field("checkpoint_dir"); f != nil {
			dir = f.First().Str
		}
	}
	if best := filepath.Join(dir, exec.BestCheckpoint); fileExists(best) {
		return best
	}
	return filepath.Join(dir, exec.LastCheckpoint)
}

func dims(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return strings.Join(parts, ", ")
}

func floats(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.4g", x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// pipeVersion is the module's version for the file's producer_version.
func pipeVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}
