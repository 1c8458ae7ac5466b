// Package weights draws the seeded initial values of the named tensors
// each node of a graph holds, as its op's descriptor in stdlib declares
// them (name, shape, buffer or not, and an Init spec). Both engines start
// from it: the native engine allocates the tensors it declares, the torch
// engine sends their values to its workers, so the same file gives the
// same starting weights on either and a run moves between them. It builds
// no kernel.
//
// Each tensor draws from its own stream, keyed by the seed and the
// tensor's name (Stream), so adding a layer leaves the others' initial
// values unchanged. Names are PyTorch's state_dict keys
// ("conv1.weight", "bn1.running_mean").
package weights

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"

	"pipe/engine"
	"pipe/stdlib"
)

// Tensor is one named tensor of a node.
type Tensor struct {
	Name  string
	Shape []int64
	// Buffer marks a tensor no gradient reaches: batchnorm's running
	// statistics, the fixed sketches of the sketched layers.
	Buffer bool
	fill   func(seed uint64, x []float32)
}

// Numel is the number of values the tensor holds.
func (t Tensor) Numel() int {
	n := 1
	for _, d := range t.Shape {
		n *= int(d)
	}
	return n
}

// Fill writes the tensor's initial values under seed into x, which holds
// Numel values.
func (t Tensor) Fill(seed uint64, x []float32) {
	if t.fill != nil {
		t.fill(seed, x)
	}
}

// Stream is the random stream of the tensor called name under seed: a
// PCG seeded with seed and the FNV-1a hash of the name.
func Stream(seed uint64, name string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(name))
	return rand.New(rand.NewPCG(seed, h.Sum64()))
}

// Init fills x from r.
type Init func(r *rand.Rand, x []float32)

// Of declares the tensors of every node of g, in the graph's order and,
// within a node, in the order of its module's state_dict. It fails,
// wrapping engine.ErrUnsupported, on a node with parameters whose op it
// does not know.
func Of(g *stdlib.Graph) ([]Tensor, error) {
	var out []Tensor
	for _, n := range g.Nodes {
		ts, err := Node(n)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	return out, nil
}

// Node declares the tensors of one node as its op's descriptor in stdlib
// lists them (stdlib.Tensors), each with the drawing its Init names.
func Node(n *stdlib.Node) ([]Tensor, error) {
	specs, _ := stdlib.Tensors(n)
	if len(specs) == 0 {
		if n.Params > 0 || n.Buffers > 0 {
			return nil, fmt.Errorf("%w: %s (%s) has parameters that package weights does not declare", engine.ErrUnsupported, n.Name, n.Op)
		}
		return nil, nil
	}
	ts := make([]Tensor, len(specs))
	for i, s := range specs {
		fill, err := filler(s)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", n.Name, n.Op, err)
		}
		ts[i] = Tensor{Name: s.Name, Shape: s.Shape, Buffer: s.Buffer, fill: fill}
	}
	return ts, nil
}

// filler is how the tensor s is drawn under a seed: from its own stream,
// or, for a sketched layer's S, from the streams of the layer's dense
// weight and sign sketches (sketch.go).
func filler(s stdlib.TensorSpec) (func(seed uint64, x []float32), error) {
	var init Init
	switch in := s.Init; in.Kind {
	case stdlib.InitFill:
		init = Fill(float32(in.Value))
	case stdlib.InitUniform:
		init = Uniform(in.Value)
	case stdlib.InitKaiming:
		init = Kaiming(in.Fan)
	case stdlib.InitNormal:
		init = Normal(in.Value)
	case stdlib.InitSignSketch:
		init = SignSketch(in.Rank)
	case stdlib.InitFavor:
		if len(s.Shape) != 2 {
			return nil, fmt.Errorf("%w: %s: random features need a shape [M, d], not %v", engine.ErrInternal, s.Name, s.Shape)
		}
		init = FavorFeatures(int(s.Shape[0]), int(s.Shape[1]))
	case stdlib.InitSketchS1:
		return sketchS1(in.Sketch), nil
	case stdlib.InitSketchS2:
		return sketchS2(in.Sketch), nil
	case stdlib.InitSketchConv:
		return sketchConv(in.Sketch), nil
	default:
		return nil, fmt.Errorf("%w: %s: initialiser kind %d", engine.ErrUnsupported, s.Name, in.Kind)
	}
	name := s.Name
	return func(seed uint64, x []float32) { init(Stream(seed, name), x) }, nil
}

// Initial is the state a model of g starts from under seed: the
// parameters, then the buffers, each in Of's order, then zero optimizer
// buffers for opt (engine.OptimizerSlots), and the counters at zero with
// the seed. It is what engine.Model.State returns before the first step.
func Initial(g *stdlib.Graph, seed uint64, opt engine.Optimizer) (engine.State, error) {
	ts, err := Of(g)
	if err != nil {
		return engine.State{}, err
	}
	st := engine.State{Counters: map[string]int64{
		engine.CounterStep:      0,
		engine.CounterMicroStep: 0,
		engine.CounterSeed:      int64(seed),
	}}
	var params, buffers []engine.Tensor
	for _, t := range ts {
		x := make([]float32, t.Numel())
		t.Fill(seed, x)
		et := engine.Tensor{Name: t.Name, Shape: append([]int64(nil), t.Shape...), Data: x}
		if t.Buffer {
			buffers = append(buffers, et)
		} else {
			params = append(params, et)
		}
	}
	for _, n := range g.Nodes {
		if n.Op == "batchnorm" {
			st.Counters[n.Name+engine.SuffixBatchesTracked] = 0
		}
	}
	st.Tensors = append(params, buffers...)
	for _, p := range params {
		for _, slot := range engine.OptimizerSlots(opt) {
			st.Tensors = append(st.Tensors, engine.Tensor{Name: engine.OptimizerKey(p.Name, slot),
				Shape: append([]int64(nil), p.Shape...), Data: make([]float32, len(p.Data))})
		}
	}
	return st, nil
}
