package views

import (
	"fmt"
	"io"
	"strings"

	"pipe/export/onnx"
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
