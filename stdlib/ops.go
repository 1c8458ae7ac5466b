package stdlib

// This file holds the op descriptor: one value per primitive op says what
// the op is (its docs, the layer calls that build it, the named tensors a
// node of it holds), so that the checker, the completion, the docs, the
// graph builder and package weights all read the same declaration. The
// descriptors live with their families (ops_*.go, panther.go, tokens.go);
// opTable lists the families.
//
// FLOPs count a multiply-add as 2 and every other arithmetic operation,
// comparison or transcendental function as 1. Reductions inside
// normalisation are counted; index arithmetic and copies are not.
//
// What an op keeps for backward follows PyTorch's autograd
// (tools/autograd/derivatives.yaml): an op keeps what its backward formula
// reads. A kept tensor that is some node's output is listed in Node.Keep,
// so when a conv keeps the output of the relu before it, which the relu
// also keeps, the graph counts it once. Per-channel statistics of
// batchnorm are per batch, not per sample, and are left out.

import (
	"fmt"
	"slices"
	"strings"

	"pipe/lang"
)

// Op describes a primitive op of a Graph. Doc, Shape and Saved document
// what it computes, its shape rule and what it keeps for backward; the
// rules themselves are the builder method its layers call, which sets a
// node's Params, FLOPs, Keep, Private, Buffers and SavedAux.
type Op struct {
	Name  string
	Doc   string
	Shape string
	Saved string
	// Layers are the layer calls that build this op (conv and conv3d
	// build conv); none for an op only other layers or families build
	// (input, tokens).
	Layers []*Layer
	// Tensors declares the named tensors of a node of this op, in the
	// order of its PyTorch module's state_dict; nil when it holds none.
	Tensors func(n *Node) []TensorSpec
}

// Layer is one layer call of the language: its schema (what the checker
// and the completion read), the other names it answers to, and how a
// call of it adds nodes to a graph.
type Layer struct {
	Spec    *lang.LayerSpec
	Aliases []string
	// build adds the call's nodes on the tensor x and returns the last
	// one's ID, or -1 after reporting why it cannot.
	build func(b *builder, c *lang.LayerCall, x int) int
}

// TensorSpec declares one named tensor of a node: its name (a PyTorch
// state_dict key such as "conv1.weight"), its shape, whether it is a
// buffer that no gradient reaches, and how its initial values are drawn.
type TensorSpec struct {
	Name   string
	Shape  []int64
	Buffer bool
	Init   Init
}

// InitKind is how a tensor starts. Package weights draws the values, each
// tensor from its own stream keyed by the seed and the tensor's name.
type InitKind uint8

const (
	// InitFill sets every value to Value.
	InitFill InitKind = iota
	// InitUniform draws from U(-Value, Value).
	InitUniform
	// InitKaiming is PyTorch's default for Linear and Conv weights and
	// biases: U(±1/√Fan).
	InitKaiming
	// InitNormal draws from N(0, Value²).
	InitNormal
	// InitSignSketch is Panther's scaled_sign_sketch: ±1/√Rank.
	InitSignSketch
	// InitFavor is FAVOR+'s orthogonal random features, of the tensor's
	// shape [M, d] (Panther's create_projection_matrix).
	InitFavor
	// InitSketchS1 and InitSketchS2 are SKLinear's S1_i = W·U1_iᵀ and
	// S2_i = U2_iᵀ·W, and InitSketchConv SKConv2d's S_i = K·U_iᵀ: sketches
	// of a dense weight by the layer's sign sketches (Init.Sketch).
	InitSketchS1
	InitSketchS2
	InitSketchConv
)

// Init is how a tensor's initial values are drawn; each kind reads the
// fields its doc names.
type Init struct {
	Kind   InitKind
	Value  float64
	Fan    int64
	Rank   int64
	Sketch Sketch
}

// Sketch is the sketched layer an InitSketch kind draws from: its node's
// name, whose dense weight ("<Layer>.W_init") and sign sketches
// ("<Layer>.U1s", "<Layer>.U2s") are drawn from their own streams, and
// its sizes (Kernel for SKConv2d).
type Sketch struct {
	Layer                        string
	In, Out, Terms, Rank, Kernel int64
}

// Initialiser shorthands for the descriptors.
func fill(v float64) Init     { return Init{Kind: InitFill, Value: v} }
func uniform(b float64) Init  { return Init{Kind: InitUniform, Value: b} }
func kaiming(fan int64) Init  { return Init{Kind: InitKaiming, Fan: fan} }
func normal(std float64) Init { return Init{Kind: InitNormal, Value: std} }
func signSketch(k int64) Init { return Init{Kind: InitSignSketch, Rank: k} }
func param(name string, shape []int64, init Init) TensorSpec {
	return TensorSpec{Name: name, Shape: shape, Init: init}
}
func buffer(name string, shape []int64, init Init) TensorSpec {
	return TensorSpec{Name: name, Shape: shape, Buffer: true, Init: init}
}

// withBias is a weight and, with bias, a bias, both from PyTorch's default
// for Linear and Conv: U(±1/√fan_in).
func withBias(name string, shape []int64, out, fan int64, bias bool) []TensorSpec {
	ts := []TensorSpec{param(name+".weight", shape, kaiming(fan))}
	if bias {
		ts = append(ts, param(name+".bias", []int64{out}, kaiming(fan)))
	}
	return ts
}

// affine is a norm's scale (ones) and shift (zeros) over c channels.
func affine(name string, c int64) []TensorSpec {
	return []TensorSpec{param(name+".weight", []int64{c}, fill(1)), param(name+".bias", []int64{c}, fill(0))}
}

// inShape is a node's first input shape; first and last are a shape's
// first axis (the channels of an image or a volume) and its last (the
// features that dense, layernorm and the token ops map), 0 when empty.
func inShape(n *Node) []int64 {
	if len(n.In) == 0 {
		return nil
	}
	return n.In[0]
}

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

// opTable is every op, family by family, in the order the docs list them.
func opTable() []*Op {
	return slices.Concat(linearOps(), normOps(), elementwiseOps(), blockOps(), spatialOps(), joinOps(), pantherOps(), tokenOps())
}

var (
	opList  []*Op
	opNamed map[string]*Op
	// layerOps maps each layer name and alias to its layer.
	layerOps map[string]*Layer
)

// init builds the registry here rather than in a variable's initialiser:
// the layers' build functions reach the registry again (a volume's hint),
// which Go would report as an initialisation cycle.
func init() {
	opList = opTable()
	opNamed = map[string]*Op{}
	layerOps = map[string]*Layer{}
	for _, op := range opList {
		if opNamed[op.Name] != nil {
			panic("stdlib: op " + op.Name + " declared twice")
		}
		opNamed[op.Name] = op
		for _, l := range op.Layers {
			for _, n := range append([]string{l.Spec.Name}, l.Aliases...) {
				if layerOps[n] != nil {
					panic("stdlib: layer " + n + " declared twice")
				}
				layerOps[n] = l
			}
		}
	}
	registry = newRegistry()
}

// addLayers registers every op's layers and their aliases, in opTable's
// order, ahead of the families.
func (r *Registry) addLayers() {
	for _, op := range opList {
		for _, l := range op.Layers {
			r.layers = append(r.layers, l.Spec)
			r.byName[l.Spec.Name] = l.Spec
			for _, a := range l.Aliases {
				r.byName[a] = l.Spec
			}
		}
	}
}

// Ops lists the primitive ops a Graph is made of, with their rules.
func Ops() []*Op { return opList }

// LookupOp returns the descriptor of the op called name, or nil.
func LookupOp(name string) *Op { return opNamed[name] }

// Tensors declares the named tensors of node n from its op's descriptor;
// ok is false when the op is unknown.
func Tensors(n *Node) (ts []TensorSpec, ok bool) {
	op := opNamed[n.Op]
	if op == nil {
		return nil, false
	}
	if op.Tensors == nil {
		return nil, true
	}
	return op.Tensors(n), true
}

// shapeStr renders a shape as "[64, 7, 7]".
func shapeStr(s []int64) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func cloneShape(s []int64) []int64 { return append([]int64(nil), s...) }

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
