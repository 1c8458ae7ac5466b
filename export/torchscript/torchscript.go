// Package torchscript writes a trained model as a TorchScript file through
// the torch engine: the model is built from the plan by the torch engine,
// given the checkpoint's weights, traced in evaluation mode and saved with
// pipe's metadata as an extra file, so that torch.jit.load alone (no pipe
// code) runs it. See docs/design/torchscript-export.md.
package torchscript

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"pipe/engine"
	"pipe/engine/torch"
	"pipe/run"
)

// MetadataFile is the extra file that holds Metadata as JSON.
const MetadataFile = "pipe.json"

// ErrUnsupported is wrapped by Export's errors for a model torch cannot
// trace or script; the error names the node, its op and the reason.
var ErrUnsupported = errors.New("cannot be exported to TorchScript")

// Metadata is what the file's MetadataFile says: the model's input is
// normalised as the ONNX export's is ((x − InputMean[c]) / InputStd[c] per
// channel, as training normalised it), shapes are one sample's (the batch
// axis is free), and the output is in the target's units.
type Metadata struct {
	Pipeline    string    `json:"pipeline"`
	Model       string    `json:"model"`
	Loss        string    `json:"loss,omitempty"`
	InputShape  []int64   `json:"input_shape"`
	OutputShape []int64   `json:"output_shape"`
	InputMean   []float64 `json:"input_mean,omitempty"`
	InputStd    []float64 `json:"input_std,omitempty"`
	ClassNames  []string  `json:"class_names,omitempty"`
	// TargetRestored says the output was restored from the training
	// scaling of a regression's target (TargetMean, TargetStd).
	TargetRestored bool      `json:"target_restored,omitempty"`
	TargetMean     []float64 `json:"target_mean,omitempty"`
	TargetStd      []float64 `json:"target_std,omitempty"`
	Producer       string    `json:"producer,omitempty"`
}

// Summary is what Export wrote.
type Summary struct {
	// Method is "trace" or "script"; Nodes the saved graph's node count;
	// Torch the torch that wrote it.
	Method string
	Nodes  int
	Torch  string
	Meta   Metadata
}

// Backend is the engine a model is traced through, whose workers run
// with python and log their stderr to log: the torch engine, whose
// models are TorchScripters. Export's caller loads the checkpoint on it
// (run.LoadTrained) and so names no engine.
func Backend(python string, log hclog.Logger) engine.Backend {
	return torch.Backend{Python: python, Log: log}
}

// MetadataOf is t's metadata, as Export records it.
func MetadataOf(t *run.Trained, producer string) Metadata {
	md := Metadata{Pipeline: t.Info.Pipeline, Model: t.Info.ModelName, Loss: t.Info.Loss,
		InputShape: t.Info.InputShape, OutputShape: t.Info.OutputShape, ClassNames: t.Info.ClassNames, Producer: producer}
	if md.Model == "" && t.Plan != nil {
		md.Model = t.Plan.Model
	}
	if nm := t.Info.InputNorm; len(nm.Mean) > 0 && len(nm.Mean) == len(nm.Std) {
		md.InputMean, md.InputStd = nm.Mean, nm.Std
	}
	if ts := t.Info.Target; ts != nil && len(ts.Mean) > 0 && len(ts.Mean) == len(ts.Std) {
		md.TargetRestored, md.TargetMean, md.TargetStd = true, ts.Mean, ts.Std
	}
	return md
}

// Export writes t, whose model the torch engine built, as TorchScript at
// path (whole or not at all). producer is recorded in the metadata.
func Export(t *run.Trained, path, producer string) (Summary, error) {
	ts, ok := t.Model.(torch.TorchScripter)
	if !ok {
		return Summary{}, errors.New("TorchScript needs the model as the torch engine builds it")
	}
	md := MetadataOf(t, producer)
	if md.TargetRestored && len(md.TargetMean) > 1 {
		if k := len(md.TargetMean); len(md.OutputShape) == 0 || md.OutputShape[0] != int64(k) {
			return Summary{}, fmt.Errorf("the target's scaling has %d channels, which are not the first axis of the output %v: %w", k, md.OutputShape, ErrUnsupported)
		}
	}
	js, err := json.Marshal(md)
	if err != nil {
		return Summary{}, err
	}
	req := torch.TorchScript{Path: path, Extra: map[string]string{MetadataFile: string(js)}}
	if md.TargetRestored {
		req.TargetMean, req.TargetStd = md.TargetMean, md.TargetStd
	}
	res, err := ts.TorchScript(req)
	if err != nil {
		if errors.Is(err, engine.ErrUnsupported) {
			msg := strings.TrimPrefix(err.Error(), engine.ErrUnsupported.Error()+": ")
			return Summary{}, fmt.Errorf("%s: the model %w", msg, ErrUnsupported)
		}
		return Summary{}, err
	}
	return Summary{Method: res.Method, Nodes: res.Nodes, Torch: res.Torch, Meta: md}, nil
}
