package onnx

import (
	"fmt"
	"math"

	"pipe/stdlib"
)

// This file holds the lowerings short enough to need no helper: the input,
// the activations, the norms that map to one ONNX operator, pooling, the
// shape ops, the joins and the token ops. layers.go holds the longer ones.

func init() {
	for op, f := range map[string]lowering{
		"input":        func(_ *exporter, n *stdlib.Node) (string, error) { return n.Name, nil },
		"layernorm":    (*exporter).layernorm,
		"instancenorm": (*exporter).instancenorm,
		"relu":         unary("Relu"),
		"sigmoid":      unary("Sigmoid"),
		"tanh":         unary("Tanh"),
		"leakyrelu":    (*exporter).leakyrelu,
		"gelu":         (*exporter).gelu,
		"silu":         (*exporter).silu,
		"hardswish":    unary("HardSwish"),
		"softmax":      (*exporter).softmax,
		"pixelshuffle": (*exporter).pixelshuffle,
		"maxpool":      (*exporter).pool,
		"avgpool":      (*exporter).pool,
		"gap":          (*exporter).gap,
		"dropout":      func(e *exporter, n *stdlib.Node) (string, error) { return e.in(n, 0), nil },
		"drop_path":    func(e *exporter, n *stdlib.Node) (string, error) { return e.in(n, 0), nil },
		"flatten":      (*exporter).flatten,
		"concat":       (*exporter).concat,
		"add":          (*exporter).add,
		"tokens":       (*exporter).tokens,
		"class_token":  (*exporter).classToken,
		"pos_embed":    (*exporter).posEmbed,
		"select_token": (*exporter).selectToken,
		"mean_tokens":  (*exporter).meanTokens,
	} {
		registerLowering(op, f)
	}
}

// unary lowers an op to the ONNX operator of that name on its one input.
func unary(op string) lowering {
	return func(e *exporter, n *stdlib.Node) (string, error) {
		return e.op(n.Name, op, []string{e.in(n, 0)}), nil
	}
}

func (e *exporter) layernorm(n *stdlib.Node) (string, error) {
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	b, _ := e.param(n, "bias")
	return e.op(n.Name, "LayerNormalization", []string{e.in(n, 0), w, b}, intAttr("axis", -1), floatAttr("epsilon", float32(epsOf(n.Args.Eps)))), nil
}

func (e *exporter) instancenorm(n *stdlib.Node) (string, error) {
	a := n.Args
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
	return e.op(n.Name, "InstanceNormalization", []string{e.in(n, 0), w, b}, floatAttr("epsilon", float32(epsOf(a.Eps)))), nil
}

func (e *exporter) leakyrelu(n *stdlib.Node) (string, error) {
	return e.op(n.Name, "LeakyRelu", []string{e.in(n, 0)}, floatAttr("alpha", float32(n.Args.Slope))), nil
}

// gelu is x·Φ(x) = 0.5·x·(1 + erf(x/√2)): Gelu is an operator only from
// opset 20.
func (e *exporter) gelu(n *stdlib.Node) (string, error) {
	out, x := n.Name, e.in(n, 0)
	d := e.op(out+"/div", "Div", []string{x, e.scalar(float32(math.Sqrt2))})
	f := e.op(out+"/erf", "Erf", []string{d})
	p := e.op(out+"/add", "Add", []string{f, e.scalar(1)})
	m := e.op(out+"/mul", "Mul", []string{x, p})
	return e.op(out, "Mul", []string{m, e.scalar(0.5)}), nil
}

// silu is x·Sigmoid(x): ONNX has no Swish operator before opset 24.
func (e *exporter) silu(n *stdlib.Node) (string, error) {
	x := e.in(n, 0)
	return e.op(n.Name, "Mul", []string{x, e.op(n.Name+"/sigmoid", "Sigmoid", []string{x})}), nil
}

func (e *exporter) softmax(n *stdlib.Node) (string, error) {
	return e.op(n.Name, "Softmax", []string{e.in(n, 0)}, intAttr("axis", 1)), nil
}

func (e *exporter) pixelshuffle(n *stdlib.Node) (string, error) {
	return e.op(n.Name, "DepthToSpace", []string{e.in(n, 0)}, intAttr("blocksize", n.Args.Scale), stringAttr("mode", "CRD")), nil
}

// pool is maxpool's MaxPool or avgpool's AveragePool, over an image or a
// volume.
func (e *exporter) pool(n *stdlib.Node) (string, error) {
	a, out := n.Args, n.Name
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
}

func (e *exporter) gap(n *stdlib.Node) (string, error) {
	sp := len(n.In[0]) - 1
	axes := make([]int64, sp)
	for i := range axes {
		axes[i] = int64(2 + i)
	}
	return e.reduce(n.Name, "ReduceMean", e.in(n, 0), n.Args.Keepdims, axes...), nil
}

func (e *exporter) flatten(n *stdlib.Node) (string, error) {
	return e.op(n.Name, "Flatten", []string{e.in(n, 0)}, intAttr("axis", 1)), nil
}

func (e *exporter) concat(n *stdlib.Node) (string, error) {
	ins := make([]string, len(n.Inputs))
	for i := range ins {
		ins[i] = e.in(n, i)
	}
	return e.op(n.Name, "Concat", ins, intAttr("axis", 1)), nil
}

// add sums its inputs left to right, the first scaled by FlowScale.
func (e *exporter) add(n *stdlib.Node) (string, error) {
	out, x := n.Name, e.in(n, 0)
	if s := n.Args.FlowScale; s > 0 && s != 1 {
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
}

// tokens is [N, D, H, W] to [N, H·W, D].
func (e *exporter) tokens(n *stdlib.Node) (string, error) {
	in, out := n.In[0], n.Name
	r := e.op(out+"/reshape", "Reshape", []string{e.in(n, 0), e.shapeConst(0, in[0], in[1]*in[2])})
	return e.op(out, "Transpose", []string{r}, intsAttr("perm", 0, 2, 1)), nil
}

func (e *exporter) classToken(n *stdlib.Node) (string, error) {
	out := n.Name
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	d := n.In[0][1]
	batch := e.batchDim(n.Inputs[0], out)
	shape := e.op(out+"/shape", "Concat", []string{batch, e.shapeConst(1, d)}, intAttr("axis", 0))
	tok := e.op(out+"/expand", "Expand", []string{w, shape})
	return e.op(out, "Concat", []string{tok, e.in(n, 0)}, intAttr("axis", 1)), nil
}

func (e *exporter) posEmbed(n *stdlib.Node) (string, error) {
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	return e.op(n.Name, "Add", []string{e.in(n, 0), w}), nil
}

func (e *exporter) selectToken(n *stdlib.Node) (string, error) {
	return e.op(n.Name, "Gather", []string{e.in(n, 0), e.ints("const.int.0", nil, 0)}, intAttr("axis", 1)), nil
}

func (e *exporter) meanTokens(n *stdlib.Node) (string, error) {
	return e.reduce(n.Name, "ReduceMean", e.in(n, 0), false, 1), nil
}
