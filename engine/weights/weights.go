// Package weights declares the named tensors each node of a graph holds
// (its shape, whether it trains, how it starts) and draws their seeded
// initial values. Both engines start from it: the native engine
// allocates the tensors it declares, the torch engine sends their values
// to its workers, so the same file gives the same starting weights on
// either and a run moves between them. It builds no kernel.
//
// Each tensor draws from its own stream, keyed by the seed and the
// tensor's name (Stream), so adding a layer leaves the others' initial
// values unchanged. Names are PyTorch's state_dict keys
// ("conv1.weight", "bn1.running_mean").
package weights

import (
	"fmt"
	"hash/fnv"
	"math"
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

// own is a tensor drawn from its own stream.
func own(name string, shape []int64, buffer bool, init Init) Tensor {
	return Tensor{Name: name, Shape: shape, Buffer: buffer, fill: func(seed uint64, x []float32) {
		init(Stream(seed, name), x)
	}}
}

func param(name string, shape []int64, init Init) Tensor  { return own(name, shape, false, init) }
func buffer(name string, shape []int64, init Init) Tensor { return own(name, shape, true, init) }

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

// first and last are a per-sample shape's first axis (the channels of an
// image or a volume, as conv and the norms over channels read it) and its
// last (the features that dense, layernorm and the token ops map).
func first(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return shape[0]
}

func last(shape []int64) int64 {
	if len(shape) == 0 {
		return 0
	}
	return shape[len(shape)-1]
}

// Node declares the tensors of one node.
func Node(n *stdlib.Node) ([]Tensor, error) {
	a := n.Args
	var in []int64
	if len(n.In) > 0 {
		in = n.In[0]
	}
	name := n.Name
	cin, cout := first(in), first(n.Out)
	fin, fout := last(in), last(n.Out)
	k := a.Kernel
	switch n.Op {
	case "conv":
		// A volume's kernel is k×k×k; groups apply to images only.
		grp := max(a.Groups, 1)
		shape, fan := []int64{cout, cin / grp, k, k}, cin/grp*k*k
		if len(in) == 4 {
			shape, fan = []int64{cout, cin, k, k, k}, cin*k*k*k
		}
		return withBias(name, shape, cout, fan, a.Bias), nil
	case "convtranspose":
		grp := max(a.Groups, 1)
		shape, fan := []int64{cin, cout / grp, k, k}, cout/grp*k*k
		if len(in) == 4 {
			shape, fan = []int64{cin, cout, k, k, k}, cout*k*k*k
		}
		return withBias(name, shape, cout, fan, a.Bias), nil
	case "dense":
		return withBias(name, []int64{fout, fin}, fout, fin, a.Bias), nil
	case "lowrank_dense":
		ts := []Tensor{
			param(name+".u", []int64{a.Terms, fin, a.Rank}, Kaiming(fin)),
			param(name+".v", []int64{a.Terms, a.Rank, fout}, Uniform(math.Sqrt(3/float64(a.Terms*a.Rank)))),
		}
		if a.Bias {
			ts = append(ts, param(name+".bias", []int64{fout}, Kaiming(fin)))
		}
		return ts, nil
	case "sketched_dense":
		return sketchedDense(name, fin, fout, a.Terms, a.Rank, a.Bias), nil
	case "sketched_conv":
		return sketchedConv(name, cin, cout, a.Terms, a.Rank, k, a.Bias), nil
	case "batchnorm":
		return BatchNorm(name, cout), nil
	case "layernorm":
		return affine(name, fout), nil
	case "instancenorm":
		if !a.Affine {
			return nil, nil
		}
		return affine(name, cout), nil
	case "class_token":
		return []Tensor{param(name+".weight", []int64{1, 1, fin}, Fill(0))}, nil
	case "pos_embed":
		return []Tensor{param(name+".weight", []int64{1, cin, fin}, Normal(0.02))}, nil
	case "attention":
		// nn.MultiheadAttention's initialisation: xavier_uniform_ on the
		// packed [3D, D] projection, zero biases, and the output
		// projection's Linear default (its bias zeroed too).
		d := fin
		return []Tensor{
			param(name+".in_proj_weight", []int64{3 * d, d}, Uniform(math.Sqrt(6/float64(4*d)))),
			param(name+".in_proj_bias", []int64{3 * d}, Fill(0)),
			param(name+".out_proj.weight", []int64{d, d}, Kaiming(d)),
			param(name+".out_proj.bias", []int64{d}, Fill(0)),
		}, nil
	case "random_attention":
		return randomAttention(name, fin, a.Heads, a.Features), nil
	}
	if n.Params > 0 || n.Buffers > 0 {
		return nil, fmt.Errorf("%w: %s (%s) has parameters that package weights does not declare", engine.ErrUnsupported, name, n.Op)
	}
	return nil, nil
}

// withBias is a weight and, with bias, a bias, both from PyTorch's
// default for Linear and Conv: U(±1/√fan_in).
func withBias(name string, shape []int64, out, fan int64, bias bool) []Tensor {
	ts := []Tensor{param(name+".weight", shape, Kaiming(fan))}
	if bias {
		ts = append(ts, param(name+".bias", []int64{out}, Kaiming(fan)))
	}
	return ts
}

// affine is a norm's scale (ones) and shift (zeros).
func affine(name string, c int64) []Tensor {
	return []Tensor{param(name+".weight", []int64{c}, Fill(1)), param(name+".bias", []int64{c}, Fill(0))}
}

// BatchNorm declares a batchnorm of c channels: its affine parameters and
// its running statistics. A conv that fuses a batchnorm holds these
// under the batchnorm node's name.
func BatchNorm(name string, c int64) []Tensor {
	sh := []int64{c}
	return append(affine(name, c),
		buffer(name+".running_mean", sh, Fill(0)),
		buffer(name+".running_var", sh, Fill(1)))
}

// randomAttention is Panther's RandMultiHeadAttention: xavier_uniform_
// projections, zero biases and the FAVOR+ feature matrix.
func randomAttention(name string, d, heads, features int64) []Tensor {
	sq, v := []int64{d, d}, []int64{d}
	xavier := Uniform(math.Sqrt(6 / float64(2*d)))
	dh := int64(0)
	if heads > 0 {
		dh = d / heads
	}
	return []Tensor{
		param(name+".Wq", sq, xavier), param(name+".Wk", sq, xavier),
		param(name+".Wv", sq, xavier), param(name+".W0", sq, xavier),
		param(name+".bq", v, Fill(0)), param(name+".bk", v, Fill(0)),
		param(name+".bv", v, Fill(0)), param(name+".b0", v, Fill(0)),
		buffer(name+".projection_matrix", []int64{features, dh}, FavorFeatures(int(features), int(dh))),
	}
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
