package onnx

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"pipe/engine"
	"pipe/run"
)

// Opset is the ONNX operator set Export targets unless WithOpset says
// otherwise: 17, the first with LayerNormalization.
const Opset = 17

// MinOpset and MaxOpset bound the opsets Export writes: 17 for
// LayerNormalization; 21, the newest onnxruntime 1.20 runs.
const (
	MinOpset = 17
	MaxOpset = 21
)

// OutputName is the name of the exported graph's output.
const OutputName = "output"

// ErrUnsupported is wrapped by Export's errors for a layer that has no
// ONNX form here.
var ErrUnsupported = errors.New("cannot be exported to ONNX")

// Option is an optional setting of Export.
type Option func(*options)

type options struct {
	opset    int
	producer string
}

// WithOpset sets the opset written (MinOpset to MaxOpset).
func WithOpset(n int) Option { return func(o *options) { o.opset = n } }

// WithProducer sets the producer_version recorded in the file.
func WithProducer(version string) Option { return func(o *options) { o.producer = version } }

// Summary is what Export wrote.
type Summary struct {
	Opset     int
	IRVersion int64
	// Nodes counts the ONNX nodes; Initializers the weight tensors and
	// constants.
	Nodes, Initializers int
	// Folded lists the batchnorms folded into the conv before them.
	Folded []string
	// Input and Output name the graph's input and output; InputShape and
	// OutputShape are one sample's (the batch axis is "batch").
	Input, Output           string
	InputShape, OutputShape []int64
}

// irVersion is the IR version an opset's release wrote.
func irVersion(opset int) int64 {
	switch {
	case opset <= 18:
		return 8
	case opset <= 20:
		return 9
	}
	return 10
}

// Export writes t as an ONNX ModelProto to w. The graph computes what
// t.Predict computes on normalised inputs: the input is named as the
// model's input node ("input"), [batch, InputShape...]; the output is
// "output", [batch, OutputShape...].
func Export(w io.Writer, t *run.Trained, opts ...Option) (Summary, error) {
	o := options{opset: Opset}
	for _, f := range opts {
		f(&o)
	}
	if o.opset < MinOpset || o.opset > MaxOpset {
		return Summary{}, fmt.Errorf("opset %d: pipe writes opsets %d to %d", o.opset, MinOpset, MaxOpset)
	}
	if t == nil || t.Graph == nil || len(t.Graph.Nodes) == 0 {
		return Summary{}, errors.New("export needs a trained model with its graph")
	}
	e := &exporter{g: t.Graph, opset: o.opset, vals: make([]string, len(t.Graph.Nodes)),
		params: make(map[string]*engine.Tensor), used: make(map[string]bool), folds: make(map[string]string)}
	for i := range t.State.Tensors {
		e.params[t.State.Tensors[i].Name] = &t.State.Tensors[i]
	}
	if t.Plan != nil {
		for _, f := range t.Plan.Fusion.InferenceFolds {
			if len(f) == 2 {
				e.folds[f[0]] = f[1]
			}
		}
	}
	if err := e.lower(); err != nil {
		return Summary{}, err
	}
	out := e.vals[e.g.Output]
	outShape := e.g.OutShape()
	if ts := t.Info.Target; ts != nil && len(ts.Mean) > 0 && len(ts.Mean) == len(ts.Std) {
		var err error
		if out, err = e.restore(out, outShape, ts); err != nil {
			return Summary{}, err
		}
	}
	e.node("output", "Identity", []string{out}, []string{OutputName})

	graph := msg(nil)
	for _, n := range e.nodes {
		graph = graph.sub(graphNode, n)
	}
	graph = graph.str(graphName, modelName(t))
	inits := e.readInits()
	for _, in := range inits {
		graph = graph.sub(graphInitializer, in)
	}
	inName := e.g.Nodes[0].Name
	graph = graph.sub(graphInput, valueInfo(inName, e.g.Input))
	graph = graph.sub(graphOutput, valueInfo(OutputName, outShape))

	model := msg(nil).varint(modelIRVersion, irVersion(o.opset)).
		str(modelProducerName, "pipe").str(modelProducerVer, orDefault(o.producer, "devel")).
		str(modelDocString, fmt.Sprintf("pipeline %s, model %s, exported by pipe export", t.Info.Pipeline, modelName(t))).
		sub(modelGraph, graph).
		sub(modelOpsetImport, msg(nil).str(opsetDomain, "").varint(opsetVersion, int64(o.opset)))
	meta := [][2]string{{"pipe.pipeline", t.Info.Pipeline}, {"pipe.model", modelName(t)}, {"pipe.loss", t.Info.Loss}}
	if nm := t.Info.InputNorm; len(nm.Mean) > 0 && len(nm.Mean) == len(nm.Std) {
		meta = append(meta, [2]string{"pipe.input_mean", joinFloats(nm.Mean)}, [2]string{"pipe.input_std", joinFloats(nm.Std)})
	}
	if len(t.Info.ClassNames) > 0 {
		meta = append(meta, [2]string{"pipe.class_names", strings.Join(t.Info.ClassNames, ",")})
	}
	for _, kv := range meta {
		if kv[1] != "" {
			model = model.sub(modelMetadata, msg(nil).str(entryKey, kv[0]).str(entryValue, kv[1]))
		}
	}
	if _, err := w.Write(model); err != nil {
		return Summary{}, err
	}
	return Summary{Opset: o.opset, IRVersion: irVersion(o.opset), Nodes: len(e.nodes), Initializers: len(inits),
		Folded: e.folded, Input: inName, Output: OutputName,
		InputShape: append([]int64(nil), e.g.Input...), OutputShape: append([]int64(nil), outShape...)}, nil
}

func joinFloats(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

func modelName(t *run.Trained) string {
	if t.Info.ModelName != "" {
		return t.Info.ModelName
	}
	if t.Plan != nil {
		return t.Plan.Model
	}
	return "model"
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// restore appends y·std + mean, per output channel (the first axis of a
// sample) when the scaling has one value per channel, as
// run.TargetScaling restores a regression's outputs.
func (e *exporter) restore(x string, shape []int64, ts *run.TargetScaling) (string, error) {
	k := len(ts.Mean)
	per := int64(1)
	for _, d := range shape {
		per *= d
	}
	dims := []int64{}
	std, mean := []float32{float32(ts.Std[0])}, []float32{float32(ts.Mean[0])}
	if k > 1 && per%int64(k) == 0 {
		if len(shape) == 0 || shape[0] != int64(k) {
			return "", fmt.Errorf("the target's scaling has %d channels, which are not the first axis of the output %v: %w", k, shape, ErrUnsupported)
		}
		dims = append([]int64{int64(k)}, rep(1, len(shape)-1)...)
		std, mean = make([]float32, k), make([]float32, k)
		for i := range k {
			std[i], mean[i] = float32(ts.Std[i]), float32(ts.Mean[i])
		}
	}
	y := e.op("target/scaled", "Mul", []string{x, e.floats("target.std", dims, std)})
	return e.op("target/restored", "Add", []string{y, e.floats("target.mean", dims, mean)}), nil
}
