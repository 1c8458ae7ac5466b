// Package torchspec loads a pipe model for the step-time comparison the
// way pipe run loads it and writes it as the torch engine's Spec, from
// which bench/torch_step.py builds the same network with the engine's own
// module, so the two sides cannot drift. The Spec also carries the
// parameters pipe initialised, a batch and what pipe computed on it, so a
// wrong padding, a transposed weight or a swapped concat shows up before
// any timing. Its neighbours: bench/cmd/torchspec writes one Spec, and
// bench/cmd/ratios times both sides on the models of bench/models.
//
// Method: docs/design/bench-ratios.md.
package torchspec

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"pipe/dataset"
	"pipe/engine"
	"pipe/engine/native"
	"pipe/engine/torch"

	"pipe/engine/costs"
	"pipe/lang"
	"pipe/planner"
	"pipe/planner/plan"
	"pipe/run"
	"pipe/stdlib"
)

// Version is the version of the Spec format; torch_step.py refuses others.
const Version = torch.SpecVersion

// Spec, TensorRef and Check are the torch engine's.
type (
	Spec      = torch.Spec
	TensorRef = torch.TensorRef
	Check     = torch.Check
)

// Model is a .pipe file loaded as pipe run loads it.
type Model struct {
	Path    string
	Program *lang.Program
	Plan    *plan.Plan
	Graph   *stdlib.Graph
	// Config is what run.Run would build the model with (the plan's
	// batch, fusion groups and folds), with Threads set.
	Config engine.Config
	// LR is the plan's learning rate.
	LR float64
}

// Load parses, checks and plans the file for the CPU (or as opts say:
// they come after WithDevice("cpu")) and builds its graph and executor
// Config. threads 0 means GOMAXPROCS.
func Load(path string, threads int, opts ...planner.Option) (*Model, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, ds := lang.Parse(path, src)
	prog, cds := lang.Check(f, stdlib.Schema())
	if ds = append(ds, cds...); ds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, ds)
	}
	dec, dds := stdlib.Decode(prog)
	if dds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, dds)
	}
	p, pds := planner.Plan(dec, append([]planner.Option{planner.WithCosts(costs.Engines()...), planner.WithDevice("cpu"), planner.WithSource(src)}, opts...)...)
	if p == nil || pds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, pds)
	}
	if !p.Fits {
		return nil, fmt.Errorf("%s: the plan does not fit %s", path, p.Device.Name)
	}
	lm := prog.Model(p.Model)
	if lm == nil {
		return nil, fmt.Errorf("%s: the plan's model %s is not in the file", path, p.Model)
	}
	g, gds := stdlib.BuildGraph(lm)
	if gds.HasErrors() {
		return nil, fmt.Errorf("%s: %w", path, gds)
	}
	cfg := run.ConfigFromPlan(p, dec)
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	cfg.Threads = threads
	return &Model{Path: path, Program: prog, Plan: p, Graph: g, Config: cfg, LR: p.Optimizer.LR}, nil
}

// Name is the pipeline's name.
func (m *Model) Name() string { return m.Program.Name }

// Build compiles the model on the CPU backend with its Config.
func (m *Model) Build() (engine.Model, error) {
	return native.Backend{}.Build(m.Graph, m.Config)
}

// Spec describes the graph without tensors, as the torch engine does. It
// fails on an op the engine does not build.
func (m *Model) Spec() (*Spec, error) {
	s, err := torch.NewSpec(m.Graph, m.Config, m.LR)
	if err != nil {
		return nil, err
	}
	s.Name, s.File = m.Name(), m.Path
	return s, nil
}

// RandomBatch is a batch of n samples for g (dataset.RandomBatch).
func RandomBatch(g *stdlib.Graph, loss string, n int, seed uint64) *dataset.Batch {
	return dataset.RandomBatch(g.Input, g.OutShape(), loss, n, seed)
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
	var tensors []engine.Tensor
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
		engine.Tensor{Name: "batch.x", Shape: in, Data: bt.X},
		engine.Tensor{Name: "batch.y", Shape: y, Data: bt.Y},
		engine.Tensor{Name: "check.out", Shape: append([]int64{int64(bt.N)}, mod.OutShape()...), Data: out})
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

// DefaultPython is Debian's interpreter, which sees python3-torch even
// when another python3 comes first on the PATH.
func DefaultPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}
