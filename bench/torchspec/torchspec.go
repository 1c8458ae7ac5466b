// Package torchspec describes a pipe model to PyTorch: it loads a .pipe
// file the way pipe run does (parse, check, plan for the CPU, build the
// graph, the executor's Config from the plan) and writes the graph's nodes
// as a JSON Spec from which bench/torch_step.py builds the same network in
// torch.nn. The models of bench/models are written once, in pipe; the
// PyTorch side is derived from them, so the two cannot drift.
//
// A Spec also carries the parameters pipe initialised, a batch, and what
// pipe computed on that batch with those parameters (the output and the
// loss in evaluation mode, the training-mode loss when no dropout
// is active). torch_step.py loads the same parameters, runs the same batch
// and reports how far its numbers are from pipe's, so a wrong padding, a
// transposed weight or a swapped concat shows up before any timing.
//
// Its neighbours: bench/cmd/torchspec writes one Spec, bench/cmd/ratios
// times pipe's training step beside PyTorch's on the models of
// bench/models.
package torchspec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"pipe/exec"
	"pipe/exec/cpu"
	"pipe/exec/data"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/stdlib"
)

// Version is the version of the Spec format; torch_step.py refuses others.
const Version = 1

// Spec is a model as bench/torch_step.py reads it.
type Spec struct {
	Version int `json:"version"`
	// Name is the pipeline's name; File the .pipe file it came from.
	Name string `json:"name"`
	File string `json:"file"`
	// Batch is the micro-batch the plan trains with, Threads the compute
	// threads both sides use.
	Batch   int `json:"batch"`
	Threads int `json:"threads"`
	// Input and OutShape are one sample's input and output shapes;
	// Output is the ID of the output node.
	Input    []int64 `json:"input"`
	OutShape []int64 `json:"out_shape"`
	Output   int     `json:"output"`
	// Params is pipe's count of trainable parameters.
	Params int64 `json:"params"`
	// Loss is the loss kind (exec.Loss), Optimizer the optimizer with the
	// plan's learning rate.
	Loss      string    `json:"loss"`
	Optimizer Optimizer `json:"optimizer"`
	Nodes     []Node    `json:"nodes"`
	// Data names the file, beside the spec, of little-endian float32
	// values that Tensors index; empty when the spec carries no tensors.
	Data    string      `json:"data,omitempty"`
	Tensors []TensorRef `json:"tensors,omitempty"`
	// Check is what pipe computed on the batch of Tensors.
	Check *Check `json:"check,omitempty"`
}

// Optimizer is exec.Optimizer with the learning rate, in PyTorch's terms.
type Optimizer struct {
	Kind        string  `json:"kind"`
	LR          float64 `json:"lr"`
	Momentum    float64 `json:"momentum"`
	Nesterov    bool    `json:"nesterov"`
	WeightDecay float64 `json:"weight_decay"`
	Beta1       float64 `json:"beta1"`
	Beta2       float64 `json:"beta2"`
	Eps         float64 `json:"eps"`
}

// Node is one graph node: its op, the IDs of the nodes it reads (in
// order: for concat and add the main flow first), their shapes and its
// own, its parameter count, and the settings its op reads, named as
// PyTorch names them.
type Node struct {
	ID     int            `json:"id"`
	Name   string         `json:"name"`
	Op     string         `json:"op"`
	Inputs []int          `json:"inputs"`
	In     [][]int64      `json:"in"`
	Out    []int64        `json:"out"`
	Params int64          `json:"params"`
	Args   map[string]any `json:"args,omitempty"`
}

// TensorRef is a named tensor in the data file: Offset and the product of
// Shape count float32 values.
type TensorRef struct {
	Name   string  `json:"name"`
	Shape  []int64 `json:"shape"`
	Offset int64   `json:"offset"`
}

// Check holds pipe's results on the batch "batch.x"/"batch.y" with the
// parameters of Tensors: the output ("check.out") and the mean loss in
// evaluation mode, and the training-mode loss (batch statistics) when the
// model has no active dropout, else nil.
type Check struct {
	EvalLoss  float64  `json:"eval_loss"`
	TrainLoss *float64 `json:"train_loss"`
}

// Model is a .pipe file loaded as pipe run loads it.
type Model struct {
	Path    string
	Program *lang.Program
	Plan    *plan.Plan
	Graph   *stdlib.Graph
	// Config is what exec.Run would build the model with (the plan's
	// batch, fusion groups and folds), with Threads set.
	Config exec.Config
	// LR is the plan's learning rate.
	LR float64
}

// Load parses, checks and plans the file for the CPU and builds its
// graph and executor Config. threads 0 means GOMAXPROCS.
func Load(path string, threads int) (*Model, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, ds := lang.Parse(path, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, ds)
	}
	p, pds := planner.Plan(prog, planner.WithDevice("cpu"), planner.WithSource(src))
	if pds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, pds)
	}
	if !p.Fits {
		return nil, fmt.Errorf("%s: the plan does not fit the CPU", path)
	}
	lm := prog.Model(p.Model)
	if lm == nil {
		return nil, fmt.Errorf("%s: the plan's model %s is not in the file", path, p.Model)
	}
	g, gds := stdlib.BuildGraph(lm)
	if gds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, gds)
	}
	cfg := exec.ConfigFromPlan(p, prog)
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	cfg.Threads = threads
	return &Model{Path: path, Program: prog, Plan: p, Graph: g, Config: cfg, LR: p.Optimizer.LR}, nil
}

// Name is the pipeline's name.
func (m *Model) Name() string { return m.Program.Name }

// Build compiles the model on the CPU backend with its Config.
func (m *Model) Build() (exec.Model, error) {
	return cpu.Backend{}.Build(m.Graph, m.Config)
}

// Spec describes the graph without tensors. It fails on an op that
// torch_step.py does not build.
func (m *Model) Spec() (*Spec, error) {
	g, cfg := m.Graph, m.Config
	o := cfg.Optimizer
	s := &Spec{
		Version:  Version,
		Name:     m.Name(),
		File:     m.Path,
		Batch:    cfg.Batch,
		Threads:  cfg.Threads,
		Input:    g.Input,
		OutShape: g.OutShape(),
		Output:   g.Output,
		Params:   g.Params(),
		Loss:     cfg.Loss.Kind,
		Optimizer: Optimizer{Kind: o.Kind, LR: m.LR, Momentum: o.Momentum, Nesterov: o.Nesterov,
			WeightDecay: o.WeightDecay, Beta1: o.Beta1, Beta2: o.Beta2, Eps: o.Eps},
	}
	for _, n := range g.Nodes {
		args, err := argsOf(n)
		if err != nil {
			return nil, err
		}
		s.Nodes = append(s.Nodes, Node{ID: n.ID, Name: n.Name, Op: n.Op, Inputs: nonNil(n.Inputs),
			In: n.In, Out: n.Out, Params: n.Params, Args: args})
	}
	return s, nil
}

func nonNil(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// argsOf is a node's settings under PyTorch's names, for the ops
// torch_step.py builds.
func argsOf(n *stdlib.Node) (map[string]any, error) {
	a := n.Args
	switch n.Op {
	case "input", "relu", "gelu", "sigmoid", "tanh", "softmax", "flatten", "concat", "add":
		return nil, nil
	case "conv":
		return map[string]any{"out_channels": a.Channels, "kernel_size": a.Kernel, "stride": a.Stride,
			"padding": a.Padding, "dilation": a.Dilation, "groups": a.Groups, "bias": a.Bias}, nil
	case "convtranspose":
		return map[string]any{"out_channels": a.Channels, "kernel_size": a.Kernel, "stride": a.Stride,
			"padding": a.Padding, "bias": a.Bias}, nil
	case "dense":
		return map[string]any{"out_features": a.Units, "bias": a.Bias}, nil
	case "batchnorm":
		return map[string]any{"eps": a.Eps, "momentum": a.Momentum}, nil
	case "layernorm":
		return map[string]any{"eps": a.Eps}, nil
	case "maxpool", "avgpool":
		return map[string]any{"kernel_size": a.Kernel, "stride": a.Stride, "padding": a.Padding}, nil
	case "gap":
		return map[string]any{"keepdims": a.Keepdims}, nil
	case "dropout":
		return map[string]any{"p": a.P}, nil
	case "upsample":
		return map[string]any{"mode": a.Mode, "align_corners": a.AlignCorners}, nil
	}
	return nil, fmt.Errorf("torchspec: node %s: op %s has no PyTorch counterpart in bench/torch_step.py", n.Name, n.Op)
}

// RandomBatch is a batch of n samples for g: inputs from N(0, 1), targets
// suited to the loss (class indices, one per output position, for
// cross_entropy; 0 or 1 per output element for bce and dice; N(0, 1)
// otherwise).
func RandomBatch(g *stdlib.Graph, loss string, n int, seed uint64) *data.Batch {
	r := rand.New(rand.NewPCG(seed, 0x70697065))
	b := &data.Batch{N: n, X: make([]float32, n*int(numel(g.Input)))}
	for i := range b.X {
		b.X[i] = float32(r.NormFloat64())
	}
	out := g.OutShape()
	switch loss {
	case "cross_entropy":
		classes := int(out[0])
		b.Y = make([]float32, n*int(numel(out[1:])))
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(classes))
		}
	case "bce", "dice":
		b.Y = make([]float32, n*int(numel(out)))
		for i := range b.Y {
			b.Y[i] = float32(r.IntN(2))
		}
	default:
		b.Y = make([]float32, n*int(numel(out)))
		for i := range b.Y {
			b.Y[i] = float32(r.NormFloat64())
		}
	}
	return b
}

func numel(s []int64) int64 {
	p := int64(1)
	for _, d := range s {
		p *= d
	}
	return p
}

// hasDropout says whether some dropout of g zeroes anything.
func hasDropout(g *stdlib.Graph) bool {
	for _, n := range g.Nodes {
		if n.Op == "dropout" && n.Args.P > 0 {
			return true
		}
	}
	return false
}

// WithCheck fills s's tensors and Check: it builds the model, takes its
// initial parameters and buffers, runs a batch of s.Batch samples in
// evaluation mode (and in training mode when no dropout is active) and
// returns the data file's contents, which the caller writes beside the
// spec under the name it sets in s.Data.
func (m *Model) WithCheck(s *Spec) ([]byte, error) {
	mod, err := m.Build()
	if err != nil {
		return nil, err
	}
	defer mod.Close()
	bt := RandomBatch(m.Graph, m.Config.Loss.Kind, m.Config.Batch, 1)
	var tensors []exec.Tensor
	for _, t := range mod.State().Tensors {
		if !strings.HasPrefix(t.Name, "optimizer.") {
			tensors = append(tensors, t)
		}
	}
	out := make([]float32, bt.N*int(numel(mod.OutShape())))
	evalLoss, err := mod.Eval(bt, out)
	if err != nil {
		return nil, fmt.Errorf("%s: eval: %w", m.Path, err)
	}
	if math.IsNaN(evalLoss) || math.IsInf(evalLoss, 0) {
		return nil, fmt.Errorf("%s: pipe's evaluation loss on the check batch is %v", m.Path, evalLoss)
	}
	s.Check = &Check{EvalLoss: evalLoss}
	if !hasDropout(m.Graph) {
		mod.ZeroGrad()
		l, err := mod.TrainStep(bt, 1)
		if err != nil {
			return nil, fmt.Errorf("%s: train step: %w", m.Path, err)
		}
		s.Check.TrainLoss = &l
	}
	in := append([]int64{int64(bt.N)}, m.Graph.Input...)
	y := []int64{int64(len(bt.Y))}
	tensors = append(tensors,
		exec.Tensor{Name: "batch.x", Shape: in, Data: bt.X},
		exec.Tensor{Name: "batch.y", Shape: y, Data: bt.Y},
		exec.Tensor{Name: "check.out", Shape: append([]int64{int64(bt.N)}, mod.OutShape()...), Data: out})
	var buf bytes.Buffer
	s.Tensors = s.Tensors[:0]
	var off int64
	for _, t := range tensors {
		if numel(t.Shape) != int64(len(t.Data)) {
			return nil, fmt.Errorf("torchspec: tensor %s has shape %v and %d values", t.Name, t.Shape, len(t.Data))
		}
		s.Tensors = append(s.Tensors, TensorRef{Name: t.Name, Shape: t.Shape, Offset: off})
		off += int64(len(t.Data))
		if err := binary.Write(&buf, binary.LittleEndian, t.Data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// Write writes the spec with its check tensors into dir as NAME.json and
// NAME.bin and returns the spec's path.
func (m *Model) Write(dir string) (string, *Spec, error) {
	s, err := m.Spec()
	if err != nil {
		return "", nil, err
	}
	blob, err := m.WithCheck(s)
	if err != nil {
		return "", nil, err
	}
	s.Data = s.Name + ".bin"
	if err := os.WriteFile(filepath.Join(dir, s.Data), blob, 0o644); err != nil {
		return "", nil, err
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", nil, err
	}
	path := filepath.Join(dir, s.Name+".json")
	if err := os.WriteFile(path, append(js, '\n'), 0o644); err != nil {
		return "", nil, err
	}
	return path, s, nil
}
