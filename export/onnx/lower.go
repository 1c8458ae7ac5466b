package onnx

import (
	"fmt"
	"strings"

	"pipe/engine"
	"pipe/stdlib"
)

// exporter lowers a graph into ONNX nodes and initializers.
type exporter struct {
	g     *stdlib.Graph
	opset int
	nodes []msg
	inits []initializer
	used  map[string]bool // initializer names written
	// read are the values the nodes read: an initializer no node reads
	// (a conv's raw weights once a batchnorm is folded into new ones) is
	// left out of the file.
	read   map[string]bool
	params map[string]*engine.Tensor
	// vals[i] is the ONNX value holding node i's output.
	vals []string
	// folds maps a conv to the batchnorm folded into it.
	folds  map[string]string
	folded []string
	// foldedBN marks the batchnorms already folded away.
	foldedBN map[string]bool
}

// initializer is a constant tensor and its value's name.
type initializer struct {
	name string
	m    msg
}

// node appends an ONNX node with one output.
func (e *exporter) node(name, op string, in []string, out []string, attrs ...attr) {
	if e.read == nil {
		e.read = map[string]bool{}
	}
	for _, v := range in {
		e.read[v] = true
	}
	e.nodes = append(e.nodes, nodeProto(name, op, in, out, attrs))
}

// readInits are the initializers some node reads, in the order written.
func (e *exporter) readInits() []msg {
	var out []msg
	for _, in := range e.inits {
		if e.read[in.name] {
			out = append(out, in.m)
		}
	}
	return out
}

// op appends a node named after its output value and returns that value.
func (e *exporter) op(out, op string, in []string, attrs ...attr) string {
	e.node(out, op, in, []string{out}, attrs...)
	return out
}

// param returns the initializer of a checkpoint tensor, writing it once.
func (e *exporter) param(n *stdlib.Node, name string) (string, error) {
	full := n.Name + "." + name
	t := e.params[full]
	if t == nil {
		return "", fmt.Errorf("%s: the checkpoint has no tensor %s", n.Name, full)
	}
	if !e.used[full] {
		e.used[full] = true
		e.inits = append(e.inits, initializer{full, floatTensor(full, t.Shape, t.Data)})
	}
	return full, nil
}

// floats writes a constant float initializer.
func (e *exporter) floats(name string, dims []int64, v []float32) string {
	if !e.used[name] {
		e.used[name] = true
		e.inits = append(e.inits, initializer{name, floatTensor(name, dims, v)})
	}
	return name
}

// ints writes a constant int64 initializer (dims nil: a scalar).
func (e *exporter) ints(name string, dims []int64, v ...int64) string {
	if !e.used[name] {
		e.used[name] = true
		e.inits = append(e.inits, initializer{name, int64Tensor(name, dims, v)})
	}
	return name
}

// shapeConst is an int64 vector constant named after its values.
func (e *exporter) shapeConst(v ...int64) string {
	parts := make([]string, len(v))
	for i, d := range v {
		parts[i] = fmt.Sprint(d)
	}
	return e.ints("const.ints."+strings.Join(parts, "_"), []int64{int64(len(v))}, v...)
}

// scalar is a float scalar constant.
func (e *exporter) scalar(v float32) string {
	return e.floats(fmt.Sprintf("const.float.%g", v), nil, []float32{v})
}

// reduce appends a Reduce* node; ReduceMean and ReduceMax take their axes
// as an attribute before opset 18 and as an input from it, ReduceSum as
// an input from opset 13.
func (e *exporter) reduce(out, op, x string, keep bool, axes ...int64) string {
	k := int64(0)
	if keep {
		k = 1
	}
	if op == "ReduceSum" || e.opset >= 18 {
		return e.op(out, op, []string{x, e.shapeConst(axes...)}, intAttr("keepdims", k))
	}
	return e.op(out, op, []string{x}, intsAttr("axes", axes...), intAttr("keepdims", k))
}

// transposed is an initializer's transpose (a Transpose node, which
// runtimes fold), so the checkpoint's tensor keeps its name and layout.
func (e *exporter) transposed(w string) string {
	out := w + ".T"
	if !e.used[out] {
		e.used[out] = true
		e.op(out, "Transpose", []string{w}, intsAttr("perm", 1, 0))
	}
	return out
}

func unsupported(n *stdlib.Node, why string, args ...any) error {
	where := ""
	if n.Range.File != "" || n.Range.Start.Line > 0 {
		where = fmt.Sprintf(" (%s:%d)", n.Range.File, n.Range.Start.Line)
	}
	return fmt.Errorf("layer %s%s, node %s (%s): %s: %w", n.Layer, where, n.Name, n.Op, fmt.Sprintf(why, args...), ErrUnsupported)
}

// live marks the nodes the output depends on.
func live(g *stdlib.Graph) []bool {
	l := make([]bool, len(g.Nodes))
	l[g.Output] = true
	for i := g.Output; i >= 0; i-- {
		if l[i] {
			for _, j := range g.Nodes[i].Inputs {
				l[j] = true
			}
		}
	}
	return l
}

func (e *exporter) lower() error {
	e.foldedBN = make(map[string]bool)
	l := live(e.g)
	for _, n := range e.g.Nodes {
		if !l[n.ID] {
			continue
		}
		v, err := e.lowerNode(n)
		if err != nil {
			return err
		}
		e.vals[n.ID] = v
	}
	return nil
}

// in returns the value of a node's k-th input.
func (e *exporter) in(n *stdlib.Node, k int) string { return e.vals[n.Inputs[k]] }

// lowering appends the ONNX nodes of one graph node and returns the
// value that holds its output.
type lowering func(e *exporter, n *stdlib.Node) (string, error)

// lowerings maps an op's name to its lowering. Each lowering's file
// registers its ops (registerLowering, in its init), so that an op's
// ONNX form and its dispatch sit in one place.
var lowerings = map[string]lowering{}

// registerLowering adds op's lowering; it runs in the package's
// initialisation, where a second registration of op is a bug.
func registerLowering(op string, f lowering) {
	if _, dup := lowerings[op]; dup {
		panic("onnx: op " + op + " registered twice")
	}
	lowerings[op] = f
}

// lowerNode lowers n by its op's registered lowering.
func (e *exporter) lowerNode(n *stdlib.Node) (string, error) {
	f := lowerings[n.Op]
	if f == nil {
		return "", unsupported(n, "pipe has no ONNX form for op %s", n.Op)
	}
	return f(e, n)
}

// batchDim is the dynamic batch extent of node id's value, as a 1-element
// int64 tensor.
func (e *exporter) batchDim(id int, prefix string) string {
	s := e.op(prefix+"/input_shape", "Shape", []string{e.vals[id]})
	return e.op(prefix+"/batch", "Slice", []string{s, e.shapeConst(0), e.shapeConst(1)})
}

func epsOf(v float64) float64 {
	if v <= 0 {
		return 1e-5
	}
	return v
}

func rep(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func fillF(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}
