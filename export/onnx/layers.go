package onnx

import (
	"fmt"
	"math"

	"pipe/engine"
	"pipe/stdlib"
)

// bnAffine is evaluation mode's per-channel scale and shift of a
// batchnorm, computed in float64 as pipe's kernels compute it.
func (e *exporter) bnAffine(bn *stdlib.Node) (scale, shift []float64, err error) {
	get := func(s string) (*engine.Tensor, error) {
		t := e.params[bn.Name+"."+s]
		if t == nil {
			return nil, fmt.Errorf("%s: the checkpoint has no tensor %s.%s", bn.Name, bn.Name, s)
		}
		return t, nil
	}
	var ts [4]*engine.Tensor
	for i, s := range []string{"weight", "bias", "running_mean", "running_var"} {
		if ts[i], err = get(s); err != nil {
			return nil, nil, err
		}
	}
	c := len(ts[0].Data)
	eps := epsOf(bn.Args.Eps)
	scale, shift = make([]float64, c), make([]float64, c)
	for i := range c {
		scale[i] = float64(ts[0].Data[i]) / math.Sqrt(float64(ts[3].Data[i])+eps)
		shift[i] = float64(ts[1].Data[i]) - float64(ts[2].Data[i])*scale[i]
	}
	return scale, shift, nil
}

// foldTarget returns the batchnorm node the plan folds into conv n, or
// nil: the plan's fold names it, and it is n's only reader.
func (e *exporter) foldTarget(n *stdlib.Node) *stdlib.Node {
	name, ok := e.folds[n.Name]
	if !ok {
		return nil
	}
	var bn *stdlib.Node
	readers := 0
	for _, m := range e.g.Nodes {
		for _, j := range m.Inputs {
			if j == n.ID {
				readers++
				if m.Name == name && m.Op == "batchnorm" {
					bn = m
				}
			}
		}
	}
	if readers != 1 || n.ID == e.g.Output {
		return nil
	}
	return bn
}

func (e *exporter) conv(n *stdlib.Node) (string, error) {
	a := n.Args
	sp := len(n.In[0]) - 1
	attrs := []attr{
		intsAttr("kernel_shape", rep(a.Kernel, sp)...),
		intsAttr("strides", rep(max(a.Stride, 1), sp)...),
		intsAttr("pads", rep(a.Padding, 2*sp)...),
		intsAttr("dilations", rep(max(a.Dilation, 1), sp)...),
		intAttr("group", max(a.Groups, 1)),
	}
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	var b string
	if a.Bias {
		b, _ = e.param(n, "bias")
	}
	if bn := e.foldTarget(n); bn != nil {
		scale, shift, err := e.bnAffine(bn)
		if err != nil {
			return "", err
		}
		wt := e.params[w]
		co := int(n.Out[0])
		if len(scale) != co || len(wt.Data)%co != 0 {
			return "", unsupported(n, "its batchnorm %s has %d channels for %d outputs", bn.Name, len(scale), co)
		}
		per := len(wt.Data) / co
		wf := make([]float32, len(wt.Data))
		bf := make([]float32, co)
		for c := range co {
			for i := c * per; i < (c+1)*per; i++ {
				wf[i] = float32(float64(wt.Data[i]) * scale[c])
			}
			var bias float64
			if a.Bias {
				bias = float64(e.params[b].Data[c])
			}
			bf[c] = float32(bias*scale[c] + shift[c])
		}
		w = e.floats(n.Name+".weight+"+bn.Name, wt.Shape, wf)
		b = e.floats(n.Name+".bias+"+bn.Name, []int64{int64(co)}, bf)
		e.foldedBN[bn.Name] = true
		e.folded = append(e.folded, bn.Name)
	}
	ins := []string{e.in(n, 0), w}
	if b != "" {
		ins = append(ins, b)
	}
	return e.op(n.Name, "Conv", ins, attrs...), nil
}

func (e *exporter) convTranspose(n *stdlib.Node) (string, error) {
	a := n.Args
	sp := len(n.In[0]) - 1
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	ins := []string{e.in(n, 0), w}
	if a.Bias {
		b, _ := e.param(n, "bias")
		ins = append(ins, b)
	}
	return e.op(n.Name, "ConvTranspose", ins,
		intsAttr("kernel_shape", rep(a.Kernel, sp)...),
		intsAttr("strides", rep(max(a.Stride, 1), sp)...),
		intsAttr("pads", rep(a.Padding, 2*sp)...),
		intsAttr("dilations", rep(max(a.Dilation, 1), sp)...),
		intAttr("group", max(a.Groups, 1))), nil
}

func init() {
	registerLowering("conv", (*exporter).conv)
	registerLowering("convtranspose", (*exporter).convTranspose)
	registerLowering("batchnorm", (*exporter).batchnorm)
	registerLowering("dense", (*exporter).dense)
	registerLowering("lowrank_dense", (*exporter).lowrankDense)
	registerLowering("sketched_dense", (*exporter).sketchedDense)
	registerLowering("sketched_conv", (*exporter).sketchedConv)
	registerLowering("upsample", (*exporter).upsample)
	registerLowering("attention", (*exporter).attention)
	registerLowering("random_attention", (*exporter).randomAttention)
	registerLowering("groupnorm", (*exporter).groupnorm)
	registerLowering("se", (*exporter).se)
}

// batchnorm is BatchNormalization, or its input where the batchnorm is
// folded into the conv before it.
func (e *exporter) batchnorm(n *stdlib.Node) (string, error) {
	if e.foldedBN[n.Name] {
		return e.in(n, 0), nil
	}
	var ins []string
	for _, s := range []string{"weight", "bias", "running_mean", "running_var"} {
		p, err := e.param(n, s)
		if err != nil {
			return "", err
		}
		ins = append(ins, p)
	}
	return e.op(n.Name, "BatchNormalization", append([]string{e.in(n, 0)}, ins...), floatAttr("epsilon", float32(epsOf(n.Args.Eps)))), nil
}

// dense is Gemm on vectors, MatMul and Add on tokens.
func (e *exporter) dense(n *stdlib.Node) (string, error) {
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	var b string
	if n.Args.Bias {
		b, _ = e.param(n, "bias")
	}
	x := e.in(n, 0)
	if len(n.In[0]) == 1 {
		ins := []string{x, w}
		if b != "" {
			ins = append(ins, b)
		}
		return e.op(n.Name, "Gemm", ins, intAttr("transB", 1)), nil
	}
	if b == "" {
		return e.op(n.Name, "MatMul", []string{x, e.transposed(w)}), nil
	}
	y := e.op(n.Name+"/matmul", "MatMul", []string{x, e.transposed(w)})
	return e.op(n.Name, "Add", []string{y, b}), nil
}

// lowrankDense is Σ_i (x·U_i)·V_i + b: x [N, F] broadcast against U
// [Terms, F, R] gives [Terms, N, R], then [Terms, N, Units], summed over
// the terms.
func (e *exporter) lowrankDense(n *stdlib.Node) (string, error) {
	if len(n.In[0]) != 1 {
		return "", unsupported(n, "runs on vectors only")
	}
	u, err := e.param(n, "u")
	if err != nil {
		return "", err
	}
	v, err := e.param(n, "v")
	if err != nil {
		return "", err
	}
	t := e.op(n.Name+"/xu", "MatMul", []string{e.in(n, 0), u})
	t = e.op(n.Name+"/xuv", "MatMul", []string{t, v})
	name := n.Name
	if n.Args.Bias {
		name = n.Name + "/sum"
	}
	y := e.reduce(name, "ReduceSum", t, false, 0)
	if n.Args.Bias {
		b, _ := e.param(n, "bias")
		y = e.op(n.Name, "Add", []string{y, b})
	}
	return y, nil
}

// sketchedDense is Panther's SKLinear: c·Σ_i (x·S1_i·U1_i + x·U2_i·S2_i)
// + b with c = 1/(2L), each product broadcast over the L terms as
// lowrank_dense's.
func (e *exporter) sketchedDense(n *stdlib.Node) (string, error) {
	if len(n.In[0]) != 1 {
		return "", unsupported(n, "runs on vectors only")
	}
	var p [4]string
	for i, s := range []string{"S1s", "U1s", "U2s", "S2s"} {
		var err error
		if p[i], err = e.param(n, s); err != nil {
			return "", err
		}
	}
	x := e.in(n, 0)
	t1 := e.op(n.Name+"/xS1", "MatMul", []string{x, p[0]})
	t1 = e.op(n.Name+"/xS1U1", "MatMul", []string{t1, p[1]})
	t2 := e.op(n.Name+"/xU2", "MatMul", []string{x, p[2]})
	t2 = e.op(n.Name+"/xU2S2", "MatMul", []string{t2, p[3]})
	s := e.op(n.Name+"/terms", "Add", []string{t1, t2})
	s = e.reduce(n.Name+"/sum", "ReduceSum", s, false, 0)
	name := n.Name
	if n.Args.Bias {
		name = n.Name + "/scaled"
	}
	y := e.op(name, "Mul", []string{s, e.scalar(float32(1 / (2 * float64(n.Args.Terms))))})
	if n.Args.Bias {
		b, _ := e.param(n, "bias")
		y = e.op(n.Name, "Add", []string{y, b})
	}
	return y, nil
}

// sketchedConv is Panther's SKConv2d: c·Σ_i U_iᵀ·(S_i ⋆ x) + b: a conv
// with the sketches S ([2L·k, C, K, K]), then U ([2L, k, out] read as
// [2L·k, out]) as a 1×1 conv, scaled by c = 1/(2L), then the bias.
func (e *exporter) sketchedConv(n *stdlib.Node) (string, error) {
	a := n.Args
	s, err := e.param(n, "S1s")
	if err != nil {
		return "", err
	}
	u, err := e.param(n, "U1s")
	if err != nil {
		return "", err
	}
	mid, out := 2*a.Terms*a.Rank, n.Out[0]
	t := e.op(n.Name+"/sketch", "Conv", []string{e.in(n, 0), s},
		intsAttr("kernel_shape", a.Kernel, a.Kernel), intsAttr("strides", max(a.Stride, 1), max(a.Stride, 1)),
		intsAttr("pads", a.Padding, a.Padding, a.Padding, a.Padding))
	u2 := e.op(u+"/matrix", "Reshape", []string{u, e.shapeConst(mid, out)})
	ut := e.op(u+"/transposed", "Transpose", []string{u2}, intsAttr("perm", 1, 0))
	uw := e.op(u+"/kernel", "Reshape", []string{ut, e.shapeConst(out, mid, 1, 1)})
	y := e.op(n.Name+"/project", "Conv", []string{t, uw}, intsAttr("kernel_shape", 1, 1))
	name := n.Name
	if a.Bias {
		name = n.Name + "/scaled"
	}
	y = e.op(name, "Mul", []string{y, e.scalar(float32(1 / (2 * float64(a.Terms))))})
	if a.Bias {
		b, _ := e.param(n, "bias")
		bb := e.op(b+"/channels", "Reshape", []string{b, e.shapeConst(out, 1, 1)})
		y = e.op(n.Name, "Add", []string{y, bb})
	}
	return y, nil
}

// upsample is Resize to the node's output extents with PyTorch's
// coordinate rules as pipe's kernels follow them: nearest picks
// floor(o·in/out) ("asymmetric", "floor"); bilinear and trilinear map
// half pixels ("pytorch_half_pixel", clamped at 0) or corners
// ("align_corners").
func (e *exporter) upsample(n *stdlib.Node) (string, error) {
	a := n.Args
	var attrs []attr
	switch a.Mode {
	case "", "nearest":
		attrs = []attr{stringAttr("mode", "nearest"), stringAttr("coordinate_transformation_mode", "asymmetric"), stringAttr("nearest_mode", "floor")}
	case "bilinear", "trilinear":
		ctm := "pytorch_half_pixel"
		if a.AlignCorners {
			ctm = "align_corners"
		}
		attrs = []attr{stringAttr("mode", "linear"), stringAttr("coordinate_transformation_mode", ctm)}
	default:
		return "", unsupported(n, "upsample mode %q has no ONNX Resize form here", a.Mode)
	}
	// sizes = [batch, C, out extents...]: the batch is dynamic.
	s := e.op(n.Name+"/input_shape", "Shape", []string{e.in(n, 0)})
	nc := e.op(n.Name+"/batch_channels", "Slice", []string{s, e.shapeConst(0), e.shapeConst(2)})
	sizes := e.op(n.Name+"/sizes", "Concat", []string{nc, e.shapeConst(n.Out[1:]...)}, intAttr("axis", 0))
	return e.op(n.Name, "Resize", []string{e.in(n, 0), "", "", sizes}, attrs...), nil
}

// heads reshapes [N, T, D] to [N, H, T, D/H] (perm 0,2,1,3) or, for keys,
// [N, H, D/H, T] (perm 0,2,3,1).
func (e *exporter) heads(x, name string, t, h, dh int64, keys bool) string {
	r := e.op(name+"/heads", "Reshape", []string{x, e.shapeConst(0, t, h, dh)})
	perm := []int64{0, 2, 1, 3}
	if keys {
		perm = []int64{0, 2, 3, 1}
	}
	return e.op(name+"/split_heads", "Transpose", []string{r}, intsAttr("perm", perm...))
}

// merge turns [N, H, T, dh] back into [N, T, D].
func (e *exporter) merge(o, name string, t, d int64) string {
	o = e.op(name+"/merge_heads", "Transpose", []string{o}, intsAttr("perm", 0, 2, 1, 3))
	return e.op(name+"/merged", "Reshape", []string{o, e.shapeConst(0, t, d)})
}

// affine is x·Wᵀ + b on tokens.
func (e *exporter) affine(x, w, b, name string) string {
	y := e.op(name+"/matmul", "MatMul", []string{x, e.transposed(w)})
	return e.op(name, "Add", []string{y, b})
}

// attention is nn.MultiheadAttention's self-attention: the packed
// projection, per head softmax(q·kᵀ/√(D/H))·v (causal: the scores above
// the diagonal at −∞), the output projection.
func (e *exporter) attention(n *stdlib.Node) (string, error) {
	t, d, h := n.In[0][0], n.In[0][1], n.Args.Heads
	if h < 1 || d%h != 0 {
		return "", unsupported(n, "heads %d do not divide the width %d", h, d)
	}
	dh := d / h
	var p [4]string
	for i, s := range []string{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"} {
		var err error
		if p[i], err = e.param(n, s); err != nil {
			return "", err
		}
	}
	nm := n.Name
	qkv := e.affine(e.in(n, 0), p[0], p[1], nm+"/qkv")
	outs := []string{nm + "/q", nm + "/k", nm + "/v"}
	e.node(nm+"/split", "Split", []string{qkv, e.shapeConst(d, d, d)}, outs, intAttr("axis", 2))
	q := e.heads(outs[0], nm+"/q", t, h, dh, false)
	k := e.heads(outs[1], nm+"/k", t, h, dh, true)
	v := e.heads(outs[2], nm+"/v", t, h, dh, false)
	s := e.op(nm+"/scores", "MatMul", []string{q, k})
	s = e.op(nm+"/scaled", "Div", []string{s, e.scalar(float32(math.Sqrt(float64(dh))))})
	if n.Args.Causal {
		mask := make([]float32, t*t)
		for i := range t {
			for j := i + 1; j < t; j++ {
				mask[i*t+j] = float32(math.Inf(-1))
			}
		}
		s = e.op(nm+"/masked", "Add", []string{s, e.floats(fmt.Sprintf("const.causal_mask.%d", t), []int64{t, t}, mask)})
	}
	pr := e.op(nm+"/probs", "Softmax", []string{s}, intAttr("axis", -1))
	o := e.op(nm+"/context", "MatMul", []string{pr, v})
	o = e.merge(o, nm, t, d)
	return e.affine(o, p[2], p[3], nm), nil
}

// randomAttention is Panther's RandMultiHeadAttention (Performer's FAVOR+)
// as pipe computes it (engine/native/randattn.go): q, k, v projections, per
// head the feature maps A = φ(q), B = φ(k) with the fixed features ω
// [M, d], o = A·(Bᵀ·v) / A·(Bᵀ·1), and the output projection. φ is
// softmax's r·(exp(c·u·ωᵀ − c²|u|²/2 − m) + ε), m the largest c·u·ωᵀ of
// the query's row or of all the head's keys, c = d^-¼, r = 1/√M; or
// relu's max(r·u·ωᵀ, 0) + ε.
func (e *exporter) randomAttention(n *stdlib.Node) (string, error) {
	a := n.Args
	t, d, h, m := n.In[0][0], n.In[0][1], a.Heads, a.Features
	if h < 1 || d%h != 0 || m < 1 {
		return "", unsupported(n, "heads %d must divide the width %d, with at least one feature", h, d)
	}
	dh := d / h
	var p [9]string
	for i, s := range []string{"Wq", "bq", "Wk", "bk", "Wv", "bv", "W0", "b0", "projection_matrix"} {
		var err error
		if p[i], err = e.param(n, s); err != nil {
			return "", err
		}
	}
	nm := n.Name
	x := e.in(n, 0)
	q := e.heads(e.affine(x, p[0], p[1], nm+"/q"), nm+"/q", t, h, dh, false)
	k := e.heads(e.affine(x, p[2], p[3], nm+"/k"), nm+"/k", t, h, dh, false)
	v := e.heads(e.affine(x, p[4], p[5], nm+"/v"), nm+"/v", t, h, dh, false)
	omegaT := e.transposed(p[8]) // [d, M]
	r := float32(1 / math.Sqrt(float64(m)))
	const favorEps = 1e-5
	phi := func(u, name string, query bool) string {
		if a.Mode == "relu" {
			z := e.op(name+"/proj", "MatMul", []string{u, omegaT})
			z = e.op(name+"/proj_scaled", "Mul", []string{z, e.scalar(r)})
			z = e.op(name+"/relu", "Relu", []string{z})
			return e.op(name+"/features", "Add", []string{z, e.scalar(favorEps)})
		}
		c := float32(1 / math.Sqrt(math.Sqrt(float64(dh))))
		z := e.op(name+"/proj", "MatMul", []string{u, omegaT})
		z = e.op(name+"/proj_scaled", "Mul", []string{z, e.scalar(c)}) // [N, H, T, M]
		sq := e.op(name+"/square", "Mul", []string{u, u})
		sq = e.reduce(name+"/norm2", "ReduceSum", sq, true, 3)
		sq = e.op(name+"/norm2_scaled", "Mul", []string{sq, e.scalar(c * c / 2)}) // [N, H, T, 1]
		var mx string
		if query {
			mx = e.reduce(name+"/stabiliser", "ReduceMax", z, true, 3)
		} else {
			mx = e.reduce(name+"/stabiliser", "ReduceMax", z, true, 2, 3)
		}
		sub := e.op(name+"/offset", "Add", []string{sq, mx})
		z = e.op(name+"/shifted", "Sub", []string{z, sub})
		z = e.op(name+"/exp", "Exp", []string{z})
		z = e.op(name+"/exp_eps", "Add", []string{z, e.scalar(favorEps)})
		return e.op(name+"/features", "Mul", []string{z, e.scalar(r)})
	}
	fa := phi(q, nm+"/q", true)
	fb := phi(k, nm+"/k", false)
	fbT := e.op(nm+"/k/features_t", "Transpose", []string{fb}, intsAttr("perm", 0, 1, 3, 2)) // [N, H, M, T]
	var num, den string
	if a.Causal {
		// The prefix sums S_t = Σ_{s≤t} B_sᵀ·v_s and z_t = Σ_{s≤t} B_s, as
		// (A·Bᵀ ⊙ L)·v and its row sums with L lower triangular: the same
		// sums, quadratic in the tokens.
		mask := make([]float32, t*t)
		for i := range t {
			for j := int64(0); j <= i; j++ {
				mask[i*t+j] = 1
			}
		}
		w := e.op(nm+"/weights", "MatMul", []string{fa, fbT}) // [N, H, T, T]
		w = e.op(nm+"/causal", "Mul", []string{w, e.floats(fmt.Sprintf("const.lower_triangle.%d", t), []int64{t, t}, mask)})
		num = e.op(nm+"/numerator", "MatMul", []string{w, v})
		den = e.reduce(nm+"/denominator", "ReduceSum", w, true, 3)
	} else {
		s := e.op(nm+"/kv", "MatMul", []string{fbT, v})
		z := e.reduce(nm+"/k/sum", "ReduceSum", fbT, true, 3)
		num = e.op(nm+"/numerator", "MatMul", []string{fa, s})
		den = e.op(nm+"/denominator", "MatMul", []string{fa, z})
	}
	o := e.op(nm+"/context", "Div", []string{num, den})
	o = e.merge(o, nm, t, d)
	return e.affine(o, p[6], p[7], nm), nil
}

// groupnorm is PyTorch's GroupNorm in the operators of every opset this
// package writes (GroupNormalization came in opset 18 and changed in 21):
// the input reshaped to [N, groups, rest], InstanceNormalization over
// each group, the input's shape back, then the per-channel scale and
// shift.
func (e *exporter) groupnorm(n *stdlib.Node) (string, error) {
	x, out, g := e.in(n, 0), n.Name, n.Args.Groups
	w, err := e.param(n, "weight")
	if err != nil {
		return "", err
	}
	b, _ := e.param(n, "bias")
	r := e.op(out+"/groups", "Reshape", []string{x, e.shapeConst(0, g, -1)})
	ones := e.floats(out+".group_ones", []int64{g}, fillF(int(g), 1))
	zeros := e.floats(out+".group_zeros", []int64{g}, fillF(int(g), 0))
	nrm := e.op(out+"/norm", "InstanceNormalization", []string{r, ones, zeros}, floatAttr("epsilon", float32(epsOf(n.Args.Eps))))
	back := e.op(out+"/back", "Reshape", []string{nrm, e.op(out+"/shape", "Shape", []string{x})})
	per := []int64{n.Out[0]} // [C, 1, 1] or [C, 1, 1, 1]: one value a channel
	for range n.Out[1:] {
		per = append(per, 1)
	}
	scaled := e.op(out+"/scale", "Mul", []string{back, e.op(out+"/weight", "Reshape", []string{w, e.shapeConst(per...)})})
	return e.op(out, "Add", []string{scaled, e.op(out+"/bias", "Reshape", []string{b, e.shapeConst(per...)})}), nil
}

// se is torchvision's SqueezeExcitation: GlobalAveragePool, fc1 (a 1x1
// Conv), x·Sigmoid(x), fc2, Sigmoid, and the input times the gate, which
// Mul broadcasts over the positions.
func (e *exporter) se(n *stdlib.Node) (string, error) {
	x, out := e.in(n, 0), n.Name
	var ps []string
	for _, s := range []string{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"} {
		p, err := e.param(n, s)
		if err != nil {
			return "", err
		}
		ps = append(ps, p)
	}
	k := intsAttr("kernel_shape", 1, 1)
	p := e.op(out+"/squeeze", "GlobalAveragePool", []string{x})
	z := e.op(out+"/fc1", "Conv", []string{p, ps[0], ps[1]}, k)
	a := e.op(out+"/silu", "Mul", []string{z, e.op(out+"/fc1_sigmoid", "Sigmoid", []string{z})})
	g := e.op(out+"/gate", "Sigmoid", []string{e.op(out+"/fc2", "Conv", []string{a, ps[2], ps[3]}, k)})
	return e.op(out, "Mul", []string{x, g}), nil
}
