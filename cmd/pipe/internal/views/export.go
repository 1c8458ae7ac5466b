package views

import (
	"fmt"
	"io"
	"strings"

	"pipe/export/onnx"
	"pipe/export/torchscript"
	"pipe/run"
)

// Export says what pipe export wrote to out: the model t loaded from the
// checkpoint at path, as the exporter summed it up.
func Export(w io.Writer, out string, t *run.Trained, sum onnx.Summary, path string) {
	fmt.Fprintf(w, "Wrote %s: model %s of pipeline %s from %s\n", out, t.Info.ModelName, t.Info.Pipeline, path)
	Loaded(w, "  from ", t)
	fmt.Fprintf(w, "  ONNX opset %d (IR version %d), %d nodes, %d initializers\n", sum.Opset, sum.IRVersion, sum.Nodes, sum.Initializers)
	fmt.Fprintf(w, "  input  %q [batch, %s] float32, normalised as training normalised it\n", sum.Input, dims(sum.InputShape))
	fmt.Fprintf(w, "  output %q [batch, %s] float32", sum.Output, dims(sum.OutputShape))
	if t.Info.Target != nil {
		fmt.Fprint(w, ", restored to the target's units")
	}
	fmt.Fprintln(w)
	if n := len(sum.Folded); n > 0 {
		fmt.Fprintf(w, "  %s folded into the conv before %s\n", Count(n, "batchnorm", "batchnorms"), map[bool]string{true: "it", false: "them"}[n == 1])
	}
	if nm := t.Info.InputNorm; len(nm.Mean) > 0 {
		fmt.Fprintf(w, "  feed it (x - mean) / std per channel: mean %s, std %s (also in the file's metadata)\n", floats(nm.Mean), floats(nm.Std))
	}
}

// ExportTorchScript says what pipe export --torchscript wrote.
func ExportTorchScript(w io.Writer, out string, t *run.Trained, sum torchscript.Summary, path string) {
	fmt.Fprintf(w, "Wrote %s: model %s of pipeline %s from %s\n", out, t.Info.ModelName, t.Info.Pipeline, path)
	Loaded(w, "  from ", t)
	how := "traced in evaluation mode, checked on a second input of another batch size"
	if sum.Method == "script" {
		how = "scripted (it cannot be traced)"
	}
	fmt.Fprintf(w, "  TorchScript by torch %s: %s, %d graph nodes; torch.jit.load runs it without pipe\n", sum.Torch, how, sum.Nodes)
	fmt.Fprintf(w, "  input  [batch, %s] float32, normalised as training normalised it\n", dims(sum.Meta.InputShape))
	fmt.Fprintf(w, "  output [batch, %s] float32", dims(sum.Meta.OutputShape))
	if sum.Meta.TargetRestored {
		fmt.Fprint(w, ", restored to the target's units")
	}
	fmt.Fprintln(w)
	if nm := t.Info.InputNorm; len(nm.Mean) > 0 {
		fmt.Fprintf(w, "  feed it (x - mean) / std per channel: mean %s, std %s\n", floats(nm.Mean), floats(nm.Std))
	}
	fmt.Fprintf(w, "  metadata in the extra file %s (torch.jit.load's _extra_files)\n", torchscript.MetadataFile)
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
