package onnx

import (
	"fmt"
	"math"
	"strings"

	"pipe/engine"
	"pipe/stdlib"
)

// exporter lowers a graph into ONNX nodes and initializers.
type exporter struct {
	g      *stdlib.Graph
	opset  int
	nodes  []msg
	inits  []msg
	used   map[string]bool // initializer names written
	params map[string]*engine.Tensor
	// vals[i] is the ONNX value holding node i's output.
	vals []string
	// folds maps a conv to the batchnorm folded into it.
	folds  map[string]string
	folded []string
	// foldedBN marks the batchnorms already folded away.
	foldedBN map[string]bool
}

// node appends an ONNX node with one output.
func (e *exporter) node(name, op string, in []string, out []string, attrs ...attr) {
	e.nodes = append(e.nodes, nodeProto(name, op, in, out, attrs))
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
		e.inits = append(e.inits, floatTensor(full, t.Shape, t.Data))
	}
	return full, nil
}

// floats writes a constant float initializer.
func (e *exporter) floats(name string, dims []int64, v []float32) string {
	if !e.used[name] {
		e.used[name] = true
		e.inits = append(e.inits, floatTensor(name, dims, v))
	}
	return name
}

// ints writes a constant int64 initializer (dims nil: a scalar).
func (e *exporter) ints(name string, dims []int64, v ...int64) string {
	if !e.used[name] {
		e.used[name] = true
		e.inits = append(e.inits, int64Tensor(name, dims, v))
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

func (e *exporter) lowerNode(n *stdlib.Node) (string, error) {
	a := n.Args
	out := n.Name
	switch n.Op {
	case "input":
		return n.Name, nil
	case "conv":
		return e.conv(n)
	case "convtranspose":
		return e.convTranspose(n)
	case "dense":
		return e.dense(n)
	case "lowrank_dense":
		return e.lowrankDense(n)
	case "sketched_dense":
		return e.sketchedDense(n)
	case "sketched_conv":
		return e.sketchedConv(n)
	case "batchnorm":
		if e.foldedBN[n.Name] {
			return e.in(n, 0), nil
		}
		return e.batchnorm(n)
	case "layernorm":
		w, err := e.param(n, "weight")
		if err != nil {
			return "", err
		}
		b, _ := e.param(n, "bias")
		return e.op(out, "LayerNormalization", []string{e.in(n, 0), w, b}, intAttr("axis", -1), floatAttr("epsilon", float32(epsOf(a.Eps)))), nil
	case "instancenorm":
		c := n.Out[0]
		var w, b string
		if a.Affine {
			var err error
			if w, err = e.param(n, "weight"); err != nil {
				return "", err
			}
			b, _ = e.param(n, "bias")
		} else {
			w = e.floats(n.Name+".ones", []int64{c}, fillF(int(c), 1))
			b = e.floats(n.Name+".zeros", []int64{c}, fillF(int(c), 0))
		}
		return e.op(out, "InstanceNormalization", []string{e.in(n, 0), w, b}, floatAttr("epsilon", float32(epsOf(a.Eps)))), nil
	case "groupnorm":
		return e.groupnorm(n)
	case "relu":
		return e.op(out, "Relu", []string{e.in(n, 0)}), nil
	case "sigmoid":
		return e.op(out, "Sigmoid", []string{e.in(n, 0)}), nil
	case "tanh":
		return e.op(out, "Tanh", []string{e.in(n, 0)}), nil
	case "leakyrelu":
		return e.op(out, "LeakyRelu", []string{e.in(n, 0)}, floatAttr("alpha", float32(a.Slope))), nil
	case "gelu":
		// x·Φ(x) = 0.5·x·(1 + erf(x/√2)): Gelu is an operator only from
		// opset 20.
		x := e.in(n, 0)
		d := e.op(out+"/div", "Div", []string{x, e.scalar(float32(math.Sqrt2))})
		f := e.op(out+"/erf", "Erf", []string{d})
		p := e.op(out+"/add", "Add", []string{f, e.scalar(1)})
		m := e.op(out+"/mul", "Mul", []string{x, p})
		return e.op(out, "Mul", []string{m, e.scalar(0.5)}), nil
	case "softmax":
		return e.op(out, "Softmax", []string{e.in(n, 0)}, intAttr("axis", 1)), nil
	case "pixelshuffle":
		return e.op(out, "DepthToSpace", []string{e.in(n, 0)}, intAttr("blocksize", a.Scale), stringAttr("mode", "CRD")), nil
	case "maxpool", "avgpool":
		sp := len(n.In[0]) - 1
		s := a.Stride
		if s == 0 {
			s = a.Kernel
		}
		attrs := []attr{intsAttr("kernel_shape", rep(a.Kernel, sp)...), intsAttr("strides", rep(s, sp)...), intsAttr("pads", rep(a.Padding, 2*sp)...)}
		if n.Op == "avgpool" {
			// PyTorch's count_include_pad, which pipe follows.
			return e.op(out, "AveragePool", []string{e.in(n, 0)}, append(attrs, intAttr("count_include_pad", 1))...), nil
		}
		return e.op(out, "MaxPool", []string{e.in(n, 0)}, attrs...), nil
	case "gap":
		sp := len(n.In[0]) - 1
		axes := make([]int64, sp)
		for i := range axes {
			axes[i] = int64(2 + i)
		}
		return e.reduce(out, "ReduceMean", e.in(n, 0), a.Keepdims, axes...), nil
	case "dropout":
		return e.in(n, 0), nil
	case "flatten":
		return e.op(out, "Flatten", []string{e.in(n, 0)}, intAttr("axis", 1)), nil
	case "upsample":
		return e.upsample(n)
	case "concat":
		ins := make([]string, len(n.Inputs))
		for i := range ins {
			ins[i] = e.in(n, i)
		}
		return e.op(out, "Concat", ins, intAttr("axis", 1)), nil
	case "add":
		x := e.in(n, 0)
		if s := a.FlowScale; s > 0 && s != 1 {
			x = e.op(out+"/scale", "Mul", []string{x, e.scalar(float32(s))})
		}
		for i := 1; i < len(n.Inputs); i++ {
			name := out
			if i < len(n.Inputs)-1 {
				name = fmt.Sprintf("%s/sum%d", out, i)
			}
			x = e.op(name, "Add", []string{x, e.in(n, i)})
		}
		return x, nil
	case "tokens":
		in := n.In[0]
		r := e.op(out+"/reshape", "Reshape", []string{e.in(n, 0), e.shapeConst(0, in[0], in[1]*in[2])})
		return e.op(out, "Transpose", []string{r}, intsAttr("perm", 0, 2, 1)), nil
	case "class_token":
		w, err := e.param(n, "weight")
		if err != nil {
			return "", err
		}
		d := n.In[0][1]
		batch := e.batchDim(n.Inputs[0], out)
		shape := e.op(out+"/shape", "Concat", []string{batch, e.shapeConst(1, d)}, intAttr("axis", 0))
		tok := e.op(out+"/expand", "Expand", []string{w, shape})
		return e.op(out, "Concat", []string{tok, e.in(n, 0)}, intAttr("axis", 1)), nil
	case "pos_embed":
		w, err := e.param(n, "weight")
		if err != nil {
			return "", err
		}
		return e.op(out, "Add", []string{e.in(n, 0), w}), nil
	case "select_token":
		return e.op(out, "Gather", []string{e.in(n, 0), e.ints("const.int.0", nil, 0)}, intAttr("axis", 1)), nil
	case "mean_tokens":
		return e.reduce(out, "ReduceMean", e.in(n, 0), false, 1), nil
	case "attention":
		return e.attention(n)
	case "random_attention":
		return e.randomAttention(n)
	}
	return "", unsupported(n, "pipe has no ONNX form for op %s", n.Op)
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
