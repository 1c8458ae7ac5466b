package native

import (
	"math"

	"pipe/engine/native/internal/cvec"
)

// actKind is an elementwise activation, alone or as a fused kernel's
// epilogue.
type actKind int

const (
	actNone actKind = iota
	actReLU
	actGELU
	actSigmoid
	actTanh
	actSiLU
	actHardswish
)

func actOf(op string) (actKind, bool) {
	switch op {
	case "relu":
		return actReLU, true
	case "gelu":
		return actGELU, true
	case "sigmoid":
		return actSigmoid, true
	case "tanh":
		return actTanh, true
	case "silu":
		return actSiLU, true
	case "hardswish":
		return actHardswish, true
	}
	return actNone, false
}

// fromOut says the derivative is a function of the output (relu,
// sigmoid, tanh); fromIn that it needs the input (gelu, silu, hardswish).
func (a actKind) fromOut() bool { return a == actReLU || a == actSigmoid || a == actTanh }

func (a actKind) fromIn() bool { return a == actGELU || a == actSiLU || a == actHardswish }

// grain is the smallest share of an elementwise loop worth a worker.
const grain = 16 << 10

// applyAct sets dst = act(src); dst and src may be the same slice.
func applyAct(a actKind, dst, src []float32) {
	dst = dst[:len(src)]
	switch a {
	case actNone:
		if &dst[0] != &src[0] {
			copy(dst, src)
		}
	case actReLU:
		for i, v := range src {
			dst[i] = relu32(v)
		}
	case actGELU:
		if cvec.Built && len(src) >= cMin {
			cvec.Gelu(dst, src, geluC1)
			return
		}
		for i, v := range src {
			dst[i] = 0.5 * v * (1 + erf32(v*geluC1))
		}
	case actSigmoid:
		for i, v := range src {
			dst[i] = sigmoid32(v)
		}
	case actTanh:
		for i, v := range src {
			dst[i] = float32(math.Tanh(float64(v)))
		}
	case actSiLU:
		for i, v := range src {
			dst[i] = v * sigmoid32(v)
		}
	case actHardswish:
		for i, v := range src {
			dst[i] = hardswish32(v)
		}
	}
}

// gelu's constants as float32: 1/√2 and 1/√(2π). The loops above and
// their C twins (cvec.Gelu, cvec.GeluGrad) take them from here.
var (
	geluC1 = float32(1 / math.Sqrt2)
	geluC2 = float32(1 / math.Sqrt(2*math.Pi))
)

// hardswish32 is x·min(max(x+3, 0), 6)/6, as PyTorch's kernel.
func hardswish32(v float32) float32 {
	return v * min(max(v+3, 0), 6) / 6
}

func sigmoid32(v float32) float32 {
	x := float64(v)
	if x >= 0 {
		return float32(1 / (1 + math.Exp(-x)))
	}
	e := math.Exp(x)
	return float32(e / (1 + e))
}

// actDeriv is the activation's derivative at input x with output y.
func actDeriv(a actKind, x, y float32) float32 {
	switch a {
	case actReLU:
		if y > 0 {
			return 1
		}
		return 0
	case actSigmoid:
		return y * (1 - y)
	case actTanh:
		return 1 - y*y
	case actGELU:
		return 0.5*(1+erf32(x*geluC1)) + x*exp32(-0.5*x*x)*geluC2
	case actSiLU:
		s := sigmoid32(x)
		return s * (1 + x*(1-s))
	case actHardswish:
		// PyTorch's hardswish_backward: 0 below -3, x/3 + 1/2 up to 3
		// (both ends included), 1 above.
		switch {
		case x < -3:
			return 0
		case x <= 3:
			return x/3 + 0.5
		}
		return 1
	}
	return 1
}

// actBackward sets g[i] *= act'(·) in place; out is the activation's
// output (relu, sigmoid, tanh) or in its input (gelu, silu, hardswish).
func actBackward(a actKind, g, in, out []float32) {
	switch a {
	case actNone:
	case actReLU:
		reluMask(g, out)
	case actGELU, actSiLU, actHardswish:
		if a == actGELU && cvec.Built && len(g) >= cMin {
			cvec.GeluGrad(g, in, geluC1, geluC2)
			return
		}
		in = in[:len(g)]
		for i, x := range in {
			g[i] *= actDeriv(a, x, 0)
		}
	default:
		out = out[:len(g)]
		for i, y := range out {
			g[i] *= actDeriv(a, 0, y)
		}
	}
}

// actKernel is an activation alone.
type actKernel struct{ a actKind }

func (k *actKernel) spec() kspec {
	return kspec{saveIn: []bool{!k.a.fromOut()}, saveOut: k.a.fromOut()}
}

func (k *actKernel) forward(e *env) {
	n := e.n * e.u.out.size()
	x, y := e.in[0][:n], e.out[:n]
	e.m.pool.forRange(n, grain, func(lo, hi int) { applyAct(k.a, y[lo:hi], x[lo:hi]) })
}

func (k *actKernel) backward(e *env) {
	if e.din[0] == nil {
		return
	}
	n := e.n * e.u.out.size()
	g, dx := e.dout[:n], e.din[0][:n]
	e.m.pool.forRange(n, grain, func(lo, hi int) {
		var in, out []float32
		if k.a.fromOut() {
			out = e.out[lo:hi]
		} else {
			in = e.in[0][lo:hi]
		}
		actBackward(k.a, g[lo:hi], in, out)
		if e.acc[0] {
			addTo(dx[lo:hi], g[lo:hi])
		} else {
			copy(dx[lo:hi], g[lo:hi])
		}
	})
}

// init registers the activations alone (a fused kernel runs them as its
// epilogue, tailOf).
func init() {
	for _, op := range []string{"relu", "gelu", "silu", "hardswish", "sigmoid", "tanh"} {
		registerKernel(op, opKernel{build: buildAct, tokens: true})
	}
}

func buildAct(_ *model, u *unit, _ tail) (kernel, error) {
	k, _ := actOf(u.nodes[0].Op)
	return &actKernel{a: k}, nil
}
